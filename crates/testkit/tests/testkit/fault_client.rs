//! `hub-fault-client` against a real hub (in this process): both roles.
//! These tests also make `cargo test --workspace` build the binary that
//! `crates/cli/tests/faults.rs` runs.

use std::process::Stdio;

use serde_json::Value;
use switchboard_testkit::{TestHub, WAIT};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

/// The JSON lines a child prints until it exits (bounded by [`WAIT`]).
async fn lines_until_exit(mut command: Command) -> (Vec<Value>, std::process::ExitStatus) {
    let mut child = command
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn");
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut lines = Vec::new();
    let read = async {
        while let Some(line) = stdout.next_line().await.unwrap() {
            lines.push(serde_json::from_str::<Value>(&line).expect("a JSON line"));
        }
        child.wait().await.unwrap()
    };
    let status = tokio::time::timeout(WAIT, read)
        .await
        .expect("the child exits in time");
    (lines, status)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fault_caller_prints_one_answer_per_request_and_the_owner_sees_each_cancel() {
    let hub = TestHub::start().await;
    let dir = hub.dir();

    let mut owner = Command::new(env!("CARGO_BIN_EXE_hub-fault-client"))
        .arg("--dir")
        .arg(dir)
        .args(["owner", "--hold-secs", "30"])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut owner_lines = BufReader::new(owner.stdout.take().unwrap()).lines();
    let mut next_owner_event = async || -> Value {
        let line = tokio::time::timeout(WAIT, owner_lines.next_line())
            .await
            .expect("an owner event in time")
            .unwrap()
            .expect("the owner is still running");
        serde_json::from_str(&line).unwrap()
    };
    let registered = next_owner_event().await;
    assert_eq!(registered["event"], "registered");
    let service = registered["serviceId"].as_str().unwrap().to_owned();

    // The hub times each request out after 200 ms: one -32051 per request,
    // and the owner is told to stop working on each.
    let mut caller = Command::new(env!("CARGO_BIN_EXE_hub-fault-client"));
    caller.arg("--dir").arg(dir).args([
        "caller",
        "--service",
        &service,
        "--requests",
        "5",
        "--tag",
        "t",
        "--timeout-ms",
        "200",
    ]);
    let (lines, status) = lines_until_exit(caller).await;
    assert!(status.success());
    let mut seqs: Vec<u64> = lines
        .iter()
        .filter(|l| l["event"] == "answer")
        .map(|l| {
            assert_eq!(l["error"]["code"], -32051, "{l}");
            l["seq"].as_u64().unwrap()
        })
        .collect();
    seqs.sort();
    assert_eq!(seqs, [0, 1, 2, 3, 4]);
    assert_eq!(lines.last().unwrap()["event"], "done");

    let mut requested = Vec::new();
    let mut cancelled = Vec::new();
    while cancelled.len() < 5 {
        let event = next_owner_event().await;
        let seq = event["seq"].as_u64().unwrap();
        match event["event"].as_str() {
            Some("request") => requested.push(seq),
            Some("cancelled") => cancelled.push(seq),
            _ => panic!("unexpected owner event {event}"),
        }
    }
    requested.sort();
    cancelled.sort();
    assert_eq!(requested, [0, 1, 2, 3, 4]);
    assert_eq!(cancelled, [0, 1, 2, 3, 4]);
    hub.stop().await;
    let _ = tokio::time::timeout(WAIT, owner.wait()).await;
}
