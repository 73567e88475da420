//! Where the workspace's binaries are, from the tests of any crate.
//!
//! `CARGO_BIN_EXE_<name>` is set only for the tests of the binary's own
//! package, so tests elsewhere find a binary next to themselves: a test
//! runs from `target/<profile>/deps/`, binaries are in `target/<profile>/`
//! (also under `--release` and `--target`). `cargo test --workspace` builds
//! every package's binaries before it runs any test.

use std::path::{Path, PathBuf};

/// The `switchboard` binary: `$SWITCHBOARD_BIN` if set, else the one built
/// next to the running test.
pub fn switchboard_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("SWITCHBOARD_BIN") {
        return PathBuf::from(path);
    }
    workspace_binary("switchboard", "switchboard-cli")
}

/// Binary `name` of workspace package `package`, built next to the running
/// test; fails with the command that builds it if it is missing.
pub fn workspace_binary(name: &str, package: &str) -> PathBuf {
    let test_exe = std::env::current_exe().expect("the test's own path");
    let profile_dir = test_exe
        .parent()
        .and_then(Path::parent)
        .expect("the test runs from target/<profile>/deps");
    let binary = profile_dir.join(name);
    assert!(
        binary.exists(),
        "{} is not built: run the tests with `cargo test --workspace`, or `cargo build -p {package} --bins` first",
        binary.display()
    );
    binary
}
