//! The registry's routing without a hub: requests and notifications built
//! as the SDK hands them to the service.

use std::time::Duration;

use serde_json::json;
use serde_json::value::RawValue;
use switchboard_client::{Notification, Request};
use switchboard_protocol::Principal;
use tokio_util::sync::CancellationToken;

use super::*;

/// A session's sink that records what it gets and answers requests with
/// `answer` (or never, when `None`).
#[derive(Default)]
struct Recorder {
    answer: Option<Value>,
    requests: Mutex<Vec<(String, Value)>>,
    notes: Mutex<Vec<(String, Value)>>,
}

impl CallSink for Recorder {
    fn request(&self, method: &str, params: Value) -> BoxFuture<Result<Value, ErrorObject>> {
        self.requests.lock().push((method.to_owned(), params));
        let answer = self.answer.clone();
        Box::pin(async move {
            match answer {
                Some(answer) => Ok(answer),
                None => std::future::pending().await,
            }
        })
    }

    fn notify(&self, method: &str, params: Value) -> BoxFuture<()> {
        self.notes.lock().push((method.to_owned(), params));
        Box::pin(async {})
    }
}

fn module(name: &str) -> Principal {
    Principal::Reserved {
        module_id: name.into(),
    }
}

fn provider(principal: Principal) -> ProviderIdentity {
    ProviderIdentity {
        service_id: "svc-provider".into(),
        client_id: "client-provider".into(),
        principal,
        version: 2,
    }
}

fn raw(value: Value) -> Option<Box<RawValue>> {
    Some(RawValue::from_string(value.to_string()).unwrap())
}

fn request(method: &str, params: Value, sender: Principal) -> Request {
    Request {
        service_id: "svc-callback".into(),
        sender_client_id: "client-provider".into(),
        sender_principal: sender,
        method: method.into(),
        params: raw(params),
        cancelled: CancellationToken::new(),
    }
}

fn notification(method: &str, params: Value, sender: Principal) -> Notification {
    Notification {
        service_id: "svc-callback".into(),
        sender_client_id: "client-provider".into(),
        sender_principal: sender,
        method: method.into(),
        params: raw(params),
    }
}

/// A registry with one session recording into `sink`.
fn with_session(sink: &Arc<Recorder>) -> (Arc<Callbacks>, u64) {
    let callbacks = Arc::new(Callbacks::default());
    let session = callbacks.open_session(sink.clone());
    (callbacks, session)
}

fn start(provider: ProviderIdentity, bound: Duration) -> CallStart {
    CallStart {
        label: "7".into(),
        provider,
        progress_token: Some(json!("client-token")),
        bound,
        sink: None,
    }
}

fn code_of(error: &ErrorObject) -> Option<String> {
    error
        .data_as::<Value>()
        .and_then(|data| data["code"].as_str().map(str::to_owned))
}

#[tokio::test]
async fn a_request_of_a_call_in_flight_reaches_its_session_without_the_call_key() {
    let sink = Arc::new(Recorder {
        answer: Some(json!({"roots": []})),
        ..Recorder::default()
    });
    let (callbacks, session) = with_session(&sink);
    let call = callbacks.begin(
        session,
        start(provider(module("ev")), Duration::from_secs(5)),
    );
    let params = json!({"_meta": {"switchboard/call": call.id(), "other": 1}});
    let answer = callbacks
        .on_request(request("roots/list", params, module("ev")))
        .await
        .unwrap();
    assert_eq!(answer.get(), r#"{"roots":[]}"#);
    assert_eq!(
        sink.requests.lock()[0],
        ("roots/list".to_owned(), json!({"_meta": {"other": 1}}))
    );
}

#[tokio::test]
async fn a_request_naming_no_call_or_another_principals_is_refused_and_counted() {
    let sink = Arc::new(Recorder::default());
    let (callbacks, session) = with_session(&sink);
    let call = callbacks.begin(
        session,
        start(provider(module("ev")), Duration::from_secs(5)),
    );
    for (params, sender) in [
        (
            json!({"_meta": {"switchboard/call": "sbc99-1"}}),
            module("ev"),
        ),
        (json!({}), module("ev")),
        (
            json!({"_meta": {"switchboard/call": call.id()}}),
            module("intruder"),
        ),
    ] {
        let error = callbacks
            .on_request(request("sampling/createMessage", params.clone(), sender))
            .await
            .unwrap_err();
        assert_eq!(error.code, -32602, "{params}");
        assert_eq!(code_of(&error).as_deref(), Some("unknown_call"));
    }
    assert_eq!(callbacks.stats().refused_requests, 3);
    assert!(sink.requests.lock().is_empty());
    // Once the call ended, its id names nothing either.
    let id = call.id().to_owned();
    drop(call);
    let error = callbacks
        .on_request(request(
            "roots/list",
            json!({"_meta": {"switchboard/call": id}}),
            module("ev"),
        ))
        .await
        .unwrap_err();
    assert_eq!(code_of(&error).as_deref(), Some("unknown_call"));
}

#[tokio::test]
async fn a_request_the_client_never_answers_ends_at_the_calls_deadline() {
    let sink = Arc::new(Recorder::default());
    let (callbacks, session) = with_session(&sink);
    let call = callbacks.begin(
        session,
        start(provider(module("ev")), Duration::from_millis(200)),
    );
    let began = Instant::now();
    let error = callbacks
        .on_request(request(
            "elicitation/create",
            json!({"message": "?", "_meta": {"switchboard/call": call.id()}}),
            module("ev"),
        ))
        .await
        .unwrap_err();
    // The deadline and the grace past it (2 s) for the call's own end.
    assert!(began.elapsed() < Duration::from_secs(5));
    assert_eq!(code_of(&error).as_deref(), Some("no_answer"));
    // And a call that ends first ends its callbacks' wait.
    let call = callbacks.begin(
        session,
        start(provider(module("ev")), Duration::from_secs(60)),
    );
    let waiting = {
        let callbacks = callbacks.clone();
        let params = json!({"_meta": {"switchboard/call": call.id()}});
        tokio::spawn(async move {
            callbacks
                .on_request(request("roots/list", params, module("ev")))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    drop(call);
    let error = tokio::time::timeout(Duration::from_secs(2), waiting)
        .await
        .unwrap()
        .unwrap()
        .unwrap_err();
    assert_eq!(code_of(&error).as_deref(), Some("call_ended"));
}

#[tokio::test]
async fn progress_goes_back_under_the_sessions_token_and_only_increasing() {
    let sink = Arc::new(Recorder::default());
    let (callbacks, session) = with_session(&sink);
    let call = callbacks.begin(
        session,
        start(provider(module("ev")), Duration::from_secs(5)),
    );
    let token = serde_json::to_value(call.id()).unwrap();
    for (progress, sender) in [
        (1.0, module("ev")),
        (3.0, module("ev")),
        (2.0, module("ev")),
        (4.0, module("x")),
    ] {
        callbacks
            .on_notification(notification(
                "notifications/progress",
                json!({"progressToken": token, "progress": progress}),
                sender,
            ))
            .await;
    }
    let notes = sink.notes.lock().clone();
    assert_eq!(
        notes,
        [
            (
                "notifications/progress".to_owned(),
                json!({"progressToken": "client-token", "progress": 1.0})
            ),
            (
                "notifications/progress".to_owned(),
                json!({"progressToken": "client-token", "progress": 3.0})
            ),
        ]
    );
    assert_eq!(callbacks.stats().dropped_notifications, 2);
}

#[tokio::test]
async fn updates_and_log_messages_of_no_call_reach_only_sessions_that_asked() {
    let first = Arc::new(Recorder::default());
    let second = Arc::new(Recorder::default());
    let callbacks = Arc::new(Callbacks::default());
    let one = callbacks.open_session(first.clone());
    let two = callbacks.open_session(second.clone());
    let ev = provider(module("ev"));
    assert!(callbacks.subscribe(one, "test://a", &ev));
    assert!(!callbacks.subscribe(two, "test://a", &ev));
    let updated = |uri: &str, sender| {
        notification(
            "notifications/resources/updated",
            json!({"uri": uri}),
            sender,
        )
    };
    callbacks
        .on_notification(updated("test://a", module("ev")))
        .await;
    callbacks
        .on_notification(updated("test://b", module("ev")))
        .await;
    callbacks
        .on_notification(updated("test://a", module("x")))
        .await;
    assert_eq!(first.notes.lock().len(), 1);
    assert_eq!(second.notes.lock().len(), 1);
    assert_eq!(callbacks.unsubscribe(one, "test://a"), None);
    assert_eq!(callbacks.unsubscribe(two, "test://a"), Some(ev.clone()));

    let message = |level: &str| {
        notification(
            "notifications/message",
            json!({"level": level, "data": "d"}),
            module("ev"),
        )
    };
    // No level was set on any provider: dropped.
    callbacks.on_notification(message("error")).await;
    assert_eq!(
        callbacks.set_level(one, LogLevel::Warning),
        LogLevel::Warning
    );
    assert_eq!(callbacks.set_level(two, LogLevel::Debug), LogLevel::Debug);
    callbacks.level_sent(&ev, LogLevel::Debug);
    callbacks.on_notification(message("info")).await;
    callbacks.on_notification(message("error")).await;
    let levels = |sink: &Recorder| -> Vec<String> {
        sink.notes
            .lock()
            .iter()
            .filter(|(method, _)| method == "notifications/message")
            .map(|(_, params)| params["level"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(levels(&first), ["error"]);
    assert_eq!(levels(&second), ["info", "error"]);
    assert_eq!(callbacks.stats().dropped_notifications, 3);
}
