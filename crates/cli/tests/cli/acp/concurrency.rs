//! Many sessions on one connection: streams never mix, cancel and busy
//! refusals stay in their session, a late turn end answers nothing, and
//! hanging up settles everything.

use agent_client_protocol::v1::schema::{SessionUpdate, StopReason};
use agent_client_protocol::ErrorCode;
use serde_json::json;

use crate::acp::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_streaming_at_once_never_interleave_their_updates() {
    let h = Harness::start().await;
    let editor = h.editor().await;
    let a = editor.new_session(&h.workdir).await;
    let b = editor.new_session(&h.workdir).await;
    h.model.script(
        "stream A",
        vec![vec![
            text("A1 "),
            hold("a1"),
            text("A2 "),
            hold("a2"),
            text("A3"),
            Act::Finish("stop"),
            Act::Done,
        ]],
    );
    h.model.script(
        "stream B",
        vec![vec![
            text("B1 "),
            hold("b1"),
            text("B2 "),
            text("B3"),
            Act::Finish("stop"),
            Act::Done,
        ]],
    );
    let prompt_a = editor.prompt(&a, "stream A");
    let prompt_b = editor.prompt(&b, "stream B");
    h.model.hold("a1").reached().await;
    h.model.hold("b1").reached().await;
    h.model.hold("a1").release();
    h.model.hold("a2").reached().await;
    h.model.hold("b1").release();
    // B finishes while A is still held mid-stream: the turns overlap.
    let answer_b = settle(prompt_b).await.expect("prompt B");
    assert_eq!(answer_b.stop_reason, StopReason::EndTurn);
    assert!(!text_of(&editor.updates(&a)).contains("A3"));
    h.model.hold("a2").release();
    let answer_a = settle(prompt_a).await.expect("prompt A");
    assert_eq!(answer_a.stop_reason, StopReason::EndTurn);

    assert_eq!(text_of(&editor.updates(&a)), "A1 A2 A3");
    assert_eq!(text_of(&editor.updates(&b)), "B1 B2 B3");
    for (session, update) in editor.all_updates() {
        let text = text_of(std::slice::from_ref(&update));
        if session == a {
            assert!(text.starts_with('A'), "session A got {update:?}");
        } else {
            assert_eq!(session, b, "an update for an unknown session");
            assert!(text.starts_with('B'), "session B got {update:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_in_one_session_leaves_other_streams_and_permissions_untouched() {
    let h = Harness::start().await;
    let editor = h.editor().await;
    let a = editor.new_session(&h.workdir).await;
    let b = editor.new_session(&h.workdir).await;
    let c = editor.new_session(&h.workdir).await;
    h.model.script(
        "cancel A",
        vec![use_tool(
            "ca",
            "testtools__write_note",
            json!({"text": "a"}),
        )],
    );
    h.model.script(
        "keep B",
        vec![
            use_tool("cb", "testtools__write_note", json!({"text": "b"})),
            say("B done"),
        ],
    );
    h.model.script(
        "stream C",
        vec![vec![
            text("C1 "),
            hold("c"),
            text("C2"),
            Act::Finish("stop"),
            Act::Done,
        ]],
    );
    let prompt_a = editor.prompt(&a, "cancel A");
    let prompt_b = editor.prompt(&b, "keep B");
    let prompt_c = editor.prompt(&c, "stream C");
    let first = editor.next_permission().await;
    let second = editor.next_permission().await;
    let (permission_a, permission_b) = if first.session() == a {
        (first, second)
    } else {
        (second, first)
    };
    assert_eq!(
        (permission_a.session(), permission_b.session()),
        (a.clone(), b.clone())
    );
    h.model.hold("c").reached().await;

    editor.cancel(&a);
    let answer_a = settle(prompt_a).await.expect("prompt A");
    assert_eq!(answer_a.stop_reason, StopReason::Cancelled);
    permission_a.wait_withdrawn().await;
    assert!(
        !permission_b.withdrawn(),
        "B's permission request was touched"
    );
    let calls_a = tool_calls(&editor.updates(&a));
    assert_eq!(calls_a.len(), 1);
    assert_eq!(
        calls_a[0].statuses.last(),
        Some(&agent_client_protocol::v1::schema::ToolCallStatus::Failed)
    );

    // C keeps streaming, B's permission still works.
    h.model.hold("c").release();
    let answer_c = settle(prompt_c).await.expect("prompt C");
    assert_eq!(answer_c.stop_reason, StopReason::EndTurn);
    assert_eq!(text_of(&editor.updates(&c)), "C1 C2");
    permission_b.answer("allow_once");
    let answer_b = settle(prompt_b).await.expect("prompt B");
    assert_eq!(answer_b.stop_reason, StopReason::EndTurn);
    assert_eq!(text_of(&editor.updates(&b)), "B done");
    let notes: Vec<String> = h
        .provider
        .calls()
        .iter()
        .map(|call| call.arguments.get().to_owned())
        .collect();
    assert_eq!(notes, vec![r#"{"text":"b"}"#.to_owned()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_session_refuses_a_second_prompt_while_another_session_runs() {
    let h = Harness::start().await;
    let editor = h.editor().await;
    let a = editor.new_session(&h.workdir).await;
    let b = editor.new_session(&h.workdir).await;
    h.model.script(
        "busy A",
        vec![vec![
            text("a"),
            hold("busy-a"),
            Act::Finish("stop"),
            Act::Done,
        ]],
    );
    h.model.script(
        "busy B",
        vec![vec![
            text("b"),
            hold("busy-b"),
            Act::Finish("stop"),
            Act::Done,
        ]],
    );
    let prompt_a = editor.prompt(&a, "busy A");
    let prompt_b = editor.prompt(&b, "busy B");
    h.model.hold("busy-a").reached().await;
    h.model.hold("busy-b").reached().await;

    let refused = editor
        .prompt_and_wait(&a, "busy A again")
        .await
        .expect_err("a second prompt on a busy session");
    assert_eq!(refused.code, ErrorCode::INVALID_PARAMS);
    assert_eq!(
        refused.message,
        "a prompt is already in flight for this session"
    );
    assert!(h.model.requests_for("busy A again").is_empty());

    h.model.hold("busy-b").release();
    assert_eq!(
        settle(prompt_b).await.unwrap().stop_reason,
        StopReason::EndTurn
    );
    h.model.hold("busy-a").release();
    assert_eq!(
        settle(prompt_a).await.unwrap().stop_reason,
        StopReason::EndTurn
    );
    assert_eq!(text_of(&editor.updates(&a)), "a");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_turns_late_end_never_answers_the_next_prompt() {
    let h = Harness::start().await;
    let editor = h.editor().await;
    let a = editor.new_session(&h.workdir).await;
    h.model.script(
        "late 1",
        vec![vec![
            text("first "),
            hold("late-1"),
            text("never"),
            Act::Finish("stop"),
            Act::Done,
        ]],
    );
    h.model.script(
        "late 2",
        vec![vec![
            text("second "),
            hold("late-2"),
            text("answer"),
            Act::Finish("stop"),
            Act::Done,
        ]],
    );
    let first = editor.prompt(&a, "late 1");
    h.model.hold("late-1").reached().await;
    editor
        .wait_updates(&a, "the first chunk", |updates| {
            text_of(updates) == "first "
        })
        .await;
    editor.cancel(&a);
    assert_eq!(
        settle(first).await.unwrap().stop_reason,
        StopReason::Cancelled
    );

    let second = editor.prompt(&a, "late 2");
    h.model.hold("late-2").reached().await;
    // The first turn's response now ends, while the second is in flight.
    h.model.hold("late-1").release();
    h.model.hold("late-2").release();
    let answer = settle(second).await.expect("second prompt");
    assert_eq!(answer.stop_reason, StopReason::EndTurn);
    assert_eq!(text_of(&editor.updates(&a)), "first second answer");

    // The cancelled turn's partial text is part of the conversation.
    let request = &h.model.requests_for("late 2")[0];
    let messages = model_server::roles_and_contents(request);
    assert_eq!(
        messages[1..],
        [
            ("user".to_owned(), "late 1".to_owned()),
            ("assistant".to_owned(), "first ".to_owned()),
            ("user".to_owned(), "late 2".to_owned()),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hanging_up_settles_every_prompt_as_cancelled_and_kills_every_job() {
    let h = Harness::start().await;
    let mut editor = h.editor().await;
    let a = editor.new_session(&h.workdir).await;
    let b = editor.new_session(&h.workdir).await;
    let pipe_a = PidPipe::create(h.path("pid-a"));
    let pipe_b = PidPipe::create(h.path("pid-b"));
    h.model.script(
        "jobs A",
        vec![
            use_tool("ja", "job_start", json!({"command": pipe_a.job_command()})),
            vec![
                text("started"),
                hold("close-a"),
                Act::Finish("stop"),
                Act::Done,
            ],
        ],
    );
    h.model.script(
        "jobs B",
        vec![
            use_tool("jb", "job_start", json!({"command": pipe_b.job_command()})),
            vec![
                text("started"),
                hold("close-b"),
                Act::Finish("stop"),
                Act::Done,
            ],
        ],
    );
    let prompt_a = editor.prompt(&a, "jobs A");
    let prompt_b = editor.prompt(&b, "jobs B");
    editor.next_permission().await.answer("allow_once");
    editor.next_permission().await.answer("allow_once");
    let pid_a = pipe_a.read_pid().await;
    let pid_b = pipe_b.read_pid().await;
    h.model.hold("close-a").reached().await;
    h.model.hold("close-b").reached().await;
    assert!(!process_gone(pid_a) && !process_gone(pid_b));

    editor.hang_up();
    assert_eq!(
        settle(prompt_a).await.unwrap().stop_reason,
        StopReason::Cancelled
    );
    assert_eq!(
        settle(prompt_b).await.unwrap().stop_reason,
        StopReason::Cancelled
    );
    let status = editor.wait_exit().await;
    assert!(
        status.success(),
        "the agent exited with {status}: {}",
        editor.log_text()
    );
    assert!(process_gone(pid_a), "job of A survived the connection");
    assert!(process_gone(pid_b), "job of B survived the connection");
    let log = editor.log_text();
    assert_eq!(
        log.matches("tearing down").count(),
        1,
        "teardown ran more than once:\n{log}"
    );
    assert!(editor
        .all_updates()
        .iter()
        .all(|(_, update)| !matches!(update, SessionUpdate::UserMessageChunk(_))));
}
