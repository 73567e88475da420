//! Jobs in the editor's terminals (the `terminal` capability): created with
//! `terminal/create` and embedded in the tool call, read and waited on with
//! `terminal/output` and `terminal/wait_for_exit`, killed and released with
//! their session; owned by their session like local jobs.

use agent_client_protocol::v1::schema::{StopReason, ToolCallStatus};
use serde_json::json;

use crate::acp::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_terminal_jobs_run_in_the_editors_terminals() {
    let h = Harness::start().await;
    let editor = h
        .editor_with_caps(
            EditorCaps {
                fs: false,
                terminal: true,
            },
            &[],
        )
        .await;
    let a = editor.new_session(&h.workdir).await;
    let b = editor.new_session(&h.workdir).await;
    h.model.script(
        "run it",
        vec![
            use_tool("r", "job_start", json!({"command": "echo hello; exit 3"})),
            say("started"),
        ],
    );
    let answer = editor.prompt(&a, "run it");
    editor.next_permission().await.answer("allow_always");
    assert_eq!(
        settle(answer).await.unwrap().stop_reason,
        StopReason::EndTurn
    );
    let started = tool_calls(&editor.updates(&a)).pop().unwrap();
    assert_eq!(started.statuses.last(), Some(&ToolCallStatus::Completed));
    assert_eq!(
        started.terminals,
        ["term-1"],
        "the terminal is embedded in the call"
    );
    assert_eq!(
        editor.client.calls("terminal/create"),
        [(a.clone(), "term-1".to_owned())]
    );
    let job = started.raw_output.unwrap()["jobId"]
        .as_str()
        .unwrap()
        .to_owned();
    editor.client.wait_terminal_exit("term-1").await;

    h.model.script(
        "read it",
        vec![
            use_tool("o", "job_output", json!({"jobId": job})),
            say("read"),
        ],
    );
    editor.prompt_and_wait(&a, "read it").await.unwrap();
    let report = tool_calls(&editor.updates(&a))
        .pop()
        .unwrap()
        .raw_output
        .unwrap();
    assert_eq!(report["output"], "hello\n");
    assert_eq!(report["exited"], true);
    assert_eq!(report["exitCode"], 3);
    assert!(editor
        .client
        .calls("terminal/output")
        .contains(&(a.clone(), "term-1".to_owned())));

    // A long job; B cannot touch it even with its id.
    let command = json!({"command": "exec sleep 600"});
    let long = run_one_tool(&h, &editor, &a, "long", "job_start", command, None).await;
    assert_eq!(long.terminals, ["term-2"]);
    let long_job = long.raw_output.unwrap()["jobId"]
        .as_str()
        .unwrap()
        .to_owned();
    h.model.script(
        "B kills",
        vec![
            use_tool("k", "job_kill", json!({"jobId": long_job})),
            say("no"),
        ],
    );
    editor.prompt_and_wait(&b, "B kills").await.unwrap();
    let refused = tool_calls(&editor.updates(&b)).pop().unwrap();
    assert_eq!(
        refused.text,
        format!("job {long_job} belongs to another session")
    );
    assert!(editor.client.calls("terminal/kill").is_empty());

    // Closing A kills and releases its terminals.
    editor.close_session(&a).await.unwrap();
    editor.client.wait_terminal_exit("term-2").await;
    let released = editor.client.calls("terminal/release");
    for terminal in ["term-1", "term-2"] {
        assert!(
            released.contains(&(a.clone(), terminal.to_owned())),
            "{released:?}"
        );
    }
    assert!(editor
        .client
        .calls("terminal/kill")
        .contains(&(a.clone(), "term-2".to_owned())));
}
