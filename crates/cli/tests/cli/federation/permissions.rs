//! Section 4: the NATS permissions of `docs/federation.md` (one user per
//! hub, publishing only under its own name) let the fabric work and keep
//! one hub from speaking for another.

use bytes::Bytes;
use serde_json::json;

use super::{next_non_action, owner, subscribed, wait_added};
use crate::support::fabric::{Fabric, OPEN};
use crate::support::metric_value;
use switchboard_testkit::NatsServer;

/// The permissions `docs/federation.md` gives hub `name`'s NATS user.
fn user(name: &str) -> String {
    format!(
        r#"{{ user: {name}, password: "{name}-secret",
  permissions: {{
    publish: {{ allow: [
      "switchboard.hub.*.{name}",
      "switchboard.probe.*",
      "$KV.switchboard-catalog.hub.{name}",
      "$KV.switchboard-catalog.svc.{name}.>",
      "$JS.API.INFO",
      "$JS.API.STREAM.INFO.KV_switchboard-catalog",
      "$JS.API.STREAM.CREATE.KV_switchboard-catalog",
      "$JS.API.STREAM.MSG.GET.KV_switchboard-catalog",
      "$JS.API.DIRECT.GET.KV_switchboard-catalog.>",
      "$JS.API.CONSUMER.CREATE.KV_switchboard-catalog",
      "$JS.API.CONSUMER.CREATE.KV_switchboard-catalog.>",
      "$JS.API.CONSUMER.DELETE.KV_switchboard-catalog.>",
      "$JS.API.CONSUMER.INFO.KV_switchboard-catalog.>",
      "$JS.FC.KV_switchboard-catalog.>",
      "$SRV.>"
    ] }},
    subscribe: {{ allow: [
      "switchboard.hub.{name}.*",
      "switchboard.probe.{name}",
      "_INBOX.>",
      "$SRV.>"
    ] }},
    allow_responses: true
  }}
}}"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_nats_user_per_hub_the_fabric_works_and_no_hub_speaks_for_another() {
    let config = format!(
        "authorization {{ users = [\n{},\n{},\n{}\n] }}\n",
        user("a"),
        user("b"),
        user("c")
    );
    let mut fabric = Fabric::new();
    fabric.nats = NatsServer::start_with_config(&config);
    fabric.users = true;
    let a = fabric.hub("a", OPEN);
    let b = fabric.hub("b", OPEN);
    // The fabric works: a service of A is listed and called from B.
    let (mut owner, service) = owner(&a, json!({}));
    let (mut caller, snapshot) = subscribed(&b);
    wait_added(&mut caller, &snapshot, &service);
    let id = caller.send_request(
        "clientService/request",
        json!({"serviceId": service, "method": "m"}),
    );
    let request = next_non_action(&mut owner);
    owner.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": "through"}));
    let answer = next_non_action(&mut caller);
    assert_eq!(answer["id"], id);
    assert_eq!(answer["result"], "through");

    // B's user cannot publish as C, nor write C's keys: NATS refuses both.
    let as_b = async_nats::ConnectOptions::with_user_and_password("b".into(), "b-secret".into())
        .connect(fabric.nats.url())
        .await
        .expect("b's user connects");
    as_b.publish("switchboard.hub.a.c", Bytes::from_static(b"{}"))
        .await
        .unwrap();
    as_b.publish(
        "$KV.switchboard-catalog.svc.c.svc-c-1",
        Bytes::from_static(b"{}"),
    )
    .await
    .unwrap();
    as_b.flush().await.unwrap();
    // Its own subject goes through (and is dropped by A: no headers): a
    // marker that A has read everything published before it.
    as_b.publish("switchboard.hub.a.b", Bytes::from_static(b"{}"))
        .await
        .unwrap();
    as_b.flush().await.unwrap();
    a.wait_for_metric(
        "switchboard_federation_ignored_total{reason=\"no_headers\"}",
        1,
    );
    let metrics = a.metrics();
    assert_eq!(
        metric_value(
            &metrics,
            "switchboard_federation_ignored_total{reason=\"unknown_hub\"}"
        ),
        0,
        "{metrics}\n{}",
        a.log()
    );
    assert_eq!(
        metric_value(
            &metrics,
            "switchboard_federation_ignored_total{reason=\"bad_entry\"}"
        ),
        0
    );
    assert_eq!(
        metric_value(
            &metrics,
            "switchboard_federation_nats_messages_received_total"
        ),
        2
    );

    // A hub whose NATS user is refused does not start: a clear error,
    // without the password.
    let output = std::process::Command::new(switchboard_testkit::switchboard_binary())
        .args(["serve", "--dir"])
        .arg(fabric.path("c-refused"))
        .args(["--ws", "127.0.0.1:0", "--hub-name", "c", "--nats"])
        .arg(fabric.nats.url_as("c", "not-c-secret"))
        .output()
        .expect("run switchboard serve");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("refused this hub"), "{stderr}");
    assert!(
        !stderr.contains("not-c-secret"),
        "the password shows: {stderr}"
    );
}
