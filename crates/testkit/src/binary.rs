//! Where the workspace's binaries are, from the tests of any crate.
//!
//! `CARGO_BIN_EXE_<name>` is set only for the tests of the binary's own
//! package, so tests elsewhere find a binary next to themselves: a test
//! runs from `target/<profile>/deps/`, binaries are in `target/<profile>/`
//! (also under `--release` and `--target`). `cargo test --workspace` builds
//! every package's binaries before it runs any test.

use std::path::{Path, PathBuf};

/// The `switchboard` binary built next to the running test, else
/// `$SWITCHBOARD_BIN` (for running one crate's tests without building the
/// cli; never in place of a binary this build made).
pub fn switchboard_binary() -> PathBuf {
    let built = sibling_of_test("switchboard");
    match std::env::var_os("SWITCHBOARD_BIN") {
        Some(path) if !built.exists() => PathBuf::from(path),
        _ => workspace_binary("switchboard", "switchboard-cli"),
    }
}

/// Binary `name` of workspace package `package`, built next to the running
/// test; fails with the command that builds it if it is missing.
pub fn workspace_binary(name: &str, package: &str) -> PathBuf {
    let binary = sibling_of_test(name);
    assert!(
        binary.exists(),
        "{} is not built: run the tests with `cargo test --workspace`, or `cargo build -p {package} --bins` first",
        binary.display()
    );
    binary
}

/// `target/<profile>/<name>`, for a test in `target/<profile>/deps/`.
fn sibling_of_test(name: &str) -> PathBuf {
    let test_exe = std::env::current_exe().expect("the test's own path");
    test_exe
        .parent()
        .and_then(Path::parent)
        .expect("the test runs from target/<profile>/deps")
        .join(name)
}
