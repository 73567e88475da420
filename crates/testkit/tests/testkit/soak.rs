//! A short `switchboard-soak` run against a real hub in this process. Alone
//! in its test binary: the soak compares the process's descriptors before
//! and after, which another test running alongside would disturb.

use std::process::Stdio;
use std::time::Duration;

use switchboard_testkit::TestHub;
use tokio::process::Command;

/// The soak runs 4 s of traffic between idle phases and a connections
/// phase: longer than one event, so it has its own bound.
const SOAK_WAIT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_soak_passes_and_writes_one_sample_a_second() {
    let hub = TestHub::start().await;
    let csv = hub.path("soak.csv");
    let mut soak = Command::new(env!("CARGO_BIN_EXE_switchboard-soak"));
    soak.arg("--dir")
        .arg(hub.dir())
        .args(["--duration", "4", "--clients", "12", "--rate", "300"])
        .arg("--csv")
        .arg(&csv)
        .stdout(Stdio::piped());
    let output = tokio::time::timeout(SOAK_WAIT, soak.output())
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
    hub.stop().await;
}
