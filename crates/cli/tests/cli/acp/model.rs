//! The agent loop against the model: hub tools and their contract, thoughts,
//! every stop reason, model errors, and cancelling a running hub tool.

use agent_client_protocol::v1::schema::{StopReason, ToolCallStatus};
use agent_client_protocol::ErrorCode;
use serde_json::{json, Value};

use crate::acp::support::provider::pin;
use crate::acp::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hub_tools_are_offered_and_called_with_the_tool_call_contract() {
    let h = Harness::start().await;
    let editor = h.editor().await;
    let a = editor.new_session(&h.workdir).await;
    h.model.script(
        "use echo",
        vec![
            vec![
                Act::CallInParts {
                    id: "call_echo".into(),
                    name: "testtools__echo".into(),
                    parts: vec![r#"{"te"#.into(), r#"xt":"hi"}"#.into()],
                },
                Act::Finish("tool_calls"),
                Act::Done,
            ],
            say("echoed"),
        ],
    );
    assert_eq!(
        editor
            .prompt_and_wait(&a, "use echo")
            .await
            .unwrap()
            .stop_reason,
        StopReason::EndTurn
    );
    assert!(
        editor.pending_permission().await.is_none(),
        "a read-only tool asked"
    );

    let requests = h.model.requests_for("use echo");
    let mut offered: Vec<String> = requests[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    offered.sort();
    assert_eq!(
        offered,
        [
            "edit_file",
            "job_kill",
            "job_output",
            "job_start",
            "read_file",
            "testtools__echo",
            "testtools__slow",
            "testtools__write_note",
            "write_file",
        ]
    );
    assert_eq!(requests[0]["stream"], true);

    let calls = h.provider.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].name, "echo");
    assert_eq!(calls[0].arguments.get(), r#"{"text":"hi"}"#);
    assert_eq!(calls[0].tool_call_id.as_deref(), Some("call_echo"));
    assert_eq!(calls[0].schema_pin, Some(pin("echo")));
    let key = calls[0].call_key.clone().expect("a call key");
    assert!(key.starts_with(&format!("acp:{a}:")), "{key}");

    let call = &tool_calls(&editor.updates(&a))[0];
    assert_eq!(
        call.statuses,
        [
            ToolCallStatus::Pending,
            ToolCallStatus::InProgress,
            ToolCallStatus::Completed
        ]
    );
    assert_eq!(call.text, "echo: hi");
    assert_eq!(call.raw_input, Some(json!({"text": "hi"})));
    let last: Value = requests[1]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        last,
        json!({"role": "tool", "tool_call_id": "call_echo", "content": "echo: hi"})
    );
    assert_eq!(text_of(&editor.updates(&a)), "echoed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thoughts_and_stop_reasons_follow_the_model() {
    let h = Harness::start().await;
    let editor = h.editor().await;
    let a = editor.new_session(&h.workdir).await;
    let cases: Vec<(&str, Vec<Act>, StopReason)> = vec![
        ("think", vec![Act::Reasoning("pondering".into()), text("answer"), Act::Finish("stop"), Act::Done], StopReason::EndTurn),
        ("too long", vec![text("cut"), Act::Finish("length"), Act::Done], StopReason::MaxTokens),
        ("filtered", vec![text("no"), Act::Finish("content_filter"), Act::Done], StopReason::Refusal),
        ("refuse", vec![Act::Refusal("I can't".into()), Act::Finish("stop"), Act::Done], StopReason::Refusal),
        (
            "multi line",
            vec![
                // One event whose JSON spans two `data:` lines.
                Act::Raw("data: {\"choices\":[{\"index\":0,\ndata: \"delta\":{\"content\":\"joined\"}}]}\n\n".into()),
                Act::Finish("stop"),
                Act::Done,
            ],
            StopReason::EndTurn,
        ),
    ];
    for (prompt, acts, expected) in cases {
        h.model.script(prompt, vec![acts]);
        let before = editor.updates(&a).len();
        let answer = editor.prompt_and_wait(&a, prompt).await.unwrap();
        assert_eq!(answer.stop_reason, expected, "prompt {prompt:?}");
        let updates = editor.updates(&a)[before..].to_vec();
        match prompt {
            "think" => {
                assert_eq!(thoughts_of(&updates), "pondering");
                assert_eq!(text_of(&updates), "answer");
            }
            "refuse" => assert_eq!(text_of(&updates), "I can't"),
            "multi line" => assert_eq!(text_of(&updates), "joined"),
            _ => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_calls_per_prompt_are_capped() {
    let h = Harness::start().await;
    let editor = h.editor_with(&["--max-model-calls", "2"]).await;
    let a = editor.new_session(&h.workdir).await;
    h.model.script(
        "loop",
        vec![
            use_tool("e1", "testtools__echo", json!({"text": "1"})),
            use_tool("e2", "testtools__echo", json!({"text": "2"})),
            say("never"),
        ],
    );
    let answer = editor.prompt_and_wait(&a, "loop").await.unwrap();
    assert_eq!(answer.stop_reason, StopReason::MaxTurnRequests);
    assert_eq!(h.model.requests_for("loop").len(), 2);
    assert_eq!(h.provider.calls().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_errors_end_the_turn_clearly_and_leave_the_session_usable() {
    let h = Harness::start().await;
    let editor = h.editor().await;
    let a = editor.new_session(&h.workdir).await;
    h.model.script(
        "http error",
        vec![vec![Act::Status(500, r#"{"error":"boom"}"#.into())]],
    );
    h.model.script(
        "bad json",
        vec![vec![Act::Raw("data: {not json\n\n".into())]],
    );
    h.model.script("dropped", vec![vec![text("half")]]);
    for (prompt, expected) in [
        (
            "http error",
            r#"model call failed: the model endpoint answered HTTP 500: {"error":"boom"}"#,
        ),
        (
            "bad json",
            "model call failed: the model sent a chunk that is not valid JSON",
        ),
        (
            "dropped",
            "model call failed: the model stream ended before the answer was complete",
        ),
    ] {
        let error = editor.prompt_and_wait(&a, prompt).await.expect_err(prompt);
        assert_eq!(error.code, ErrorCode::INTERNAL_ERROR);
        assert!(
            error.message.starts_with(expected),
            "{prompt}: {}",
            error.message
        );
    }
    h.model.script("recovered", vec![say("fine")]);
    let answer = editor.prompt_and_wait(&a, "recovered").await.unwrap();
    assert_eq!(answer.stop_reason, StopReason::EndTurn);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_turn_cancels_its_running_hub_tool_on_the_hub() {
    let h = Harness::start().await;
    let editor = h.editor().await;
    let a = editor.new_session(&h.workdir).await;
    h.model
        .script("slow", vec![use_tool("s", "testtools__slow", json!({}))]);
    let prompt = editor.prompt(&a, "slow");
    h.provider.wait_calls(1).await;
    editor.cancel(&a);
    assert_eq!(
        settle(prompt).await.unwrap().stop_reason,
        StopReason::Cancelled
    );
    h.provider.wait_cancelled(1).await;
    let call = &tool_calls(&editor.updates(&a))[0];
    assert_eq!(
        call.statuses,
        [
            ToolCallStatus::Pending,
            ToolCallStatus::InProgress,
            ToolCallStatus::Failed
        ]
    );
}

/// The tool names offered in a model request.
fn offered(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            t["function"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

/// Prompts (bounded) until a model request's tools satisfy `wanted`: the
/// agent learns of catalog changes asynchronously, and a prompt is the only
/// way to see what it offers.
async fn probe_until(
    h: &Harness,
    editor: &Editor,
    session: &str,
    wanted: impl Fn(&[String]) -> bool,
) {
    for attempt in 0..100 {
        let prompt = format!("probe {attempt}");
        h.model.script(&prompt, vec![say("ok")]);
        editor.prompt_and_wait(session, &prompt).await.unwrap();
        if wanted(&offered(&h.model.requests_for(&prompt)[0])) {
            return;
        }
    }
    panic!("the offered tools never changed as expected");
}

/// Whether the offered tools include `name`.
fn offers(name: &str) -> impl Fn(&[String]) -> bool + '_ {
    move |tools| tools.iter().any(|t| t == name)
}

/// Has the model call the ping tool `name` (`register_ping`) once; checks
/// the editor saw its answer.
async fn ping(h: &Harness, editor: &Editor, session: &str, name: &str) {
    let prompt = format!("ping {name}");
    h.model
        .script(&prompt, vec![use_tool("p", name, json!({})), say("pinged")]);
    editor.prompt_and_wait(session, &prompt).await.unwrap();
    let call = tool_calls(&editor.updates(session)).pop().unwrap();
    assert_eq!(call.text, "pong");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_offered_tools_follow_the_live_catalog() {
    let h = Harness::start().await;
    let editor = h.editor().await;
    let a = editor.new_session(&h.workdir).await;
    h.model.script("before", vec![say("ok")]);
    editor.prompt_and_wait(&a, "before").await.unwrap();
    assert!(!offered(&h.model.requests_for("before")[0]).contains(&"extra__ping".to_owned()));

    let client = h.hub_client("late provider").await;
    let service = provider::register_ping(&client, "extra").await;
    probe_until(&h, &editor, &a, offers("extra__ping")).await;
    ping(&h, &editor, &a, "extra__ping").await;

    service.unregister().await.expect("unregister");
    probe_until(&h, &editor, &a, |tools| !offers("extra__ping")(tools)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_offered_tools_follow_the_hub_across_a_restart() {
    let mut h = Harness::start().await;
    let editor = h.editor().await;
    let a = editor.new_session(&h.workdir).await;
    probe_until(&h, &editor, &a, offers("testtools__echo")).await;

    h.stop_hub().await;
    // The agent goes on with its built-in tools only.
    probe_until(&h, &editor, &a, |tools| {
        !tools.iter().any(|t| t.contains("__")) && tools.iter().any(|t| t == "job_start")
    })
    .await;

    h.start_hub().await;
    let client = h.hub_client("provider after the restart").await;
    let _service = provider::register_ping(&client, "back").await;
    probe_until(&h, &editor, &a, offers("back__ping")).await;
    ping(&h, &editor, &a, "back__ping").await;
}
