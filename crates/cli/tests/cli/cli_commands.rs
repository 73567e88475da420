//! The operator commands (`services`, `call`, `notify`, `status`) run as
//! processes against a `switchboard serve` process, with services played by
//! SDK clients in the test.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::support::{empty_dir, switchboard, switchboard_with_stdin, HubProcess, Live, WAIT};
use serde_json::{json, Value};
use switchboard_client::protocol::jsonrpc::ErrorObject;
use switchboard_client::{handler_fn, reply, Client, Handler, ServiceHandle};
use tokio::sync::mpsc;

/// A service answering `echo` with `{"method", "params"}`, `fail` with an
/// application error, and `hang` never; it counts the requests it gets.
fn demo_service(requests: Arc<AtomicUsize>) -> impl Handler {
    handler_fn(move |request| {
        requests.fetch_add(1, Ordering::SeqCst);
        async move {
            match request.method.as_str() {
                "echo" => reply(&json!({
                    "method": request.method,
                    "params": request.params::<Value>()?,
                })),
                "fail" => Err(ErrorObject {
                    code: 4001,
                    message: "no such thing".into(),
                    data: None,
                }
                .with_data(&json!({"thing": "x"}))),
                "hang" => std::future::pending().await,
                other => Err(switchboard_client::method_not_found(other)),
            }
        }
    })
}

async fn register_demo(client: &Client, metadata: Value) -> (ServiceHandle, Arc<AtomicUsize>) {
    let requests = Arc::new(AtomicUsize::new(0));
    let service = client
        .register(&metadata, demo_service(requests.clone()))
        .await
        .expect("register");
    (service, requests)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_lists_the_catalog_as_a_table_and_as_json() {
    let hub = HubProcess::start();
    let owner = hub.client("owner").await;
    let (first, _) = register_demo(
        &owner,
        json!({"protocol": "demo", "version": 1, "label": "first one", "extra": true}),
    )
    .await;
    let (second, _) = register_demo(&owner, json!({"custom": {"deep": [1, 2, 3]}})).await;

    let run = switchboard(&["services", "--dir", hub.dir_arg()]).await;
    let lines: Vec<&str> = run.ok().lines().collect();
    assert_eq!(lines.len(), 3, "{}", run.stdout);
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(header, ["SERVICE", "OWNER", "PRINCIPAL", "METADATA"]);
    let row = |id: &str| {
        *lines
            .iter()
            .find(|line| line.starts_with(id))
            .unwrap_or_else(|| panic!("no row for {id}:\n{}", run.stdout))
    };
    let first_row: Vec<&str> = row(&first.id()).split_whitespace().collect();
    assert_eq!(first_row[1], owner.client_id());
    assert_eq!(first_row[2], "direct");
    assert_eq!(
        first_row[3..].join(" "),
        "protocol=demo version=1 label=\"first one\" +1 more"
    );
    assert!(
        row(&second.id()).ends_with(r#"{"custom":{"deep":[1,2,3]}}"#),
        "metadata without the usual keys is shown as JSON"
    );
    // Columns line up: every row's METADATA starts where the header's does.
    let column = lines[0].find("METADATA").unwrap();
    assert!(lines[1..]
        .iter()
        .all(|line| line[column - 2..column] == *"  " && !line[column..].starts_with(' ')));

    let run = switchboard(&["services", "--json", "--dir", hub.dir_arg()]).await;
    let listed: Vec<Value> = serde_json::from_str(run.ok()).expect("JSON");
    let mut ids: Vec<&str> = listed
        .iter()
        .map(|s| s["serviceId"].as_str().unwrap())
        .collect();
    ids.sort();
    let mut expected = vec![first.id(), second.id()];
    expected.sort();
    assert_eq!(ids, expected);
    let first_json = listed
        .iter()
        .find(|s| s["serviceId"] == first.id())
        .unwrap();
    assert_eq!(
        first_json,
        &json!({
            "serviceId": first.id(),
            "clientId": owner.client_id(),
            "principal": {"kind": "direct"},
            "metadata": {"protocol": "demo", "version": 1, "label": "first one", "extra": true},
        })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_watch_prints_each_change_as_it_happens() {
    let hub = HubProcess::start();
    let mut watch = Live::start(&["services", "--watch", "--dir", hub.dir_arg()]);
    assert!(
        watch.line().await.starts_with("SERVICE"),
        "the table comes first"
    );

    // The header is printed once the subscription is in place, so every
    // change from here on reaches the watcher.
    let owner = hub.client("owner").await;
    let (service, _) = register_demo(&owner, json!({"protocol": "demo", "version": 1})).await;
    let id = service.id();
    let added = watch.line().await;
    let fields: Vec<&str> = added.split_whitespace().collect();
    assert!(fields[0].ends_with('Z'), "an RFC 3339 UTC time: {added}");
    assert_eq!(
        fields[1..],
        ["+", id.as_str(), "protocol=demo", "version=1"]
    );

    service
        .update(&json!({"protocol": "demo", "version": 2}))
        .await
        .unwrap();
    let updated = watch.line().await;
    assert_eq!(
        updated.split_whitespace().skip(1).collect::<Vec<_>>(),
        ["~", id.as_str(), "protocol=demo", "version=2"]
    );

    service.unregister().await.unwrap();
    let removed = watch.line().await;
    assert_eq!(
        removed.split_whitespace().skip(1).collect::<Vec<_>>(),
        ["-", id.as_str(), "(unregistered)"]
    );

    let (service, _) = register_demo(&owner, json!({"label": "leaving"})).await;
    assert!(watch
        .line()
        .await
        .contains(&format!("+ {} label=leaving", service.id())));
    owner.close();
    let gone = watch.line().await;
    assert!(
        gone.ends_with(&format!("- {} (disconnected)", service.id())),
        "{gone}"
    );

    let status = watch.terminate().await;
    assert_eq!(status.code(), Some(0), "SIGTERM ends the watch cleanly");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_watch_json_prints_one_object_per_change() {
    let hub = HubProcess::start();
    let owner = hub.client("owner").await;
    let (before, _) = register_demo(&owner, json!({"protocol": "demo"})).await;
    let mut watch = Live::start(&["services", "--watch", "--json", "--dir", hub.dir_arg()]);
    let snapshot: Value = serde_json::from_str(&watch.line().await).unwrap();
    assert_eq!(snapshot["event"], "snapshot");
    assert_eq!(snapshot["services"][0]["serviceId"], before.id());

    let (after, _) = register_demo(&owner, json!({"protocol": "other"})).await;
    let added: Value = serde_json::from_str(&watch.line().await).unwrap();
    assert_eq!(added["event"], "added");
    assert_eq!(added["service"]["serviceId"], after.id());
    assert_eq!(added["service"]["metadata"], json!({"protocol": "other"}));
    assert!(added["time"].as_str().unwrap().ends_with('Z'));

    let before_id = before.id();
    before.unregister().await.unwrap();
    let removed: Value = serde_json::from_str(&watch.line().await).unwrap();
    assert_eq!(
        (
            removed["event"].clone(),
            removed["serviceId"].clone(),
            removed["reason"].clone()
        ),
        (json!("removed"), json!(before_id), json!("unregistered"))
    );
    assert_eq!(watch.terminate().await.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_watch_fails_when_the_hub_goes_away() {
    let mut hub = HubProcess::start();
    let mut watch = Live::start(&["services", "--watch", "--dir", hub.dir_arg()]);
    assert!(watch.line().await.starts_with("SERVICE"));
    hub.kill();
    let status = watch.exit().await;
    assert_eq!(status.code(), Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_prints_the_result_of_a_service_named_by_id_or_selector() {
    let hub = HubProcess::start();
    let owner = hub.client("owner").await;
    let (service, requests) =
        register_demo(&owner, json!({"protocol": "demo", "version": 1})).await;
    register_demo(&owner, json!({"protocol": "other"})).await;

    let run = switchboard(&[
        "call",
        "--dir",
        hub.dir_arg(),
        &service.id(),
        "echo",
        r#"{"a": [1, 2]}"#,
    ])
    .await;
    assert_eq!(run.ok(), "{\"method\":\"echo\",\"params\":{\"a\":[1,2]}}\n");
    assert_eq!(run.stderr, "");

    for selector in ["protocol=demo", "protocol=demo,version=1"] {
        let run = switchboard(&["call", "--dir", hub.dir_arg(), selector, "echo", "[3]"]).await;
        assert_eq!(run.ok(), "{\"method\":\"echo\",\"params\":[3]}\n");
    }

    let run = switchboard(&["call", "--dir", hub.dir_arg(), "protocol=demo", "echo"]).await;
    assert_eq!(
        run.ok(),
        "{\"method\":\"echo\",\"params\":null}\n",
        "no params"
    );

    let run = switchboard_with_stdin(
        &["call", "--dir", hub.dir_arg(), "protocol=demo", "echo", "-"],
        "{\"from\": \"stdin\"}\n",
    )
    .await;
    assert_eq!(
        run.ok(),
        "{\"method\":\"echo\",\"params\":{\"from\":\"stdin\"}}\n"
    );
    assert_eq!(requests.load(Ordering::SeqCst), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_refuses_an_ambiguous_selector_and_lists_the_matches() {
    let hub = HubProcess::start();
    let owner = hub.client("owner").await;
    let (a, a_requests) = register_demo(&owner, json!({"protocol": "demo", "label": "a"})).await;
    let (b, b_requests) = register_demo(&owner, json!({"protocol": "demo", "label": "b"})).await;

    let run = switchboard(&[
        "call",
        "--dir",
        hub.dir_arg(),
        "protocol=demo",
        "echo",
        "{}",
    ])
    .await;
    assert_eq!(run.code(), 1);
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr.contains("protocol=demo matches 2 services"),
        "{}",
        run.stderr
    );
    assert!(run
        .stderr
        .contains(&format!("{}  direct  protocol=demo label=a", a.id())));
    assert!(run
        .stderr
        .contains(&format!("{}  direct  protocol=demo label=b", b.id())));
    assert_eq!(
        a_requests.load(Ordering::SeqCst) + b_requests.load(Ordering::SeqCst),
        0
    );

    let run = switchboard(&["notify", "--dir", hub.dir_arg(), "protocol=demo", "tick"]).await;
    assert_eq!(run.code(), 1);
    assert!(run.stderr.contains("matches 2 services"), "{}", run.stderr);

    let run = switchboard(&[
        "call",
        "--dir",
        hub.dir_arg(),
        "protocol=demo,label=b",
        "echo",
        "{}",
    ])
    .await;
    assert!(run.ok().contains("echo"), "a narrower selector picks one");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_and_notify_report_an_unknown_service() {
    let hub = HubProcess::start();
    let owner = hub.client("owner").await;
    register_demo(&owner, json!({"protocol": "demo"})).await;
    let dir = hub.dir_arg();

    let run = switchboard(&[
        "call",
        "--dir",
        dir,
        "svc-00000000000000000000000000000000",
        "echo",
    ])
    .await;
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr
            .contains("no service svc-00000000000000000000000000000000 in the catalog"),
        "{}",
        run.stderr
    );

    let run = switchboard(&["call", "--dir", dir, "protocol=absent", "echo"]).await;
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr
            .contains("no service matches protocol=absent (1 in the catalog"),
        "{}",
        run.stderr
    );

    let run = switchboard(&["call", "--dir", dir, "=broken", "echo"]).await;
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr.contains("neither a service id nor a selector"),
        "{}",
        run.stderr
    );

    let run = switchboard(&["notify", "--dir", dir, "svc-nope", "tick"]).await;
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr.contains("no service svc-nope in the catalog"),
        "{}",
        run.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_params_json_is_refused_before_anything_is_sent() {
    let hub = HubProcess::start();
    let owner = hub.client("owner").await;
    let (_service, requests) = register_demo(&owner, json!({"protocol": "demo"})).await;
    let dir = hub.dir_arg();

    let run = switchboard(&["call", "--dir", dir, "protocol=demo", "echo", "{a: 1}"]).await;
    assert_eq!(run.code(), 2, "a usage error");
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr
            .contains("invalid value '{a: 1}' for '[PARAMS_JSON]': not valid JSON: key must be a string at line 1 column 2"),
        "{}",
        run.stderr
    );

    let run = switchboard(&["notify", "--dir", dir, "protocol=demo", "tick", "[1,"]).await;
    assert_eq!(run.code(), 2);
    assert!(
        run.stderr.contains("not valid JSON: EOF while parsing"),
        "{}",
        run.stderr
    );

    let run = switchboard_with_stdin(
        &["call", "--dir", dir, "protocol=demo", "echo", "-"],
        "nope",
    )
    .await;
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr.contains(
            "PARAMS_JSON from stdin is not valid JSON: expected ident at line 1 column 2"
        ),
        "{}",
        run.stderr
    );
    assert_eq!(requests.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_reports_an_error_answer_with_code_message_and_data() {
    let hub = HubProcess::start();
    let owner = hub.client("owner").await;
    let (service, _) = register_demo(&owner, json!({"protocol": "demo"})).await;

    let run = switchboard(&[
        "call",
        "--dir",
        hub.dir_arg(),
        "protocol=demo",
        "fail",
        "{}",
    ])
    .await;
    assert_eq!(run.code(), 1);
    assert_eq!(run.stdout, "");
    assert_eq!(
        run.stderr,
        format!(
            "switchboard: fail on {} failed: error 4001: no such thing\ndata: {{\"thing\":\"x\"}}\n",
            service.id()
        )
    );

    let run = switchboard(&[
        "call",
        "--dir",
        hub.dir_arg(),
        "protocol=demo",
        "frobnicate",
    ])
    .await;
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr
            .contains("error -32601: unknown method \"frobnicate\""),
        "{}",
        run.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_timeout_is_passed_to_the_hub_and_checked_at_its_bounds() {
    let hub = HubProcess::start();
    let owner = hub.client("owner").await;
    register_demo(&owner, json!({"protocol": "demo"})).await;
    let dir = hub.dir_arg();

    let run = switchboard(&[
        "call",
        "--dir",
        dir,
        "--timeout",
        "100",
        "protocol=demo",
        "hang",
    ])
    .await;
    assert_eq!(run.code(), 1);
    assert!(run.stderr.contains("error -32051"), "{}", run.stderr);
    assert!(run.stderr.contains("\"timeoutMs\":100"), "{}", run.stderr);

    let run = switchboard(&[
        "call",
        "--dir",
        dir,
        "--timeout",
        "600000",
        "protocol=demo",
        "echo",
    ])
    .await;
    run.ok();
    let run = switchboard(&[
        "call",
        "--dir",
        dir,
        "--timeout",
        "600001",
        "protocol=demo",
        "echo",
    ])
    .await;
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr
            .contains("--timeout 600001 is over the hub's maxRequestTimeoutMs (600000)"),
        "{}",
        run.stderr
    );
    let run = switchboard(&[
        "call",
        "--dir",
        dir,
        "--timeout",
        "0",
        "protocol=demo",
        "echo",
    ])
    .await;
    assert_eq!(run.code(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notify_delivers_to_the_resolved_service_and_prints_nothing() {
    let hub = HubProcess::start();
    let owner = hub.client("owner").await;
    let (seen, mut notifications) = mpsc::unbounded_channel();
    let handler = handler_fn(|_| async { reply(&()) }).with_notifications(move |notification| {
        let seen = seen.clone();
        async move {
            let _ = seen.send((notification.method.clone(), notification.params::<Value>()));
        }
    });
    owner
        .register(&json!({"protocol": "listener"}), handler)
        .await
        .unwrap();

    let run = switchboard(&[
        "notify",
        "--dir",
        hub.dir_arg(),
        "protocol=listener",
        "tick",
        r#"{"n": 1}"#,
    ])
    .await;
    assert_eq!(run.ok(), "");
    let (method, params) = tokio::time::timeout(WAIT, notifications.recv())
        .await
        .expect("delivered within WAIT")
        .unwrap();
    assert_eq!(method, "tick");
    assert_eq!(params, Some(json!({"n": 1})));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_reports_the_running_hub_and_its_counts() {
    let hub = HubProcess::start();
    let owner = hub.client("owner").await;
    let (service, _) = register_demo(&owner, json!({"protocol": "demo"})).await;
    let _catalog = owner.catalog().await.unwrap();
    // From this process, so that no other connection is still closing when
    // the counts are read.
    let _: Value = owner
        .request(&service.id(), "echo", &json!({}))
        .await
        .unwrap();

    let run = switchboard(&["status", "--dir", hub.dir_arg()]).await;
    let text = run.ok();
    let value = |key: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(&format!("{key}: ")))
            .unwrap_or_else(|| panic!("no {key:?} line:\n{text}"))
            .to_owned()
    };
    assert_eq!(value("hub"), "running");
    assert_eq!(value("pid"), hub.pid().to_string());
    assert_eq!(value("dir"), hub.dir_arg());
    assert_eq!(value("socket"), hub.info["socket"].as_str().unwrap());
    assert_eq!(value("websocket"), hub.info["ws"].as_str().unwrap());
    assert_eq!(value("services"), "1");
    assert_eq!(value("catalog subscribers"), "1");
    assert_eq!(value("requests in flight"), "0");
    assert_eq!(value("requests completed"), "1");
    assert_eq!(value("notifications dropped"), "0");
    let connections: u64 = value("connections").parse().unwrap();
    assert!(connections >= 1, "at least the owner: {connections}");

    let run = switchboard(&["status", "--json", "--dir", hub.dir_arg()]).await;
    let report: Value = serde_json::from_str(run.ok()).unwrap();
    assert_eq!(report["running"], true);
    assert_eq!(report["pid"], hub.pid());
    assert_eq!(report["metrics"]["services"], 1);
    assert_eq!(report["metrics"]["requests_completed_total"], 1);
    assert_eq!(report["metrics"]["notifications_dropped_total"]["shed"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_without_a_websocket_port_says_metrics_are_unavailable() {
    let hub = HubProcess::builder().no_ws().start();
    let run = switchboard(&["status", "--dir", hub.dir_arg()]).await;
    let text = run.ok();
    assert!(text.contains("hub: running\n"), "{text}");
    assert!(text.contains("websocket: none\n"), "{text}");
    assert!(
        text.contains("metrics: unavailable (the hub serves no WebSocket port, so no /metrics)"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_fails_when_no_hub_runs_or_only_its_hub_json_is_left() {
    let (_temp, dir) = empty_dir();
    let run = switchboard(&["status", "--dir", &dir]).await;
    assert_eq!(run.code(), 1);
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr.contains(&format!("no hub is running on {dir}")),
        "{}",
        run.stderr
    );
    let run = switchboard(&["status", "--json", "--dir", &dir]).await;
    assert_eq!(run.code(), 1);
    let report: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(report["running"], false);

    let mut hub = HubProcess::start();
    hub.kill();
    assert!(
        hub.dir().join("hub.json").exists(),
        "a killed hub leaves hub.json"
    );
    let run = switchboard(&["status", "--dir", hub.dir_arg()]).await;
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr
            .contains(&format!("hub.json names pid {} but its socket", hub.pid())),
        "{}",
        run.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_fails_clearly_without_a_hub() {
    let (_temp, dir) = empty_dir();
    for args in [
        vec!["services", "--dir", &dir],
        vec!["services", "--watch", "--dir", &dir],
        vec!["call", "--dir", &dir, "protocol=demo", "echo", "{}"],
        vec!["notify", "--dir", &dir, "protocol=demo", "tick"],
    ] {
        let run = switchboard(&args).await;
        assert_eq!(run.code(), 1, "{args:?}");
        assert_eq!(run.stdout, "", "{args:?}");
        assert!(
            run.stderr
                .starts_with(&format!("switchboard: no hub is running on {dir}")),
            "{args:?}: {}",
            run.stderr
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_has_dir_and_help() {
    for (command, mentions) in [
        ("services", vec!["--json", "--watch", "TIME + ID SUMMARY"]),
        (
            "call",
            vec!["SERVICE", "METHOD", "PARAMS_JSON", "--timeout", "selector"],
        ),
        (
            "notify",
            vec!["SERVICE", "METHOD", "PARAMS_JSON", "never acknowledged"],
        ),
        ("status", vec!["--json", "Exit status"]),
    ] {
        let run = switchboard(&[command, "--help"]).await;
        let help = run.ok();
        for needle in mentions.iter().chain(&["--dir"]) {
            assert!(
                help.contains(needle),
                "{command} --help lacks {needle:?}:\n{help}"
            );
        }
    }
}
