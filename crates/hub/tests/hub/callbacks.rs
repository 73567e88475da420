//! Spec section 13: callback services. A service registered with
//! `"callback": true` may be discovered, notified and requested by every
//! principal its owner's principal may `request`, with no grant naming the
//! owner's services; it is listed to such a principal only when it
//! subscribed with `{"callbacks": true}`; a reload re-decides all of it.

use crate::support::*;
use serde_json::{json, Value};

const PRINCIPALS: &[&str] = &["consumer", "module", "stranger", "viewer"];

/// consumer may call module's services (so module may use consumer's
/// callback services). No grant names consumer's services, but viewer's
/// `discover`, which does not make it a callee of consumer.
const GRANTS: &str = r#"
[[grants]]
from = "consumer"
to = "module"
allow = ["discover", "request"]

[[grants]]
from = "viewer"
to = "consumer"
allow = ["discover"]
"#;

async fn hub() -> TestHub {
    TestHub::with_principals(PRINCIPALS, GRANTS).await
}

fn reserved(name: &str) -> Value {
    json!({"kind": "reserved", "module_id": name})
}

fn callback_metadata() -> Value {
    json!({"protocol": "mcp-client", "version": 1, "callback": true})
}

async fn subscribe_with(client: &mut RawClient, params: Value) -> Value {
    client.call("subscribe", params).await["snapshot"].clone()
}

async fn subscribe_for_callbacks(client: &mut RawClient) -> Value {
    subscribe_with(client, json!({"channel": CATALOG, "callbacks": true})).await
}

fn dropped_not_permitted(hub: &TestHub) -> u64 {
    hub.metric("switchboard_notifications_dropped_total{reason=\"not_permitted\"}")
}

#[tokio::test]
async fn a_callee_of_the_owner_may_request_and_notify_its_callback_service() {
    let hub = hub().await;
    let mut consumer = hub.client_as("consumer").await;
    let callback = consumer.register(callback_metadata()).await;
    let mut module = hub.client_as("module").await;

    let id = module
        .request_service(&callback, "sampling/createMessage", json!({"n": 1}))
        .await;
    let handle = consumer.handle_request().await;
    assert_eq!(handle["params"]["serviceId"], callback.as_str());
    assert_eq!(handle["params"]["senderPrincipal"], reserved("module"));
    assert_eq!(
        handle["params"]["senderClientId"],
        module.client_id.as_str()
    );
    assert_eq!(handle["params"]["params"], json!({"n": 1}));
    consumer.respond(&handle["id"], json!("sampled")).await;
    assert_eq!(expect_result(&module.response(&id).await), "sampled");

    module
        .notify_service(&callback, "notifications/progress", json!({"progress": 1}))
        .await;
    module
        .notify_service(&callback, "notifications/progress", json!({"progress": 2}))
        .await;
    for progress in [1, 2] {
        let note = consumer
            .receive(is_method("clientService/notification"), WAIT)
            .await;
        assert_eq!(note["params"]["senderPrincipal"], reserved("module"));
        assert_eq!(note["params"]["params"]["progress"], progress);
    }

    // It may see it (-32009, not -32008, for what only its owner may do).
    let response = module
        .request("client/unregisterService", json!({"serviceId": callback}))
        .await;
    expect_error(&response, code::PERMISSION_DENIED);

    // module may request no one: its own callback service is nobody else's.
    let modules = module.register(json!({"callback": true})).await;
    let mut stranger = hub.client_as("stranger").await;
    let id = stranger.request_service(&modules, "m", json!({})).await;
    expect_error(&stranger.response(&id).await, code::NOT_FOUND);

    expect_all_silent([&mut consumer, &mut module, &mut stranger]).await;
    assert_eq!(dropped_not_permitted(&hub), 0);
    hub.assert_bookkeeping_released().await;
}

#[tokio::test]
async fn a_principal_the_owner_may_not_request_is_refused() {
    let hub = hub().await;
    let mut consumer = hub.client_as("consumer").await;
    let callback = consumer.register(callback_metadata()).await;

    // stranger: no grant at all; viewer: may discover consumer's services,
    // but consumer may not request viewer, so the rule gives it nothing more.
    let mut stranger = hub.client_as("stranger").await;
    let id = stranger.request_service(&callback, "m", json!({})).await;
    expect_error(&stranger.response(&id).await, code::NOT_FOUND);
    let mut viewer = hub.client_as("viewer").await;
    let id = viewer.request_service(&callback, "m", json!({})).await;
    expect_error(&viewer.response(&id).await, code::PERMISSION_DENIED);

    for sender in [&mut stranger, &mut viewer] {
        sender.notify_service(&callback, "n", json!({})).await;
        expect_result(&sender.request("ping", json!(null)).await);
    }
    consumer.expect_silence(SILENCE).await;
    assert_eq!(dropped_not_permitted(&hub), 2);
    expect_all_silent([&mut stranger, &mut viewer]).await;
}

#[tokio::test]
async fn an_ordinary_service_of_the_owner_still_needs_a_grant() {
    let hub = hub().await;
    let mut consumer = hub.client_as("consumer").await;
    let ordinary = consumer.register(json!({"protocol": "mcp-client"})).await;
    let callback = consumer.register(callback_metadata()).await;
    let mut module = hub.client_as("module").await;

    let id = module.request_service(&ordinary, "m", json!({})).await;
    expect_error(&module.response(&id).await, code::NOT_FOUND);
    module.notify_service(&ordinary, "n", json!(1)).await;
    // The same sender, right after, to the callback service: delivered.
    module.notify_service(&callback, "n", json!(2)).await;
    let note = consumer
        .receive(is_method("clientService/notification"), WAIT)
        .await;
    assert_eq!(note["params"]["serviceId"], callback.as_str());
    assert_eq!(note["params"]["params"], 2);
    consumer.expect_silence(SILENCE).await;
    assert_eq!(dropped_not_permitted(&hub), 1);
    expect_all_silent([&mut module]).await;
}

#[tokio::test]
async fn callback_services_are_listed_only_to_subscribers_that_ask_for_them() {
    let hub = hub().await;
    let mut consumer = hub.client_as("consumer").await;
    let first = consumer.register(callback_metadata()).await;

    let mut plain = hub.client_as("module").await;
    assert!(snapshot_services(&plain.subscribe().await).is_empty());
    let mut asking = hub.client_as("module").await;
    let listed = snapshot_services(&subscribe_for_callbacks(&mut asking).await);
    assert_eq!(listed.keys().collect::<Vec<_>>(), vec![&first]);
    assert_eq!(listed[&first]["principal"], reserved("consumer"));
    assert_eq!(listed[&first]["metadata"], callback_metadata());
    // Asking gives nothing to a principal the owner may not request.
    let mut stranger = hub.client_as("stranger").await;
    assert!(snapshot_services(&subscribe_for_callbacks(&mut stranger).await).is_empty());
    // `"callbacks": false` is the default.
    let mut declining = hub.client_as("module").await;
    let snapshot = subscribe_with(
        &mut declining,
        json!({"channel": CATALOG, "callbacks": false}),
    )
    .await;
    assert!(snapshot_services(&snapshot).is_empty());
    // An ordinary grant lists it whatever the subscriber asked.
    let mut viewer = hub.client_as("viewer").await;
    let listed = snapshot_services(&viewer.subscribe().await);
    assert_eq!(listed.keys().collect::<Vec<_>>(), vec![&first]);

    // Changes: only `asking` and viewer hear of them.
    let second = consumer.register(callback_metadata()).await;
    consumer
        .call(
            "client/updateService",
            json!({"serviceId": second, "metadata": {"callback": true, "v": 2}}),
        )
        .await;
    consumer
        .call("client/unregisterService", json!({"serviceId": first}))
        .await;
    for client in [&mut asking, &mut viewer] {
        let added = client.action("clientServices/added").await;
        assert_eq!(
            added["params"]["action"]["service"]["serviceId"],
            second.as_str()
        );
        let updated = client.action("clientServices/updated").await;
        assert_eq!(updated["params"]["action"]["metadata"]["v"], 2);
        let removed = client.action("clientServices/removed").await;
        assert_eq!(removed["params"]["action"]["serviceId"], first.as_str());
    }
    // Subscribing again without asking: the callback services are gone
    // from the new snapshot, and from what follows.
    assert!(snapshot_services(&asking.subscribe().await).is_empty());
    let third = consumer.register(callback_metadata()).await;
    viewer.action("clientServices/added").await;
    // Yet it may still use them.
    let id = asking.request_service(&third, "m", json!({})).await;
    let handle = consumer.handle_request().await;
    consumer.respond(&handle["id"], json!(true)).await;
    expect_result(&asking.response(&id).await);

    expect_all_silent([
        &mut plain,
        &mut asking,
        &mut stranger,
        &mut declining,
        &mut viewer,
    ])
    .await;
}

#[tokio::test]
async fn callback_other_than_true_is_invalid_params_naming_it() {
    let hub = hub().await;
    let mut consumer = hub.client_as("consumer").await;
    for metadata in [
        json!({"callback": "yes"}),
        json!({"callback": false}),
        json!({"callback": null}),
        json!({"callback": 1}),
    ] {
        let response = consumer
            .request("client/registerService", json!({"metadata": metadata}))
            .await;
        let error = expect_error(&response, code::INVALID_PARAMS);
        assert_eq!(error["data"]["field"], "callback", "{metadata}");
        assert!(
            error["message"].as_str().unwrap().contains("callback"),
            "{error}"
        );
    }
    let response = consumer
        .request(
            "client/registerService",
            json!({"metadata": {"nested": {"callback": "yes"}}}),
        )
        .await;
    expect_result(&response);

    // An update may not make a service a callback service, nor the reverse.
    let ordinary = consumer.register(json!({})).await;
    let callback = consumer.register(callback_metadata()).await;
    for (service, metadata) in [
        (&ordinary, json!({"callback": true})),
        (&callback, json!({})),
        (&callback, json!({"callback": "yes"})),
    ] {
        let response = consumer
            .request(
                "client/updateService",
                json!({"serviceId": service, "metadata": metadata}),
            )
            .await;
        let error = expect_error(&response, code::INVALID_PARAMS);
        assert_eq!(error["data"]["field"], "callback");
    }

    // Subscribe's `callbacks` is a boolean.
    let response = consumer
        .request("subscribe", json!({"channel": CATALOG, "callbacks": "yes"}))
        .await;
    let error = expect_error(&response, code::INVALID_PARAMS);
    assert_eq!(error["data"]["field"], "callbacks");

    // The connection carries on.
    expect_result(&consumer.request("ping", json!(null)).await);
    let listed = snapshot_services(&consumer.subscribe().await);
    assert_eq!(listed.len(), 3);
    assert_eq!(listed[&callback]["metadata"], callback_metadata());
}

#[tokio::test]
async fn a_reload_that_removes_the_owners_request_grant_refuses_the_callee() {
    let hub = hub().await;
    let mut consumer = hub.client_as("consumer").await;
    let callback = consumer.register(callback_metadata()).await;
    let mut module = hub.client_as("module").await;
    let mut watcher = hub.client_as("module").await;
    let listed = snapshot_services(&subscribe_for_callbacks(&mut watcher).await);
    assert!(listed.contains_key(&callback));

    // Notified once, so the sender keeps the decision (`LastRoute`).
    module.notify_service(&callback, "n", json!(1)).await;
    assert_eq!(consumer.next().await["params"]["params"], 1);

    let without = GRANTS.replace(
        "allow = [\"discover\", \"request\"]",
        "allow = [\"discover\"]",
    );
    assert_ne!(without, GRANTS);
    hub.reload_with(&without).unwrap();
    let removed = watcher.action("clientServices/removed").await;
    assert_eq!(
        removed["params"]["action"],
        json!({"type": "clientServices/removed", "serviceId": callback, "reason": "hidden"})
    );
    module.notify_service(&callback, "n", json!(2)).await;
    let id = module.request_service(&callback, "m", json!({})).await;
    expect_error(&module.response(&id).await, code::NOT_FOUND);
    consumer.expect_silence(SILENCE).await;
    assert_eq!(dropped_not_permitted(&hub), 1);

    // The grant back: usable and listed again.
    hub.reload_with(GRANTS).unwrap();
    let added = watcher.action("clientServices/added").await;
    assert_eq!(
        added["params"]["action"]["service"]["serviceId"],
        callback.as_str()
    );
    module.notify_service(&callback, "n", json!(3)).await;
    assert_eq!(consumer.next().await["params"]["params"], 3);
    expect_all_silent([&mut consumer, &mut module, &mut watcher]).await;
}

/// `direct` may request every principal's services, so every principal may
/// use a callback service `direct` registers (the CLI's, for instance).
#[tokio::test]
async fn every_principal_may_use_a_callback_service_of_direct() {
    let hub = hub().await;
    let mut user = hub.client("user").await;
    let callback = user.register(callback_metadata()).await;
    let ordinary = user.register(json!({})).await;
    let mut stranger = hub.client_as("stranger").await;
    let listed = snapshot_services(&subscribe_for_callbacks(&mut stranger).await);
    assert_eq!(listed.keys().collect::<Vec<_>>(), vec![&callback]);
    let id = stranger.request_service(&callback, "m", json!({})).await;
    let handle = user.handle_request().await;
    assert_eq!(handle["params"]["senderPrincipal"], reserved("stranger"));
    user.respond(&handle["id"], json!("ok")).await;
    assert_eq!(expect_result(&stranger.response(&id).await), "ok");
    let id = stranger.request_service(&ordinary, "m", json!({})).await;
    expect_error(&stranger.response(&id).await, code::NOT_FOUND);
    expect_all_silent([&mut user, &mut stranger]).await;
}
