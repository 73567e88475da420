//! Calls: results, error answers, cancel on drop, timeout, progress routed
//! per call, `tools/list_changed`, the end of the connection.

use super::*;
use crate::CallError;

/// The error a call ends with, bounded.
async fn refused(connection: &Connection, call: ToolCall) -> CallError {
    let name = call.name.clone();
    match within(&format!("{name} to fail"), connection.call_tool(call)).await {
        Ok(result) => panic!("{name} answered {}", result.get()),
        Err(error) => error,
    }
}

#[tokio::test]
async fn a_call_answers_with_the_servers_result() {
    let Started { connection, .. } = started().await;
    assert_eq!(
        call(&connection, "echo", json!({"text": "hello"})).await,
        "hello"
    );
    let error = refused(
        &connection,
        ToolCall::new("echo", json!(["not", "an object"])),
    )
    .await;
    assert_eq!(
        error.to_string(),
        "MCP tools take an object of arguments, not [\"not\",\"an object\"]"
    );
    connection.stop().await;
}

#[tokio::test]
async fn an_error_answer_keeps_its_code_and_message() {
    let Started { connection, .. } = started().await;
    let error = refused(&connection, ToolCall::new("no_such_tool", no_arguments())).await;
    match error {
        CallError::Answered(error) => {
            assert_eq!(error.code, -32602);
            assert_eq!(error.message, "unknown tool \"no_such_tool\"");
        }
        other => panic!("expected an error answer, got {other:?}"),
    }
    connection.stop().await;
}

#[tokio::test]
async fn dropping_a_call_tells_the_server_to_stop() {
    let Started { connection, .. } = started().await;
    let temp = tempfile::tempdir().unwrap();
    let marker = temp.path().join("marker");
    let mut slow = ToolCall::new("slow", json!({"marker": marker, "seconds": 60}));
    slow.cancel_reason = "the test gave up";
    let pending = tokio::spawn({
        let connection = connection.clone();
        async move { connection.call_tool(slow).await }
    });
    switchboard_testkit::eventually("the call to start", || lines(&marker) == ["started"]).await;
    pending.abort();
    switchboard_testkit::eventually("the server to hear the cancel", || {
        lines(&marker) == ["started", "cancelled"]
    })
    .await;
    connection.stop().await;
}

/// A call written around rmcp (stdio) waits on the tap, not on rmcp: the
/// connection's stop must end it too.
#[tokio::test]
async fn a_call_in_flight_when_the_connection_stops_fails_at_once() {
    let Started { connection, .. } = started().await;
    let temp = tempfile::tempdir().unwrap();
    let marker = temp.path().join("marker");
    let slow = ToolCall::new("slow", json!({"marker": marker, "seconds": 60}));
    let pending = tokio::spawn({
        let connection = connection.clone();
        async move { connection.call_tool(slow).await }
    });
    switchboard_testkit::eventually("the call to start", || lines(&marker) == ["started"]).await;
    connection.stop().await;
    let error = within("the call to end", pending)
        .await
        .unwrap()
        .unwrap_err();
    assert!(matches!(error, CallError::Closed(_)), "{error:?}");
}

#[tokio::test]
async fn a_call_past_its_timeout_fails_and_the_server_is_told() {
    let Started { connection, .. } = started().await;
    let temp = tempfile::tempdir().unwrap();
    let marker = temp.path().join("marker");
    let mut slow = ToolCall::new("slow", json!({"marker": marker, "seconds": 60}));
    slow.timeout = Some(Duration::from_millis(300));
    let error = refused(&connection, slow).await;
    assert!(
        matches!(error, CallError::TimedOut(bound) if bound == Duration::from_millis(300)),
        "{error:?}"
    );
    assert_eq!(error.to_string(), "no answer within 300ms");
    switchboard_testkit::eventually("the server to hear the cancel", || {
        lines(&marker) == ["started", "cancelled"]
    })
    .await;
    connection.stop().await;
}

#[tokio::test]
async fn progress_goes_to_the_sink_of_its_own_call() {
    let Started { connection, .. } = started().await;
    let three = Arc::new(Collected::default());
    let two = Arc::new(Collected::default());
    let mut first = ToolCall::new("progress", json!({"steps": 3}));
    first.progress = Some(three.clone());
    let mut second = ToolCall::new("progress", json!({"steps": 2}));
    second.progress = Some(two.clone());
    let unwatched = ToolCall::new("progress", json!({"steps": 4}));
    let (a, b, c) = within("three progress calls", async {
        tokio::join!(
            connection.call_tool(first),
            connection.call_tool(second),
            connection.call_tool(unwatched),
        )
    })
    .await;
    for result in [a, b, c] {
        assert_eq!(text(&result.unwrap()), "done");
    }
    // Reports run on tasks of their own: they may land after the answer.
    switchboard_testkit::eventually("every report to land", || {
        three.0.lock().len() == 3 && two.0.lock().len() == 2
    })
    .await;
    assert_eq!(three.messages(), ["step 1", "step 2", "step 3"]);
    assert_eq!(two.messages(), ["step 1", "step 2"]);
    let totals: Vec<Option<f64>> = three.0.lock().iter().map(|update| update.total).collect();
    assert_eq!(totals, [Some(3.0); 3]);
    connection.stop().await;
}

/// A call's answer waits until the reports the server wrote before it
/// were handled; then its route goes at once (no task and no timer per
/// call), not a second later, and a later call routes as well.
#[tokio::test]
async fn a_call_whose_reports_settled_leaves_no_route_behind() {
    let Started { connection, .. } = started().await;
    for steps in [3, 2] {
        let collected = Arc::new(Collected::default());
        let mut call = ToolCall::new("progress", json!({ "steps": steps }));
        call.progress = Some(collected.clone());
        call.tag = Some(steps);
        let result = within("a progress call", connection.call_tool(call)).await;
        assert_eq!(text(&result.unwrap()), "done");
        assert_eq!(
            collected.0.lock().len(),
            steps as usize,
            "every report before the answer"
        );
        assert_eq!(
            connection.inner.routes.routed().await,
            0,
            "the route outlived its call"
        );
        let token = rmcp::model::ProgressToken(rmcp::model::NumberOrString::String(
            format!("sb-{}", 4 - steps).into(),
        ));
        assert_eq!(
            connection.inner.routes.tag_of(&token).await,
            Some(steps),
            "the ended call's tag is kept for what the server sent before its answer"
        );
    }
    connection.stop().await;
}

#[tokio::test]
async fn list_changed_is_signalled_once_for_a_burst_and_heard_by_the_handler() {
    let changes = Arc::new(Changes::default());
    let Started { connection, .. } = within(
        "the start",
        start(test_server(&[]), &options(WAIT), changes.clone()),
    )
    .await
    .unwrap();
    call(&connection, "add_tool", json!({"name": "first"})).await;
    call(&connection, "add_tool", json!({"name": "second"})).await;
    switchboard_testkit::eventually("both notifications", || changes.0.lock().len() == 2).await;
    assert_eq!(*changes.0.lock(), [ListKind::Tools, ListKind::Tools]);
    within("the signal", connection.tools_changed()).await;
    assert!(
        tokio::time::timeout(Duration::from_millis(300), connection.tools_changed())
            .await
            .is_err(),
        "a burst of two is one signal"
    );
    let tools = connection.list_tools(WAIT).await.unwrap();
    let names = names(&tools);
    assert!(names.iter().any(|n| n == "first") && names.iter().any(|n| n == "second"));
    connection.stop().await;
}

#[tokio::test]
async fn the_end_of_the_connection_is_seen_and_nothing_is_sent_after_it() {
    let Started { connection, .. } = started().await;
    let error = refused(&connection, ToolCall::new("exit", no_arguments())).await;
    assert!(
        matches!(error, CallError::Closed(_) | CallError::Lost(_)),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .starts_with("the MCP server stopped answering during the call: "),
        "{error}"
    );
    within("the end", connection.closed()).await;
    assert!(connection.is_closed());
    let error = refused(&connection, ToolCall::new("echo", json!({"text": "x"}))).await;
    assert!(matches!(error, CallError::NotSent), "{error:?}");
    // Stopping what already ended is quick and harmless.
    within("the stop", connection.stop()).await;
}

/// A server that stops reading its input (here: stopped with SIGSTOP): a
/// call that would take what waits for it past the input's bound is
/// refused at once as never sent, and the calls queued before it are
/// answered once the server reads again.
#[tokio::test]
async fn a_call_past_a_stalled_servers_input_bound_is_refused_unsent() {
    let Started { connection, .. } = started().await;
    let pid = connection
        .pid()
        .expect("a stdio server has a pid")
        .to_string();
    let signal = |name: &str| {
        let status = std::process::Command::new("kill")
            .args([name, &pid])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill {name} {pid}");
    };
    signal("-STOP");
    // 12 calls of 8 MiB: 96 MiB against a bound of 64 MiB queued.
    let eight_mib = "x".repeat(8 * 1024 * 1024);
    let calls: Vec<_> = (0..12)
        .map(|_| {
            let (connection, text) = (connection.clone(), eight_mib.clone());
            tokio::spawn(async move {
                connection
                    .call_tool(ToolCall::new("echo", json!({ "text": text })))
                    .await
            })
        })
        .collect();
    switchboard_testkit::eventually("a call to be refused", || {
        calls.iter().any(|call| call.is_finished())
    })
    .await;
    signal("-CONT");
    let (mut answered, mut refused) = (0, 0);
    for call in calls {
        match within("the call to end", call).await.unwrap() {
            Ok(result) => {
                assert!(text(&result) == eight_mib);
                answered += 1;
            }
            Err(CallError::Backlogged) => refused += 1,
            Err(other) => panic!("expected an answer or Backlogged, got {other:?}"),
        }
    }
    // What fits: 64 MiB queued plus the line being written.
    assert!((7..=9).contains(&answered), "{answered} answered");
    assert_eq!(answered + refused, 12);
    connection.stop().await;
}

/// An answer longer than the bound on one line ends its call at once with
/// an error that says so (it waited for its timeout before), and the
/// connection carries on.
#[tokio::test]
async fn an_answer_longer_than_the_line_bound_ends_its_call_with_an_error() {
    let Started { connection, .. } = started().await;
    let seventeen_mib = "x".repeat(17 * 1024 * 1024);
    let error = refused(
        &connection,
        ToolCall::new("echo", json!({ "text": seventeen_mib })),
    )
    .await;
    match error {
        CallError::Unexpected(reason) => assert!(reason.contains("longer than 16 MiB"), "{reason}"),
        other => panic!("expected the answer to be too long, got {other:?}"),
    }
    assert_eq!(
        call(&connection, "echo", json!({"text": "after"})).await,
        "after"
    );
    connection.stop().await;
}
