//! Shared setup for the process tests: the real `switchboard` binary run as
//! a child process on a fresh directory, and a small blocking line client
//! for its Unix socket. Every wait is bounded by [`WAIT`].

#![allow(dead_code)] // each test file uses a different part of this module

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub const WAIT: Duration = Duration::from_secs(10);

pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_switchboard")
}

/// A `switchboard serve` child process.
pub struct HubProcess {
    child: Child,
    pub dir: PathBuf,
    /// What `hub.json` said once this process had written it.
    pub info: Value,
    log: PathBuf,
}

impl HubProcess {
    /// Starts `switchboard serve --dir DIR --ws 127.0.0.1:0 [extra]` (no
    /// `--ws` when `extra` has `--no-ws`) and waits until `hub.json` names
    /// this process.
    pub fn start(dir: &Path, extra: &[&str]) -> HubProcess {
        let mut args = vec!["--dir", dir.to_str().expect("a UTF-8 path")];
        if !extra.contains(&"--no-ws") {
            args.extend(["--ws", "127.0.0.1:0"]);
        }
        args.extend(extra);
        Self::start_with(dir, &args, &[("RUST_LOG", "info")])
    }

    /// Starts `switchboard serve ARGS` with extra environment variables and
    /// waits until `DIR/hub.json` names this process.
    pub fn start_with(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> HubProcess {
        Self::start_configured(dir, args, env, |_| {})
    }

    /// Like [`HubProcess::start_with`], with a last say on the command (for
    /// example a `pre_exec` that sets the umask).
    pub fn start_configured(
        dir: &Path,
        args: &[&str],
        env: &[(&str, &str)],
        configure: impl FnOnce(&mut Command),
    ) -> HubProcess {
        // The log sits next to the hub directory, one file per process.
        static STARTED: AtomicUsize = AtomicUsize::new(0);
        let n = STARTED.fetch_add(1, Ordering::Relaxed);
        let log_path = dir.with_extension(format!("serve-{n}.log"));
        let stderr = File::create(&log_path).expect("create log file");
        let mut command = Command::new(binary());
        command
            .arg("serve")
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        configure(&mut command);
        let child = command.spawn().expect("spawn switchboard serve");
        let mut hub = HubProcess {
            child,
            dir: dir.to_owned(),
            info: Value::Null,
            log: log_path,
        };
        let pid = hub.pid();
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(info) = read_hub_json(dir).filter(|info| info["pid"] == pid) {
                hub.info = info;
                return hub;
            }
            if let Ok(Some(status)) = hub.child.try_wait() {
                panic!("switchboard serve exited with {status}:\n{}", hub.log());
            }
            assert!(
                Instant::now() < deadline,
                "hub.json did not name pid {pid} within {WAIT:?}:\n{}",
                hub.log()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn socket(&self) -> PathBuf {
        PathBuf::from(self.info["socket"].as_str().unwrap())
    }

    pub fn token(&self) -> String {
        self.info["token"].as_str().unwrap().to_owned()
    }

    pub fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        let rc = unsafe { libc::kill(self.pid() as libc::pid_t, signal) };
        assert_eq!(rc, 0, "kill({}, {signal})", self.pid());
    }

    /// Waits for the process to exit.
    pub fn wait_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "switchboard serve still running {WAIT:?} later:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// What the hub logged (stderr) so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the hub's log holds `needle`.
    pub fn wait_for_log(&self, needle: &str) {
        let deadline = Instant::now() + WAIT;
        while !self.log().contains(needle) {
            assert!(
                Instant::now() < deadline,
                "the log never said {needle:?}:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// A client initialized with the hub's own token.
    pub fn client(&self) -> LineClient {
        let mut client = LineClient::connect(&self.socket());
        client.initialize(&self.token());
        client
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

pub fn read_hub_json(dir: &Path) -> Option<Value> {
    let text = std::fs::read_to_string(dir.join("hub.json")).ok()?;
    serde_json::from_str(&text).ok()
}

/// Runs `switchboard ARGS` to completion (bounded by [`WAIT`]).
pub fn run(args: &[&str]) -> Output {
    let mut child = Command::new(binary())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn switchboard");
    let deadline = Instant::now() + WAIT;
    while child.try_wait().expect("try_wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("switchboard {args:?} did not finish within {WAIT:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().expect("collect output")
}

/// A blocking newline-delimited JSON-RPC client.
pub struct LineClient {
    writer: UnixStream,
    reader: BufReader<UnixStream>,
    next_id: u64,
}

impl LineClient {
    pub fn connect(socket: &Path) -> LineClient {
        let stream = UnixStream::connect(socket).expect("connect to the hub socket");
        stream.set_read_timeout(Some(WAIT)).unwrap();
        LineClient {
            reader: BufReader::new(stream.try_clone().unwrap()),
            writer: stream,
            next_id: 1,
        }
    }

    pub fn send(&mut self, message: &Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.writer.write_all(line.as_bytes()).expect("write");
    }

    /// The next message; fails after [`WAIT`] or at end of stream.
    pub fn recv(&mut self) -> Value {
        self.try_recv()
            .unwrap_or_else(|| panic!("the hub closed the connection"))
    }

    /// The next message, or `None` at end of stream.
    pub fn try_recv(&mut self) -> Option<Value> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) => None,
            Ok(_) => Some(serde_json::from_str(&line).expect("a JSON line")),
            Err(error) => panic!("no message within {WAIT:?}: {error}"),
        }
    }

    /// Sends a request; returns its id.
    pub fn send_request(&mut self, method: &str, params: Value) -> Value {
        let id = json!(self.next_id);
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// Sends a request and returns its response, skipping other messages.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params);
        loop {
            let message = self.recv();
            if message["id"] == id && message.get("method").is_none() {
                return message;
            }
        }
    }

    pub fn initialize(&mut self, token: &str) -> Value {
        let response = self.request("initialize", json!({"authToken": token}));
        assert!(response.get("result").is_some(), "initialize: {response}");
        response["result"].clone()
    }
}

/// One HTTP/1.1 response from the hub's WebSocket port.
#[derive(Debug)]
pub struct HttpResponse {
    pub status: u16,
    /// The status line and the headers, as sent.
    pub head: String,
    pub body: String,
}

impl HttpResponse {
    /// Header names, lower-cased.
    pub fn header_names(&self) -> Vec<String> {
        self.head
            .lines()
            .skip(1)
            .filter_map(|line| line.split_once(':'))
            .map(|(name, _)| name.trim().to_ascii_lowercase())
            .collect()
    }
}

impl HubProcess {
    /// `127.0.0.1:PORT` of the WebSocket (and metrics) listener.
    pub fn ws_address(&self) -> String {
        self.info["ws"]
            .as_str()
            .expect("the hub serves a WebSocket port")
            .trim_start_matches("ws://")
            .trim_end_matches('/')
            .to_owned()
    }

    /// `GET path` with `Host: <the listener's address>` unless `headers`
    /// names a Host.
    pub fn http_get(&self, path: &str, headers: &[(&str, &str)]) -> HttpResponse {
        let address = self.ws_address();
        let mut request = format!("GET {path} HTTP/1.1\r\nConnection: close\r\n");
        if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
            request.push_str(&format!("Host: {address}\r\n"));
        }
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("\r\n");
        http_exchange(&address, &request)
    }

    /// `GET /metrics` (Prometheus text).
    pub fn metrics(&self) -> String {
        let response = self.http_get("/metrics", &[]);
        assert_eq!(response.status, 200, "GET /metrics: {response:?}");
        response.body
    }

    /// Waits until the `/metrics` sample `sample` has `value`.
    pub fn wait_for_metric(&self, sample: &str, value: u64) {
        let deadline = Instant::now() + WAIT;
        loop {
            let text = self.metrics();
            if metric_value(&text, sample) == value {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{sample} never became {value} within {WAIT:?}:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The value of one sample in Prometheus text, e.g.
/// `switchboard_requests_failed_total{reason="disconnected"}`.
pub fn metric_value(text: &str, sample: &str) -> u64 {
    text.lines()
        .find_map(|line| line.strip_prefix(sample)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no sample {sample} in:\n{text}"))
        .parse()
        .unwrap_or_else(|_| panic!("{sample} is not an integer"))
}

/// Sends `request` (a whole HTTP request, head and body) to `address` and
/// reads the response until the hub closes the connection (bounded by
/// [`WAIT`]). For an upgrade that succeeds, reads only the head.
pub fn http_exchange(address: &str, request: &str) -> HttpResponse {
    use std::io::Read;
    let mut stream = std::net::TcpStream::connect(address).expect("connect to the WebSocket port");
    stream.set_read_timeout(Some(WAIT)).unwrap();
    stream
        .write_all(request.as_bytes())
        .expect("send the request");
    let mut response = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => response.extend_from_slice(&chunk[..n]),
            Err(error) => panic!("reading the response to {request:?}: {error}"),
        }
        // A 101 keeps the connection open: the head is all there is to read.
        if response.starts_with(b"HTTP/1.1 101") && response.windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
    }
    let text = String::from_utf8_lossy(&response).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {text:?}"));
    HttpResponse {
        status,
        head: head.to_owned(),
        body: body.to_owned(),
    }
}
