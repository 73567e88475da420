//! Section 4 (SECURITY.md, "Another hub of a federation"): no token ever
//! crosses the fabric. A spy on the nats-server reads every message the
//! hubs publish (lines, credits, catalog keys and heartbeats, probes) while
//! a request, an answer, notifications and registrations go between them;
//! neither hub's `direct` token nor any named principal's appears, in a
//! subject, a header or a payload, plain or hex-encoded.

use futures::StreamExt;
use serde_json::json;

use super::{next_non_action, subscribed, wait_added};
use crate::support::fabric::{Fabric, OPEN};
use crate::support::LineClient;

const EXPLORER: &str = "explorer-secret-token-0123456789abcdef";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_token_of_either_hub_crosses_the_fabric() {
    let fabric = Fabric::new();
    let spy = async_nats::connect(fabric.nats.url())
        .await
        .expect("the spy connects");
    let mut everything = spy.subscribe(">").await.expect("subscribe to everything");
    spy.flush().await.unwrap();
    let config = format!("[principals.explorer]\ntoken = \"{EXPLORER}\"\n{OPEN}");
    let a = fabric.hub("a", &config);
    let b = fabric.hub("b", &config);

    // A named principal's service on a, called from b by b's direct client
    // and b's explorer; notifications both ways.
    let mut owner = LineClient::connect(&a.socket());
    owner.initialize(EXPLORER);
    let answer = owner.request(
        "client/registerService",
        json!({"metadata": {"who": "explorer"}}),
    );
    let service = answer["result"]["serviceId"].as_str().unwrap().to_owned();
    let (mut caller, snapshot) = subscribed(&b);
    wait_added(&mut caller, &snapshot, &service);
    let mut explorer_on_b = LineClient::connect(&b.socket());
    explorer_on_b.initialize(EXPLORER);
    for client in [&mut caller, &mut explorer_on_b] {
        let id = client.send_request(
            "clientService/request",
            json!({"serviceId": service, "method": "m", "params": {"p": 1}}),
        );
        // The previous caller's notification may reach the owner first.
        let request = loop {
            let message = next_non_action(&mut owner);
            if message.get("id").is_some() {
                break message;
            }
        };
        owner.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": {"ok": true}}));
        let answer = next_non_action(client);
        assert_eq!(answer["id"], id, "{answer}");
        client.send(&json!({"jsonrpc": "2.0", "method": "clientService/notify",
            "params": {"serviceId": service, "method": "n", "params": {}}}));
    }
    // A marker through the same path: everything before it was published.
    let id = caller.send_request(
        "clientService/request",
        json!({"serviceId": service, "method": "last"}),
    );
    loop {
        let message = next_non_action(&mut owner);
        if message["params"]["method"] == "last" {
            owner.send(&json!({"jsonrpc": "2.0", "id": message["id"], "result": null}));
            break;
        }
    }
    assert_eq!(next_non_action(&mut caller)["id"], id);

    let secrets = [a.token(), b.token(), EXPLORER.to_owned()];
    let mut seen = 0;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(3);
    while let Ok(Some(message)) = tokio::time::timeout_at(deadline, everything.next()).await {
        seen += 1;
        let mut text = message.subject.to_string();
        if let Some(headers) = &message.headers {
            for (name, values) in headers.iter() {
                text.push_str(name.as_ref());
                for value in values {
                    text.push_str(value.as_str());
                }
            }
        }
        text.push_str(&String::from_utf8_lossy(&message.payload));
        if let Some(reply) = &message.reply {
            text.push_str(reply);
        }
        for secret in &secrets {
            assert!(
                !text.contains(secret.as_str()) && !text.contains(&hex(secret)),
                "a token crossed the fabric on {}",
                message.subject
            );
        }
    }
    assert!(seen > 10, "the spy saw only {seen} messages");
}

fn hex(text: &str) -> String {
    text.bytes().map(|b| format!("{b:02x}")).collect()
}
