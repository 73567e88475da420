//! The file tools: through the editor's `fs/*` when it advertises them
//! (unsaved buffers seen, writes applied by the editor), on disk inside the
//! session's directory otherwise; an edit shows its diff; anything outside
//! the directory, a directory, a binary or an oversized file is refused.

use agent_client_protocol::v1::schema::{ToolCallStatus, ToolKind};
use serde_json::json;

use crate::acp::support::*;

async fn run_tool(
    h: &Harness,
    editor: &Editor,
    session: &str,
    prompt: &str,
    tool: &str,
    arguments: serde_json::Value,
    asks: bool,
) -> editor::ToolCallView {
    let answer = asks.then_some("allow_once");
    run_one_tool(h, editor, session, prompt, tool, arguments, answer).await
}

fn told_model(h: &Harness, prompt: &str) -> String {
    let request = &h.model.requests_for(prompt)[1];
    let last = request["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    last["content"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_fs_the_file_tools_act_on_disk_inside_the_sessions_directory() {
    let h = Harness::start().await;
    let editor = h.editor().await;
    let session = editor.new_session(&h.workdir).await;
    let file = h.workdir.join("notes.txt");
    std::fs::write(&file, "alpha\nbeta\ngamma\n").unwrap();

    let read = run_tool(
        &h,
        &editor,
        &session,
        "read",
        "read_file",
        json!({"path": "notes.txt", "line": 2, "limit": 1}),
        false,
    )
    .await;
    assert_eq!(read.statuses.last(), Some(&ToolCallStatus::Completed));
    assert_eq!(read.kind, Some(ToolKind::Read));
    assert_eq!(read.locations, std::slice::from_ref(&file));
    assert_eq!(told_model(&h, "read"), "beta\n");

    let edit = run_tool(
        &h,
        &editor,
        &session,
        "edit",
        "edit_file",
        json!({"path": "notes.txt", "old_text": "beta", "new_text": "BETA"}),
        true,
    )
    .await;
    assert_eq!(edit.statuses.last(), Some(&ToolCallStatus::Completed));
    assert_eq!(edit.kind, Some(ToolKind::Edit));
    assert_eq!(edit.locations, std::slice::from_ref(&file));
    let (path, old, new) = edit.diffs.last().expect("the edit's diff").clone();
    assert_eq!(path, file);
    assert_eq!(old.as_deref(), Some("alpha\nbeta\ngamma\n"));
    assert_eq!(new, "alpha\nBETA\ngamma\n");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "alpha\nBETA\ngamma\n"
    );

    let write = run_tool(
        &h,
        &editor,
        &session,
        "write",
        "write_file",
        json!({"path": "sub/new.txt", "content": "fresh"}),
        true,
    )
    .await;
    assert_eq!(write.statuses.last(), Some(&ToolCallStatus::Completed));
    let (_, old, new) = write.diffs.last().unwrap().clone();
    assert_eq!((old, new.as_str()), (None, "fresh"));
    assert_eq!(
        std::fs::read_to_string(h.workdir.join("sub/new.txt")).unwrap(),
        "fresh"
    );
    assert!(editor.client.calls("fs/read_text_file").is_empty());

    // Refusals: each a clear tool error, nothing asked, nothing written.
    let outside = h.path("outside.txt");
    std::fs::write(&outside, "secret").unwrap();
    std::os::unix::fs::symlink(&outside, h.workdir.join("link")).unwrap();
    std::fs::write(h.workdir.join("blob.bin"), [0u8, 159, 146, 150, 0]).unwrap();
    std::fs::write(h.workdir.join("big.txt"), "x".repeat(1024 * 1024 + 1)).unwrap();
    std::fs::create_dir(h.workdir.join("dir")).unwrap();
    for (n, (tool, arguments, expected)) in [
        (
            "read_file",
            json!({"path": "../outside.txt"}),
            "is outside the session's directory",
        ),
        (
            "write_file",
            json!({"path": outside, "content": "x"}),
            "is outside the session's directory",
        ),
        (
            "read_file",
            json!({"path": "link"}),
            "leads outside the session's directory",
        ),
        (
            "edit_file",
            json!({"path": "link", "old_text": "secret", "new_text": "x"}),
            "leads outside the session's directory",
        ),
        (
            "read_file",
            json!({"path": "dir"}),
            "is a directory, not a file",
        ),
        (
            "read_file",
            json!({"path": "blob.bin"}),
            "is not a text file (it holds binary data)",
        ),
        (
            "read_file",
            json!({"path": "big.txt"}),
            "the file tools read at most 1048576 bytes",
        ),
        (
            "edit_file",
            json!({"path": "notes.txt", "old_text": "nowhere", "new_text": "x"}),
            "old_text was not found",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let prompt = format!("refused {n}");
        let call = run_tool(&h, &editor, &session, &prompt, tool, arguments, false).await;
        assert_eq!(
            call.statuses.last(),
            Some(&ToolCallStatus::Failed),
            "{prompt}"
        );
        assert!(call.text.contains(expected), "{prompt}: {}", call.text);
        assert!(told_model(&h, &prompt).starts_with("error: "), "{prompt}");
    }
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "secret");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_fs_the_file_tools_go_through_the_editor() {
    let h = Harness::start().await;
    let editor = h
        .editor_with_caps(
            EditorCaps {
                fs: true,
                terminal: false,
            },
            &[],
        )
        .await;
    let session = editor.new_session(&h.workdir).await;
    let file = h.workdir.join("main.rs");
    std::fs::write(&file, "fn main() {}\n").unwrap();
    // The user has typed in the editor without saving.
    editor
        .client
        .open_buffer(file.clone(), "fn main() {\n    println!(\"unsaved\");\n}\n");

    run_tool(
        &h,
        &editor,
        &session,
        "read it",
        "read_file",
        json!({"path": "main.rs"}),
        false,
    )
    .await;
    assert!(told_model(&h, "read it").contains("unsaved"));

    let edit = run_tool(
        &h, &editor, &session, "edit it", "edit_file",
        json!({"path": file, "start_line": 2, "end_line": 2, "new_text": "    println!(\"edited\");"}),
        true,
    )
    .await;
    assert_eq!(edit.statuses.last(), Some(&ToolCallStatus::Completed));
    let (_, old, new) = edit.diffs.last().unwrap().clone();
    assert_eq!(
        old.as_deref(),
        Some("fn main() {\n    println!(\"unsaved\");\n}\n")
    );
    assert_eq!(new, "fn main() {\n    println!(\"edited\");\n}\n");
    // The editor applied it to its buffer; the disk is the editor's business.
    assert_eq!(editor.client.buffer(&file).as_deref(), Some(new.as_str()));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "fn main() {}\n");

    let writes = editor.client.calls("fs/write_text_file");
    assert_eq!(writes, [(session.clone(), file.display().to_string())]);
    assert!(editor
        .client
        .calls("fs/read_text_file")
        .iter()
        .all(|(id, _)| id == &session));

    // Confinement holds on this path too.
    let escaped = run_tool(
        &h,
        &editor,
        &session,
        "escape",
        "write_file",
        json!({"path": "../x", "content": "x"}),
        false,
    )
    .await;
    assert_eq!(escaped.statuses.last(), Some(&ToolCallStatus::Failed));
    assert!(escaped.text.contains("is outside the session's directory"));
    assert_eq!(editor.client.calls("fs/write_text_file").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_editor_read_error_fails_the_call_and_writes_nothing() {
    let h = Harness::start().await;
    let editor = h
        .editor_with_caps(
            EditorCaps {
                fs: true,
                terminal: false,
            },
            &[],
        )
        .await;
    let session = editor.new_session(&h.workdir).await;
    let file = h.workdir.join("new.txt");
    editor
        .client
        .fail_reads(Some(agent_client_protocol::Error::new(
            agent_client_protocol::ErrorCode::INTERNAL_ERROR,
            "the buffer store is unavailable",
        )));

    let write = run_tool(
        &h,
        &editor,
        &session,
        "write while reads fail",
        "write_file",
        json!({"path": "new.txt", "content": "fresh"}),
        false,
    )
    .await;
    assert_eq!(write.statuses.last(), Some(&ToolCallStatus::Failed));
    assert!(
        write.text.contains("the buffer store is unavailable"),
        "{}",
        write.text
    );
    assert!(told_model(&h, "write while reads fail").contains("the buffer store is unavailable"));
    assert!(editor.client.calls("fs/write_text_file").is_empty());
    assert!(editor.client.buffer(&file).is_none());
    assert!(!file.exists());

    // The editor's "not found" (-32002) is what makes a file new.
    editor.client.fail_reads(None);
    let created = run_tool(
        &h,
        &editor,
        &session,
        "write when it is missing",
        "write_file",
        json!({"path": "new.txt", "content": "fresh"}),
        true,
    )
    .await;
    assert_eq!(created.statuses.last(), Some(&ToolCallStatus::Completed));
    assert!(created.text.starts_with("created "), "{}", created.text);
    assert_eq!(editor.client.buffer(&file).as_deref(), Some("fresh"));
}
