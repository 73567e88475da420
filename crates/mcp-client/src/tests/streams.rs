//! A server on two streams ([`Upstream::streams`]): a scripted server in
//! this process, served as a stdio server is, and stopped by closing its
//! input.

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::oneshot;

use super::*;
use crate::StartError;

const LABEL: &str = "the in-process server";

/// The server's answer to `message`, if it answers it.
fn answer(message: &Value) -> Option<Value> {
    let id = message.get("id")?.clone();
    let result = match message["method"].as_str()? {
        "initialize" => json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "scripted", "version": "1"},
        }),
        "tools/list" => json!({"tools": [
            {"name": "echo", "inputSchema": {"type": "object"}},
        ]}),
        "tools/call" => json!({"content": [
            {"type": "text", "text": message["params"]["arguments"]["text"]},
        ]}),
        _ => {
            return Some(json!({"jsonrpc": "2.0", "id": id,
                                "error": {"code": -32601, "message": "no such method"}}))
        }
    };
    Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

/// Serves `side` until its input ends; says so on `ended`.
async fn scripted_server(side: DuplexStream, ended: oneshot::Sender<()>) {
    let (read, mut write) = tokio::io::split(side);
    let mut lines = BufReader::new(read).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let message: Value = serde_json::from_str(&line).expect("the client writes JSON lines");
        if let Some(answer) = answer(&message) {
            let mut text = answer.to_string();
            text.push('\n');
            write.write_all(text.as_bytes()).await.expect("written");
        }
    }
    let _ = ended.send(());
}

fn upstream(client_side: DuplexStream) -> Upstream {
    let (output, input) = tokio::io::split(client_side);
    Upstream::streams(LABEL, output, input)
}

#[tokio::test]
async fn a_server_on_streams_starts_answers_calls_and_is_stopped_by_closing_its_input() {
    let (client_side, server_side) = tokio::io::duplex(64 * 1024);
    let (ended, input_closed) = oneshot::channel();
    tokio::spawn(scripted_server(server_side, ended));

    let Started { connection, tools } = within(
        "the in-process server to start",
        start(upstream(client_side), &options(WAIT), Arc::new(())),
    )
    .await
    .expect("it starts");
    assert_eq!(names(&tools), ["echo"]);
    assert_eq!(connection.pid(), None, "no process of ours");

    let mut call = ToolCall::new("echo", json!({"text": "over streams"}));
    call.timeout = Some(WAIT);
    let result = within("the call's answer", connection.call_tool(call))
        .await
        .expect("answered");
    assert_eq!(text(&result), "over streams");

    within("the stop", connection.stop()).await;
    assert!(connection.is_closed());
    within("the server's input to end", input_closed)
        .await
        .expect("the server saw its input end");
}

#[tokio::test]
async fn a_server_on_streams_that_closes_at_once_is_named_in_the_error() {
    let (client_side, server_side) = tokio::io::duplex(1024);
    drop(server_side);
    let error = within(
        "the start to fail",
        start(upstream(client_side), &options(WAIT), Arc::new(())),
    )
    .await
    .err()
    .expect("nothing answers initialize");
    assert!(matches!(error, StartError::Handshake { .. }), "{error:?}");
    assert!(error.to_string().contains(LABEL), "{error}");
}
