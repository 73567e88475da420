//! Bad input from the fabric and at start: dropped and counted, or a clear
//! error; never forwarded, never a crash.

use std::process::Command;

use async_nats::jetstream::{self, kv};
use bytes::Bytes;
use serde_json::{json, Value};
use switchboard_testkit::switchboard_binary;

use super::{next_non_action, owner, subscribed, wait_added};
use crate::support::fabric::{Fabric, OPEN};
use crate::support::metric_value;

/// A client id as hub b mints them (`c-b-` and 32 hex digits).
const CLIENT_B: &str = "c-b-00000000000000000000000000000001";

async fn bucket(fabric: &Fabric) -> (async_nats::Client, kv::Store) {
    let client = async_nats::connect(fabric.nats.url())
        .await
        .expect("connect to NATS");
    let store = jetstream::new(client.clone())
        .get_key_value("switchboard-catalog")
        .await
        .expect("the bucket");
    (client, store)
}

async fn instance(store: &kv::Store, hub: &str) -> String {
    let claim = store
        .get(format!("hub.{hub}"))
        .await
        .unwrap()
        .expect("a claim");
    let claim: Value = serde_json::from_slice(&claim).unwrap();
    claim["instance"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_messages_on_the_fabric_are_dropped_and_counted_and_nothing_else_is_lost() {
    let fabric = Fabric::new();
    let a = fabric.hub("a", &format!("[limits]\nmaxMessageBytes = 4096\nmaxMetadataBytes = 1024\nmaxErrorDataBytes = 1024\n{OPEN}"));
    let b = fabric.hub("b", OPEN);
    let (mut owner, service) = owner(&a, json!({}));
    let (client, store) = bucket(&fabric).await;
    let (a_instance, b_instance) = (instance(&store, "a").await, instance(&store, "b").await);
    // Hub b's own lines come on this subject; the test speaks as b.
    let publish = |headers: Option<(&str, &str)>, payload: String| {
        let headers = headers.map(|(from, to)| {
            let mut map = async_nats::HeaderMap::new();
            map.insert("Switchboard-From", from);
            map.insert("Switchboard-To", to);
            map
        });
        let client = client.clone();
        async move {
            let subject = "switchboard.hub.a.b";
            match headers {
                Some(map) => {
                    client
                        .publish_with_headers(subject, map, Bytes::from(payload))
                        .await
                }
                None => client.publish(subject, Bytes::from(payload)).await,
            }
            .unwrap();
        }
    };
    let from_b = Some((b_instance.as_str(), a_instance.as_str()));
    let notify = |client_id: &str, principal: Value, service: &str| {
        json!({"jsonrpc": "2.0", "method": "clientService/notification",
               "params": {"channel": "ahp-client-services://", "serviceId": service,
                          "senderClientId": client_id, "senderPrincipal": principal,
                          "method": "n", "params": {}}})
        .to_string()
    };
    publish(None, "{}".into()).await;
    publish(
        Some((b_instance.as_str(), "not-a")),
        notify(CLIENT_B, json!({"kind": "direct"}), &service),
    )
    .await;
    publish(
        Some(("not-b", a_instance.as_str())),
        notify(CLIENT_B, json!({"kind": "direct"}), &service),
    )
    .await;
    publish(from_b, "not json at all\n{\"jsonrpc\":\"2.0\"}".into()).await;
    publish(from_b, notify("c-c-1", json!({"kind": "direct"}), &service)).await;
    publish(
        from_b,
        notify(CLIENT_B, json!({"kind": "direct", "hub": "c"}), &service),
    )
    .await;
    publish(
        from_b,
        notify(CLIENT_B, json!({"kind": "direct"}), "svc-a-unknown"),
    )
    .await;
    // A request to an unknown service is owed an answer: -32008 to hub b.
    publish(
        from_b,
        json!({"jsonrpc": "2.0", "id": 990, "method": "clientService/handleRequest",
               "params": {"channel": "ahp-client-services://", "serviceId": "svc-a-unknown",
                          "senderClientId": CLIENT_B, "senderPrincipal": {"kind": "direct"},
                          "method": "m", "params": {}}})
        .to_string(),
    )
    .await;
    publish(
        from_b,
        format!(
            "{{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":\"{}\"}}",
            "y".repeat(5000)
        ),
    )
    .await;
    publish(
        from_b,
        json!({"jsonrpc": "2.0", "id": 1, "method": "client/registerService", "params": {}})
            .to_string(),
    )
    .await;
    // A hub that is not in the fabric at all.
    client
        .publish("switchboard.hub.a.zz", Bytes::from_static(b"{}"))
        .await
        .unwrap();
    client.flush().await.unwrap();

    let ignored =
        |reason: &str| format!("switchboard_federation_ignored_total{{reason=\"{reason}\"}}");
    a.wait_for_metric(&ignored("no_headers"), 2);
    a.wait_for_metric(&ignored("stale_instance"), 2);
    a.wait_for_metric(&ignored("malformed"), 2);
    a.wait_for_metric(&ignored("impersonation"), 2);
    a.wait_for_metric(&ignored("too_large"), 1);
    a.wait_for_metric(&ignored("unknown_method"), 1);
    a.wait_for_metric(
        "switchboard_notifications_dropped_total{reason=\"unknown_service\"}",
        1,
    );
    a.wait_for_metric("switchboard_requests_failed_total{reason=\"not_found\"}", 1);

    // None reached the owner; a real request from B still does.
    let (mut caller, snapshot) = subscribed(&b);
    wait_added(&mut caller, &snapshot, &service);
    let id = caller.send_request(
        "clientService/request",
        json!({"serviceId": service, "method": "real"}),
    );
    let request = next_non_action(&mut owner);
    assert_eq!(request["params"]["method"], "real", "{request}");
    owner.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": true}));
    assert_eq!(next_non_action(&mut caller)["id"], id);
    // Only the notification to an unknown service reached the router, which
    // dropped it: nothing was forwarded.
    let metrics = a.metrics();
    assert_eq!(
        metric_value(
            &metrics,
            "switchboard_federation_lines_received_total{kind=\"notification\"}"
        ),
        1
    );
    assert_eq!(
        metric_value(&metrics, "switchboard_notifications_forwarded_total"),
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catalog_entries_that_do_not_parse_are_ignored_and_counted() {
    let fabric = Fabric::new();
    let a = fabric.hub("a", OPEN);
    let b = fabric.hub("b", OPEN);
    let (_client, store) = bucket(&fabric).await;
    let b_instance = instance(&store, "b").await;
    store
        .put("svc.b.svc-b-junk", Bytes::from_static(b"not json"))
        .await
        .unwrap();
    store.put("hub.zz", Bytes::from_static(b"{")).await.unwrap();
    store
        .put("nothing.of.ours", Bytes::from_static(b"{}"))
        .await
        .unwrap();
    // Well formed, but an id of another hub under b's key.
    let entry = json!({"instance": b_instance, "service": {"serviceId": "svc-c-1", "clientId": CLIENT_B,
                       "principal": {"kind": "direct"}, "metadata": {}}});
    store
        .put("svc.b.svc-c-1", Bytes::from(entry.to_string()))
        .await
        .unwrap();
    // And one that is fine, listed like any other.
    let entry = json!({"instance": b_instance, "service": {"serviceId": "svc-b-0000000000000000000000000000f00d", "clientId": CLIENT_B,
                       "principal": {"kind": "reserved", "module_id": "git"}, "metadata": {"ok": true}}});
    store
        .put(
            "svc.b.svc-b-0000000000000000000000000000f00d",
            Bytes::from(entry.to_string()),
        )
        .await
        .unwrap();
    let (mut on_a, snapshot) = subscribed(&a);
    let listed = wait_added(
        &mut on_a,
        &snapshot,
        "svc-b-0000000000000000000000000000f00d",
    );
    assert_eq!(
        listed["principal"],
        json!({"kind": "reserved", "module_id": "git", "hub": "b"})
    );
    a.wait_for_metric(
        "switchboard_federation_ignored_total{reason=\"bad_entry\"}",
        4,
    );
    // None of the bad entries is listed. (The good one may have aged out by
    // now: nothing re-writes it, and its TTL is the fabric's 2 s.)
    let (_, now) = subscribed(&a);
    assert!(
        now.iter()
            .all(|s| s["serviceId"] == "svc-b-0000000000000000000000000000f00d"),
        "{now:?}"
    );
    drop(b);
}

fn serve(args: &[&str]) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(switchboard_binary())
        .arg("serve")
        .arg("--dir")
        .arg(dir.path().join("hub"))
        .args(["--ws", "127.0.0.1:0"])
        .args(args)
        .output()
        .expect("run switchboard serve");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn a_bad_nats_url_or_credentials_file_is_a_clear_error_at_start() {
    let (ok, stderr) = serve(&["--nats", "nats://127.0.0.1:notaport", "--hub-name", "a"]);
    assert!(!ok);
    assert!(stderr.contains("is not a NATS URL"), "{stderr}");
    let (ok, stderr) = serve(&["--nats", "http://127.0.0.1:4222", "--hub-name", "a"]);
    assert!(!ok);
    assert!(stderr.contains("is not a NATS URL"), "{stderr}");
    let (ok, stderr) = serve(&["--nats", "nats://127.0.0.1:4222"]);
    assert!(!ok);
    assert!(stderr.contains("--nats needs --hub-name"), "{stderr}");
    let (ok, stderr) = serve(&[
        "--nats",
        "nats://127.0.0.1:4222",
        "--hub-name",
        "Not_A_Name",
    ]);
    assert!(!ok);
    assert!(stderr.contains("is not valid"), "{stderr}");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("switchboard.toml");
    std::fs::write(&config, "[federation]\nnats = \"nats://127.0.0.1:4222\"\nname = \"a\"\ncredentials = \"missing.creds\"\n").unwrap();
    let (ok, stderr) = serve(&["--config", config.to_str().unwrap()]);
    assert!(!ok);
    assert!(
        stderr.contains("cannot read the NATS credentials file"),
        "{stderr}"
    );
    assert!(stderr.contains("missing.creds"), "{stderr}");
    // A credentials file that is there but not one.
    std::fs::write(dir.path().join("missing.creds"), "not a creds file").unwrap();
    let (ok, stderr) = serve(&["--config", config.to_str().unwrap()]);
    assert!(!ok);
    assert!(stderr.contains("credentials"), "{stderr}");
    // A CA file that is not there.
    std::fs::write(&config, "[federation]\nnats = \"tls://127.0.0.1:4222\"\nname = \"a\"\ntls_ca = \"missing-ca.pem\"\n").unwrap();
    let (ok, stderr) = serve(&["--config", config.to_str().unwrap()]);
    assert!(!ok);
    assert!(stderr.contains("cannot read the NATS CA file"), "{stderr}");
    assert!(stderr.contains("missing-ca.pem"), "{stderr}");
}
