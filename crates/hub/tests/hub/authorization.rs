//! Spec section 7 (and the ownership rules of section 3): identity is the
//! hub's; `discover`, `notify` and `request` are granted separately; a
//! reload re-decides visibility and closes connections that lost their
//! principal.

use crate::support::*;
use serde_json::{json, Value};

const PRINCIPALS: &[&str] = &["explorer", "git", "viewer", "notifier", "stranger"];

/// explorer may do everything to git's services, viewer may only see them,
/// notifier may only notify them; stranger has no grant.
const GRANTS: &str = r#"
[[grants]]
from = "explorer"
to = "git"
allow = ["discover", "request", "notify"]

[[grants]]
from = "viewer"
to = "git"
allow = ["discover"]

[[grants]]
from = "notifier"
to = "git"
allow = ["notify"]
"#;

async fn hub_with_grants() -> TestHub {
    TestHub::with_principals(PRINCIPALS, GRANTS).await
}

fn reserved(name: &str) -> Value {
    json!({"kind": "reserved", "module_id": name})
}

#[tokio::test]
async fn named_tokens_authenticate_reserved_principals() {
    let hub = hub_with_grants().await;
    for name in PRINCIPALS {
        let client = hub.client_as(name).await;
        assert_eq!(client.init["principal"], reserved(name));
    }
    let direct = hub.client("direct").await;
    assert_eq!(direct.init["principal"], json!({"kind": "direct"}));
}

#[tokio::test]
async fn each_subscriber_discovers_only_the_services_it_may_see() {
    let hub = hub_with_grants().await;
    let mut git = hub.client_as("git").await;
    let first = git.register(json!({"repo": "one"})).await;

    let mut seeing = vec![
        hub.client_as("explorer").await,
        hub.client_as("viewer").await,
        hub.client("direct").await,
    ];
    let mut blind = vec![
        hub.client_as("notifier").await,
        hub.client_as("stranger").await,
    ];
    for client in &mut seeing {
        let listed = snapshot_services(&client.subscribe().await);
        assert_eq!(
            listed.keys().collect::<Vec<_>>(),
            vec![&first],
            "{}",
            client.label
        );
    }
    for client in &mut blind {
        let listed = snapshot_services(&client.subscribe().await);
        assert!(listed.is_empty(), "{} sees {listed:?}", client.label);
    }

    let second = git.register(json!({"repo": "two"})).await;
    git.call(
        "client/updateService",
        json!({"serviceId": second, "metadata": {"repo": "2"}}),
    )
    .await;
    git.call("client/unregisterService", json!({"serviceId": first}))
        .await;
    for client in &mut seeing {
        let added = client.action("clientServices/added").await;
        assert_eq!(
            added["params"]["action"]["service"]["serviceId"],
            second.as_str()
        );
        assert_eq!(
            added["params"]["action"]["service"]["principal"],
            reserved("git")
        );
        client.action("clientServices/updated").await;
        let removed = client.action("clientServices/removed").await;
        assert_eq!(removed["params"]["action"]["serviceId"], first.as_str());
    }
    expect_all_silent(&mut blind).await;

    // A subscriber always sees its own services; git does not see stranger's.
    let stranger = &mut blind[1];
    let own = stranger.register(json!({"mine": true})).await;
    let added = stranger.action("clientServices/added").await;
    assert_eq!(
        added["params"]["action"]["service"]["serviceId"],
        own.as_str()
    );
    let listed = snapshot_services(&git.subscribe().await);
    assert!(!listed.contains_key(&own));
}

#[tokio::test]
async fn a_request_needs_discover_and_request_grants() {
    let hub = hub_with_grants().await;
    let mut git = hub.client_as("git").await;
    let service = git.register(json!({})).await;

    // Allowed: granted, direct, the same principal, the owner itself.
    let mut allowed = vec![
        (hub.client_as("explorer").await, reserved("explorer")),
        (hub.client("direct").await, json!({"kind": "direct"})),
        (hub.client_as("git").await, reserved("git")),
    ];
    for (caller, principal) in &mut allowed {
        let id = caller.request_service(&service, "log", json!({})).await;
        let handle = git.handle_request().await;
        assert_eq!(handle["params"]["senderPrincipal"], *principal);
        assert_eq!(
            handle["params"]["senderClientId"],
            caller.client_id.as_str()
        );
        git.respond(&handle["id"], json!("ok")).await;
        assert_eq!(expect_result(&caller.response(&id).await), "ok");
    }

    // Visible but not requestable: -32009.
    let mut viewer = hub.client_as("viewer").await;
    let id = viewer.request_service(&service, "log", json!({})).await;
    expect_error(&viewer.response(&id).await, code::PERMISSION_DENIED);

    // Invisible: -32008, the same answer as for an id that never existed.
    let unknown = "svc-0123456789abcdef0123456789abcdef";
    for name in ["stranger", "notifier"] {
        let mut caller = hub.client_as(name).await;
        let id = caller.request_service(&service, "log", json!({})).await;
        let hidden = expect_error(&caller.response(&id).await, code::NOT_FOUND);
        let id = caller.request_service(unknown, "log", json!({})).await;
        let missing = expect_error(&caller.response(&id).await, code::NOT_FOUND);
        let hidden_text = hidden.to_string().replace(&service, "ID");
        assert_eq!(hidden_text, missing.to_string().replace(unknown, "ID"));
    }

    // Grants have a direction: git may not call explorer's services.
    let mut explorer = hub.client_as("explorer").await;
    let explorers = explorer.register(json!({})).await;
    let id = git.request_service(&explorers, "open", json!({})).await;
    expect_error(&git.response(&id).await, code::NOT_FOUND);

    expect_all_silent([&mut git, &mut explorer]).await;
    hub.assert_bookkeeping_released().await;
}

#[tokio::test]
async fn a_notification_needs_only_the_notify_grant_and_refusals_are_silent() {
    let hub = hub_with_grants().await;
    let mut git = hub.client_as("git").await;
    let service = git.register(json!({})).await;

    let mut delivered = [
        hub.client_as("explorer").await,
        hub.client_as("notifier").await, // notify without discover
        hub.client_as("git").await,
        hub.client("direct").await,
    ];
    let mut dropped = [
        hub.client_as("viewer").await,
        hub.client_as("stranger").await,
    ];
    for sender in delivered.iter_mut().chain(dropped.iter_mut()) {
        let label = sender.label.clone();
        sender.notify_service(&service, "hello", json!(label)).await;
        expect_result(&sender.request("ping", json!(null)).await);
    }
    let mut got = Vec::new();
    for _ in 0..delivered.len() {
        let note = git
            .receive(is_method("clientService/notification"), WAIT)
            .await;
        got.push(
            note["params"]["senderClientId"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    git.expect_silence(SILENCE).await;
    let mut expected: Vec<String> = delivered.iter().map(|c| c.client_id.clone()).collect();
    got.sort();
    expected.sort();
    assert_eq!(got, expected);
    expect_all_silent(delivered.iter_mut().chain(dropped.iter_mut())).await;
    assert_eq!(
        hub.metric("switchboard_notifications_dropped_total{reason=\"not_permitted\"}"),
        2
    );
}

#[tokio::test]
async fn only_the_owning_connection_may_unregister_or_update_a_service() {
    let hub = hub_with_grants().await;
    let mut git = hub.client_as("git").await;
    let service = git.register(json!({"v": 1})).await;

    let unregister = json!({"serviceId": service});
    let update = json!({"serviceId": service, "metadata": {"v": 666}});
    // Those who can see it: -32009.
    for mut other in [
        hub.client_as("git").await,
        hub.client_as("viewer").await,
        hub.client("direct").await,
    ] {
        let response = other
            .request("client/unregisterService", unregister.clone())
            .await;
        expect_error(&response, code::PERMISSION_DENIED);
        let response = other.request("client/updateService", update.clone()).await;
        expect_error(&response, code::PERMISSION_DENIED);
    }
    // Those who cannot: -32008.
    for mut other in [
        hub.client_as("stranger").await,
        hub.client_as("notifier").await,
    ] {
        let response = other
            .request("client/unregisterService", unregister.clone())
            .await;
        expect_error(&response, code::NOT_FOUND);
        let response = other.request("client/updateService", update.clone()).await;
        expect_error(&response, code::NOT_FOUND);
    }
    let listed = snapshot_services(&hub.client("judge").await.subscribe().await);
    assert_eq!(listed[&service]["metadata"], json!({"v": 1}));

    git.call(
        "client/updateService",
        json!({"serviceId": service, "metadata": {"v": 2}}),
    )
    .await;
    git.call("client/unregisterService", unregister).await;
}

#[tokio::test]
async fn nothing_a_client_writes_changes_its_identity() {
    let hub = hub_with_grants().await;
    let mut git = hub.client_as("git").await;
    let service = git.register(json!({})).await;
    let mut explorer = hub.connect("explorer").await;
    explorer
        .initialize_with(json!({
            "authToken": token_of("explorer"),
            "principal": {"kind": "direct"},
            "clientId": "c-forged",
        }))
        .await;
    assert_eq!(explorer.init["principal"], reserved("explorer"));

    let forged = json!({
        "serviceId": service,
        "method": "m",
        "params": {},
        "senderClientId": "c-forged",
        "senderPrincipal": {"kind": "direct"},
    });
    explorer
        .notify("clientService/notify", forged.clone())
        .await;
    let note = git.next().await;
    assert_eq!(
        note["params"]["senderClientId"],
        explorer.client_id.as_str()
    );
    assert_eq!(note["params"]["senderPrincipal"], reserved("explorer"));

    let id = explorer.send_request("clientService/request", forged).await;
    let handle = git.handle_request().await;
    assert_eq!(
        handle["params"]["senderClientId"],
        explorer.client_id.as_str()
    );
    assert_eq!(handle["params"]["senderPrincipal"], reserved("explorer"));
    git.respond(&handle["id"], json!(null)).await;
    explorer.response(&id).await;
}

#[tokio::test]
async fn a_reload_pushes_visibility_changes_as_added_and_removed_hidden() {
    let hub = hub_with_grants().await;
    let mut git = hub.client_as("git").await;
    let service = git.register(json!({"repo": "r"})).await;
    let mut stranger = hub.client_as("stranger").await;
    let snapshot = stranger.subscribe().await;
    assert_eq!(snapshot["state"]["services"], json!([]));
    let mut explorer = hub.client_as("explorer").await;
    explorer.subscribe().await;

    let more = format!(
        "{GRANTS}\n[[grants]]\nfrom = \"stranger\"\nto = \"git\"\nallow = [\"discover\", \"request\"]\n"
    );
    let result = hub.reload_with(&more).unwrap();
    assert_eq!((result.principals, result.grants, result.closed), (5, 4, 0));
    let added = stranger.action("clientServices/added").await;
    assert_eq!(
        added["params"]["action"]["service"]["serviceId"],
        service.as_str()
    );
    assert_eq!(
        added["params"]["action"]["service"]["metadata"],
        json!({"repo": "r"})
    );
    let added_seq = added["params"]["serverSeq"].as_u64().unwrap();
    assert!(added_seq > snapshot["fromSeq"].as_u64().unwrap());

    let id = stranger.request_service(&service, "log", json!({})).await;
    let handle = git.handle_request().await;
    git.respond(&handle["id"], json!("visible now")).await;
    assert_eq!(expect_result(&stranger.response(&id).await), "visible now");

    hub.reload_with(GRANTS).unwrap();
    let removed = stranger.action("clientServices/removed").await;
    assert_eq!(
        removed["params"]["action"],
        json!({"type": "clientServices/removed", "serviceId": service, "reason": "hidden"})
    );
    assert!(removed["params"]["serverSeq"].as_u64().unwrap() > added_seq);
    let id = stranger.request_service(&service, "log", json!({})).await;
    expect_error(&stranger.response(&id).await, code::NOT_FOUND);
    stranger.notify_service(&service, "hello", json!({})).await;

    // Nothing changed for explorer; git got nothing after the last answer.
    expect_all_silent([&mut explorer, &mut git]).await;
}

/// A sender's connection keeps the route and the decision of the service
/// it last notified (`LastRoute`); a reload must re-decide the very next
/// notification, both ways.
#[tokio::test]
async fn a_reload_re_decides_the_next_notification_of_a_sender_that_just_notified() {
    let hub = hub_with_grants().await;
    let mut git = hub.client_as("git").await;
    let service = git.register(json!({})).await;
    let mut notifier = hub.client_as("notifier").await;
    let notified = |note: &Msg| note.value["params"]["params"].clone();

    notifier.notify_service(&service, "n", json!(1)).await;
    assert_eq!(notified(&git.next().await), 1);

    // Without notifier's grant: the same sender, the same service, dropped.
    let without = GRANTS.replace("from = \"notifier\"", "from = \"stranger\"");
    assert_ne!(without, GRANTS);
    hub.reload_with(&without).unwrap();
    notifier.notify_service(&service, "n", json!(2)).await;
    expect_result(&notifier.request("ping", json!(null)).await);
    git.expect_silence(SILENCE).await;
    assert_eq!(
        hub.metric("switchboard_notifications_dropped_total{reason=\"not_permitted\"}"),
        1
    );

    // The grant back: delivered again, in order.
    hub.reload_with(GRANTS).unwrap();
    notifier.notify_service(&service, "n", json!(3)).await;
    notifier.notify_service(&service, "n", json!(4)).await;
    assert_eq!(notified(&git.next().await), 3);
    assert_eq!(notified(&git.next().await), 4);
    expect_all_silent([&mut notifier, &mut git]).await;
}

#[tokio::test]
async fn a_reload_that_removes_a_principal_closes_its_connections() {
    let hub = hub_with_grants().await;
    let mut watcher = hub.client("watcher").await;
    watcher.subscribe().await;
    let mut stranger = hub.client_as("stranger").await;
    let service = stranger.register(json!({})).await;
    watcher.action("clientServices/added").await;
    let mut explorer = hub.client_as("explorer").await;
    let mut caller = hub.client("caller").await;
    let pending = caller.request_service(&service, "slow", json!({})).await;
    stranger.handle_request().await;

    let remaining: Vec<&str> = PRINCIPALS
        .iter()
        .copied()
        .filter(|p| *p != "stranger")
        .collect();
    let result = hub.reload_with_principals(&remaining, GRANTS).unwrap();
    assert_eq!((result.principals, result.closed), (4, 1));

    stranger.wait_closed().await;
    let removed = watcher.action("clientServices/removed").await;
    assert_eq!(
        removed["params"]["action"],
        json!({"type": "clientServices/removed", "serviceId": service, "reason": "disconnected"})
    );
    let answer = caller.response(&pending).await;
    expect_error(&answer, code::SERVICE_GONE);
    assert_eq!(answer["error"]["data"]["reason"], "disconnected");
    expect_result(&explorer.request("ping", json!(null)).await);

    let mut again = hub.connect("stranger-again").await;
    let response = again.initialize(Some(&token_of("stranger"))).await;
    expect_error(&response, code::AUTH_REQUIRED);
    again.wait_closed().await;
    hub.assert_bookkeeping_released().await;
}

#[tokio::test]
async fn hub_reload_is_for_the_direct_principal_and_reports_a_broken_config() {
    let hub = hub_with_grants().await;
    let mut operator = hub.client("operator").await;
    let result = operator.call("hub/reload", json!(null)).await;
    assert_eq!(result, json!({"principals": 5, "grants": 3, "closed": 0}));

    let mut explorer = hub.client_as("explorer").await;
    let response = explorer.request("hub/reload", json!(null)).await;
    expect_error(&response, code::PERMISSION_DENIED);

    hub.write_config("[[grants]]\nfrom = \"ghost\"\nto = \"*\"\nallow = [\"notify\"]\n");
    let response = operator.request("hub/reload", json!(null)).await;
    let error = expect_error(&response, code::INTERNAL_ERROR);
    assert_eq!(error["data"]["reason"], "config");
    assert!(
        error["message"].as_str().unwrap().contains("ghost"),
        "{error}"
    );

    // The old config stays in force: explorer's token still works.
    let again = hub.client_as("explorer").await;
    assert_eq!(again.init["principal"], reserved("explorer"));
    expect_result(&explorer.request("ping", json!(null)).await);
}

#[tokio::test]
async fn unverified_connections_are_served_only_when_allowed_and_do_not_see_each_other() {
    let hub = TestHub::with_config("[hub]\nallow_unverified = true\n").await;
    let mut anonymous = Vec::new();
    for label in ["anon-a", "anon-b"] {
        let mut client = hub.connect(label).await;
        let result = client.initialize_ok(None).await;
        assert_eq!(result["principal"], json!({"kind": "unverified"}));
        anonymous.push(client);
    }
    let service = anonymous[0].register(json!({})).await;
    let snapshot = anonymous[1].subscribe().await;
    assert_eq!(snapshot["state"]["services"], json!([]));
    let id = anonymous[1].request_service(&service, "m", json!({})).await;
    expect_error(&anonymous[1].response(&id).await, code::NOT_FOUND);
    let mut direct = hub.client("direct").await;
    assert!(snapshot_services(&direct.subscribe().await).contains_key(&service));

    // A grant from "*" covers unverified callers too.
    hub.reload_with(
        "[hub]\nallow_unverified = true\n[[grants]]\nfrom = \"*\"\nto = \"*\"\nallow = [\"discover\"]\n",
    )
    .unwrap();
    let added = anonymous[1].action("clientServices/added").await;
    assert_eq!(
        added["params"]["action"]["service"]["serviceId"],
        service.as_str()
    );

    // Turning unverified access off closes them; the direct client stays.
    let result = hub.reload_with("").unwrap();
    assert_eq!(result.closed, 2);
    for client in &mut anonymous {
        client.wait_closed().await;
    }
    let removed = direct.action("clientServices/removed").await;
    assert_eq!(removed["params"]["action"]["reason"], "disconnected");
    let mut late = hub.connect("anon-late").await;
    expect_error(&late.initialize(None).await, code::AUTH_REQUIRED);
    late.wait_closed().await;
}

#[tokio::test]
async fn a_reload_that_changes_a_principals_token_closes_connections_using_the_old_one() {
    let hub = TestHub::with_principals(&["explorer"], "").await;
    let mut old = hub.client_as("explorer").await;
    let mut direct = hub.client("direct").await;
    let result = hub
        .reload_with_principals(
            &[],
            "[principals.explorer]\ntoken = \"rotated-token-0123\"\n",
        )
        .unwrap();
    assert_eq!((result.principals, result.closed), (1, 1));
    old.wait_closed().await;
    expect_result(&direct.request("ping", json!(null)).await);

    let mut new = hub.connect("explorer-rotated").await;
    let result = new.initialize_ok(Some("rotated-token-0123")).await;
    assert_eq!(result["principal"], reserved("explorer"));
}
