//! The real `switchboard serve` binary as a child process.
//!
//! Starting waits on the calling thread (at most [`WAIT`](crate::WAIT))
//! until `hub.json` names the new process; an async test holds one runtime
//! worker for that while, which nothing in the test waits on, as the hub is
//! another process.

use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::Value;
use switchboard_client::Client;

use crate::http::{self, HttpResponse};
use crate::wait::poll;
use crate::{clients, switchboard_binary, LineClient};

/// A `switchboard serve` child process; killed (SIGKILL) when dropped, its
/// log removed.
pub struct HubProcess {
    child: Child,
    dir: PathBuf,
    /// What `hub.json` said once this process had written it.
    pub info: Value,
    log: PathBuf,
    /// How it was started, for [`HubProcess::restart`].
    builder: HubProcessBuilder,
    /// The temporary directory holding `dir`, when the builder made it
    /// (shared with the process a restart starts).
    temp: Option<Arc<tempfile::TempDir>>,
}

/// How to start a [`HubProcess`]: `switchboard serve --dir DIR --ws
/// 127.0.0.1:0 ARGS…` with `RUST_LOG=info`, unless told otherwise.
#[derive(Clone)]
#[must_use]
pub struct HubProcessBuilder {
    dir: Option<PathBuf>,
    dir_from_env: bool,
    /// `--ws` (`None`: `--no-ws`).
    ws: Option<String>,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    configure: Option<Arc<Configure>>,
}

/// A caller's last say on the `switchboard serve` command.
type Configure = dyn Fn(&mut Command) + Send + Sync;

impl HubProcess {
    /// A hub process on a fresh temporary directory, with a WebSocket.
    pub fn start() -> HubProcess {
        HubProcess::builder().start()
    }

    pub fn builder() -> HubProcessBuilder {
        HubProcessBuilder {
            dir: None,
            dir_from_env: false,
            ws: Some("127.0.0.1:0".into()),
            args: Vec::new(),
            env: vec![("RUST_LOG".into(), "info".into())],
            configure: None,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The hub directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The hub directory as a command-line argument (`--dir`).
    pub fn dir_arg(&self) -> &str {
        self.dir.to_str().expect("a UTF-8 hub directory")
    }

    /// `name` beside the hub directory (marker files, configs).
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir
            .parent()
            .expect("the hub directory has a parent")
            .join(name)
    }

    pub fn socket(&self) -> PathBuf {
        PathBuf::from(
            self.info["socket"]
                .as_str()
                .expect("hub.json names a socket"),
        )
    }

    /// The `direct` principal's token.
    pub fn token(&self) -> String {
        self.info["token"]
            .as_str()
            .expect("hub.json holds a token")
            .to_owned()
    }

    /// An SDK client that finds the hub through `hub.json`.
    pub async fn client(&self, name: &str) -> Client {
        clients::connect_dir(&self.dir, name).await
    }

    /// A [`LineClient`] initialized with the hub's own token.
    pub fn line_client(&self) -> LineClient {
        let mut client = LineClient::connect(&self.socket());
        client.initialize(&self.token());
        client
    }

    pub fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        let rc = unsafe { libc::kill(self.pid() as libc::pid_t, signal) };
        assert_eq!(rc, 0, "kill({}, {signal})", self.pid());
    }

    /// SIGKILL, and reap: the hub cannot clean up, so `hub.json` and the
    /// socket stay behind.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        self.child.wait().expect("reap the hub");
    }

    /// Kills the hub (SIGKILL) and starts a new one the same way on the
    /// same directory.
    pub fn restart(&mut self) {
        self.kill();
        let builder = self.builder.clone().dir(self.dir.clone());
        let mut next = builder.spawn(self.temp.clone());
        std::mem::swap(self, &mut next);
    }

    /// Waits for the process to exit.
    pub fn wait_exit(&mut self) -> ExitStatus {
        let child = &mut self.child;
        let log = &self.log;
        poll(
            || child.try_wait().expect("try_wait"),
            || format!("switchboard serve still running:\n{}", read_log(log)),
        )
    }

    /// What the hub logged (stderr) so far.
    pub fn log(&self) -> String {
        read_log(&self.log)
    }

    /// Waits until the hub's log holds `needle`.
    pub fn wait_for_log(&self, needle: &str) {
        poll(
            || self.log().contains(needle).then_some(()),
            || format!("the log never said {needle:?}:\n{}", self.log()),
        )
    }

    /// `127.0.0.1:PORT` of the WebSocket (and metrics) listener.
    pub fn ws_address(&self) -> String {
        http::address_of(
            self.info["ws"]
                .as_str()
                .expect("the hub serves a WebSocket port"),
        )
    }

    /// `GET path` on the WebSocket port, with `Host: <its address>` unless
    /// `headers` names a Host.
    pub fn http_get(&self, path: &str, headers: &[(&str, &str)]) -> HttpResponse {
        http::get(&self.ws_address(), path, headers)
    }

    /// `GET /metrics` (Prometheus text).
    pub fn metrics(&self) -> String {
        let response = self.http_get("/metrics", &[]);
        assert_eq!(response.status, 200, "GET /metrics: {response:?}");
        response.body
    }

    /// Waits until the `/metrics` sample `sample` has `value`.
    pub fn wait_for_metric(&self, sample: &str, value: u64) {
        poll(
            || (crate::metric_value(&self.metrics(), sample) == value).then_some(()),
            || format!("{sample} never became {value}:\n{}", self.metrics()),
        )
    }

    /// Waits until the `/metrics` sample `sample` is at least `value`.
    pub fn wait_for_metric_at_least(&self, sample: &str, value: u64) {
        poll(
            || (crate::metric_value(&self.metrics(), sample) >= value).then_some(()),
            || format!("{sample} never reached {value}:\n{}", self.metrics()),
        )
    }
}

impl Drop for HubProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_file(&self.log);
    }
}

impl HubProcessBuilder {
    /// The hub directory (default: `hub` in a fresh temporary directory).
    pub fn dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.dir = Some(dir.into());
        self
    }

    /// Names the directory with `$SWITCHBOARD_DIR` instead of `--dir`.
    pub fn dir_from_env(mut self) -> Self {
        self.dir_from_env = true;
        self
    }

    /// `--no-ws`: the hub serves the Unix socket only.
    pub fn no_ws(mut self) -> Self {
        self.ws = None;
        self
    }

    /// `--ws ADDRESS` instead of `127.0.0.1:0`.
    pub fn ws_on(mut self, address: &str) -> Self {
        self.ws = Some(address.to_owned());
        self
    }

    /// `--config PATH`.
    pub fn config(self, path: &Path) -> Self {
        self.arg("--config").arg(path)
    }

    /// One more argument for `switchboard serve`.
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// An environment variable for the process (`RUST_LOG` replaces the
    /// default `info`).
    pub fn env(mut self, name: &str, value: impl Into<OsString>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }

    /// A last say on the command (for example a `pre_exec` that sets the
    /// umask); kept for [`HubProcess::restart`].
    pub fn configure(mut self, configure: impl Fn(&mut Command) + Send + Sync + 'static) -> Self {
        self.configure = Some(Arc::new(configure));
        self
    }

    /// Starts the process and waits until `hub.json` names it.
    pub fn start(self) -> HubProcess {
        let temp = match self.dir {
            Some(_) => None,
            None => Some(Arc::new(
                tempfile::tempdir().expect("a temporary directory"),
            )),
        };
        self.spawn(temp)
    }

    fn spawn(self, temp: Option<Arc<tempfile::TempDir>>) -> HubProcess {
        let dir = match (&self.dir, &temp) {
            (Some(dir), _) => dir.clone(),
            (None, Some(temp)) => temp.path().join("hub"),
            (None, None) => unreachable!("start makes a directory when none is given"),
        };
        // The log sits next to the hub directory, one file per process.
        static STARTED: AtomicUsize = AtomicUsize::new(0);
        let n = STARTED.fetch_add(1, Ordering::Relaxed);
        let log = dir.with_extension(format!("serve-{n}.log"));
        let stderr = File::create(&log).expect("create the hub's log file");

        let mut command = Command::new(switchboard_binary());
        command.arg("serve");
        if self.dir_from_env {
            command.env("SWITCHBOARD_DIR", &dir);
        } else {
            command.arg("--dir").arg(&dir);
        }
        match &self.ws {
            Some(address) => command.args(["--ws", address]),
            None => command.arg("--no-ws"),
        };
        command
            .args(&self.args)
            .envs(self.env.iter().map(|(name, value)| (name, value)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        if let Some(configure) = &self.configure {
            configure(&mut command);
        }
        let child = command.spawn().expect("spawn switchboard serve");
        let mut hub = HubProcess {
            child,
            dir,
            info: Value::Null,
            log,
            builder: self,
            temp,
        };
        hub.wait_for_hub_json();
        hub
    }
}

impl HubProcess {
    fn wait_for_hub_json(&mut self) {
        let pid = self.pid();
        let (dir, child, log) = (&self.dir, &mut self.child, &self.log);
        self.info = poll(
            || {
                if let Ok(Some(status)) = child.try_wait() {
                    panic!("switchboard serve exited with {status}:\n{}", read_log(log));
                }
                read_hub_json(dir).filter(|info| info["pid"] == pid)
            },
            || format!("hub.json did not name pid {pid}:\n{}", read_log(log)),
        );
    }
}

fn read_log(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// `dir/hub.json`, if it exists and is JSON.
pub fn read_hub_json(dir: &Path) -> Option<Value> {
    let text = std::fs::read_to_string(dir.join("hub.json")).ok()?;
    serde_json::from_str(&text).ok()
}
