//! `session/resume`: a stored session reattached without its history
//! replayed, and every way of asking for it wrongly refused with the
//! session unharmed.

use agent_client_protocol::v1::schema::{ResumeSessionRequest, StopReason};
use agent_client_protocol::ErrorCode;

use crate::acp::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_reattaches_a_stored_session_without_replaying_it() {
    let h = Harness::start().await;
    let mut first = h.editor().await;
    let a = first.new_session(&h.workdir).await;
    h.model.script("before resume", vec![say("one")]);
    first.prompt_and_wait(&a, "before resume").await.unwrap();
    first.hang_up();
    assert!(first.wait_exit().await.success());

    let second = h.editor().await;
    let capabilities = &second.init.agent_capabilities.session_capabilities;
    assert!(capabilities.resume.is_some(), "resume is advertised");
    let resumed = second
        .resume_session(&a, &h.workdir)
        .await
        .expect("session/resume");
    assert_eq!(&*resumed.modes.expect("modes").current_mode_id.0, "ask");
    let options = resumed.config_options.expect("config options");
    assert_eq!(option_value(&options, "mode"), "ask");
    assert_eq!(option_value(&options, "model"), "default");
    assert!(
        second.updates(&a).is_empty(),
        "resume replayed: {:#?}",
        second.updates(&a)
    );

    // The session goes on with its whole conversation.
    h.model.script("after resume", vec![say("two")]);
    let answer = second.prompt_and_wait(&a, "after resume").await.unwrap();
    assert_eq!(answer.stop_reason, StopReason::EndTurn);
    assert_eq!(text_of(&second.updates(&a)), "two");
    let request = &h.model.requests_for("after resume")[0];
    assert_eq!(
        model_server::roles_and_contents(request)[1..],
        [
            ("user".to_owned(), "before resume".to_owned()),
            ("assistant".to_owned(), "one".to_owned()),
            ("user".to_owned(), "after resume".to_owned()),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_resume_is_refused_and_the_session_is_unharmed() {
    let h = Harness::start().await;
    let editor = h.editor().await;
    let a = editor.new_session(&h.workdir).await;

    let unknown = editor
        .resume_session("sess_nope", &h.workdir)
        .await
        .expect_err("an unknown session");
    assert_eq!(unknown.code, ErrorCode::RESOURCE_NOT_FOUND);
    assert_eq!(unknown.message, "session sess_nope not found");

    let open = editor
        .resume_session(&a, &h.workdir)
        .await
        .expect_err("a session already open");
    assert_eq!(open.code, ErrorCode::INVALID_PARAMS);
    assert_eq!(
        open.message,
        format!("session {a} is already open on this connection")
    );

    let relative = editor
        .resume_session(&a, std::path::Path::new("work"))
        .await
        .expect_err("a relative cwd");
    assert_eq!(relative.code, ErrorCode::INVALID_PARAMS);
    assert_eq!(
        relative.message,
        r#"cwd must be an absolute path, got "work""#
    );

    let bad_directory = editor
        .request(
            ResumeSessionRequest::new(a.clone(), &h.workdir)
                .additional_directories(vec!["docs".into()]),
        )
        .await
        .expect_err("a relative additional directory");
    assert_eq!(bad_directory.code, ErrorCode::INVALID_PARAMS);
    assert_eq!(
        bad_directory.message,
        r#"additionalDirectories[0] must be an absolute path, got "docs""#
    );

    h.model.script("still here", vec![say("yes")]);
    let answer = editor.prompt_and_wait(&a, "still here").await.unwrap();
    assert_eq!(answer.stop_reason, StopReason::EndTurn);
    assert_eq!(text_of(&editor.updates(&a)), "yes");
}
