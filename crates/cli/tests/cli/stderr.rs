//! What the binary writes to stderr, as a new user first sees it: an error
//! names its cause once, and logs carry no colour codes when stderr is not
//! a terminal (MCP and ACP hosts capture it to files).

use serde_json::json;

use crate::support::mcp::test_server_bin;
use crate::support::{empty_dir, path_str, run, HubProcess};

/// Runs a command that must fail; its stderr, checked to be one line.
fn one_error_line(args: &[&str]) -> String {
    let failed = run(args);
    assert_eq!(failed.code(), 1, "{failed:#?}");
    let lines: Vec<&str> = failed.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line of stderr: {failed:#?}");
    assert!(lines[0].starts_with("switchboard: "), "{failed:#?}");
    failed.stderr
}

/// `provide-mcp -- SERVER` on a directory where no hub runs.
fn provide_mcp_without_a_hub(dir: &str, server: &str) -> String {
    one_error_line(&[
        "provide-mcp",
        "--namespace",
        "x",
        "--dir",
        dir,
        "--",
        server,
    ])
}

#[test]
fn provide_mcp_without_a_hub_names_the_missing_hub_json_once() {
    let (_temp, dir) = empty_dir();
    let stderr = provide_mcp_without_a_hub(&dir, path_str(&test_server_bin()));
    let cause = format!("cannot read {dir}/hub.json (No such file or directory (os error 2))");
    assert_eq!(stderr.matches(&cause).count(), 1, "{stderr}");
    assert_eq!(stderr.matches("No such file").count(), 1, "{stderr}");
    assert_eq!(stderr.matches("cannot find the hub").count(), 1, "{stderr}");
}

#[test]
fn provide_mcp_with_a_server_that_cannot_start_names_the_os_error_once() {
    let (_temp, dir) = empty_dir();
    let stderr = provide_mcp_without_a_hub(&dir, "/nonexistent/mcp-server");
    assert!(
        stderr.contains("cannot start the MCP server `/nonexistent/mcp-server`"),
        "{stderr}"
    );
    assert_eq!(stderr.matches("No such file").count(), 1, "{stderr}");
}

#[test]
fn serve_on_a_directory_it_cannot_create_names_the_os_error_once() {
    let (temp, _) = empty_dir();
    // A regular file where the hub directory's parent should be.
    let blocker = format!("{}/file", path_str(temp.path()));
    std::fs::write(&blocker, "").unwrap();
    let stderr = one_error_line(&["serve", "--no-ws", "--dir", &format!("{blocker}/hub")]);
    assert!(stderr.contains("cannot create hub directory"), "{stderr}");
    assert_eq!(stderr.matches("Not a directory").count(), 1, "{stderr}");
}

/// Every subcommand logs through the same subscriber (`main.rs`); the hub
/// logs the most.
#[test]
fn the_hub_log_carries_no_colour_codes_when_stderr_is_a_file() {
    let mut hub = HubProcess::builder().env("RUST_LOG", "debug").start();
    hub.line_client().request("ping", json!(null));
    hub.signal(libc::SIGTERM);
    assert_eq!(hub.wait_exit().code(), Some(0), "{}", hub.log());
    let log = hub.log();
    assert!(log.contains("hub ready"), "{log}");
    assert!(log.contains("DEBUG"), "nothing at debug:\n{log}");
    assert!(!log.contains('\x1b'), "colour codes in the log:\n{log:?}");
}
