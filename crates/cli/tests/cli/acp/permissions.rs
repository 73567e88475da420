//! The permission gate: reject skips the tool and tells the model; "always"
//! holds in its own session only.

use agent_client_protocol::v1::schema::{PermissionOptionKind, StopReason, ToolCallStatus};
use serde_json::json;

use crate::acp::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejecting_skips_the_tool_and_tells_the_model() {
    let h = Harness::start().await;
    let editor = h.editor().await;
    let a = editor.new_session(&h.workdir).await;
    h.model.script(
        "write it",
        vec![
            use_tool("w1", "testtools__write_note", json!({"text": "x"})),
            say("understood"),
        ],
    );
    let prompt = editor.prompt(&a, "write it");
    let permission = editor.next_permission().await;
    assert_eq!(permission.session(), a);
    let kinds: Vec<PermissionOptionKind> =
        permission.request.options.iter().map(|o| o.kind).collect();
    assert_eq!(
        kinds,
        [
            PermissionOptionKind::AllowOnce,
            PermissionOptionKind::AllowAlways,
            PermissionOptionKind::RejectOnce,
            PermissionOptionKind::RejectAlways
        ]
    );
    assert_eq!(
        permission.request.tool_call.fields.title.as_deref(),
        Some("testtools__write_note")
    );
    permission.answer("reject_once");
    assert_eq!(
        settle(prompt).await.unwrap().stop_reason,
        StopReason::EndTurn
    );

    assert!(h.provider.calls().is_empty(), "a rejected tool ran");
    let call = &tool_calls(&editor.updates(&a))[0];
    assert_eq!(
        call.statuses,
        [ToolCallStatus::Pending, ToolCallStatus::Failed]
    );
    let told = &h.model.requests_for("write it")[1];
    let last = told["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["role"], "tool");
    assert_eq!(last["tool_call_id"], "w1");
    assert_eq!(
        last["content"],
        "error: the tool did not run: the user rejected this tool call"
    );
    assert_eq!(text_of(&editor.updates(&a)), "understood");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_always_stops_asking_in_that_session_only() {
    let h = Harness::start().await;
    let editor = h.editor().await;
    let a = editor.new_session(&h.workdir).await;
    let b = editor.new_session(&h.workdir).await;
    for (prompt, note) in [("note 1", "1"), ("note 2", "2"), ("note 3", "3")] {
        h.model.script(
            prompt,
            vec![
                use_tool(
                    &format!("n{note}"),
                    "testtools__write_note",
                    json!({"text": note}),
                ),
                say("ok"),
            ],
        );
    }
    let first = editor.prompt(&a, "note 1");
    editor.next_permission().await.answer("allow_always");
    assert_eq!(
        settle(first).await.unwrap().stop_reason,
        StopReason::EndTurn
    );

    // A does not ask again.
    assert_eq!(
        editor
            .prompt_and_wait(&a, "note 2")
            .await
            .unwrap()
            .stop_reason,
        StopReason::EndTurn
    );
    assert!(
        editor.pending_permission().await.is_none(),
        "session A asked again"
    );

    // B still asks.
    let third = editor.prompt(&b, "note 3");
    let permission = editor.next_permission().await;
    assert_eq!(permission.session(), b);
    permission.answer("allow_once");
    assert_eq!(
        settle(third).await.unwrap().stop_reason,
        StopReason::EndTurn
    );

    let notes: Vec<String> = h
        .provider
        .calls()
        .iter()
        .map(|call| call.arguments.get().to_owned())
        .collect();
    assert_eq!(
        notes,
        [r#"{"text":"1"}"#, r#"{"text":"2"}"#, r#"{"text":"3"}"#]
    );
}
