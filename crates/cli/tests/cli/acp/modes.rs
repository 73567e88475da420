//! Session modes: listed by `session/new`, switched per session by
//! `session/set_mode` (announced with `current_mode_update`), and deciding
//! whether writes and commands ask.

use agent_client_protocol::v1::schema::{
    NewSessionRequest, SessionUpdate, SetSessionModeRequest, StopReason, ToolCallStatus,
};
use agent_client_protocol::ErrorCode;
use serde_json::json;

use crate::acp::support::*;

fn mode_updates(updates: &[SessionUpdate]) -> Vec<String> {
    updates
        .iter()
        .filter_map(|update| match update {
            SessionUpdate::CurrentModeUpdate(update) => Some(update.current_mode_id.0.to_string()),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mode_change_in_one_session_never_changes_another() {
    let h = Harness::start().await;
    let editor = h.editor().await;
    let created = editor
        .request(NewSessionRequest::new(&h.workdir))
        .await
        .unwrap();
    let modes = created.modes.expect("session/new lists the modes");
    assert_eq!(&*modes.current_mode_id.0, "ask");
    let ids: Vec<&str> = modes.available_modes.iter().map(|m| &*m.id.0).collect();
    assert_eq!(ids, ["ask", "auto", "read-only"]);
    let a = created.session_id.0.to_string();
    let b = editor.new_session(&h.workdir).await;

    editor
        .request(SetSessionModeRequest::new(a.clone(), "auto"))
        .await
        .expect("session/set_mode");
    editor
        .wait_updates(&a, "the mode change announced", |u| {
            mode_updates(u) == ["auto"]
        })
        .await;
    assert!(mode_updates(&editor.updates(&b)).is_empty());

    // In A (auto) a write and a command inside the directory run at once.
    h.model.script(
        "A works",
        vec![
            use_tool("w", "write_file", json!({"path": "a.txt", "content": "a"})),
            use_tool("j", "job_start", json!({"command": "true"})),
            say("done"),
        ],
    );
    let answer = editor.prompt_and_wait(&a, "A works").await.unwrap();
    assert_eq!(answer.stop_reason, StopReason::EndTurn);
    assert!(
        editor.pending_permission().await.is_none(),
        "auto mode asked"
    );
    let calls = tool_calls(&editor.updates(&a));
    assert!(calls
        .iter()
        .all(|c| c.statuses.last() == Some(&ToolCallStatus::Completed)));
    assert_eq!(
        std::fs::read_to_string(h.workdir.join("a.txt")).unwrap(),
        "a"
    );

    // In B (still ask) the same write asks.
    h.model.script(
        "B works",
        vec![
            use_tool("w", "write_file", json!({"path": "b.txt", "content": "b"})),
            say("done"),
        ],
    );
    let answer = editor.prompt(&b, "B works");
    let permission = editor.next_permission().await;
    assert_eq!(permission.session(), b);
    permission.answer("reject_once");
    settle(answer).await.unwrap();
    assert!(!h.workdir.join("b.txt").exists());

    // A command outside the directory still asks in auto mode.
    h.model.script(
        "A outside",
        vec![
            use_tool("j", "job_start", json!({"command": "true", "cwd": "/"})),
            say("done"),
        ],
    );
    let answer = editor.prompt(&a, "A outside");
    editor.next_permission().await.answer("reject_once");
    settle(answer).await.unwrap();

    // Read-only refuses without asking; reads still run.
    editor
        .request(SetSessionModeRequest::new(b.clone(), "read-only"))
        .await
        .unwrap();
    h.model.script(
        "B read-only",
        vec![
            use_tool("w", "write_file", json!({"path": "b.txt", "content": "b"})),
            use_tool("r", "read_file", json!({"path": "a.txt"})),
            say("done"),
        ],
    );
    editor.prompt_and_wait(&b, "B read-only").await.unwrap();
    assert!(editor.pending_permission().await.is_none());
    let calls = tool_calls(&editor.updates(&b));
    let (write, read) = (&calls[calls.len() - 2], &calls[calls.len() - 1]);
    assert_eq!(write.statuses.last(), Some(&ToolCallStatus::Failed));
    assert!(write.text.contains("read-only mode"), "{}", write.text);
    assert_eq!(read.statuses.last(), Some(&ToolCallStatus::Completed));
    assert_eq!(mode_updates(&editor.updates(&a)), ["auto"]);
    assert_eq!(mode_updates(&editor.updates(&b)), ["read-only"]);

    let error = editor
        .request(SetSessionModeRequest::new(a.clone(), "yolo"))
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
    assert_eq!(
        error.message,
        "unknown mode \"yolo\"; the modes are ask, auto, read-only"
    );
    let error = editor
        .request(SetSessionModeRequest::new("sess_nope", "auto"))
        .await
        .unwrap_err();
    assert_eq!(error.message, "session sess_nope not found");
}
