//! Spec section 7 against a hostile principal: knowing or guessing a
//! `serviceId` grants nothing, a refusal looks exactly like an id that never
//! existed, and nothing a client writes in its params (identity fields,
//! a chosen id, metadata claiming another principal, a crafted channel)
//! changes who it is. `authorization.rs` covers the grant matrix itself.

use crate::support::*;
use serde_json::{json, Value};

/// git owns a service; stranger has no grant of any kind.
async fn hub_with_a_stranger() -> TestHub {
    TestHub::with_principals(&["git", "stranger"], "").await
}

fn reserved(name: &str) -> Value {
    json!({"kind": "reserved", "module_id": name})
}

fn random_service_id() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("OS randomness");
    format!("svc-{}", hex::encode(bytes))
}

/// An error's message with the id it names replaced, so refusals for
/// different ids can be compared.
fn normalized(error: &Value, id: &str) -> Value {
    let mut error = error.clone();
    let message = error["message"].as_str().unwrap_or_default();
    error["message"] = json!(message.replace(&format!("{id:?}"), "\"ID\""));
    error
}

#[tokio::test]
async fn guessed_or_learned_service_ids_reach_nothing_and_look_like_unknown_ids() {
    let hub = hub_with_a_stranger().await;
    let mut git = hub.client_as("git").await;
    let service = git.register(json!({"repo": "private"})).await;
    let mut stranger = hub.client_as("stranger").await;
    let snapshot = stranger.subscribe().await;
    assert!(snapshot_services(&snapshot).is_empty());

    // The id itself (learned out of band), near misses, and random ids.
    let mut guesses = vec![
        service.clone(),
        service.to_uppercase(),
        format!("{service} "),
        service[..service.len() - 1].to_owned(),
        format!("{service}0"),
        git.client_id.clone(),
        "svc-".to_owned(),
        String::new(),
    ];
    guesses.extend((0..16).map(|_| random_service_id()));

    let never_existed = random_service_id();
    let baseline =
        |response: &Value| normalized(&expect_error(response, code::NOT_FOUND), &never_existed);
    let id = stranger
        .request_service(&never_existed, "m", json!({}))
        .await;
    let request_refusal = baseline(&stranger.response(&id).await);
    let unregister_refusal = baseline(
        &stranger
            .request(
                "client/unregisterService",
                json!({"serviceId": never_existed}),
            )
            .await,
    );
    let update_refusal = baseline(
        &stranger
            .request(
                "client/updateService",
                json!({"serviceId": never_existed, "metadata": {"repo": "mine"}}),
            )
            .await,
    );

    for guess in &guesses {
        stranger
            .notify_service(guess, "push", json!({"force": true}))
            .await;
        let id = stranger.request_service(guess, "push", json!({})).await;
        let refused = expect_error(&stranger.response(&id).await, code::NOT_FOUND);
        assert_eq!(
            normalized(&refused, guess),
            request_refusal,
            "request to {guess:?}"
        );
        let refused = stranger
            .request("client/unregisterService", json!({"serviceId": guess}))
            .await;
        let refused = expect_error(&refused, code::NOT_FOUND);
        assert_eq!(
            normalized(&refused, guess),
            unregister_refusal,
            "unregister {guess:?}"
        );
        let refused = stranger
            .request(
                "client/updateService",
                json!({"serviceId": guess, "metadata": {"repo": "mine"}}),
            )
            .await;
        let refused = expect_error(&refused, code::NOT_FOUND);
        assert_eq!(
            normalized(&refused, guess),
            update_refusal,
            "update {guess:?}"
        );
    }

    // Nothing reached git; its service is untouched and still hidden, even
    // from a subscriber watching while it changes.
    git.expect_silence(SILENCE).await;
    git.call(
        "client/updateService",
        json!({"serviceId": service, "metadata": {"repo": "private", "v": 2}}),
    )
    .await;
    stranger.expect_silence(SILENCE).await;
    let judge = snapshot_services(&hub.client("judge").await.subscribe().await);
    assert_eq!(
        judge[&service]["metadata"],
        json!({"repo": "private", "v": 2})
    );
    assert_eq!(
        hub.metric("switchboard_notifications_dropped_total{reason=\"not_permitted\"}"),
        1,
        "the notification to the real id was refused, not delivered"
    );
    assert_eq!(hub.metric("switchboard_notifications_forwarded_total"), 0);
    hub.assert_bookkeeping_released().await;
}

#[tokio::test]
async fn identity_fields_and_a_chosen_id_in_params_are_ignored() {
    let hub = hub_with_a_stranger().await;
    let mut git = hub.client_as("git").await;
    let mut stranger = hub.client_as("stranger").await;
    let mut judge = hub.client("judge").await;
    judge.subscribe().await;
    let chosen = random_service_id();

    // Everything but `metadata` is the hub's to decide.
    let registered = stranger
        .call(
            "client/registerService",
            json!({
                "metadata": {"principal": {"kind": "direct"}, "clientId": git.client_id},
                "serviceId": chosen,
                "clientId": git.client_id,
                "principal": {"kind": "direct"},
                "senderPrincipal": {"kind": "direct"},
            }),
        )
        .await;
    let service = registered["serviceId"].as_str().unwrap().to_owned();
    assert_ne!(service, chosen);
    let added = judge.action("clientServices/added").await;
    let listed = &added["params"]["action"]["service"];
    assert_eq!(listed["serviceId"], service.as_str());
    assert_eq!(listed["clientId"], stranger.client_id.as_str());
    assert_eq!(listed["principal"], reserved("stranger"));
    // Metadata is descriptive only: claiming `direct` there grants nothing.
    assert_eq!(listed["metadata"]["principal"], json!({"kind": "direct"}));
    assert!(snapshot_services(&git.subscribe().await).is_empty());
    let id = git.request_service(&service, "m", json!({})).await;
    expect_error(&git.response(&id).await, code::NOT_FOUND);
    // The chosen id routes nowhere.
    let id = judge.request_service(&chosen, "m", json!({})).await;
    expect_error(&judge.response(&id).await, code::NOT_FOUND);

    // An update that claims another identity changes the metadata only.
    stranger
        .call(
            "client/updateService",
            json!({
                "serviceId": service,
                "metadata": {"v": 2},
                "clientId": git.client_id,
                "principal": reserved("git"),
            }),
        )
        .await;
    let updated = judge.action("clientServices/updated").await;
    assert_eq!(
        updated["params"]["action"],
        json!({"type": "clientServices/updated", "serviceId": service, "metadata": {"v": 2}})
    );
    let listed = snapshot_services(&judge.subscribe().await);
    assert_eq!(listed[&service]["clientId"], stranger.client_id.as_str());
    assert_eq!(listed[&service]["principal"], reserved("stranger"));

    // Claiming to be the owner does not let git unregister it.
    let response = git
        .request(
            "client/unregisterService",
            json!({"serviceId": service, "clientId": stranger.client_id, "principal": reserved("stranger")}),
        )
        .await;
    expect_error(&response, code::NOT_FOUND);
    assert!(snapshot_services(&judge.subscribe().await).contains_key(&service));
}

#[tokio::test]
async fn crafted_catalog_channels_are_unknown_and_reveal_nothing() {
    let hub = hub_with_a_stranger().await;
    let mut git = hub.client_as("git").await;
    git.register(json!({})).await;
    let mut stranger = hub.client_as("stranger").await;
    for channel in [
        "ahp-client-services://git",
        "ahp-client-services://?principal=direct",
        "ahp-client-services:///../direct",
        "AHP-CLIENT-SERVICES://",
        "ahp-client-services:// ",
    ] {
        let response = stranger
            .request("subscribe", json!({"channel": channel}))
            .await;
        expect_error(&response, code::NOT_FOUND);
    }
    assert!(snapshot_services(&stranger.subscribe().await).is_empty());
    expect_all_silent([&mut git, &mut stranger]).await;
}
