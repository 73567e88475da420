//! Malformed requests get a clear JSON-RPC error and change nothing; the
//! live-session bound holds at its edge.

use agent_client_protocol::v1::schema::{
    ContentBlock, ImageContent, NewSessionRequest, PromptRequest, StopReason,
};
use agent_client_protocol::ErrorCode;

use crate::acp::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_get_clear_errors_and_change_nothing() {
    let h = Harness::start().await;
    let editor = h.editor().await;

    let relative = editor
        .request(NewSessionRequest::new("relative/dir"))
        .await
        .expect_err("a relative cwd");
    assert_eq!(relative.code, ErrorCode::INVALID_PARAMS);
    assert_eq!(
        relative.message,
        r#"cwd must be an absolute path, got "relative/dir""#
    );
    assert!(editor.list_sessions().await.sessions.is_empty());

    let unknown = editor
        .prompt_and_wait("sess_nope", "hello")
        .await
        .expect_err("an unknown session");
    assert_eq!(unknown.code, ErrorCode::RESOURCE_NOT_FOUND);
    assert_eq!(unknown.message, "session sess_nope not found");
    let unknown_load = editor
        .load_session("sess_nope", &h.workdir)
        .await
        .expect_err("loading an unknown session");
    assert_eq!(unknown_load.code, ErrorCode::RESOURCE_NOT_FOUND);
    let unknown_close = editor
        .close_session("sess_nope")
        .await
        .expect_err("closing an unknown session");
    assert_eq!(unknown_close.code, ErrorCode::RESOURCE_NOT_FOUND);
    editor.cancel("sess_nope");

    let a = editor.new_session(&h.workdir).await;
    let empty = editor
        .request(PromptRequest::new(a.clone(), Vec::new()))
        .await
        .expect_err("an empty prompt");
    assert_eq!(empty.code, ErrorCode::INVALID_PARAMS);
    assert_eq!(
        empty.message,
        "prompt is empty; send at least one content block"
    );
    let image = editor
        .request(PromptRequest::new(
            a.clone(),
            vec![ContentBlock::Image(ImageContent::new("aGk=", "image/png"))],
        ))
        .await
        .expect_err("an image prompt");
    assert_eq!(image.code, ErrorCode::INVALID_PARAMS);
    assert!(image.message.contains("image content"), "{}", image.message);

    // None of that reached the model or left the session busy.
    assert_eq!(h.model.request_count(), 0);
    h.model.script("still fine", vec![say("yes")]);
    assert_eq!(
        editor
            .prompt_and_wait(&a, "still fine")
            .await
            .unwrap()
            .stop_reason,
        StopReason::EndTurn
    );
    assert_eq!(editor.list_sessions().await.sessions.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_sessions_are_bounded() {
    let h = Harness::start().await;
    let editor = h.editor_with(&["--max-sessions", "2"]).await;
    let a = editor.new_session(&h.workdir).await;
    let _b = editor.new_session(&h.workdir).await;
    let refused = editor
        .request(NewSessionRequest::new(&h.workdir))
        .await
        .expect_err("a third session");
    assert_eq!(refused.code, ErrorCode::INVALID_PARAMS);
    assert_eq!(
        refused.message,
        "at most 2 sessions may be live at once; close one first"
    );
    editor.close_session(&a).await.expect("close a session");
    editor.new_session(&h.workdir).await;
    // A closed session no longer takes prompts.
    let closed = editor
        .prompt_and_wait(&a, "hello")
        .await
        .expect_err("a closed session");
    assert_eq!(closed.code, ErrorCode::RESOURCE_NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_methods_and_malformed_params_are_named_in_their_errors() {
    let h = Harness::start().await;
    let editor = h.editor().await;
    let untyped = |method: &str, params: serde_json::Value| {
        agent_client_protocol::UntypedMessage::new(method, params).expect("an untyped request")
    };
    for method in ["session/foo", "session/delete", "authenticate"] {
        let error = editor
            .request(untyped(method, serde_json::json!({"sessionId": "sess_x"})))
            .await
            .expect_err(method);
        assert_eq!(error.code, ErrorCode::METHOD_NOT_FOUND, "{method}");
        assert_eq!(error.message, format!("method not found: {method}"));
    }
    let error = editor
        .request(untyped("session/prompt", serde_json::json!({"prompt": []})))
        .await
        .expect_err("a prompt without a session");
    assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
    assert_eq!(
        error.message,
        "invalid params for session/prompt: missing field `sessionId`"
    );
    let error = editor
        .request(untyped(
            "session/set_config_option",
            serde_json::json!({"sessionId": "sess_x", "configId": "model"}),
        ))
        .await
        .expect_err("an option without a value");
    assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
    assert!(
        error
            .message
            .starts_with("invalid params for session/set_config_option: "),
        "{}",
        error.message
    );
    // The connection still serves.
    editor.new_session(&h.workdir).await;
}
