//! Supervision: restarts with a pause, none with `Restart::Never`, the
//! tools listed again on `tools/list_changed`, a bounded stop.

use super::*;
use crate::{Backoff, Event, Restart, Supervised, SupervisedStart};

const QUICK: Backoff = Backoff {
    first: Duration::from_millis(50),
    max: Duration::from_millis(400),
    reset_after: Duration::from_secs(30),
};

/// `mcp-test-server`, refusing to start while `refuse` exists.
async fn supervised(refuse: &Path, restart: Restart) -> SupervisedStart {
    let refuse = refuse.to_owned();
    within(
        "the first start",
        Supervised::start(
            move || test_server(&[("MCP_TEST_SERVER_REFUSE_START", &refuse)]),
            options(WAIT),
            Arc::new(()),
            restart,
        ),
    )
    .await
    .expect("the first start")
}

async fn next(events: &mut tokio::sync::mpsc::UnboundedReceiver<Event>) -> Option<Event> {
    within("the next event", events.recv()).await
}

#[tokio::test]
async fn a_server_that_exits_is_started_again() {
    let temp = tempfile::tempdir().unwrap();
    let SupervisedStart {
        server, mut events, ..
    } = supervised(&temp.path().join("refuse"), Restart::After(QUICK)).await;
    let first = server.connection().expect("up");
    let _ = first.call_tool(ToolCall::new("exit", no_arguments())).await;
    assert_eq!(next(&mut events).await, Some(Event::Ended));
    match next(&mut events).await {
        Some(Event::Restarted(tools)) => assert!(names(&tools).contains(&"echo".to_owned())),
        other => panic!("expected a restart, got {other:?}"),
    }
    let second = server.connection().expect("up again");
    assert_ne!(first.pid(), second.pid());
    assert_eq!(call(&second, "echo", json!({"text": "back"})).await, "back");
    server.stop().await;
    assert!(server.connection().is_none());
    assert_eq!(next(&mut events).await, None, "supervision ends with stop");
}

#[tokio::test]
async fn a_server_that_cannot_start_again_is_retried_until_it_can() {
    let temp = tempfile::tempdir().unwrap();
    let refuse = temp.path().join("refuse");
    let SupervisedStart {
        server, mut events, ..
    } = supervised(&refuse, Restart::After(QUICK)).await;
    std::fs::write(&refuse, "").unwrap();
    let connection = server.connection().expect("up");
    let _ = connection
        .call_tool(ToolCall::new("exit", no_arguments()))
        .await;
    assert_eq!(next(&mut events).await, Some(Event::Ended));
    // Several failed starts: 100, 200, 400, 400 ms apart.
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(server.connection().is_none(), "down while it refuses");
    std::fs::remove_file(&refuse).unwrap();
    assert!(matches!(next(&mut events).await, Some(Event::Restarted(_))));
    assert!(server.connection().is_some());
    server.stop().await;
}

#[tokio::test]
async fn with_restart_never_the_end_is_the_last_event() {
    let temp = tempfile::tempdir().unwrap();
    let SupervisedStart {
        server, mut events, ..
    } = supervised(&temp.path().join("refuse"), Restart::Never).await;
    let connection = server.connection().expect("up");
    let _ = connection
        .call_tool(ToolCall::new("exit", no_arguments()))
        .await;
    assert_eq!(next(&mut events).await, Some(Event::Ended));
    assert_eq!(next(&mut events).await, None);
    assert!(server.connection().is_none());
}

#[tokio::test]
async fn changed_tools_are_listed_again() {
    let temp = tempfile::tempdir().unwrap();
    let SupervisedStart {
        server, mut events, ..
    } = supervised(&temp.path().join("refuse"), Restart::Never).await;
    let connection = server.connection().expect("up");
    call(&connection, "add_tool", json!({"name": "later"})).await;
    match next(&mut events).await {
        Some(Event::ToolsChanged(tools)) => {
            assert!(names(&tools).contains(&"later".to_owned()), "{tools:?}")
        }
        other => panic!("expected the new tools, got {other:?}"),
    }
    within("the stop", server.stop()).await;
    assert!(connection.is_closed());
    assert_eq!(next(&mut events).await, None);
}
