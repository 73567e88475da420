//! `mcp-test-server`, the MCP server the end-to-end tests in `crates/cli`
//! wrap with `provide-mcp`, checked on its own through the official client.

use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(10);

#[tokio::test]
async fn lists_its_tools_and_echoes() {
    let command = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-test-server"));
    let transport = TokioChildProcess::new(command).expect("spawn mcp-test-server");
    let client = tokio::time::timeout(WAIT, ().serve(transport))
        .await
        .expect("initialized in time")
        .expect("initialized");

    let tools = tokio::time::timeout(WAIT, client.peer().list_all_tools())
        .await
        .unwrap()
        .unwrap();
    let mut names: Vec<String> = tools.into_iter().map(|t| t.name.into_owned()).collect();
    names.sort();
    for expected in [
        "add_tool",
        "counter",
        "echo",
        "exit",
        "progress",
        "remove_tool",
        "slow",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} missing from {names:?}"
        );
    }

    let params = CallToolRequestParams::new("echo")
        .with_arguments(json!({"text": "hello"}).as_object().cloned().unwrap());
    let result = tokio::time::timeout(WAIT, client.peer().call_tool(params))
        .await
        .unwrap()
        .unwrap();
    let result = serde_json::to_value(&result).unwrap();
    assert_eq!(result["content"][0]["text"], "hello", "{result}");
    let _ = client.cancel().await;
}

/// MCP hosts capture a server's stderr to a file: its logs must not carry
/// terminal colour codes there.
#[tokio::test]
async fn logs_carry_no_colour_codes_when_stderr_is_not_a_terminal() {
    use tokio::io::AsyncReadExt;

    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-test-server"));
    command.env("RUST_LOG", "debug");
    let (transport, stderr) = TokioChildProcess::builder(command)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn mcp-test-server");
    let mut stderr = stderr.expect("a piped stderr");
    let client = tokio::time::timeout(WAIT, ().serve(transport))
        .await
        .expect("initialized in time")
        .expect("initialized");
    tokio::time::timeout(WAIT, client.peer().list_all_tools())
        .await
        .unwrap()
        .unwrap();
    let _ = client.cancel().await;

    // The server exits once its stdin closes, which ends its stderr.
    let mut log = String::new();
    tokio::time::timeout(WAIT, stderr.read_to_string(&mut log))
        .await
        .expect("stderr ends in time")
        .unwrap();
    assert!(!log.is_empty(), "nothing was logged at debug");
    assert!(!log.contains('\x1b'), "colour codes in the log:\n{log:?}");
}
