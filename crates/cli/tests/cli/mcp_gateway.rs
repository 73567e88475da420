//! `switchboard mcp` through the official MCP client, against a live hub
//! with providers started by `switchboard provide-mcp`.

use std::time::Duration;

use crate::support::mcp::*;
use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest};
use rmcp::service::PeerRequestOptions;
use serde_json::json;

use crate::support::modules::{toml_string, ModuleHub};
use crate::support::switchboard;

/// A server's progress and its answer, written one right after the other,
/// keep their order through provide-mcp, the hub and the gateway: MCP
/// drops progress that comes after the answer, so a report overtaken on
/// the way is lost (rmcp handles each notification on a task of its own;
/// provide-mcp waits, bounded, for the reports it read before the answer).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_written_just_before_the_answer_is_not_overtaken_by_it() {
    const CALLS: usize = 20;
    let hub = HubProcess::start();
    let _beta = hub.provide("beta");
    let gateway = hub.gateway().await;
    gateway
        .wait_for_tools("beta", |names| names.iter().any(|n| n == "beta__progress"))
        .await;
    for _ in 0..CALLS {
        let result = gateway
            .call("beta__progress", json!({"steps": 3}))
            .await
            .unwrap();
        assert_eq!(text_of(&result), "done");
    }
    // The client handles notifications on tasks of its own too: each
    // call's last step arrives, if not before its answer, soon after.
    eventually("every call's last progress step", || {
        let progress = gateway.events.progress.lock().unwrap();
        progress.iter().filter(|note| note.progress == 3.0).count() == CALLS
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_and_calls_the_tools_of_two_providers_with_progress() {
    let hub = HubProcess::start();
    let _alpha = hub.provide("alpha");
    let _beta = hub.provide("beta");
    let client = hub.client("test").await;
    provider_id(&client, "alpha").await;
    provider_id(&client, "beta").await;
    let gateway = hub.gateway().await;
    let names = gateway
        .wait_for_tools("both providers", |names| {
            names.iter().any(|n| n == "alpha__echo") && names.iter().any(|n| n == "beta__echo")
        })
        .await;
    assert!(names.contains(&"beta__counter".to_owned()), "{names:?}");

    let result = gateway
        .call("alpha__echo", json!({"text": "hi"}))
        .await
        .unwrap();
    assert_eq!(text_of(&result), "hi");
    assert_ne!(result.is_error, Some(true));

    // rmcp sends a progress token with every request; progress comes back
    // while the call runs (the tool holds its answer until released, since
    // progress after the answer is dropped, as MCP requires).
    let release = hub.path("release-progress");
    let call = {
        let release = release.clone();
        let peer = gateway.service.peer().clone();
        tokio::spawn(async move {
            let params = rmcp::model::CallToolRequestParams::new("beta__progress").with_arguments(
                json!({"steps": 3, "release": release})
                    .as_object()
                    .cloned()
                    .unwrap(),
            );
            tokio::time::timeout(WAIT, peer.call_tool(params)).await
        })
    };
    // rmcp runs each incoming notification on its own task, here and in
    // `provide-mcp`, so arrival order is not send order; the gateway drops a
    // value that does not increase (MCP requires increasing progress). So:
    // the last step always arrives, nothing arrives twice, and each
    // notification carries its own step's total and message.
    eventually("the last progress step", || {
        let progress = gateway.events.progress.lock().unwrap();
        progress.iter().any(|note| note.progress == 3.0)
    })
    .await;
    std::fs::write(&release, "").unwrap();
    let result = call.await.unwrap().unwrap().unwrap();
    assert_eq!(text_of(&result), "done");
    let progress = gateway.events.progress.lock().unwrap().clone();
    let mut steps: Vec<f64> = progress.iter().map(|note| note.progress).collect();
    steps.sort_by(f64::total_cmp);
    steps.dedup();
    assert_eq!(steps.len(), progress.len(), "no step twice: {progress:?}");
    for note in &progress {
        assert!([1.0, 2.0, 3.0].contains(&note.progress), "{note:?}");
        assert_eq!(note.total, Some(3.0));
        assert_eq!(
            note.message.as_deref(),
            Some(format!("step {}", note.progress).as_str())
        );
    }

    // Arguments the schema refuses: the model reads why.
    let result = gateway
        .call("alpha__echo", json!({"text": 5}))
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(true));
    assert!(
        text_of(&result).starts_with("[invalid_arguments]"),
        "{}",
        text_of(&result)
    );

    // An unknown tool is a JSON-RPC error.
    let error = gateway.call("alpha__nope", json!({})).await.unwrap_err();
    assert!(error.to_string().contains("unknown tool"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn providers_joining_leaving_and_changing_tools_are_announced() {
    let hub = HubProcess::start();
    let _alpha = hub.provide_listed("alpha").await;
    let gateway = hub.gateway().await;
    gateway.wait_for_tool("alpha__echo").await;

    let mut beta = hub.provide("beta");
    tokio::time::timeout(WAIT, gateway.events.list_changed.notified())
        .await
        .expect("list_changed when beta joins");
    gateway
        .wait_for_tools("beta to join", |names| {
            names.iter().any(|n| n == "beta__echo")
        })
        .await;

    // The child changes its own tool list at run time.
    gateway
        .call("alpha__add_tool", json!({"name": "extra"}))
        .await
        .unwrap();
    tokio::time::timeout(WAIT, gateway.events.list_changed.notified())
        .await
        .expect("list_changed when alpha's child adds a tool");
    gateway
        .wait_for_tools("alpha__extra", |names| {
            names.iter().any(|n| n == "alpha__extra")
        })
        .await;
    let result = gateway.call("alpha__extra", json!({})).await.unwrap();
    assert_eq!(text_of(&result), "extra ran");

    beta.stop();
    tokio::time::timeout(WAIT, gateway.events.list_changed.notified())
        .await
        .expect("list_changed when beta leaves");
    gateway
        .wait_for_tools("beta to leave", |names| {
            !names.iter().any(|n| n.starts_with("beta__"))
        })
        .await;
}

/// Starts `alpha__slow` through the gateway and cancels it once the child
/// runs it; returns when the child has seen the cancellation.
async fn cancel_a_running_call(hub: &HubProcess, gateway: &Gateway) {
    let marker = hub.path("slow-marker");
    let params = CallToolRequestParams::new("alpha__slow").with_arguments(
        json!({"marker": marker, "seconds": 60})
            .as_object()
            .cloned()
            .unwrap(),
    );
    let handle = gateway
        .service
        .peer()
        .send_cancellable_request(
            ClientRequest::CallToolRequest(CallToolRequest::new(params)),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    eventually("slow to start", || marker_lines(&marker) == ["started"]).await;
    handle
        .cancel(Some("the user pressed stop".into()))
        .await
        .unwrap();
    eventually("the child to see the cancellation", || {
        marker_lines(&marker) == ["started", "cancelled"]
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_an_mcp_call_reaches_the_providers_child() {
    let hub = HubProcess::start();
    let _alpha = hub.provide_listed("alpha").await;
    let gateway = hub.gateway().await;
    gateway.wait_for_tool("alpha__slow").await;
    cancel_a_running_call(&hub, &gateway).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_tool_or_a_cancel_is_no_warning_in_the_gateways_log() {
    let hub = HubProcess::start();
    let _alpha = hub.provide_listed("alpha").await;
    let (gateway, stderr) = hub.gateway_with_default_logs().await;
    gateway.wait_for_tool("alpha__slow").await;

    let error = gateway.call("alpha__nope", json!({})).await.unwrap_err();
    assert!(error.to_string().contains("unknown tool"), "{error}");
    cancel_a_running_call(&hub, &gateway).await;
    // Answered after both, so the gateway has dealt with them.
    let result = gateway
        .call("alpha__echo", json!({"text": "still here"}))
        .await
        .unwrap();
    assert_eq!(text_of(&result), "still here");

    gateway.close().await;
    let lines = stderr.all().await;
    // The capture works: the gateway's info lines are there.
    assert!(
        lines
            .iter()
            .any(|line| line.contains("connected to the hub")),
        "{lines:#?}"
    );
    let warnings: Vec<&String> = lines
        .iter()
        .filter(|line| line.contains(" WARN ") || line.contains(" ERROR "))
        .collect();
    assert!(warnings.is_empty(), "{warnings:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_starts_with_no_tools_and_picks_the_hub_up_later() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("hub");
    let gateway = gateway_on(&dir).await;
    assert_eq!(gateway.tool_names().await, Vec::<String>::new());

    let hub = HubProcess::builder().dir(&dir).start();
    let _alpha = hub.provide("alpha");
    tokio::time::timeout(WAIT, gateway.events.list_changed.notified())
        .await
        .expect("list_changed when the hub and its provider appear");
    gateway.wait_for_tool("alpha__echo").await;
    let result = gateway
        .call("alpha__echo", json!({"text": "late"}))
        .await
        .unwrap();
    assert_eq!(text_of(&result), "late");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_fail_clearly_while_the_child_is_down_and_work_after_its_restart() {
    let hub = HubProcess::start();
    let _alpha = hub.provide_listed("alpha").await;
    let gateway = hub.gateway().await;
    gateway.wait_for_tool("alpha__exit").await;
    // Keep the child down once it dies.
    std::fs::write(hub.refuse_file("alpha"), "").unwrap();
    let result = gateway.call("alpha__exit", json!({})).await.unwrap();
    assert_eq!(result.is_error, Some(true));
    assert!(
        text_of(&result).starts_with("[outcome_unknown]"),
        "{}",
        text_of(&result)
    );

    let result = gateway
        .call("alpha__echo", json!({"text": "x"}))
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(true));
    assert!(
        text_of(&result).starts_with("[tool_unavailable]"),
        "{}",
        text_of(&result)
    );
    // The tools stay listed during the outage.
    assert!(gateway
        .tool_names()
        .await
        .contains(&"alpha__echo".to_owned()));

    std::fs::remove_file(hub.refuse_file("alpha")).unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let result = gateway
            .call("alpha__echo", json!({"text": "back"}))
            .await
            .unwrap();
        if result.is_error != Some(true) {
            assert_eq!(text_of(&result), "back");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the child never came back"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_to_a_provider_that_died_fails_clearly() {
    let hub = HubProcess::start();
    let mut alpha = hub.provide_listed("alpha").await;
    let gateway = hub.gateway().await;
    gateway.wait_for_tool("alpha__echo").await;
    alpha.kill9();
    // Whether the gateway has already dropped the tool or not, the answer
    // says what happened instead of hanging or pretending.
    match gateway.call("alpha__echo", json!({"text": "x"})).await {
        Ok(result) => {
            assert_eq!(result.is_error, Some(true));
            assert!(
                text_of(&result).starts_with("[provider_gone]"),
                "{}",
                text_of(&result)
            );
        }
        Err(error) => assert!(error.to_string().contains("unknown tool"), "{error}"),
    }
    gateway
        .wait_for_tools("alpha to disappear", |names| {
            !names.iter().any(|n| n.starts_with("alpha__"))
        })
        .await;
    let error = gateway
        .call("alpha__echo", json!({"text": "x"}))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("unknown tool"), "{error}");
}

/// A tool result longer than the hub's `maxMessageBytes` ends its call
/// with the limit's error, and `provide-mcp` serves on: the hub closes a
/// connection that sends it a message over the limit, so before
/// `provide-mcp` checked, one long result cut off every tool of its
/// namespace and every call in flight on it. Arguments over the limit are
/// refused by the gateway before they are sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_over_the_hubs_message_limit_fails_its_call_and_the_provider_serves_on() {
    let temp = tempfile::tempdir().unwrap();
    let config = temp.path().join("switchboard.toml");
    std::fs::write(&config, "[limits]\nmaxMessageBytes = 65536\n").unwrap();
    let hub = HubProcess::builder()
        .dir(temp.path().join("hub"))
        .config(&config)
        .start();
    let _alpha = hub.provide_listed("alpha").await;
    let client = hub.client("test").await;
    let registered = provider_id(&client, "alpha").await;
    let gateway = hub.gateway().await;
    gateway.wait_for_tool("alpha__echo").await;

    // 60,000 bytes of text fit with the envelopes around them.
    let fits = gateway
        .call("alpha__echo", json!({"text": "x", "times": 60_000}))
        .await
        .unwrap();
    assert_eq!(text_of(&fits).len(), 60_000);

    let too_long = gateway
        .call("alpha__echo", json!({"text": "x", "times": 70_000}))
        .await
        .unwrap();
    assert_eq!(too_long.is_error, Some(true));
    let said = text_of(&too_long);
    assert!(
        said.starts_with("[limit_exceeded]")
            && said.contains("at most 65536 bytes in one message (maxMessageBytes)"),
        "{said}"
    );

    // Arguments that do not fit are refused by the gateway, unsent.
    let long_arguments = gateway
        .call("alpha__echo", json!({"text": "x".repeat(70_000)}))
        .await
        .unwrap();
    assert_eq!(long_arguments.is_error, Some(true));
    let said = text_of(&long_arguments);
    assert!(
        said.starts_with("[limit_exceeded] the request is"),
        "{said}"
    );

    // The same provider connection answers the next call: nothing was
    // closed, so nothing registered again.
    let next = gateway
        .call("alpha__echo", json!({"text": "still here"}))
        .await
        .unwrap();
    assert_eq!(text_of(&next), "still here");
    assert_eq!(provider_id(&client, "alpha").await, registered);
}

/// MCP has no idempotency key: a plain call through the gateway carries
/// none (a fresh one would fence nothing), and a client that wants the
/// provider's fence gives its own in `_meta`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_key_in_meta_is_fenced_and_a_plain_call_is_not() {
    let hub = HubProcess::start();
    let _alpha = hub.provide_listed("alpha").await;
    let gateway = hub.gateway().await;
    gateway.wait_for_tool("alpha__counter").await;
    let counter = hub.path("counter");
    let count = || std::fs::read_to_string(&counter).unwrap_or_default();

    let keyed = json!({"switchboard/callKey": "retry-1"});
    let first = gateway
        .call_with_meta("alpha__counter", json!({"path": counter}), keyed.clone())
        .await
        .unwrap();
    let second = gateway
        .call_with_meta("alpha__counter", json!({"path": counter}), keyed)
        .await
        .unwrap();
    assert_eq!(first, second);
    assert_eq!(count(), "1", "the same key ran twice");

    gateway
        .call("alpha__counter", json!({"path": counter}))
        .await
        .unwrap();
    gateway
        .call("alpha__counter", json!({"path": counter}))
        .await
        .unwrap();
    assert_eq!(count(), "3", "plain calls are each their own");

    // A key that is not a string, or breaks the token rule: refused,
    // nothing runs.
    let error = gateway
        .call_with_meta(
            "alpha__counter",
            json!({"path": counter}),
            json!({"switchboard/callKey": 7}),
        )
        .await
        .unwrap_err();
    assert!(error.to_string().contains("must be a string"), "{error}");
    let refused = gateway
        .call_with_meta(
            "alpha__counter",
            json!({"path": counter}),
            json!({"switchboard/callKey": "has space"}),
        )
        .await;
    let text = match refused {
        Ok(result) => text_of(&result),
        Err(error) => error.to_string(),
    };
    assert!(text.contains("call_key"), "{text}");
    assert_eq!(count(), "3");
}

/// `switchboard mcp --profile` with the profile in the hub's own config
/// file (the hub leaves `[profiles]` to the gateway): only the profile's
/// tools, under its names; an unknown profile is refused at start, naming
/// the ones there are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profile_in_the_hubs_config_narrows_and_renames_the_gateways_tools_and_tool_search_lists_two(
) {
    let config = format!(
        "[modules.fs]\nmcp = [{}]\n\n[profiles.echo-only]\ninclude = [\"fs__echo\"]\nrename = {{ \"fs__echo\" = \"say\" }}\n",
        toml_string(&test_server_bin().to_string_lossy())
    );
    let hub = ModuleHub::start(&config);
    let client = hub.client().await;
    provider_id(&client, "fs").await;
    let config_path = hub.config.to_str().unwrap();

    let everything = gateway_on(hub.dir()).await;
    let all = everything
        .wait_for_tools("fs__echo", |names| names.iter().any(|n| n == "fs__echo"))
        .await;
    assert!(all.len() > 1, "{all:?}");
    everything.close().await;

    let narrow = gateway_with_args(
        hub.dir(),
        &["--config", config_path, "--profile", "echo-only"],
    )
    .await;
    let names = narrow
        .wait_for_tools("say", |names| names.iter().any(|n| n == "say"))
        .await;
    assert_eq!(names, ["say"]);
    let said = narrow.call("say", json!({"text": "hi"})).await.unwrap();
    assert_eq!(text_of(&said), "hi");
    assert!(narrow
        .call("fs__echo", json!({"text": "hi"}))
        .await
        .is_err());
    narrow.close().await;

    // --tool-search: two tools listed, the rest found and called through them.
    let searching = gateway_with_args(hub.dir(), &["--tool-search"]).await;
    let names = searching
        .wait_for_tools("search_tools", |names| !names.is_empty())
        .await;
    assert_eq!(names, ["search_tools", "call_tool"]);
    let found = searching
        .call("search_tools", json!({"query": "echo some text back"}))
        .await
        .unwrap();
    assert!(
        text_of(&found).contains("\"fs__echo\""),
        "{}",
        text_of(&found)
    );
    let said = searching
        .call(
            "call_tool",
            json!({"name": "fs__echo", "arguments": {"text": "found"}}),
        )
        .await
        .unwrap();
    assert_eq!(text_of(&said), "found");
    searching.close().await;

    let unknown = switchboard(&[
        "mcp",
        "--dir",
        hub.dir_arg(),
        "--config",
        config_path,
        "--profile",
        "wide",
    ])
    .await;
    assert_eq!(unknown.code(), 1, "{unknown:?}");
    assert!(
        unknown
            .stderr
            .contains("has no [profiles.wide] (profiles there: echo-only)"),
        "{unknown:?}"
    );
    client.close();
}
