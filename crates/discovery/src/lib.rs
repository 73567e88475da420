//! Where a hub is: the hub directory rule and `hub.json`, read the same
//! way by the hub (which writes the file), the SDK and the CLI.
//!
//! `<dir>` is `--dir`, else `$SWITCHBOARD_DIR`, else
//! `$XDG_RUNTIME_DIR/switchboard`, else `/tmp/switchboard-<uid>`; a hub
//! writes `<dir>/hub.json` (its socket, WebSocket URL and `direct` token)
//! once it is ready. The file's shape is the wire type
//! [`HubInfo`] of `switchboard-protocol`.
//!
//! **Invariant:** this is the only code that applies the directory rule or
//! reads `hub.json`; it writes nothing (the hub's `dir.rs` does).

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

pub use switchboard_protocol::discovery::{FederationInfo, HubInfo, INFO_FILE, SOCKET_FILE};

/// Why `hub.json` could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    #[error("cannot read {} ({error}); is `switchboard serve` running on {}?", path.display(), dir.display())]
    Unreadable {
        path: PathBuf,
        dir: PathBuf,
        error: io::Error,
    },
    #[error("{} is malformed: {error}", path.display())]
    Malformed {
        path: PathBuf,
        error: serde_json::Error,
    },
}

/// The hub directory `explicit` (`--dir`) names, by the rule, made absolute
/// against the working directory; creates nothing.
pub fn hub_dir(explicit: Option<&Path>) -> PathBuf {
    let dir = hub_dir_in(explicit, |name| std::env::var_os(name), current_uid());
    std::path::absolute(&dir).unwrap_or(dir)
}

/// The rule itself, over values the caller supplies.
pub fn hub_dir_in(
    explicit: Option<&Path>,
    env: impl Fn(&str) -> Option<OsString>,
    uid: u32,
) -> PathBuf {
    if let Some(dir) = explicit {
        return dir.to_owned();
    }
    let set = |name: &str| env(name).filter(|value| !value.is_empty());
    if let Some(dir) = set("SWITCHBOARD_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(runtime) = set("XDG_RUNTIME_DIR") {
        return Path::new(&runtime).join("switchboard");
    }
    PathBuf::from(format!("/tmp/switchboard-{uid}"))
}

/// The hub directory a *client* looks in: [`hub_dir`], except when neither
/// `SWITCHBOARD_DIR` nor `XDG_RUNTIME_DIR` is set and no `--dir` given,
/// no hub is in the rule's directory, but one is in the login session's
/// runtime directory (`/run/user/<uid>/switchboard`): then that one.
///
/// Why: MCP hosts start their servers with a few variables only (Codex and
/// hosts built on MCP's TypeScript SDK pass `HOME`, `PATH`, `USER` and the
/// like, not `XDG_RUNTIME_DIR`), so `switchboard mcp` under them would look
/// in `/tmp/switchboard-<uid>` while the user's hub, started in the session,
/// is in `/run/user/<uid>/switchboard`. The hub itself keeps the rule.
pub fn client_hub_dir(explicit: Option<&Path>) -> PathBuf {
    let dir = client_hub_dir_in(
        explicit,
        |name| std::env::var_os(name),
        current_uid(),
        |dir| dir.join(INFO_FILE).exists(),
    );
    std::path::absolute(&dir).unwrap_or(dir)
}

/// [`client_hub_dir`] over values the caller supplies (`has_hub`: whether
/// a directory holds a `hub.json`).
pub fn client_hub_dir_in(
    explicit: Option<&Path>,
    env: impl Fn(&str) -> Option<OsString>,
    uid: u32,
    has_hub: impl Fn(&Path) -> bool,
) -> PathBuf {
    let set = |name: &str| env(name).is_some_and(|value| !value.is_empty());
    let by_rule = hub_dir_in(explicit, &env, uid);
    if explicit.is_some() || set("SWITCHBOARD_DIR") || set("XDG_RUNTIME_DIR") || has_hub(&by_rule) {
        return by_rule;
    }
    let session = PathBuf::from(format!("/run/user/{uid}/switchboard"));
    if has_hub(&session) {
        session
    } else {
        by_rule
    }
}

/// Reads `<dir>/hub.json`.
pub fn read_info(dir: &Path) -> Result<HubInfo, DiscoveryError> {
    let path = dir.join(INFO_FILE);
    let text = std::fs::read_to_string(&path).map_err(|error| DiscoveryError::Unreadable {
        path: path.clone(),
        dir: dir.to_owned(),
        error,
    })?;
    serde_json::from_str(&text).map_err(|error| DiscoveryError::Malformed { path, error })
}

/// This process's user id.
pub fn current_uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directory_rule_in_order() {
        let none = |_: &str| None;
        assert_eq!(
            hub_dir_in(None, none, 7),
            PathBuf::from("/tmp/switchboard-7")
        );
        let xdg = |name: &str| (name == "XDG_RUNTIME_DIR").then(|| OsString::from("/run/user/7"));
        assert_eq!(
            hub_dir_in(None, xdg, 7),
            PathBuf::from("/run/user/7/switchboard")
        );
        let both = |name: &str| match name {
            "XDG_RUNTIME_DIR" => Some(OsString::from("/run/user/7")),
            "SWITCHBOARD_DIR" => Some(OsString::from("/srv/sb")),
            _ => None,
        };
        assert_eq!(hub_dir_in(None, both, 7), PathBuf::from("/srv/sb"));
        assert_eq!(
            hub_dir_in(Some(Path::new("/x")), both, 7),
            PathBuf::from("/x")
        );
        let empty = |_: &str| Some(OsString::new());
        assert_eq!(
            hub_dir_in(None, empty, 7),
            PathBuf::from("/tmp/switchboard-7")
        );
    }

    #[test]
    fn a_client_without_the_variables_finds_the_sessions_hub() {
        let none = |_: &str| None;
        let session = Path::new("/run/user/7/switchboard");
        let in_session = |dir: &Path| dir == session;
        assert_eq!(
            client_hub_dir_in(None, none, 7, in_session),
            session.to_owned()
        );
        // A hub in the rule's own directory comes first.
        let both = |dir: &Path| dir == session || dir == Path::new("/tmp/switchboard-7");
        assert_eq!(
            client_hub_dir_in(None, none, 7, both),
            PathBuf::from("/tmp/switchboard-7")
        );
        // No hub anywhere: the rule (where a hub started later will be).
        assert_eq!(
            client_hub_dir_in(None, none, 7, |_| false),
            PathBuf::from("/tmp/switchboard-7")
        );
        // A variable or --dir set: the rule, whatever the session holds.
        let xdg = |name: &str| (name == "XDG_RUNTIME_DIR").then(|| OsString::from("/x/run"));
        assert_eq!(
            client_hub_dir_in(None, xdg, 7, in_session),
            PathBuf::from("/x/run/switchboard")
        );
        let sb = |name: &str| (name == "SWITCHBOARD_DIR").then(|| OsString::from("/srv/sb"));
        assert_eq!(
            client_hub_dir_in(None, sb, 7, in_session),
            PathBuf::from("/srv/sb")
        );
        assert_eq!(
            client_hub_dir_in(Some(Path::new("/d")), none, 7, in_session),
            PathBuf::from("/d")
        );
    }

    #[test]
    fn a_missing_or_malformed_file_says_where_and_what() {
        let dir = tempfile::tempdir().unwrap();
        let error = read_info(dir.path()).unwrap_err().to_string();
        assert!(error.contains("hub.json"), "{error}");
        assert!(error.contains("is `switchboard serve` running"), "{error}");
        std::fs::write(dir.path().join(INFO_FILE), "{").unwrap();
        let error = read_info(dir.path()).unwrap_err().to_string();
        assert!(error.contains("is malformed"), "{error}");
    }
}
