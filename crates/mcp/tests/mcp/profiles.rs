//! Profiles (`[profiles.NAME]`): two gateways on one hub, each with its
//! own, list different tools and prompts, under the names their profiles
//! give; a name a profile leaves out (or renames away) cannot be called,
//! got or completed; a renamed one reaches its provider under its own name.

use std::path::Path;

use rmcp::model::{CompleteRequestParams, GetPromptRequestParams};
use serde_json::{json, Value};
use switchboard_mcp::Profile;

use crate::support::*;

const CONFIG: &str = r#"
[profiles.alpha-only]
include = ["alpha__*"]
exclude = ["alpha__*long", "alpha__sample", "alpha__elicit", "alpha__roots", "alpha__progress", "alpha__log"]
rename = { "alpha__echo" = "echo", "alpha__greet" = "hello" }

[profiles.zeta-echo]
include = ["zeta__echo", "zeta__greet"]
"#;

fn profile(name: &str) -> Profile {
    Profile::parse(CONFIG, Path::new("switchboard.toml"), name).expect("a valid profile")
}

fn serves() -> Serves {
    Serves {
        resources: vec![],
        templates: vec![],
        prompts: vec![prompt("greet")],
        broken_prompts: false,
    }
}

async fn names(client: &McpClient) -> (Vec<String>, Vec<String>) {
    let peer = client.service.peer();
    let mut tools: Vec<String> = within("tools/list", peer.list_all_tools())
        .await
        .unwrap()
        .into_iter()
        .map(|tool| tool.name.into_owned())
        .collect();
    tools.sort();
    let mut prompts: Vec<String> = within("prompts/list", peer.list_all_prompts())
        .await
        .unwrap()
        .into_iter()
        .map(|prompt| prompt.name)
        .collect();
    prompts.sort();
    (tools, prompts)
}

#[tokio::test]
async fn each_gateway_shows_its_profiles_tools_and_prompts_under_its_names() {
    let hub = hub().await;
    let alpha = TestProvider::start(direct(&hub), "alpha", serves()).await;
    let zeta = TestProvider::start(direct(&hub), "zeta", serves()).await;
    let narrow = gateway_with(&hub, Some(profile("alpha-only"))).await;
    let other = gateway_with(&hub, Some(profile("zeta-echo"))).await;
    for gateway in [&narrow, &other] {
        wait_for_provider(gateway, "alpha").await;
        wait_for_provider(gateway, "zeta").await;
    }
    let one = McpClient::connect(&narrow, "one", Answers::Always).await;
    let two = McpClient::connect(&other, "two", Answers::Always).await;
    assert_eq!(
        names(&one).await,
        (vec!["echo".to_owned()], vec!["hello".to_owned()])
    );
    assert_eq!(
        names(&two).await,
        (
            vec!["zeta__echo".to_owned()],
            vec!["zeta__greet".to_owned()]
        )
    );

    // The renamed tool reaches its provider; the names the profile does
    // not show are unknown, as tools the hub does not have.
    let echoed = one.call("echo", json!({"text": "hi"})).await.unwrap();
    assert_eq!(text_of(&echoed), "hi");
    assert_eq!(alpha.seen.of("tools/call").len(), 1);
    for hidden in ["alpha__echo", "zeta__echo", "alpha__sample"] {
        let error = one.call(hidden, json!({})).await.unwrap_err();
        assert!(
            error.to_string().contains("unknown tool"),
            "{hidden}: {error}"
        );
    }
    let error = two.call("echo", json!({})).await.unwrap_err();
    assert!(error.to_string().contains("unknown tool"), "{error}");
    assert!(zeta.seen.of("tools/call").is_empty());

    // Prompts: got and completed by the shown name, under the provider's
    // own; a hidden one is an unknown prompt.
    let peer = one.service.peer();
    let got = within(
        "prompts/get",
        peer.get_prompt(GetPromptRequestParams::new("hello")),
    )
    .await
    .unwrap();
    let got: Value = serde_json::to_value(got).unwrap();
    assert_eq!(got["messages"][0]["content"]["text"], "alpha prompt greet");
    let hidden = within(
        "a hidden prompt",
        peer.get_prompt(GetPromptRequestParams::new("zeta__greet")),
    )
    .await
    .unwrap_err();
    assert!(hidden.to_string().contains("unknown prompt"), "{hidden}");
    let params: CompleteRequestParams = serde_json::from_value(json!({
        "ref": {"type": "ref/prompt", "name": "hello"},
        "argument": {"name": "topic", "value": "t"}}))
    .unwrap();
    within("completion/complete", peer.complete(params))
        .await
        .unwrap();
    assert_eq!(
        alpha.seen.of("completion/complete")[0]["ref"]["name"],
        "greet"
    );
    assert!(zeta.seen.of("prompts/get").is_empty());
}
