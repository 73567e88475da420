//! What the binary writes to stderr, as a new user first sees it: logs
//! carry no colour codes when stderr is not a terminal (MCP and ACP hosts
//! capture it to files).

use serde_json::json;

use crate::support::HubProcess;

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
