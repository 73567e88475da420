//! The session store: a session loads back with the same updates, after a
//! normal end and after the process was killed mid-turn.

use agent_client_protocol::v1::schema::{ContentBlock, SessionUpdate, StopReason};
use agent_client_protocol::ErrorCode;
use serde_json::json;

use crate::acp::support::*;

fn user_text(update: &SessionUpdate) -> Option<String> {
    match update {
        SessionUpdate::UserMessageChunk(chunk) => match &chunk.content {
            ContentBlock::Text(text) => Some(text.text.clone()),
            _ => None,
        },
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loading_after_a_normal_end_replays_the_same_updates() {
    let h = Harness::start().await;
    let mut first = h.editor().await;
    let a = first.new_session(&h.workdir).await;
    h.model.script(
        "remember me",
        vec![
            vec![
                Act::Reasoning("thinking".into()),
                call("e1", "testtools__echo", json!({"text": "hi"})),
                Act::Finish("tool_calls"),
                Act::Done,
            ],
            say("done remembering"),
        ],
    );
    assert_eq!(
        first
            .prompt_and_wait(&a, "remember me")
            .await
            .unwrap()
            .stop_reason,
        StopReason::EndTurn
    );
    let live = first.updates(&a);
    first.hang_up();
    assert!(first.wait_exit().await.success());

    let second = h.editor().await;
    second
        .load_session(&a, &h.workdir)
        .await
        .expect("session/load");
    let replayed = second.updates(&a);
    assert_eq!(user_text(&replayed[0]).as_deref(), Some("remember me"));
    assert_eq!(replayed[1..], live[..]);

    // The conversation continues where it was.
    h.model.script("and then", vec![say("next")]);
    second.prompt_and_wait(&a, "and then").await.unwrap();
    let request = &h.model.requests_for("and then")[0];
    let messages = request["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "assistant", "user"]
    );
    assert_eq!(messages[2]["tool_calls"][0]["id"], "e1");
    assert_eq!(messages[3]["content"], "echo: hi");
    assert_eq!(messages[4]["content"], "done remembering");

    let listed = second.list_sessions().await;
    let info = listed
        .sessions
        .iter()
        .find(|s| s.session_id.0.as_ref() == a)
        .expect("the session is listed");
    assert_eq!(info.title.as_deref(), Some("remember me"));
    assert_eq!(info.cwd, h.workdir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_killed_mid_turn_loads_back_to_its_last_complete_turn() {
    let h = Harness::start().await;
    let mut first = h.editor().await;
    let a = first.new_session(&h.workdir).await;
    h.model.script("complete turn", vec![say("kept")]);
    h.model.script(
        "cut turn",
        vec![vec![
            text("partial "),
            hold("cut"),
            text("rest"),
            Act::Finish("stop"),
            Act::Done,
        ]],
    );
    first.prompt_and_wait(&a, "complete turn").await.unwrap();
    let _cut = first.prompt(&a, "cut turn");
    h.model.hold("cut").reached().await;
    first
        .wait_updates(&a, "the partial text", |updates| {
            text_of(updates).contains("partial")
        })
        .await;
    first.kill().await;

    let second = h.editor().await;
    second
        .load_session(&a, &h.workdir)
        .await
        .expect("session/load");
    let replayed = second.updates(&a);
    assert_eq!(replayed.len(), 2, "{replayed:#?}");
    assert_eq!(user_text(&replayed[0]).as_deref(), Some("complete turn"));
    assert_eq!(text_of(&replayed), "kept");

    h.model.script("after the crash", vec![say("fine")]);
    assert_eq!(
        second
            .prompt_and_wait(&a, "after the crash")
            .await
            .unwrap()
            .stop_reason,
        StopReason::EndTurn
    );
    let request = &h.model.requests_for("after the crash")[0];
    assert_eq!(
        model_server::roles_and_contents(request)[1..],
        [
            ("user".to_owned(), "complete turn".to_owned()),
            ("assistant".to_owned(), "kept".to_owned()),
            ("user".to_owned(), "after the crash".to_owned()),
        ]
    );
    h.model.hold("cut").release();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_id_cannot_load_twice_at_once_while_different_ids_load_together() {
    let h = Harness::start().await;
    let mut first = h.editor().await;
    let a = first.new_session(&h.workdir).await;
    let b = first.new_session(&h.workdir).await;
    h.model.script("turn a", vec![say("A")]);
    h.model.script("turn b", vec![say("B")]);
    first.prompt_and_wait(&a, "turn a").await.unwrap();
    first.prompt_and_wait(&b, "turn b").await.unwrap();
    first.hang_up();
    first.wait_exit().await;

    let second = h.editor().await;
    let load = |id: &str| {
        let request =
            agent_client_protocol::v1::schema::LoadSessionRequest::new(id.to_owned(), &h.workdir);
        tokio::spawn(second.cx.send_request(request).block_task())
    };
    // Sent back to back: the second load of A arrives while the first holds
    // A's slot (or after it made A live); B loads alongside.
    let (load_a, load_a_again, load_b) = (load(&a), load(&a), load(&b));
    let first_a = tokio::time::timeout(WAIT, load_a).await.unwrap().unwrap();
    let again = tokio::time::timeout(WAIT, load_a_again)
        .await
        .unwrap()
        .unwrap();
    let load_b = tokio::time::timeout(WAIT, load_b).await.unwrap().unwrap();
    first_a.expect("the first load of A");
    load_b.expect("the load of B");
    let refused = again.expect_err("the second load of A");
    assert_eq!(refused.code, ErrorCode::INVALID_PARAMS);
    assert!(
        refused.message == format!("session {a} is already being loaded")
            || refused.message == format!("session {a} is already open on this connection"),
        "{}",
        refused.message
    );
    // Each session replayed once, with its own history only.
    assert_eq!(text_of(&second.updates(&a)), "A");
    assert_eq!(text_of(&second.updates(&b)), "B");
    assert_eq!(second.updates(&a).len(), 2);
    assert_eq!(second.updates(&b).len(), 2);
}
