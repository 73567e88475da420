//! A session's own MCP servers (`mcpServers`): started for it alone,
//! offered under `mcp_<name>__<tool>` after the hub's tools, behind the
//! same permission gate, refused by entry when malformed, reported when
//! they fail, and stopped with their session and with the front.

use agent_client_protocol::v1::schema::{SessionUpdate, StopReason, ToolCallStatus};
use agent_client_protocol::ErrorCode;
use serde_json::{json, Value};

use crate::acp::support::*;
use crate::support::http_mcp::HttpMcpServer;

/// The function names a model request offered.
fn offered(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|tool| tool["function"]["name"].as_str().map(str::to_owned))
        .collect()
}

fn session_id(answer: &agent_client_protocol::v1::schema::NewSessionResponse) -> String {
    answer.session_id.0.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_calls_a_tool_of_the_sessions_own_mcp_server() {
    let h = Harness::start().await;
    let editor = h.editor().await;
    let log = h.path("server-calls");
    let answer = editor
        .new_session_with_servers(
            &h.workdir,
            json!([test_server_entry(
                "files",
                &[("MCP_TEST_SERVER_LOG", log.to_str().unwrap())]
            )]),
        )
        .await
        .expect("session/new with a stdio MCP server");
    let session = session_id(&answer);
    h.model.script(
        "echo through mcp",
        vec![
            use_tool(
                "m1",
                "mcp_files__echo",
                json!({"text": "from the session's server"}),
            ),
            say("done"),
        ],
    );
    let prompt = editor.prompt(&session, "echo through mcp");
    // Not annotated read-only: the same gate as a hub tool.
    let permission = editor.next_permission().await;
    assert_eq!(permission.session(), session);
    assert_eq!(
        permission.request.tool_call.fields.title.as_deref(),
        Some("mcp_files__echo")
    );
    permission.answer("allow_once");
    assert_eq!(
        settle(prompt).await.unwrap().stop_reason,
        StopReason::EndTurn
    );

    let requests = h.model.requests_for("echo through mcp");
    let names = offered(&requests[0]);
    assert!(names.contains(&"mcp_files__echo".to_owned()), "{names:?}");
    assert!(
        names.contains(&"testtools__echo".to_owned()),
        "hub tools stay: {names:?}"
    );
    let call = &tool_calls(&editor.updates(&session))[0];
    assert_eq!(call.statuses.last(), Some(&ToolCallStatus::Completed));
    assert_eq!(call.text, "from the session's server");
    let last = requests[1]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "tool");
    assert_eq!(last["content"], "from the session's server");
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "echo\n");
    // The hub saw nothing of it.
    assert!(h.provider.calls().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sessions_each_see_only_their_own_servers() {
    let h = Harness::start().await;
    let editor = h.editor().await;
    let a = session_id(
        &editor
            .new_session_with_servers(&h.workdir, json!([test_server_entry("alpha", &[])]))
            .await
            .unwrap(),
    );
    let b = session_id(
        &editor
            .new_session_with_servers(&h.workdir, json!([test_server_entry("beta", &[])]))
            .await
            .unwrap(),
    );
    h.model.script("A lists", vec![say("a")]);
    h.model.script(
        "B reaches for A's tool",
        vec![
            use_tool("x", "mcp_alpha__echo", json!({"text": "x"})),
            say("b"),
        ],
    );
    editor.prompt_and_wait(&a, "A lists").await.unwrap();
    editor
        .prompt_and_wait(&b, "B reaches for A's tool")
        .await
        .unwrap();

    let of_a = offered(&h.model.requests_for("A lists")[0]);
    let of_b = offered(&h.model.requests_for("B reaches for A's tool")[0]);
    assert!(of_a.iter().any(|n| n == "mcp_alpha__echo"), "{of_a:?}");
    assert!(
        !of_a.iter().any(|n| n.starts_with("mcp_beta__")),
        "{of_a:?}"
    );
    assert!(of_b.iter().any(|n| n == "mcp_beta__echo"), "{of_b:?}");
    assert!(
        !of_b.iter().any(|n| n.starts_with("mcp_alpha__")),
        "{of_b:?}"
    );
    let call = &tool_calls(&editor.updates(&b))[0];
    assert_eq!(call.statuses.last(), Some(&ToolCallStatus::Failed));
    assert_eq!(call.text, "unknown tool \"mcp_alpha__echo\"");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_entry_is_refused_naming_the_entry() {
    let h = Harness::start().await;
    let editor = h.editor().await;
    let good = test_server_entry("good", &[]);
    for (servers, expected) in [
        (
            json!([good.clone(), {"name": "nocmd", "args": []}]),
            "mcpServers[1] (\"nocmd\"): command is missing",
        ),
        (
            json!([{"type": "websocket", "name": "ws", "url": "ws://127.0.0.1:1"}]),
            "mcpServers[0] (\"ws\"): unknown type \"websocket\" (this agent takes stdio and http servers)",
        ),
        (
            json!([{"name": "env", "command": "/bin/true", "env": [{"name": "A"}]}]),
            "mcpServers[0] (\"env\"): env[0] must be an object with a string name and a string value",
        ),
        (
            json!([{"name": "env2", "command": "/bin/true", "env": [{"name": "A=B", "value": "1"}]}]),
            "mcpServers[0] (\"env2\"): env[0] has the name \"A=B\"; a variable name is non-empty and holds no '='",
        ),
    ] {
        let error = editor
            .new_session_with_servers(&h.workdir, servers.clone())
            .await
            .expect_err("a malformed entry");
        assert_eq!(error.code, ErrorCode::INVALID_PARAMS, "{servers}");
        assert_eq!(error.message, expected, "{servers}");
    }
    // Nothing was started or kept: the agent takes a good session next.
    let ok = editor
        .new_session_with_servers(&h.workdir, json!([good]))
        .await
        .unwrap();
    assert!(!session_id(&ok).is_empty());
    assert_eq!(editor.list_sessions().await.sessions.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_that_fail_or_hang_at_start_are_reported_in_the_session() {
    let h = Harness::start().await;
    let editor = h.editor_with(&["--mcp-start-timeout", "1s"]).await;
    let refuse = h.path("refuse-start");
    std::fs::write(&refuse, "").unwrap();
    let answer = editor
        .new_session_with_servers(
            &h.workdir,
            json!([
                test_server_entry("down", &[("MCP_TEST_SERVER_REFUSE_START", refuse.to_str().unwrap())]),
                {"name": "mute", "command": "/bin/sleep", "args": ["600"]},
                test_server_entry("up", &[]),
            ]),
        )
        .await
        .expect("the session starts with the servers that did");
    let session = session_id(&answer);
    editor
        .wait_updates(&session, "both failures reported", |updates| {
            let text = text_of(updates);
            text.contains("MCP server \"down\"") && text.contains("MCP server \"mute\"")
        })
        .await;
    let text = text_of(&editor.updates(&session));
    assert!(
        text.contains("refusing to start"),
        "the server's own words: {text}"
    );
    assert!(
        text.contains("did not answer initialize within 1s; given up"),
        "{text}"
    );
    assert!(!text.contains("\"up\""), "{text}");

    h.model.script("what is there", vec![say("ok")]);
    editor
        .prompt_and_wait(&session, "what is there")
        .await
        .unwrap();
    let names = offered(&h.model.requests_for("what is there")[0]);
    assert!(names.iter().any(|n| n == "mcp_up__echo"), "{names:?}");
    assert!(!names
        .iter()
        .any(|n| n.starts_with("mcp_down__") || n.starts_with("mcp_mute__")));
    // Another session on the connection heard nothing of it.
    let other = editor.new_session(&h.workdir).await;
    assert!(editor.updates(&other).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_servers_stop_with_it_and_with_the_front() {
    let h = Harness::start().await;
    let mut editor = h.editor().await;
    let mut pids = Vec::new();
    let mut sessions = Vec::new();
    for name in ["closed", "killed"] {
        let pipe = PidPipe::create(h.path(&format!("server-{name}")));
        // The server reports its pid, then becomes the test server.
        let entry = json!({
            "name": name,
            "command": "/bin/sh",
            "args": ["-c", format!("echo $$ > '{}'; exec '{}'", pipe.path.display(), mcp_test_server().display())],
        });
        let (answer, pid) = tokio::join!(
            editor.new_session_with_servers(&h.workdir, json!([entry])),
            pipe.read_pid()
        );
        sessions.push(session_id(&answer.expect("session/new")));
        assert!(!process_gone(pid));
        pids.push(pid);
    }
    editor
        .close_session(&sessions[0])
        .await
        .expect("session/close");
    assert!(
        process_gone(pids[0]),
        "the closed session's server survived it"
    );
    assert!(
        !process_gone(pids[1]),
        "closing one session stopped another's server"
    );

    editor.kill().await;
    switchboard_testkit::eventually("the server is gone after kill -9 of the front", || {
        process_gone(pids[1])
    })
    .await;
    assert!(editor
        .all_updates()
        .iter()
        .all(|(_, update)| !matches!(update, SessionUpdate::AgentMessageChunk(_))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_server_is_reached_with_its_headers() {
    let h = Harness::start().await;
    let editor = h.editor().await;
    let caps = &editor.init.agent_capabilities.mcp_capabilities;
    assert!(caps.http, "mcpCapabilities.http is advertised");
    let server = HttpMcpServer::start().await;
    let answer = editor
        .new_session_with_servers(
            &h.workdir,
            json!([{"type": "http", "name": "web", "url": server.url,
                    "headers": [{"name": "X-Test-Token", "value": "t0ken"}]}]),
        )
        .await
        .expect("session/new with an http MCP server");
    let session = session_id(&answer);
    h.model.script(
        "shout",
        vec![
            use_tool("s", "mcp_web__shout", json!({"text": "quiet"})),
            say("done"),
        ],
    );
    let prompt = editor.prompt(&session, "shout");
    editor.next_permission().await.answer("allow_once");
    settle(prompt).await.unwrap();
    let call = &tool_calls(&editor.updates(&session))[0];
    assert_eq!(call.statuses.last(), Some(&ToolCallStatus::Completed));
    assert_eq!(call.text, "QUIET");
    let seen = server.seen("x-test-token");
    assert!(!seen.is_empty());
    assert!(
        seen.iter().all(|value| value.as_deref() == Some("t0ken")),
        "every request carries the header: {seen:?}"
    );
    assert!(
        !editor.log_text().contains("t0ken"),
        "a header value reached the log"
    );
}
