//! A provider on a real hub: listing, metadata and revisions, schema pins,
//! token validation, unknown tools, argument validation, fallback ids and
//! progress.

use crate::support::*;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use switchboard_client::{handler_fn, reply, CatalogEvent, Selector};
use switchboard_tools::progress::{progress_sink_metadata, ProgressParams, PROGRESS_METHOD};
use switchboard_tools::{tool_fn, ToolResult, ToolSpec};
use tokio::sync::mpsc;
use tokio::time::timeout;

#[tokio::test]
async fn registers_tool_provider_metadata_and_lists_tools_with_pins() {
    let demo = demo_provider().await;
    let catalog = demo.caller.catalog().await.unwrap();
    let providers = catalog.select(&Selector::parse("protocol=tool-provider").unwrap());
    assert_eq!(providers.len(), 1);
    assert_eq!(
        providers[0].metadata,
        json!({"protocol": "tool-provider", "version": 1, "namespace": "demo", "toolsRevision": 1})
    );
    let listing = demo.list().await;
    let echo = &listing["tools"][0];
    assert_eq!(echo["name"], "echo");
    assert_eq!(echo["description"], "Repeats the text");
    assert_eq!(echo["inputSchema"], echo_schema());
    assert_eq!(echo["annotations"], json!({"readOnlyHint": true}));
    assert_eq!(echo["schemaPin"], demo.pin("echo"));
    let names: Vec<&str> = listing["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["echo", "counter", "blocker", "cancellable", "progress"]
    );
}

#[tokio::test]
async fn schema_pin_matches_a_golden_vector() {
    let hub = TestHub::start().await;
    let client = hub.client("provider").await;
    // `1.0E0` canonicalizes to `1`; keys sort; `description` keywords go, the
    // property named `description` stays.
    let schema: Value = serde_json::from_str(
        r#"{"type":"object","description":"Echo a message",
            "properties":{"description":{"type":"string","description":"the text"},
                          "count":{"type":"integer","minimum":1.0E0,"description":"how often"}},
            "required":["description"],"additionalProperties":false}"#,
    )
    .unwrap();
    let jcs = r#"{"additionalProperties":false,"properties":{"count":{"minimum":1,"type":"integer"},"description":{"type":"string"}},"required":["description"],"type":"object"}"#;
    let digest = hex::encode(Sha256::digest(jcs.as_bytes()));
    assert_eq!(
        digest,
        "ee24d3aad2ff097e37e4c9dc8749f4fccf1a8633d9d883e56b2bf923dcf3707b"
    );
    let provider = switchboard_tools::Provider::builder("golden")
        .ledger_path(ledger_path(&hub, "golden"))
        .tool(
            ToolSpec::new("say", schema).semantics(7),
            tool_fn(|_| async { Ok(ToolResult::text("ok")) }),
        )
        .register(&client)
        .await
        .unwrap();
    assert_eq!(
        provider.pins(),
        vec![("say".to_owned(), format!("tp1:say:{digest}:7"))]
    );
}

#[tokio::test]
async fn description_edit_keeps_the_pin_and_schema_edit_changes_it() {
    let demo = demo_provider().await;
    let old_pin = demo.pin("echo");
    let mut catalog = demo.caller.catalog().await.unwrap();

    // Only descriptions change: the listing changes (revision 2), the pin not.
    let mut tools = demo_tools(&demo.runs);
    let mut schema = echo_schema();
    schema["properties"]["text"]["description"] = json!("the words to repeat");
    tools[0].0 = ToolSpec::new("echo", schema)
        .description("Says it again")
        .read_only(true);
    assert!(demo.provider.set_tools(tools).await.unwrap());
    assert_eq!(demo.pin("echo"), old_pin);
    match timeout(WAIT, catalog.next_event()).await.unwrap().unwrap() {
        CatalogEvent::Updated(service) => assert_eq!(service.metadata["toolsRevision"], 2),
        other => panic!("expected an update, got {other:?}"),
    }

    // A real schema change: new pin; the old one is refused and nothing runs.
    let mut tools = demo_tools(&demo.runs);
    let mut schema = echo_schema();
    schema["properties"]["loud"] = json!({"type": "boolean"});
    tools[0].0 = ToolSpec::new("echo", schema);
    tools[1].0 = ToolSpec::new("counter", json!({"type": "object", "minProperties": 1}));
    let counter_pin = demo.pin("counter");
    assert!(demo.provider.set_tools(tools).await.unwrap());
    let new_pin = demo.pin("echo");
    assert_ne!(new_pin, old_pin);
    let (code, _, data) = rpc_error(
        demo.call(&json!({"name": "counter", "arguments": {"x": 1}, "schema_pin": counter_pin}))
            .await,
    );
    assert_eq!(code, -32602);
    assert_eq!(
        data,
        json!({"code": "tool_schema_changed", "tool": "counter", "expected": counter_pin, "current": demo.pin("counter")})
    );
    assert_eq!(
        demo.runs.counter.load(std::sync::atomic::Ordering::SeqCst),
        0
    );
    let answer = demo
        .call(&json!({"name": "echo", "arguments": {"text": "hi"}, "schema_pin": new_pin}))
        .await
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(answer.get()).unwrap()["content"][0]["text"],
        "hi"
    );
}

#[tokio::test]
async fn identical_tool_set_does_not_bump_the_revision() {
    let demo = demo_provider().await;
    assert!(!demo
        .provider
        .set_tools(demo_tools(&demo.runs))
        .await
        .unwrap());
    assert_eq!(demo.provider.tools_revision(), 1);
    assert!(demo.provider.remove_tool("progress").await.unwrap());
    assert_eq!(demo.provider.tools_revision(), 2);
    let (_, _, data) = rpc_error(
        demo.call(&json!({"name": "progress", "arguments": {}}))
            .await,
    );
    assert_eq!(data["code"], "unknown_tool");
}

#[tokio::test]
async fn every_malformed_token_gets_its_field_named_error() {
    let demo = demo_provider().await;
    let long = "k".repeat(257);
    let cases: [(&str, &str, Value); 6] = [
        ("", "empty", json!(null)),
        (&long, "too_long", json!(257)),
        ("a b", "invalid_character", json!(1)),
        ("a\tb", "invalid_character", json!(1)),
        ("ab\u{7f}", "invalid_character", json!(2)),
        ("é", "invalid_character", json!(0)),
    ];
    for field in ["call_key", "schema_pin", "origin.call_key"] {
        for (value, reason, detail) in &cases {
            let mut body = json!({"name": "counter", "arguments": {}});
            match field {
                "origin.call_key" => {
                    body["origin"] = json!({"carrier": {"kind": "reserved", "module_id": "acp"}, "call_key": value})
                }
                _ => body[field] = json!(value),
            }
            let (code, message, data) = rpc_error(demo.call(&body).await);
            assert_eq!(code, -32602, "{field} {value:?}");
            assert!(message.starts_with(&format!("{field} ")), "{message}");
            assert_eq!(data["code"], "invalid_request");
            assert_eq!(data["field"], field);
            assert_eq!(data["reason"], *reason);
            match *reason {
                "too_long" => assert_eq!(data["length"], *detail),
                "invalid_character" => assert_eq!(data["index"], *detail),
                _ => {}
            }
        }
    }
    // The edges that pass: 1 byte and 256 bytes, every printable character.
    for key in ["k".to_owned(), "k".repeat(256), "!~:/+=".to_owned()] {
        demo.call(&json!({"name": "counter", "arguments": {}, "call_key": key}))
            .await
            .unwrap();
    }
    assert_eq!(
        demo.runs.counter.load(std::sync::atomic::Ordering::SeqCst),
        3
    );
}

#[tokio::test]
async fn malformed_and_foreign_pins_are_refused_by_reason() {
    let demo = demo_provider().await;
    let (code, _, data) = rpc_error(
        demo.call(
            &json!({"name": "echo", "arguments": {"text": "x"}, "schema_pin": "tp1:echo:abc:0"}),
        )
        .await,
    );
    assert_eq!(code, -32602);
    assert_eq!(
        data,
        json!({"code": "invalid_request", "field": "schema_pin", "reason": "malformed"})
    );
    let (_, _, data) = rpc_error(
        demo.call(
            &json!({"name": "echo", "arguments": {"text": "x"}, "schema_pin": demo.pin("counter")}),
        )
        .await,
    );
    assert_eq!(
        data,
        json!({"code": "invalid_request", "field": "schema_pin", "reason": "other_tool"})
    );
}

#[tokio::test]
async fn unknown_tool_and_invalid_arguments_are_named() {
    let demo = demo_provider().await;
    let (code, message, data) =
        rpc_error(demo.call(&json!({"name": "nope", "arguments": {}})).await);
    assert_eq!(
        (code, data["code"].as_str()),
        (-32602, Some("unknown_tool"))
    );
    assert!(message.contains("nope"));
    let (code, message, data) = rpc_error(
        demo.call(&json!({"name": "echo", "arguments": {"text": 5}}))
            .await,
    );
    assert_eq!(code, -32602);
    assert_eq!(data["code"], "invalid_arguments");
    assert_eq!(data["errors"][0]["path"], "/text");
    assert!(message.contains("/text"), "{message}");
    // A body that is not a ToolCallRequest at all.
    let (code, _, data) = rpc_error(demo.call(&json!({"arguments": {}})).await);
    assert_eq!((code, data["field"].as_str()), (-32602, Some("params")));
}

#[tokio::test]
async fn a_missing_tool_call_id_is_counted_as_a_fallback() {
    let demo = demo_provider().await;
    demo.call(&json!({"name": "counter", "arguments": {}}))
        .await
        .unwrap();
    demo.call(&json!({"name": "counter", "arguments": {}, "tool_call_id": "mcp-7"}))
        .await
        .unwrap();
    demo.call(&json!({"name": "counter", "arguments": {}}))
        .await
        .unwrap();
    assert_eq!(demo.provider.stats().fallback_tool_call_ids, 2);
}

#[tokio::test]
async fn progress_reaches_the_callers_sink_with_its_token_untouched_and_only_increasing() {
    let demo = demo_provider().await;
    let (seen, mut progress) = mpsc::unbounded_channel();
    let sink = handler_fn(|_| async { reply(&json!(null)) }).with_notifications(move |note| {
        let seen = seen.clone();
        async move {
            if note.method == PROGRESS_METHOD {
                let _ = seen.send((
                    note.sender_client_id.clone(),
                    note.params::<ProgressParams>(),
                ));
            }
        }
    });
    demo.caller
        .register(&progress_sink_metadata(), sink)
        .await
        .unwrap();
    // The provider learns about the sink through its catalog; wait for it.
    let mut answer = Value::Null;
    for _ in 0..100 {
        let raw = demo
            .call(&json!({"name": "progress", "arguments": {}, "progress_token": {"t": [1, "x"]}}))
            .await
            .unwrap();
        answer = serde_json::from_str(raw.get()).unwrap();
        if answer["content"][0]["text"] == "progress enabled: true" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(answer["content"][0]["text"], "progress enabled: true");
    let provider_client_id = demo.provider_client.client_id();
    let mut steps = Vec::new();
    while steps.len() < 3 {
        let (from, params) = timeout(WAIT, progress.recv()).await.unwrap().unwrap();
        let params = params.unwrap();
        assert_eq!(from, provider_client_id);
        assert_eq!(params.progress_token.get(), r#"{"t":[1,"x"]}"#);
        assert_eq!(params.total, Some(3.0));
        assert_eq!(
            params.message.as_deref(),
            Some(format!("step {}", params.progress).as_str())
        );
        steps.push(params.progress);
    }
    // The tool reported 1, 2, 1, 2, 3; notifications from one sender to one
    // service keep their order, so the sink sees exactly the increasing ones.
    assert_eq!(steps, [1.0, 2.0, 3.0]);
    assert!(
        timeout(std::time::Duration::from_millis(200), progress.recv())
            .await
            .is_err(),
        "nothing after the last step"
    );
}
