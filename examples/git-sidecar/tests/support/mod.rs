//! Shared setup for the sidecar tests: a real Git repository made with the
//! git CLI and `git-sidecar` as a child process, on a `switchboard serve`
//! process (`switchboard_testkit::HubProcess`) with an SDK client in
//! the test. Every wait is bounded by [`WAIT`].

#![allow(dead_code)] // each test uses a different part of this module

use std::path::PathBuf;
use std::process::Stdio;

use serde_json::Value;
use switchboard_client::{CatalogEvent, Client, Selector};
pub use switchboard_testkit::{switchboard_binary, HubProcess, WAIT};
use tokio::process::{Child, Command};

pub fn sidecar_binary() -> &'static str {
    env!("CARGO_BIN_EXE_git-sidecar")
}

/// A `git-sidecar` child process and the id of the service it registered.
pub struct Sidecar {
    child: Child,
    pub service_id: String,
    log: PathBuf,
}

impl Sidecar {
    /// Starts `git-sidecar --dir HUB --label LABEL EXTRA…` and waits until
    /// its service is in the catalog of `client`.
    pub async fn start(hub: &HubProcess, client: &Client, label: &str, extra: &[&str]) -> Sidecar {
        let log = hub.path(&format!("{label}.log"));
        let child = Command::new(sidecar_binary())
            .args(["--dir", hub.dir_arg(), "--label", label])
            .args(extra)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .kill_on_drop(true)
            .spawn()
            .expect("spawn git-sidecar");
        let log_text = || std::fs::read_to_string(&log).unwrap_or_default();
        let service_id = wait_for_service(client, label).await.unwrap_or_else(|| {
            panic!(
                "git-sidecar {label} did not register within {WAIT:?}:\n{}",
                log_text()
            )
        });
        // The service can be listed before the sidecar has read the answer
        // to its registration; once it answers a request, it has.
        let stats = client
            .request::<Value>(&service_id, "getStats", &serde_json::json!({}))
            .await;
        assert!(stats.is_ok(), "getStats: {stats:?}\n{}", log_text());
        Sidecar {
            child,
            service_id,
            log,
        }
    }

    /// What the sidecar logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// The id of the `git-object-reader` service labelled `label`, once listed
/// (`None` if it is not within [`WAIT`]).
pub async fn wait_for_service(client: &Client, label: &str) -> Option<String> {
    let mut catalog = client.catalog().await.expect("subscribe");
    let selector =
        Selector::parse(&format!("protocol=git-object-reader,label={label}")).expect("selector");
    tokio::time::timeout(WAIT, async {
        if let Some(found) = catalog.select(&selector).into_iter().next() {
            return found.service_id;
        }
        loop {
            match catalog.next_event().await.expect("catalog open") {
                CatalogEvent::Added(service) if service.matches(&selector) => {
                    return service.service_id
                }
                _ => {}
            }
        }
    })
    .await
    .ok()
}

/// A repository made with the git CLI, isolated from the user's config.
pub struct GitRepo {
    pub path: PathBuf,
    /// The temporary directory holding the repository, when this owns it.
    _temp: Option<tempfile::TempDir>,
}

impl GitRepo {
    /// `git init` of a directory named `name`, branch `main`.
    pub fn init(name: &str) -> GitRepo {
        let temp = tempfile::tempdir().expect("temp dir");
        let path = temp.path().join(name);
        std::fs::create_dir(&path).expect("create repo dir");
        let repo = GitRepo {
            path,
            _temp: Some(temp),
        };
        repo.git(&["init", "-q", "-b", "main"]);
        repo
    }

    /// A repository (or worktree) that already exists and that another
    /// `GitRepo` cleans up.
    pub fn at(path: PathBuf) -> GitRepo {
        GitRepo { path, _temp: None }
    }

    pub fn path_str(&self) -> &str {
        self.path.to_str().expect("utf-8 temp path")
    }

    /// Runs git in the repository; returns stdout as bytes.
    pub fn git_bytes(&self, args: &[&str]) -> Vec<u8> {
        self.git_with_input(args, b"")
    }

    /// Runs git with `input` on its stdin; returns stdout as bytes.
    pub fn git_with_input(&self, args: &[&str], input: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut child = std::process::Command::new("git")
            .args(args)
            .current_dir(&self.path)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            // Objects must stay loose (tests delete them on purpose).
            .env("GIT_CONFIG_COUNT", "1")
            .env("GIT_CONFIG_KEY_0", "gc.auto")
            .env("GIT_CONFIG_VALUE_0", "0")
            .env("GIT_AUTHOR_NAME", "Test")
            .env("GIT_AUTHOR_EMAIL", "test@example.com")
            .env("GIT_COMMITTER_NAME", "Test")
            .env("GIT_COMMITTER_EMAIL", "test@example.com")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run git");
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(input).expect("write git's stdin");
        drop(stdin);
        let output = child.wait_with_output().expect("git output");
        assert!(
            output.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        output.stdout
    }

    /// Runs git; returns stdout as text without the final newline.
    pub fn git(&self, args: &[&str]) -> String {
        let text = String::from_utf8(self.git_bytes(args)).expect("utf-8 git output");
        text.trim_end_matches('\n').to_owned()
    }

    /// Writes `content` to `file`, commits it, returns the commit id.
    pub fn commit_file(&self, file: &str, content: &[u8], message: &str) -> String {
        std::fs::write(self.path.join(file), content).expect("write file");
        self.git(&["add", file]);
        self.git(&["commit", "-q", "-m", message]);
        self.git(&["rev-parse", "HEAD"])
    }

    /// The id `git hash-object -w` gives `content` (stored loose).
    pub fn write_blob(&self, content: &[u8]) -> String {
        let id = self.git_with_input(&["hash-object", "-w", "--stdin"], content);
        String::from_utf8(id).expect("hex id").trim_end().to_owned()
    }

    /// The loose object file of `oid`.
    pub fn loose_object(&self, oid: &str) -> PathBuf {
        self.path
            .join(".git/objects")
            .join(&oid[..2])
            .join(&oid[2..])
    }
}
