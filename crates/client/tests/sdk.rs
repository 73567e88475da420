//! The SDK against a real hub (in-process, real sockets).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use switchboard_client::protocol::error::GoneReason;
use switchboard_client::{
    handler_fn, reply, CatalogEvent, Client, ErrorKind, Notification, RequestOptions,
};
use switchboard_testkit::{TestHub, WAIT};
use tokio::sync::mpsc;
use tokio::time::timeout;

fn echo() -> impl switchboard_client::Handler {
    handler_fn(|request| async move {
        match request.method.as_str() {
            "echo" => reply(&request.params::<Value>()?),
            other => Err(switchboard_client::method_not_found(other)),
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_and_notify_between_two_clients() {
    let hub = TestHub::start().await;
    let (seen, mut notifications) = mpsc::unbounded_channel();
    let owner = hub.client("owner").await;
    let handler = handler_fn(|request| async move { reply(&json!({"method": request.method})) })
        .with_notifications(move |notification| {
            let seen = seen.clone();
            async move {
                let params = notification.params::<Value>();
                let _ = seen.send((notification.method, params));
            }
        });
    let service = owner
        .register(&json!({"protocol": "demo"}), handler)
        .await
        .unwrap();

    let caller = hub.ws_client("caller").await;
    let answer: Value = caller
        .request(&service.id(), "getRefs", &json!({}))
        .await
        .unwrap();
    assert_eq!(answer, json!({"method": "getRefs"}));

    for n in 0..100 {
        caller
            .notify(&service.id(), "tick", &json!({ "n": n }))
            .await
            .unwrap();
    }
    for n in 0..100 {
        let (method, params) = timeout(WAIT, notifications.recv()).await.unwrap().unwrap();
        assert_eq!(method, "tick");
        assert_eq!(
            params,
            Some(json!({ "n": n })),
            "notifications arrive in order"
        );
    }
    hub.stop().await;
}

/// A client in the hub's own process (the endpoint door's in-process
/// connection, as the MCP gateway behind `/mcp` has) serves and calls as a
/// socket client does, and a connection the hub refuses is an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_process_client_serves_and_calls_like_a_socket_client() {
    let hub = TestHub::builder()
        .config("[limits]\nmaxConnections = 2\n")
        .start()
        .await;
    let owner = hub.in_process_client("in-process owner").await;
    let service = owner
        .register(&json!({"protocol": "demo"}), echo())
        .await
        .unwrap();
    let caller = hub.client("caller").await;
    let answer: Value = caller
        .request(&service.id(), "echo", &json!({"big": "x".repeat(200_000)}))
        .await
        .unwrap();
    assert_eq!(answer["big"].as_str().map(str::len), Some(200_000));

    let theirs = caller
        .register(&json!({"protocol": "demo"}), echo())
        .await
        .unwrap();
    let answer: Value = owner
        .request(&theirs.id(), "echo", &json!([1, 2]))
        .await
        .unwrap();
    assert_eq!(answer, json!([1, 2]));

    let door = hub.door();
    let refused = Client::connect_with(switchboard_client::ConnectOptions {
        endpoint: switchboard_client::Endpoint::InProcess {
            connect: switchboard_client::Connector::new(move || Ok(door.connect()?)),
            token: Some(hub.info().token.clone()),
        },
        client_name: "one too many".into(),
    })
    .await;
    let error = refused
        .err()
        .expect("a third connection past maxConnections = 2");
    assert!(error.to_string().contains("maxConnections"), "{error}");
    hub.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_typed() {
    let hub = TestHub::start().await;
    let owner = hub.client("owner").await;
    let service = owner.register(&json!({}), echo()).await.unwrap();
    let caller = hub.client("caller").await;

    let error = caller
        .request::<Value>("svc-unknown", "echo", &json!({}))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), Some(ErrorKind::NotFound));

    let error = caller
        .request::<Value>(&service.id(), "frob", &json!({}))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), Some(ErrorKind::MethodNotFound));

    let silent = owner
        .register(&json!({}), handler_fn(|_| std::future::pending()))
        .await
        .unwrap();
    let options = RequestOptions {
        timeout: Some(Duration::from_millis(50)),
    };
    let error = caller
        .request_raw(&silent.id(), "wait", None, options)
        .await
        .unwrap_err();
    assert_eq!(
        error.kind(),
        Some(ErrorKind::Timeout {
            timeout_ms: Some(50)
        })
    );
    hub.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_are_served_concurrently() {
    let hub = TestHub::start().await;
    let owner = hub.client("owner").await;
    // Each request waits until all 32 have arrived: only concurrent handling
    // can finish.
    let barrier = Arc::new(tokio::sync::Barrier::new(32));
    let handler = handler_fn(move |request| {
        let barrier = barrier.clone();
        async move {
            barrier.wait().await;
            reply(&request.params::<Value>()?)
        }
    });
    let service = owner.register(&json!({}), handler).await.unwrap();
    let caller = hub.client("caller").await;
    let calls = (0..32).map(|n| {
        let caller = caller.clone();
        let id = service.id();
        async move {
            caller
                .request::<Value>(&id, "echo", &json!(n))
                .await
                .unwrap()
        }
    });
    let answers = timeout(WAIT, futures_util::future::join_all(calls))
        .await
        .unwrap();
    assert_eq!(answers, (0..32).map(|n| json!(n)).collect::<Vec<_>>());
    hub.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_request_cancels_it_at_the_owner() {
    let hub = TestHub::start().await;
    let owner = hub.client("owner").await;
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let (cancelled_tx, mut cancelled) = mpsc::unbounded_channel();
    let handler = handler_fn(move |request| {
        let started_tx = started_tx.clone();
        let cancelled_tx = cancelled_tx.clone();
        async move {
            let _ = started_tx.send(());
            request.cancelled.cancelled().await;
            let _ = cancelled_tx.send(());
            reply(&"never sent")
        }
    });
    let service = owner.register(&json!({}), handler).await.unwrap();
    let caller = hub.client("caller").await;
    let id = service.id();
    let call = tokio::spawn({
        let caller = caller.clone();
        async move { caller.request::<Value>(&id, "slow", &json!({})).await }
    });
    timeout(WAIT, started.recv()).await.unwrap().unwrap();
    call.abort();
    // The owner's handler sees the hub's $/cancelRequest.
    timeout(WAIT, cancelled.recv()).await.unwrap().unwrap();
    let state = hub.hub().state().clone();
    timeout(WAIT, async {
        while state.pending_count() != 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap();
    hub.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catalog_stays_consistent_under_concurrent_registrations() {
    let hub = TestHub::start().await;
    let watcher = hub.client("watcher").await;
    let mut catalog = watcher.catalog().await.unwrap();
    let mut expected: BTreeSet<String> = catalog
        .initial()
        .iter()
        .map(|s| s.service_id.clone())
        .collect();

    let writers: Vec<Client> = futures_util::future::join_all(
        (0..4).map(|n| hub.client(if n % 2 == 0 { "a" } else { "b" })),
    )
    .await;
    let churn = writers.iter().cloned().map(|client| {
        tokio::spawn(async move {
            let mut kept = Vec::new();
            for round in 0..25 {
                let handle = client
                    .register(&json!({"round": round}), echo())
                    .await
                    .unwrap();
                if round % 3 == 0 {
                    handle
                        .update(&json!({"round": round, "updated": true}))
                        .await
                        .unwrap();
                }
                if round % 2 == 0 {
                    handle.unregister().await.unwrap();
                } else {
                    kept.push(handle.id());
                }
            }
            kept
        })
    });
    let kept: BTreeSet<String> = futures_util::future::join_all(churn)
        .await
        .into_iter()
        .flat_map(|r| r.unwrap())
        .collect();

    // Apply the events to the initial snapshot until it matches a fresh
    // subscriber's snapshot.
    let late = hub.client("late").await;
    let truth: BTreeSet<String> = late
        .catalog()
        .await
        .unwrap()
        .initial()
        .iter()
        .map(|s| s.service_id.clone())
        .collect();
    assert_eq!(truth, kept);
    let mut last_seq = catalog.event_seq();
    timeout(WAIT, async {
        while expected != truth {
            match catalog.next_event().await.unwrap() {
                CatalogEvent::Added(service) => assert!(expected.insert(service.service_id)),
                CatalogEvent::Removed { service_id, .. } => assert!(expected.remove(&service_id)),
                CatalogEvent::Updated(service) => assert!(expected.contains(&service.service_id)),
                CatalogEvent::Resynced => panic!("no reconnect happened"),
            }
            let seq = catalog.event_seq();
            assert!(seq > last_seq, "serverSeq only grows");
            last_seq = seq;
        }
    })
    .await
    .unwrap();
    let live: BTreeSet<String> = catalog
        .services()
        .into_iter()
        .map(|s| s.service_id)
        .collect();
    assert_eq!(live, truth);
    hub.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnect_registers_again_under_new_ids() {
    let hub = TestHub::start().await;
    let owner = hub.client("owner").await;
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let handler = handler_fn(move |_request| {
        counted.fetch_add(1, Ordering::SeqCst);
        async { reply(&"ok") }
    });
    let service = owner
        .register(&json!({"protocol": "sticky"}), handler)
        .await
        .unwrap();
    let mut catalog = owner.catalog().await.unwrap();
    let old_id = service.id();
    let old_client = owner.client_id();

    owner.reconnect().await.unwrap();
    let new_id = service.id();
    assert_ne!(new_id, old_id);
    assert_ne!(owner.client_id(), old_client);

    let caller = hub.client("caller").await;
    let error = caller
        .request::<Value>(&old_id, "x", &json!({}))
        .await
        .unwrap_err();
    // The old connection's close reaches the hub on its own time: until
    // the hub has processed it the old service is going (`serviceGone`,
    // disconnected), after that it is unknown. Either way it never routes.
    assert!(
        matches!(
            error.kind(),
            Some(
                ErrorKind::NotFound
                    | ErrorKind::ServiceGone {
                        reason: Some(GoneReason::Disconnected)
                    }
            )
        ),
        "an old id never routes: {error:?}"
    );
    let answer: String = caller.request(&new_id, "x", &json!({})).await.unwrap();
    assert_eq!(answer, "ok");
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    // The catalog was re-subscribed on the new connection.
    timeout(WAIT, async {
        loop {
            if catalog.next_event().await.unwrap() == CatalogEvent::Resynced {
                break;
            }
        }
    })
    .await
    .unwrap();
    assert!(catalog.get(&new_id).is_some());
    assert!(catalog.get(&old_id).is_none());
    hub.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_request_fails_when_the_owner_leaves() {
    let hub = TestHub::start().await;
    let owner = hub.client("owner").await;
    let service = owner
        .register(&json!({}), handler_fn(|_| std::future::pending()))
        .await
        .unwrap();
    let caller = hub.client("caller").await;
    let id = service.id();
    let call = tokio::spawn(async move { caller.request::<Value>(&id, "slow", &json!({})).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    owner.close();
    let error = timeout(WAIT, call).await.unwrap().unwrap().unwrap_err();
    assert_eq!(
        error.kind(),
        Some(ErrorKind::ServiceGone {
            reason: Some(GoneReason::Disconnected)
        })
    );
    hub.stop().await;
}

/// `notifications_handled` waits for a notification still being handled,
/// and returns at once when none is waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_handled_waits_for_the_one_being_handled() {
    let hub = TestHub::start().await;
    let (started, mut started_rx) = mpsc::unbounded_channel();
    let release = Arc::new(tokio::sync::Notify::new());
    let handled = Arc::new(AtomicUsize::new(0));
    let handler = handler_fn(|_request| async move { reply(&json!({})) }).with_notifications({
        let (release, handled) = (release.clone(), handled.clone());
        move |_notification| {
            let (started, release, handled) = (started.clone(), release.clone(), handled.clone());
            async move {
                let _ = started.send(());
                release.notified().await;
                handled.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
    let owner = hub.client("owner").await;
    let service = owner
        .register(&json!({"protocol": "demo"}), handler)
        .await
        .unwrap();
    // Nothing queued yet: at once.
    timeout(WAIT, service.notifications_handled())
        .await
        .unwrap();

    let caller = hub.client("caller").await;
    caller
        .notify(&service.id(), "tick", &json!({}))
        .await
        .unwrap();
    timeout(WAIT, started_rx.recv()).await.unwrap().unwrap();
    let waiting = tokio::spawn({
        let handled = handled.clone();
        async move {
            service.notifications_handled().await;
            handled.load(Ordering::SeqCst)
        }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !waiting.is_finished(),
        "returned while one was being handled"
    );
    release.notify_one();
    assert_eq!(timeout(WAIT, waiting).await.unwrap().unwrap(), 1);
}

/// A notification handler that panics loses that notification only: the
/// next one is still delivered (the worker lives on), the lost one is not
/// counted as dropped for a full queue, and waiting for what is queued
/// does not hang.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_notification_handler_loses_only_its_own_notification() {
    let hub = TestHub::start().await;
    let (delivered, mut delivered_rx) = mpsc::unbounded_channel();
    let handler = handler_fn(|_request| async move { reply(&json!({})) }).with_notifications(
        move |notification: Notification| {
            let delivered = delivered.clone();
            async move {
                if notification.method == "boom" {
                    panic!("a handler's bug");
                }
                let _ = delivered.send(notification.method);
            }
        },
    );
    let owner = hub.client("owner").await;
    let service = owner
        .register(&json!({"protocol": "demo"}), handler)
        .await
        .unwrap();
    let caller = hub.client("caller").await;
    for method in ["boom", "after"] {
        caller
            .notify(&service.id(), method, &json!({}))
            .await
            .unwrap();
    }
    let after = timeout(WAIT, delivered_rx.recv()).await.unwrap().unwrap();
    assert_eq!(after, "after");
    timeout(WAIT, service.notifications_handled())
        .await
        .unwrap();
    assert_eq!(service.dropped_notifications(), 0);
}

/// A hub whose `maxMessageBytes` is 65,536: messages over it are cheap to
/// build.
async fn hub_with_message_limit() -> TestHub {
    TestHub::builder()
        .config("[limits]\nmaxMessageBytes = 65536\n")
        .start()
        .await
}

/// An answer longer than the hub's `maxMessageBytes` would make the hub
/// close the service's connection (and every service on it): the SDK sends
/// the caller a `LimitExceeded` error instead, and the service serves on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_over_the_hubs_message_limit_is_refused_and_the_service_serves_on() {
    let hub = hub_with_message_limit().await;
    let owner = hub.client("owner").await;
    // `bytes`: an answer that long, from a request of a few bytes.
    let handler = handler_fn(|request| async move {
        let bytes = request.params::<Value>()?["bytes"].as_u64().unwrap_or(0);
        reply(&"x".repeat(bytes as usize))
    });
    let service = owner.register(&json!({}), handler).await.unwrap();
    let caller = hub.client("caller").await;

    let answer: String = caller
        .request(&service.id(), "bytes", &json!({"bytes": 60_000}))
        .await
        .unwrap();
    assert_eq!(answer.len(), 60_000, "an answer under the limit passes");

    let error = caller
        .request::<String>(&service.id(), "bytes", &json!({"bytes": 70_000}))
        .await
        .unwrap_err();
    assert_eq!(
        error.kind(),
        Some(ErrorKind::LimitExceeded {
            limit: Some("maxMessageBytes".into())
        }),
        "{error}"
    );
    assert!(
        error.to_string().contains("the service's answer is"),
        "{error}"
    );

    let answer: String = caller
        .request(&service.id(), "bytes", &json!({"bytes": 3}))
        .await
        .unwrap();
    assert_eq!(answer, "xxx", "the service's connection is still up");
    hub.stop().await;
}

/// A request or notification longer than the hub's `maxMessageBytes` would
/// make the hub close the sender's connection: the SDK refuses it with
/// `LimitExceeded`, sends nothing, and the connection carries on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_over_the_hubs_limit_is_refused_unsent_and_the_connection_carries_on() {
    let hub = hub_with_message_limit().await;
    let owner = hub.client("owner").await;
    let service = owner.register(&json!({}), echo()).await.unwrap();
    let caller = hub.client("caller").await;

    let too_long = json!({ "text": "x".repeat(70_000) });
    let refused = caller
        .request::<Value>(&service.id(), "echo", &too_long)
        .await
        .unwrap_err();
    let limit = Some(ErrorKind::LimitExceeded {
        limit: Some("maxMessageBytes".into()),
    });
    assert_eq!(refused.kind(), limit, "{refused}");
    assert!(refused.to_string().contains("not sent"), "{refused}");
    let refused = caller
        .notify(&service.id(), "tick", &too_long)
        .await
        .unwrap_err();
    assert_eq!(refused.kind(), limit, "{refused}");

    let answer: Value = caller
        .request(&service.id(), "echo", &json!({ "after": 1 }))
        .await
        .unwrap();
    assert_eq!(
        answer,
        json!({ "after": 1 }),
        "the caller's connection is up"
    );
    hub.stop().await;
}

/// Between a client and the hub: passes every line on, except the hub's
/// answers to requests for the method `never`, which it withholds; and
/// tells the test which `$/cancelRequest`s the client sent.
async fn withholding_relay(
    hub_socket: std::path::PathBuf,
    dir: &std::path::Path,
) -> (std::path::PathBuf, mpsc::UnboundedReceiver<i64>) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    use tokio::net::{UnixListener, UnixStream};

    let path = dir.join("relay.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let (cancels, cancelled) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let (client, _) = listener.accept().await.unwrap();
        let hub = UnixStream::connect(&hub_socket).await.unwrap();
        let (client_read, mut client_write) = client.into_split();
        let (hub_read, mut hub_write) = hub.into_split();
        let withheld = Arc::new(parking_lot::Mutex::new(BTreeSet::new()));
        let to_hub = {
            let withheld = withheld.clone();
            async move {
                let mut lines = BufReader::new(client_read).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    let message: Value = serde_json::from_str(&line).unwrap();
                    if message["params"]["method"] == "never" {
                        withheld.lock().insert(message["id"].as_i64().unwrap());
                    }
                    if message["method"] == "$/cancelRequest" {
                        let _ = cancels.send(message["params"]["id"].as_i64().unwrap());
                    }
                    hub_write
                        .write_all(format!("{line}\n").as_bytes())
                        .await
                        .unwrap();
                }
            }
        };
        let to_client = async move {
            let mut lines = BufReader::new(hub_read).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let message: Value = serde_json::from_str(&line).unwrap();
                let withhold = message["id"]
                    .as_i64()
                    .is_some_and(|id| withheld.lock().contains(&id));
                if !withhold {
                    client_write
                        .write_all(format!("{line}\n").as_bytes())
                        .await
                        .unwrap();
                }
            }
        };
        tokio::join!(to_hub, to_client);
    });
    (path, cancelled)
}

/// A request whose answer never comes fails on its own, with the hub told
/// to cancel it, when its timeout and the SDK's margin have passed; one
/// with an earlier deadline, made later, fails first; the connection
/// carries on. (The SDK watches all of a connection's deadlines with one
/// timer, `deadlines.rs`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_never_answered_times_out_locally_and_is_cancelled() {
    let hub = TestHub::start().await;
    let owner = hub.client("owner").await;
    let service = owner
        .register(
            &json!({"protocol": "demo"}),
            handler_fn(|request| async move {
                match request.method.as_str() {
                    "never" => {
                        // Answered after the hub has given up on it, which
                        // the relay withholds anyway.
                        tokio::time::sleep(Duration::from_secs(30)).await;
                        reply(&json!("late"))
                    }
                    _ => reply(&json!("now")),
                }
            }),
        )
        .await
        .unwrap();
    let (relay, mut cancelled) = withholding_relay(hub.info().socket.clone(), hub.dir()).await;
    let caller = Client::connect_with(switchboard_client::ConnectOptions {
        endpoint: switchboard_client::Endpoint::Unix {
            path: relay,
            token: Some(hub.info().token.clone()),
        },
        client_name: "caller".into(),
    })
    .await
    .unwrap();

    let ask = |timeout_ms: u64| {
        let caller = caller.clone();
        let service = service.id();
        async move {
            let started = tokio::time::Instant::now();
            let options = RequestOptions {
                timeout: Some(Duration::from_millis(timeout_ms)),
            };
            let outcome = caller.request_raw(&service, "never", None, options).await;
            (outcome, started.elapsed())
        }
    };
    // The SDK waits 5 s beyond a request's own timeout.
    let longer = tokio::spawn(ask(1_500));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let shorter = tokio::spawn(ask(200));
    let (shorter, shorter_took) = timeout(WAIT, shorter).await.unwrap().unwrap();
    assert!(!longer.is_finished(), "the later deadline is still ahead");
    let (longer, longer_took) = timeout(WAIT, longer).await.unwrap().unwrap();
    for (outcome, took, wait) in [
        (shorter, shorter_took, Duration::from_millis(5_200)),
        (longer, longer_took, Duration::from_millis(6_500)),
    ] {
        match outcome {
            Err(switchboard_client::Error::LocalTimeout(waited)) => assert_eq!(waited, wait),
            other => panic!("expected a local timeout after {wait:?}, got {other:?}"),
        }
        assert!(took >= wait, "gave up after {took:?}, before its {wait:?}");
    }
    // Both were cancelled at the hub, the shorter first.
    let first = timeout(WAIT, cancelled.recv()).await.unwrap().unwrap();
    let second = timeout(WAIT, cancelled.recv()).await.unwrap().unwrap();
    assert!(
        first > second,
        "the later request (a higher id) was cancelled first"
    );

    // The connection carries on.
    let answer: Value = caller
        .request(&service.id(), "now", &json!({}))
        .await
        .unwrap();
    assert_eq!(answer, json!("now"));
    hub.stop().await;
}
