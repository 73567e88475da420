//! `additionalDirectories`: the file tools reach them as they reach `cwd`,
//! nothing outside them, and only for the session that named them; a
//! relative or missing directory is refused before a session exists.

use agent_client_protocol::v1::schema::{LoadSessionRequest, NewSessionRequest, ToolCallStatus};
use agent_client_protocol::ErrorCode;
use serde_json::json;

use crate::acp::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn additional_directories_are_reachable_and_nothing_outside_them() {
    let h = Harness::start().await;
    let docs = h.path("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(docs.join("guide.md"), "the guide\n").unwrap();
    let elsewhere = h.path("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("secret.txt"), "secret").unwrap();
    let editor = h.editor().await;
    let with_docs = editor
        .request(NewSessionRequest::new(&h.workdir).additional_directories(vec![docs.clone()]))
        .await
        .expect("session/new with additionalDirectories")
        .session_id
        .0
        .to_string();
    let without = editor.new_session(&h.workdir).await;
    let guide = docs.join("guide.md");

    let read = run_one_tool(
        &h,
        &editor,
        &with_docs,
        "read the guide",
        "read_file",
        json!({"path": guide}),
        None,
    )
    .await;
    assert_eq!(read.statuses.last(), Some(&ToolCallStatus::Completed));
    let told = &h.model.requests_for("read the guide")[1];
    let last = told["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(last["content"], "the guide\n");

    let write = run_one_tool(
        &h,
        &editor,
        &with_docs,
        "add a page",
        "write_file",
        json!({"path": docs.join("new.md"), "content": "new"}),
        Some("allow_once"),
    )
    .await;
    assert_eq!(write.statuses.last(), Some(&ToolCallStatus::Completed));
    assert_eq!(std::fs::read_to_string(docs.join("new.md")).unwrap(), "new");

    let outside = run_one_tool(
        &h,
        &editor,
        &with_docs,
        "read elsewhere",
        "read_file",
        json!({"path": elsewhere.join("secret.txt")}),
        None,
    )
    .await;
    assert_eq!(outside.statuses.last(), Some(&ToolCallStatus::Failed));
    assert!(
        outside
            .text
            .contains("is outside the session's directory and its additional directories"),
        "{}",
        outside.text
    );

    // Another session did not name the directory: it is outside for it.
    let other = run_one_tool(
        &h,
        &editor,
        &without,
        "read the guide too",
        "read_file",
        json!({"path": guide}),
        None,
    )
    .await;
    assert_eq!(other.statuses.last(), Some(&ToolCallStatus::Failed));
    assert!(
        other.text.contains("is outside the session's directory"),
        "{}",
        other.text
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relative_or_missing_additional_directory_is_refused() {
    let h = Harness::start().await;
    let editor = h.editor().await;
    let relative = editor
        .request(NewSessionRequest::new(&h.workdir).additional_directories(vec!["docs".into()]))
        .await
        .expect_err("a relative directory");
    assert_eq!(relative.code, ErrorCode::INVALID_PARAMS);
    assert_eq!(
        relative.message,
        r#"additionalDirectories[0] must be an absolute path, got "docs""#
    );
    let missing = h.path("missing");
    let refused = editor
        .request(
            NewSessionRequest::new(&h.workdir)
                .additional_directories(vec![h.workdir.clone(), missing.clone()]),
        )
        .await
        .expect_err("a missing directory");
    assert_eq!(refused.code, ErrorCode::INVALID_PARAMS);
    assert_eq!(
        refused.message,
        format!(
            "additionalDirectories[1] ({:?}) cannot be used: No such file or directory (os error 2)",
            missing.display().to_string()
        )
    );
    assert!(editor.list_sessions().await.sessions.is_empty());

    // The same on load, and the session then loads as asked.
    let a = editor.new_session(&h.workdir).await;
    editor.close_session(&a).await.unwrap();
    let file = h.workdir.join("file.txt");
    std::fs::write(&file, "x").unwrap();
    let not_a_dir = editor
        .request(LoadSessionRequest::new(a.clone(), &h.workdir).additional_directories(vec![file]))
        .await
        .expect_err("a file as a directory");
    assert_eq!(not_a_dir.code, ErrorCode::INVALID_PARAMS);
    assert!(
        not_a_dir.message.ends_with("is not a directory"),
        "{}",
        not_a_dir.message
    );
    editor.load_session(&a, &h.workdir).await.expect("load");
}
