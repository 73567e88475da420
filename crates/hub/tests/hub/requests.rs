//! Spec section 6: requests are forwarded under a hub-minted id and answered
//! exactly once: by the owner, or by the hub on timeout, cancel, disconnect
//! or unregister. Every ending releases the hub's bookkeeping.

use crate::support::*;
use serde_json::{json, Value};

/// An owner with one service and a caller, on a hub with `config`.
async fn owner_and_caller(hub: &TestHub) -> (RawClient, RawClient, String) {
    let mut owner = hub.client("owner").await;
    let caller = hub.client("caller").await;
    let service = owner.register(json!({"name": "svc"})).await;
    (owner, caller, service)
}

fn error_reason(response: &Value) -> Value {
    response["error"]["data"]["reason"].clone()
}

#[tokio::test]
async fn a_request_produces_exactly_the_forwarded_request_and_exactly_the_answer() {
    let hub = TestHub::start().await;
    let (mut owner, mut caller, service) = owner_and_caller(&hub).await;

    let params = r#"{"price" : 1.50,"qty":[ 2 , 3.0e0 ],"note":"\u00e9\n"}"#;
    caller
        .send_line(&format!(
            r#"{{"jsonrpc":"2.0","id":"call-1","method":"clientService/request","params":{{"serviceId":"{service}","method":"shop/quote","params":{params}}}}}"#
        ))
        .await;

    let forwarded = owner.next().await;
    let y = forwarded["id"].clone();
    assert!(y.as_u64().is_some_and(|y| y > 0), "forwarded id {y}");
    assert_eq!(
        forwarded.value,
        json!({
            "jsonrpc": "2.0",
            "id": y,
            "method": "clientService/handleRequest",
            "params": {
                "channel": CATALOG,
                "serviceId": service,
                "senderClientId": caller.client_id,
                "senderPrincipal": {"kind": "direct"},
                "method": "shop/quote",
                "params": serde_json::from_str::<Value>(params).unwrap(),
            },
        })
    );
    assert_eq!(raw_member(&forwarded.raw, &["params", "params"]), params);
    expect_all_silent([&mut owner, &mut caller]).await;

    let result = r#"{ "total":4.50 , "currency" : "EUR", "exp": 1E+2 }"#;
    owner
        .send_line(&format!(
            r#"{{"jsonrpc":"2.0","id":{y},"result":{result}}}"#
        ))
        .await;
    let answer = caller.next().await;
    assert_eq!(answer["id"], "call-1");
    assert_eq!(raw_member(&answer.raw, &["result"]), result);
    assert!(answer.get("error").is_none());
    expect_all_silent([&mut caller, &mut owner]).await;
    hub.assert_bookkeeping_released().await;
    assert_eq!(hub.metric("switchboard_requests_completed_total"), 1);
}

#[tokio::test]
async fn application_errors_keep_their_code_message_and_data() {
    let hub = TestHub::start().await;
    let (mut owner, mut caller, service) = owner_and_caller(&hub).await;
    let cases = [
        (
            4242,
            r#""ref not found""#,
            Some(r#"{"ref" : "refs/heads/x","tries":[1, 2.50]}"#),
        ),
        (-32601, r#""no method frob""#, None),
        (-1, r#""caf\u00e9""#, Some("null")),
    ];
    for (code, message, data) in cases {
        let id = caller.request_service(&service, "frob", json!({})).await;
        let handle = owner.handle_request().await;
        let data_member = data.map(|d| format!(r#","data":{d}"#)).unwrap_or_default();
        owner
            .send_line(&format!(
                r#"{{"jsonrpc":"2.0","id":{},"error":{{"code":{code},"message":{message}{data_member}}}}}"#,
                handle["id"]
            ))
            .await;
        let answer = caller.receive(|m| m["id"] == id, WAIT).await;
        assert_eq!(answer["error"]["code"], code);
        assert_eq!(raw_member(&answer.raw, &["error", "message"]), message);
        match data {
            Some(data) => assert_eq!(raw_member(&answer.raw, &["error", "data"]), data),
            None => assert!(answer["error"].get("data").is_none(), "{answer:?}"),
        }
    }
    caller.expect_silence(SILENCE).await;
    hub.assert_bookkeeping_released().await;
}

#[tokio::test]
async fn a_malformed_error_from_the_owner_reaches_the_caller_as_internal_error() {
    let hub = TestHub::start().await;
    let (mut owner, mut caller, service) = owner_and_caller(&hub).await;
    for error in [
        r#""just a string""#,
        r#"{"code":"x","message":"m"}"#,
        r#"{"code":1}"#,
    ] {
        let id = caller.request_service(&service, "m", json!({})).await;
        let handle = owner.handle_request().await;
        owner
            .send_line(&format!(
                r#"{{"jsonrpc":"2.0","id":{},"error":{error}}}"#,
                handle["id"]
            ))
            .await;
        expect_error(&caller.response(&id).await, code::INTERNAL_ERROR);
    }
    caller.expect_silence(SILENCE).await;
    hub.assert_bookkeeping_released().await;
}

#[tokio::test]
async fn absent_request_params_are_forwarded_absent() {
    let hub = TestHub::start().await;
    let (mut owner, mut caller, service) = owner_and_caller(&hub).await;
    let id = caller
        .send_request(
            "clientService/request",
            json!({"serviceId": service, "method": "bare"}),
        )
        .await;
    let handle = owner.handle_request().await;
    assert!(handle["params"].get("params").is_none(), "{handle:?}");
    owner.respond(&handle["id"], json!(null)).await;
    assert_eq!(expect_result(&caller.response(&id).await), Value::Null);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_using_the_same_id_at_once_get_their_own_answers() {
    let hub = TestHub::start().await;
    let (mut owner, _, service) = owner_and_caller(&hub).await;
    let mut callers = Vec::new();
    for i in 0..8 {
        callers.push(hub.client(&format!("caller-{i}")).await);
    }
    for (i, caller) in callers.iter_mut().enumerate() {
        caller
            .send_request_with_id(
                json!(1),
                "clientService/request",
                json!({"serviceId": service, "method": "whoami", "params": {"caller": i}}),
            )
            .await;
    }
    let mut handles = Vec::new();
    for _ in 0..callers.len() {
        handles.push(owner.handle_request().await);
    }
    // Answer in reverse order, echoing who asked.
    for handle in handles.iter().rev() {
        let asked = handle["params"]["params"]["caller"].clone();
        owner
            .respond(
                &handle["id"],
                json!({"caller": asked, "sender": handle["params"]["senderClientId"]}),
            )
            .await;
    }
    for (i, caller) in callers.iter_mut().enumerate() {
        let answer = caller.response(&json!(1)).await;
        assert_eq!(
            expect_result(&answer),
            json!({"caller": i, "sender": caller.client_id})
        );
    }
    expect_all_silent(&mut callers).await;
    hub.assert_bookkeeping_released().await;
}

#[tokio::test]
async fn only_the_owner_connection_can_complete_a_forwarded_request() {
    let hub = TestHub::start().await;
    let (mut owner, mut caller, service) = owner_and_caller(&hub).await;
    let mut intruder = hub.client("intruder").await;
    // The intruder even owns a service of the same principal.
    intruder.register(json!({"name": "decoy"})).await;

    let id = caller.request_service(&service, "secret", json!({})).await;
    let handle = owner.handle_request().await;
    intruder
        .respond(&handle["id"], json!({"forged": true}))
        .await;
    intruder
        .send(&json!({"jsonrpc": "2.0", "id": handle["id"], "error": {"code": 1, "message": "forged"}}))
        .await;
    expect_result(&intruder.request("ping", json!(null)).await);
    caller.expect_silence(SILENCE).await;
    assert_eq!(hub.bookkeeping().pending, 1);
    assert_eq!(hub.metric("switchboard_responses_dropped_total"), 2);

    owner.respond(&handle["id"], json!({"real": true})).await;
    assert_eq!(
        expect_result(&caller.response(&id).await),
        json!({"real": true})
    );
    expect_all_silent([&mut caller, &mut intruder]).await;
    hub.assert_bookkeeping_released().await;
}

#[tokio::test]
async fn a_duplicate_in_flight_id_on_one_connection_is_refused_and_the_first_stands() {
    let hub = TestHub::start().await;
    let (mut owner, mut caller, service) = owner_and_caller(&hub).await;
    let params = json!({"serviceId": service, "method": "m"});
    caller
        .send_request_with_id(json!("dup"), "clientService/request", params.clone())
        .await;
    let handle = owner.handle_request().await;
    caller
        .send_request_with_id(json!("dup"), "clientService/request", params.clone())
        .await;
    let refused = caller.response(&json!("dup")).await;
    let error = expect_error(&refused, code::INVALID_REQUEST);
    assert_eq!(error["data"]["reason"], "duplicateId");
    owner.expect_silence(SILENCE).await;

    owner.respond(&handle["id"], json!("first")).await;
    assert_eq!(
        expect_result(&caller.response(&json!("dup")).await),
        "first"
    );
    // Once answered, the id may be used again.
    caller
        .send_request_with_id(json!("dup"), "clientService/request", params)
        .await;
    let handle = owner.handle_request().await;
    owner.respond(&handle["id"], json!("second")).await;
    assert_eq!(
        expect_result(&caller.response(&json!("dup")).await),
        "second"
    );
    caller.expect_silence(SILENCE).await;
    hub.assert_bookkeeping_released().await;
}

#[tokio::test]
async fn the_owner_disconnecting_fails_pending_requests_with_service_gone() {
    let hub = TestHub::start().await;
    let (mut owner, mut caller, service) = owner_and_caller(&hub).await;
    let other = owner.register(json!({"name": "second"})).await;
    let first = caller.request_service(&service, "slow", json!({})).await;
    let second = caller.request_service(&other, "slow", json!({})).await;
    owner.handle_request().await;
    owner.handle_request().await;
    assert_eq!(hub.bookkeeping().pending, 2);

    owner.close().await;
    for id in [first, second] {
        let answer = caller.response(&id).await;
        expect_error(&answer, code::SERVICE_GONE);
        assert_eq!(error_reason(&answer), "disconnected");
    }
    caller.expect_silence(SILENCE).await;
    hub.assert_bookkeeping_released().await;
    let id = caller.request_service(&service, "slow", json!({})).await;
    expect_error(&caller.response(&id).await, code::NOT_FOUND);
}

#[tokio::test]
async fn unregistering_fails_pending_requests_and_a_late_answer_is_dropped() {
    let hub = TestHub::start().await;
    let (mut owner, mut caller, service) = owner_and_caller(&hub).await;
    let kept = owner.register(json!({"name": "kept"})).await;
    let doomed = caller.request_service(&service, "slow", json!({})).await;
    let survivor = caller.request_service(&kept, "slow", json!({})).await;
    let doomed_handle = owner.handle_request().await;
    let survivor_handle = owner.handle_request().await;

    owner
        .call("client/unregisterService", json!({"serviceId": service}))
        .await;
    let answer = caller.response(&doomed).await;
    expect_error(&answer, code::SERVICE_GONE);
    assert_eq!(error_reason(&answer), "unregistered");
    caller.expect_silence(SILENCE).await;

    // The owner answers anyway: dropped, never a second answer.
    owner.respond(&doomed_handle["id"], json!("late")).await;
    owner.respond(&survivor_handle["id"], json!("kept")).await;
    assert_eq!(expect_result(&caller.response(&survivor).await), "kept");
    caller.expect_silence(SILENCE).await;
    hub.assert_bookkeeping_released().await;
    assert_eq!(hub.metric("switchboard_responses_dropped_total"), 1);
}

#[tokio::test]
async fn the_caller_disconnecting_releases_its_requests_and_cancels_them_at_the_owner() {
    let hub = TestHub::start().await;
    let (mut owner, mut caller, service) = owner_and_caller(&hub).await;
    caller.request_service(&service, "a", json!({})).await;
    caller.request_service(&service, "b", json!({})).await;
    let mut forwarded = vec![
        owner.handle_request().await["id"].clone(),
        owner.handle_request().await["id"].clone(),
    ];
    caller.close().await;

    let mut cancelled = Vec::new();
    for _ in 0..2 {
        let cancel = owner.receive(is_method("$/cancelRequest"), WAIT).await;
        assert!(cancel.get("id").is_none(), "a cancel is a notification");
        cancelled.push(cancel["params"]["id"].clone());
    }
    forwarded.sort_by_key(|id| id.as_u64());
    cancelled.sort_by_key(|id| id.as_u64());
    assert_eq!(cancelled, forwarded);
    hub.assert_bookkeeping_released().await;

    // Answers after the caller left go nowhere.
    for id in &forwarded {
        owner.respond(id, json!("late")).await;
    }
    expect_result(&owner.request("ping", json!(null)).await);
    owner.expect_silence(SILENCE).await;
    assert_eq!(hub.metric("switchboard_responses_dropped_total"), 2);
}

#[tokio::test]
async fn a_timeout_answers_request_timeout_and_cancels_at_the_owner() {
    let hub = TestHub::start().await;
    let (mut owner, mut caller, service) = owner_and_caller(&hub).await;
    let id = caller
        .send_request(
            "clientService/request",
            json!({"serviceId": service, "method": "slow", "timeoutMs": 50}),
        )
        .await;
    let handle = owner.handle_request().await;

    let answer = caller.response(&id).await;
    let error = expect_error(&answer, code::REQUEST_TIMEOUT);
    assert_eq!(error["data"]["timeoutMs"], 50);
    let cancel = owner.receive(is_method("$/cancelRequest"), WAIT).await;
    assert_eq!(cancel["params"], json!({"id": handle["id"]}));
    hub.assert_bookkeeping_released().await;

    owner.respond(&handle["id"], json!("too late")).await;
    expect_all_silent([&mut caller, &mut owner]).await;
    assert_eq!(hub.metric("switchboard_responses_dropped_total"), 1);
    assert_eq!(
        hub.metric("switchboard_requests_failed_total{reason=\"timeout\"}"),
        1
    );
}

#[tokio::test]
async fn without_timeout_ms_the_configured_default_applies() {
    let hub = TestHub::with_config("[limits]\ndefaultRequestTimeoutMs = 100\n").await;
    let (mut owner, mut caller, service) = owner_and_caller(&hub).await;
    let id = caller.request_service(&service, "slow", json!({})).await;
    owner.handle_request().await;
    let error = expect_error(&caller.response(&id).await, code::REQUEST_TIMEOUT);
    assert_eq!(error["data"]["timeoutMs"], 100);
    owner.receive(is_method("$/cancelRequest"), WAIT).await;
    hub.assert_bookkeeping_released().await;
}

#[tokio::test]
async fn cancel_answers_at_once_and_tells_the_owner() {
    let hub = TestHub::start().await;
    let (mut owner, mut caller, service) = owner_and_caller(&hub).await;
    let id = caller.request_service(&service, "slow", json!({})).await;
    let handle = owner.handle_request().await;

    caller.notify("$/cancelRequest", json!({"id": id})).await;
    let answer = caller.next().await;
    assert_eq!(answer["id"], id);
    expect_error(&answer, code::REQUEST_CANCELLED);
    let cancel = owner.next().await;
    assert_eq!(
        cancel.value,
        json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": handle["id"]}})
    );
    hub.assert_bookkeeping_released().await;

    owner.respond(&handle["id"], json!("done anyway")).await;
    expect_all_silent([&mut caller, &mut owner]).await;
    assert_eq!(hub.metric("switchboard_responses_dropped_total"), 1);
}

#[tokio::test]
async fn cancelling_an_unknown_or_finished_id_does_nothing() {
    let hub = TestHub::start().await;
    let (mut owner, mut caller, service) = owner_and_caller(&hub).await;
    let id = caller.request_service(&service, "quick", json!({})).await;
    let handle = owner.handle_request().await;
    owner.respond(&handle["id"], json!("ok")).await;
    expect_result(&caller.response(&id).await);

    caller.notify("$/cancelRequest", json!({"id": id})).await;
    caller.notify("$/cancelRequest", json!({"id": 9999})).await;
    caller.notify("$/cancelRequest", json!({})).await;
    // The forwarded id is not the caller's to cancel.
    caller
        .notify("$/cancelRequest", json!({"id": handle["id"]}))
        .await;
    expect_result(&caller.request("ping", json!(null)).await);
    expect_all_silent([&mut caller, &mut owner]).await;
    hub.assert_bookkeeping_released().await;
}

#[tokio::test]
async fn a_second_response_to_the_same_request_is_dropped() {
    let hub = TestHub::start().await;
    let (mut owner, mut caller, service) = owner_and_caller(&hub).await;
    let id = caller.request_service(&service, "once", json!({})).await;
    let handle = owner.handle_request().await;
    owner.respond(&handle["id"], json!(1)).await;
    owner.respond(&handle["id"], json!(2)).await;
    owner
        .send(&json!({"jsonrpc": "2.0", "id": handle["id"], "error": {"code": 3, "message": "three"}}))
        .await;
    assert_eq!(expect_result(&caller.response(&id).await), json!(1));
    caller.expect_silence(SILENCE).await;
    assert_eq!(hub.metric("switchboard_responses_dropped_total"), 2);
    hub.assert_bookkeeping_released().await;
}

#[tokio::test]
async fn a_client_may_call_its_own_service() {
    let hub = TestHub::start().await;
    let mut client = hub.client("loopback").await;
    let service = client.register(json!({})).await;
    let id = client.request_service(&service, "echo", json!("hi")).await;
    let handle = client.handle_request().await;
    assert_eq!(
        handle["params"]["senderClientId"],
        client.client_id.as_str()
    );
    client.respond(&handle["id"], json!("hi")).await;
    assert_eq!(expect_result(&client.response(&id).await), "hi");
    hub.assert_bookkeeping_released().await;
}

#[tokio::test]
async fn a_cancel_only_touches_the_cancelling_callers_own_request() {
    let hub = TestHub::start().await;
    let (mut owner, mut first, service) = owner_and_caller(&hub).await;
    let mut second = hub.client("second").await;
    let params = json!({"serviceId": service, "method": "slow"});
    first
        .send_request_with_id(json!(1), "clientService/request", params.clone())
        .await;
    let first_handle = owner.handle_request().await;
    second
        .send_request_with_id(json!(1), "clientService/request", params)
        .await;
    let second_handle = owner.handle_request().await;

    second.notify("$/cancelRequest", json!({"id": 1})).await;
    expect_error(&second.response(&json!(1)).await, code::REQUEST_CANCELLED);
    let cancel = owner.receive(is_method("$/cancelRequest"), WAIT).await;
    assert_eq!(cancel["params"]["id"], second_handle["id"]);

    owner.respond(&first_handle["id"], json!("first")).await;
    assert_eq!(expect_result(&first.response(&json!(1)).await), "first");
    expect_all_silent([&mut first, &mut second, &mut owner]).await;
    hub.assert_bookkeeping_released().await;
}

/// Answers, cancels and timeouts racing each other: each request still gets
/// exactly one answer, and the owner at most one `$/cancelRequest` for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_answers_cancels_and_timeouts_answer_each_request_exactly_once() {
    const ROUNDS: u64 = 300;
    let hub = TestHub::start().await;
    let (mut owner, mut caller, service) = owner_and_caller(&hub).await;

    let owner_task = tokio::spawn(async move {
        let mut cancels = std::collections::HashMap::new();
        let mut handled = 0;
        while handled < ROUNDS {
            let message = owner.next().await;
            if message["method"] == "$/cancelRequest" {
                *cancels
                    .entry(message["params"]["id"].to_string())
                    .or_insert(0) += 1;
                continue;
            }
            owner
                .respond(&message["id"], message["params"]["params"].clone())
                .await;
            handled += 1;
        }
        (owner, cancels)
    });
    for n in 0..ROUNDS {
        let mut params = json!({"serviceId": service, "method": "race", "params": n});
        if n % 3 == 1 {
            params["timeoutMs"] = json!(1);
        }
        caller
            .send_request_with_id(json!(n), "clientService/request", params)
            .await;
        if n % 3 == 0 {
            caller.notify("$/cancelRequest", json!({"id": n})).await;
        }
    }
    let mut outcomes = [0; 3];
    for n in 0..ROUNDS {
        let answer = caller.response(&json!(n)).await;
        match answer["error"]["code"].as_i64() {
            None => {
                assert_eq!(answer["result"], n);
                outcomes[0] += 1;
            }
            Some(code::REQUEST_CANCELLED) => outcomes[1] += 1,
            Some(code::REQUEST_TIMEOUT) => outcomes[2] += 1,
            _ => panic!("unexpected answer {answer}"),
        }
    }
    caller.expect_silence(SILENCE).await;
    let (mut owner, mut cancels) = owner_task.await.unwrap();
    // Every cancel was queued before the answer it caused; a ping puts the
    // remaining ones in the owner's inbox.
    expect_result(&owner.request("ping", json!(null)).await);
    for message in owner.take_inbox() {
        assert_eq!(message["method"], "$/cancelRequest", "{message:?}");
        *cancels
            .entry(message["params"]["id"].to_string())
            .or_insert(0) += 1;
    }
    owner.expect_silence(SILENCE).await;
    assert!(cancels.values().all(|count| *count == 1), "{cancels:?}");
    assert_eq!(outcomes.iter().sum::<u64>(), ROUNDS);
    hub.assert_bookkeeping_released().await;
}

#[tokio::test]
async fn request_params_are_read_alike_within_and_past_the_decoders_index() {
    // The decoder indexes the first 8 members of `params`; past that the
    // router walks params itself. Both paths must agree, duplicates included.
    let hub = TestHub::start().await;
    let (mut owner, mut caller, service) = owner_and_caller(&hub).await;
    for extra_members in [0, 10] {
        let extras: String = (0..extra_members)
            .map(|i| format!("\"x{i}\":[{i}],"))
            .collect();
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":"ok","method":"clientService/request","params":{{{extras}"serviceId":"{service}","method":"wide","params":{{"k":"v"}}}}}}"#
        );
        caller.send_line(&line).await;
        let handle = owner.handle_request().await;
        assert_eq!(handle["params"]["method"], "wide");
        assert_eq!(handle["params"]["params"], json!({"k": "v"}));
        owner.respond(&handle["id"], json!(extra_members)).await;
        assert_eq!(
            expect_result(&caller.response(&json!("ok")).await),
            json!(extra_members)
        );

        let twice = format!(
            r#"{{"jsonrpc":"2.0","id":"twice","method":"clientService/request","params":{{{extras}"serviceId":"{service}","method":"a","method":"b"}}}}"#
        );
        caller.send_line(&twice).await;
        let answer = caller.response(&json!("twice")).await;
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
        assert_eq!(answer["error"]["data"]["field"], "method", "{answer}");
    }
    hub.assert_bookkeeping_released().await;
}
