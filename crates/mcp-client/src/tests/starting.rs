//! Starting: the first tools, and each way a start fails, worded for the
//! user.

use super::*;
use crate::StartError;

#[tokio::test]
async fn a_started_server_lists_its_tools() {
    let Started { connection, tools } = started().await;
    let names = names(&tools);
    for expected in ["echo", "slow", "progress", "add_tool", "exit"] {
        assert!(names.iter().any(|n| n == expected), "{expected}: {names:?}");
    }
    assert!(connection.pid().is_some());
    assert!(!connection.is_closed());
    connection.stop().await;
    assert!(connection.is_closed());
}

#[tokio::test]
async fn a_program_that_is_not_there_cannot_start() {
    let upstream = Upstream::stdio(
        "the MCP server `/nonexistent/mcp-server`",
        tokio::process::Command::new("/nonexistent/mcp-server"),
    );
    let error = start(upstream, &options(WAIT), Arc::new(()))
        .await
        .err()
        .expect("no such program");
    assert!(matches!(error, StartError::Spawn { .. }), "{error:?}");
    assert_eq!(
        error.to_string(),
        "cannot start the MCP server `/nonexistent/mcp-server`: No such file or directory (os error 2)"
    );
}

#[tokio::test]
async fn a_server_that_exits_at_start_is_reported_with_what_it_said() {
    let mut command = tokio::process::Command::new("/bin/sh");
    command.args([
        "-c",
        "echo 'no config here' >&2; echo 'giving up' >&2; exit 1",
    ]);
    let upstream = Upstream::stdio("MCP server \"down\" (/bin/sh)", command).capture_stderr();
    let error = within(
        "the failed start",
        start(upstream, &options(WAIT), Arc::new(())),
    )
    .await
    .err()
    .expect("it exits");
    let message = error.to_string();
    assert!(
        message.starts_with("MCP server \"down\" (/bin/sh) did not start: "),
        "{message}"
    );
    assert!(
        message.ends_with("; it said: no config here | giving up"),
        "{message}"
    );
}

#[tokio::test]
async fn a_server_that_never_answers_is_given_up_and_stopped() {
    let stopped = Arc::new(Mutex::new(Vec::new()));
    let hook = {
        let stopped = stopped.clone();
        Arc::new(move |pid: u32| stopped.lock().push(pid))
    };
    let mut command = tokio::process::Command::new("/bin/sleep");
    command.arg("600");
    let upstream = Upstream::stdio("MCP server \"mute\" (/bin/sleep)", command)
        .capture_stderr()
        .stopped_by(hook);
    let error = within(
        "the start to be given up",
        start(upstream, &options(Duration::from_millis(300)), Arc::new(())),
    )
    .await
    .err()
    .expect("it never answers");
    assert_eq!(
        error.to_string(),
        "MCP server \"mute\" (/bin/sleep) did not answer initialize within 300ms; given up"
    );
    assert_eq!(stopped.lock().len(), 1, "the stop hook ran once");
}

#[tokio::test]
async fn an_http_server_that_is_not_there_does_not_start() {
    // A port nothing listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let upstream = Upstream::http("MCP server \"web\"", format!("http://127.0.0.1:{port}/mcp"))
        .headers(vec![("X-Token".into(), "t0ken".into())]);
    let error = within(
        "the failed start",
        start(upstream, &options(WAIT), Arc::new(())),
    )
    .await
    .err()
    .expect("nothing listens");
    let message = error.to_string();
    assert!(
        message.starts_with("MCP server \"web\" did not start: "),
        "{message}"
    );
    assert!(!message.contains("t0ken"), "{message}");
}

#[tokio::test]
async fn an_http_server_that_hangs_is_given_up_within_the_bound() {
    // Accepts connections and reads, but never answers a request.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            open.push(stream);
        }
    });
    let upstream = Upstream::http("MCP server \"stuck\"", url);
    let error = within(
        "the start to be given up",
        start(upstream, &options(Duration::from_millis(300)), Arc::new(())),
    )
    .await
    .err()
    .expect("it never answers");
    assert_eq!(
        error.to_string(),
        "MCP server \"stuck\" did not answer initialize within 300ms; given up"
    );
    held.abort();
}
