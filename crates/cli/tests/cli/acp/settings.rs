//! A session's settings: its mode and model are stored with it and come
//! back however often a client reloads it; `session/set_config_option`
//! switches one session's model without touching another's; every bad
//! option, value or model is refused with the session unharmed.

use agent_client_protocol::v1::schema::{
    SessionConfigOptionValue, SetSessionConfigOptionRequest, SetSessionModeRequest, StopReason,
    ToolCallStatus,
};
use agent_client_protocol::ErrorCode;
use serde_json::json;

use crate::acp::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_session_stays_read_only_however_often_it_is_loaded() {
    let h = Harness::start().await;
    let mut first = h.editor().await;
    let a = first.new_session(&h.workdir).await;
    first
        .request(SetSessionModeRequest::new(a.clone(), "read-only"))
        .await
        .expect("session/set_mode");
    first.hang_up();
    assert!(first.wait_exit().await.success());

    // As acpx does before every prompt: a new process, initialize, load.
    for _ in 0..3 {
        let mut editor = h.editor().await;
        let loaded = editor.load_session(&a, &h.workdir).await.unwrap();
        assert_eq!(
            &*loaded.modes.expect("modes").current_mode_id.0,
            "read-only"
        );
        let options = loaded.config_options.expect("config options");
        assert_eq!(option_value(&options, "mode"), "read-only");
        editor.hang_up();
        assert!(editor.wait_exit().await.success());
    }

    let editor = h.editor().await;
    editor.load_session(&a, &h.workdir).await.unwrap();
    h.model.script(
        "write it anyway",
        vec![
            use_tool("w", "write_file", json!({"path": "x.txt", "content": "x"})),
            say("tried"),
        ],
    );
    let (answer, asked) = prompt_approving_all(&editor, &a, "write it anyway").await;
    assert_eq!(answer.unwrap().stop_reason, StopReason::EndTurn);
    assert_eq!(asked, 0, "read-only refuses without asking");
    assert!(!h.workdir.join("x.txt").exists());
    let write = tool_calls(&editor.updates(&a)).pop().expect("the write");
    assert_eq!(write.statuses.last(), Some(&ToolCallStatus::Failed));
    assert!(write.text.contains("read-only mode"), "{}", write.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_switched_in_one_session_leaves_the_other_on_its_own() {
    let h = Harness::start().await;
    let second = ModelServer::start().await;
    let config = h.models_config(&[
        ("second", &second.url(), None),
        ("keyed", &second.url(), Some("SWITCHBOARD_TEST_UNSET_KEY")),
    ]);
    let config = config.to_str().unwrap();
    let mut editor = h.editor_with(&["--config", config]).await;
    let created = editor
        .request(agent_client_protocol::v1::schema::NewSessionRequest::new(
            &h.workdir,
        ))
        .await
        .unwrap();
    let options = created.config_options.expect("config options");
    assert_eq!(option_value(&options, "model"), "default");
    let a = created.session_id.0.to_string();
    let b = editor.new_session(&h.workdir).await;

    let switched = editor.set_option(&a, "model", "second").await.unwrap();
    assert_eq!(option_value(&switched.config_options, "model"), "second");
    assert_eq!(option_value(&switched.config_options, "mode"), "ask");

    h.model.script("B asks", vec![say("from the default")]);
    second.script("A asks", vec![say("from the second")]);
    let (in_a, in_b) = (editor.prompt(&a, "A asks"), editor.prompt(&b, "B asks"));
    settle(in_a).await.unwrap();
    settle(in_b).await.unwrap();
    assert_eq!(text_of(&editor.updates(&a)), "from the second");
    assert_eq!(text_of(&editor.updates(&b)), "from the default");
    assert_eq!(second.requests_for("A asks")[0]["model"], "second-model");
    assert_eq!(h.model.requests_for("B asks")[0]["model"], "test-model");
    assert!(h.model.requests_for("A asks").is_empty());
    assert!(second.requests_for("B asks").is_empty());

    // Bad options, values and models: refused, nothing changes.
    let refusals = [
        (
            editor.set_option(&a, "colour", "red").await,
            "unknown config option \"colour\"; the options are mode, model".to_owned(),
        ),
        (
            editor.set_option(&a, "model", "nope").await,
            "unknown model \"nope\"; the models are default, keyed, second".to_owned(),
        ),
        (
            editor.set_option(&a, "model", "keyed").await,
            "model \"keyed\" takes its API key from the environment variable \
             SWITCHBOARD_TEST_UNSET_KEY, which is not set for this agent"
                .to_owned(),
        ),
        (
            editor.set_option(&a, "mode", "yolo").await,
            "unknown mode \"yolo\"; the modes are ask, auto, read-only".to_owned(),
        ),
        (
            editor
                .request(SetSessionConfigOptionRequest::new(
                    a.clone(),
                    "mode",
                    SessionConfigOptionValue::boolean(true),
                ))
                .await,
            "config option \"mode\" takes one of its values' ids, not a boolean".to_owned(),
        ),
    ];
    for (refused, message) in refusals {
        let error = refused.expect_err(&message);
        assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
        assert_eq!(error.message, message);
    }
    let unknown = editor
        .set_option("sess_nope", "model", "second")
        .await
        .unwrap_err();
    assert_eq!(unknown.code, ErrorCode::RESOURCE_NOT_FOUND);

    second.script("A again", vec![say("still second")]);
    editor.prompt_and_wait(&a, "A again").await.unwrap();
    assert_eq!(second.requests_for("A again").len(), 1);

    // Each session's model is stored with it.
    editor.hang_up();
    assert!(editor.wait_exit().await.success());
    let editor = h.editor_with(&["--config", config]).await;
    let loaded_a = editor.load_session(&a, &h.workdir).await.unwrap();
    let loaded_b = editor.load_session(&b, &h.workdir).await.unwrap();
    assert_eq!(
        option_value(&loaded_a.config_options.unwrap(), "model"),
        "second"
    );
    assert_eq!(
        option_value(&loaded_b.config_options.unwrap(), "model"),
        "default"
    );
}
