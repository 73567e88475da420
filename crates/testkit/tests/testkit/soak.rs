//! A short `switchboard-soak` run against a real hub in this process. Alone
//! in its test binary: the soak compares the process's descriptors before
//! and after, which another test running alongside would disturb.

use std::process::Stdio;
use std::time::Duration;

use switchboard_hub::{Hub, HubOptions};
use tokio::process::Command;

const WAIT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_soak_passes_and_writes_one_sample_a_second() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("hub");
    let hub = Hub::start(HubOptions {
        dir: dir.clone(),
        ws: Some("127.0.0.1:0".parse().unwrap()),
        config: None,
    })
    .await
    .expect("the hub starts");
    let csv = temp.path().join("soak.csv");
    let mut soak = Command::new(env!("CARGO_BIN_EXE_switchboard-soak"));
    soak.arg("--dir")
        .arg(&dir)
        .args(["--duration", "4", "--clients", "12", "--rate", "300"])
        .arg("--csv")
        .arg(&csv)
        .stdout(Stdio::piped());
    let output = tokio::time::timeout(WAIT, soak.output())
        .await
        .expect("the soak ends in time")
        .unwrap();
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{report}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(report.contains("RESULT: PASS"), "{report}");
    for line in [
        "duplicate_answers: 0",
        "unanswered: 0",
        "misrouted_answers: 0",
    ] {
        assert!(report.contains(line), "{line} missing from\n{report}");
    }
    let samples = std::fs::read_to_string(&csv).unwrap();
    let mut rows = samples.lines();
    assert!(rows
        .next()
        .unwrap()
        .starts_with("t_s,phase,rss_kib,fds,in_flight"));
    let traffic = rows.filter(|row| row.contains(",traffic,")).count();
    assert!(traffic >= 3, "{samples}");
    hub.shutdown().await;
}
