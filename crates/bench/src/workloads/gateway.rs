//! Workload 8: an MCP `tools/call` through the gateway (client →
//! `switchboard mcp` → hub → `provide-mcp` → a stdio server) beside the same
//! client calling the same server directly over stdio; and the memory of
//! five clients sharing three hosted servers through the gateway against
//! five clients each starting their own three.
//!
//! The client is a lean MCP client over a child's stdio, the same for both
//! paths: it writes one request line and reads lines until the answer with
//! its id, reading only the `id` member (what an MCP host does at least).
//! Beside them, the same calls through the hub's own `/mcp` over
//! Streamable HTTP ([`HttpMcp`]: one POST per call on one kept
//! connection, answered as JSON).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use hdrhistogram::Histogram;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use switchboard_testkit::procfs;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::systems::hub::{HubLaunch, HubProcess};
use crate::systems::SETUP_TIMEOUT;

/// The MCP version the client asks for (the gateway and every SDK speak it).
const PROTOCOL_VERSION: &str = "2025-06-18";

/// How to start an MCP server over stdio.
#[derive(Debug, Clone)]
pub struct ServerCommand {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// What the report calls it.
    pub label: String,
}

/// An MCP client on a child's stdio (the server itself, or `switchboard
/// mcp`); the child is killed when this is dropped.
pub struct StdioMcp {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    line: String,
    next_id: u64,
}

#[derive(Deserialize)]
struct Answer<'a> {
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    #[serde(borrow)]
    error: Option<&'a RawValue>,
}

impl StdioMcp {
    /// Starts `program args…` with `env`, its stderr in `log`, and runs the
    /// MCP handshake.
    pub async fn start(
        program: &Path,
        args: &[OsString],
        env: &[(&str, &Path)],
        log: &Path,
    ) -> anyhow::Result<Self> {
        let log = std::fs::File::create(log)?;
        let mut command = Command::new(program);
        command
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .kill_on_drop(true);
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command
            .spawn()
            .with_context(|| format!("cannot start {}", program.display()))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            bail!("no stdio pipes to {}", program.display());
        };
        let mut client = StdioMcp {
            child,
            stdin,
            stdout: BufReader::new(stdout),
            line: String::new(),
            next_id: 0,
        };
        let params = json!({"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                            "clientInfo": {"name": "switchboard-bench", "version": "0"}});
        tokio::time::timeout(SETUP_TIMEOUT, client.request("initialize", &params))
            .await
            .context("initialize took too long")??;
        client
            .write(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string())
            .await?;
        Ok(client)
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    async fn write(&mut self, line: &str) -> anyhow::Result<()> {
        self.stdin.write_all(line.as_bytes()).await?;
        self.stdin.write_all(b"\n").await?;
        self.stdin.flush().await?;
        Ok(())
    }

    /// Sends a request and returns its answer's text (an error answer is
    /// an error).
    pub async fn request(&mut self, method: &str, params: &Value) -> anyhow::Result<String> {
        self.next_id += 1;
        let id = self.next_id;
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.write(&request.to_string()).await?;
        self.answer(id).await
    }

    /// Reads lines until the answer to `id` (skipping notifications and
    /// anything else the server writes).
    async fn answer(&mut self, id: u64) -> anyhow::Result<String> {
        let id = id.to_string();
        loop {
            self.line.clear();
            if self.stdout.read_line(&mut self.line).await? == 0 {
                bail!("the MCP server closed its stdout");
            }
            let Ok(answer) = serde_json::from_str::<Answer<'_>>(&self.line) else {
                continue;
            };
            if answer.id.map(RawValue::get) != Some(id.as_str()) {
                continue;
            }
            if let Some(error) = answer.error {
                bail!("the MCP server answered with an error: {}", error.get());
            }
            return Ok(std::mem::take(&mut self.line));
        }
    }

    /// Lists tools until `name` is there (the gateway lists the hub's
    /// providers in the background after its handshake).
    pub async fn wait_for_tool(&mut self, name: &str) -> anyhow::Result<()> {
        let deadline = Instant::now() + SETUP_TIMEOUT;
        let quoted = format!("\"{name}\"");
        loop {
            let listed = self.request("tools/list", &json!({})).await?;
            if listed.contains(&quoted) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!("{name} was not listed within {SETUP_TIMEOUT:?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// What the latency loop needs of an MCP client.
#[allow(
    async_fn_in_trait,
    reason = "the bench's own trait, awaited in place; no Send bound needed"
)]
pub trait McpRequests {
    /// Sends a request and returns its answer's text (an error answer is
    /// an error).
    async fn request(&mut self, method: &str, params: &Value) -> anyhow::Result<String>;
}

impl McpRequests for StdioMcp {
    async fn request(&mut self, method: &str, params: &Value) -> anyhow::Result<String> {
        StdioMcp::request(self, method, params).await
    }
}

/// An MCP client of the hub's `/mcp` over Streamable HTTP, in a session.
pub struct HttpMcp {
    address: std::net::SocketAddr,
    /// The kept connection (`None` until the first request, or after the
    /// hub closed it).
    stream: Option<tokio::net::TcpStream>,
    path: String,
    token: String,
    session: String,
    next_id: u64,
    buf: Vec<u8>,
}

impl HttpMcp {
    /// `initialize` (and `notifications/initialized`) at `mcp_url`
    /// (`http://127.0.0.1:PORT/mcp`) with the bearer `token`.
    pub async fn start(mcp_url: &str, token: &str) -> anyhow::Result<Self> {
        let rest = mcp_url
            .strip_prefix("http://")
            .with_context(|| format!("{mcp_url} is not an http:// URL"))?;
        let (address, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let mut client = HttpMcp {
            address: address.parse().context("mcp_url's address")?,
            stream: None,
            path: path.to_owned(),
            token: token.to_owned(),
            session: String::new(),
            next_id: 0,
            buf: Vec::with_capacity(8192),
        };
        let params = json!({"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                            "clientInfo": {"name": "switchboard-bench", "version": "0"}});
        let initialize =
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params});
        let head = tokio::time::timeout(SETUP_TIMEOUT, client.post(&initialize.to_string()))
            .await
            .context("initialize took too long")??;
        client.session = head
            .lines()
            .find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("mcp-session-id")
                    .then(|| value.trim().to_owned())
            })
            .context("initialize was answered without Mcp-Session-Id")?;
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        client.post(&initialized.to_string()).await?;
        Ok(client)
    }

    /// POSTs `body` on the kept connection (a new one if there is none),
    /// reads the answer's head and its `Content-Length` body into `buf`,
    /// and returns the head; the body is `buf` after it.
    async fn post(&mut self, body: &str) -> anyhow::Result<String> {
        use tokio::io::AsyncReadExt;
        let mut request = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\
             Accept: application/json\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n",
            self.path,
            self.address,
            self.token,
            body.len()
        );
        if !self.session.is_empty() {
            request.push_str(&format!("Mcp-Session-Id: {}\r\n", self.session));
        }
        request.push_str("\r\n");
        request.push_str(body);
        let mut stream = match self.stream.take() {
            Some(stream) => stream,
            None => {
                let stream = tokio::net::TcpStream::connect(self.address).await?;
                stream.set_nodelay(true)?;
                stream
            }
        };
        stream.write_all(request.as_bytes()).await?;
        self.buf.clear();
        let (end, length) = loop {
            if stream.read_buf(&mut self.buf).await? == 0 {
                bail!("/mcp closed the connection before its answer");
            }
            let Some(end) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                continue;
            };
            let head = String::from_utf8_lossy(&self.buf[..end]);
            let length = head
                .lines()
                .find_map(|line| {
                    let (name, value) = line.split_once(':')?;
                    if name.eq_ignore_ascii_case("content-length") {
                        value.trim().parse::<usize>().ok()
                    } else {
                        None
                    }
                })
                .context("an answer without Content-Length")?;
            break (end, length);
        };
        while self.buf.len() < end + 4 + length {
            if stream.read_buf(&mut self.buf).await? == 0 {
                bail!("/mcp closed the connection inside its answer");
            }
        }
        let head = String::from_utf8_lossy(&self.buf[..end]).into_owned();
        if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.1 202") {
            bail!("/mcp answered {}", head.lines().next().unwrap_or_default());
        }
        if !head.to_ascii_lowercase().contains("connection: close") {
            self.stream = Some(stream);
        }
        self.buf.drain(..end + 4);
        Ok(head)
    }

    pub async fn wait_for_tool(&mut self, name: &str) -> anyhow::Result<()> {
        let deadline = Instant::now() + SETUP_TIMEOUT;
        let quoted = format!("\"{name}\"");
        loop {
            if self
                .request("tools/list", &json!({}))
                .await?
                .contains(&quoted)
            {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!("{name} was not listed within {SETUP_TIMEOUT:?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl McpRequests for HttpMcp {
    async fn request(&mut self, method: &str, params: &Value) -> anyhow::Result<String> {
        self.next_id += 1;
        let request =
            json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params});
        self.post(&request.to_string()).await?;
        let answer: Answer<'_> =
            serde_json::from_slice(&self.buf).context("/mcp answered no JSON-RPC message")?;
        if let Some(error) = answer.error {
            bail!("/mcp answered with an error: {}", error.get());
        }
        Ok(String::from_utf8_lossy(&self.buf).into_owned())
    }
}

/// Sequential `tools/call`s of `tool` with `arguments` for `duration`,
/// unmeasured: a server that compiles its hot code as it runs (Node's V8)
/// stalls for milliseconds now and then until it has, for longer in time
/// the slower each call is, so a warm-up by count would favour the faster
/// path.
pub async fn warm_up(
    client: &mut impl McpRequests,
    tool: &str,
    arguments: &serde_json::Value,
    duration: Duration,
) -> anyhow::Result<()> {
    let params = json!({"name": tool, "arguments": arguments});
    let end = Instant::now() + duration;
    while Instant::now() < end {
        client.request("tools/call", &params).await?;
    }
    Ok(())
}

/// The latencies of sequential `tools/call`s of `tool` with `arguments`
/// for `duration` (after a warm-up), in nanoseconds.
pub async fn call_latencies(
    client: &mut impl McpRequests,
    tool: &str,
    arguments: &serde_json::Value,
    duration: Duration,
) -> anyhow::Result<Histogram<u64>> {
    let params = json!({"name": tool, "arguments": arguments});
    for _ in 0..200 {
        client.request("tools/call", &params).await?;
    }
    let mut latency = Histogram::new_with_bounds(1, 60_000_000_000, 3)?;
    let end = Instant::now() + duration;
    while Instant::now() < end {
        let began = Instant::now();
        client.request("tools/call", &params).await?;
        let took = u64::try_from(began.elapsed().as_nanos()).unwrap_or(u64::MAX);
        latency.record(took.max(1))?;
    }
    Ok(latency)
}

/// A hub with `servers` hosted on it by `provide-mcp`, one namespace each
/// (`s0`, `s1`, …); its processes are stopped on drop.
pub struct HostedServers {
    pub hub: HubProcess,
    providers: Vec<Child>,
}

impl HostedServers {
    pub async fn start(hub_bin: &Path, servers: &[ServerCommand]) -> anyhow::Result<Self> {
        let hub = HubProcess::start(HubLaunch {
            bin: hub_bin,
            cpu: None,
            // The HTTP port serves `/mcp` (the HTTP gateway's latency).
            ws: true,
            wrapper: Vec::new(),
            startup: Duration::from_secs(10),
            args: Vec::new(),
            config: "",
        })
        .await
        .context("starting the hub")?;
        let mut providers = Vec::new();
        for (n, server) in servers.iter().enumerate() {
            let log = std::fs::File::create(hub.dir().join(format!("provide-{n}.log")))?;
            let child = Command::new(hub_bin)
                .arg("provide-mcp")
                .arg("--dir")
                .arg(hub_dir(&hub))
                .arg("--namespace")
                .arg(format!("s{n}"))
                .arg("--")
                .arg(&server.program)
                .args(&server.args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .kill_on_drop(true)
                .spawn()
                .context("cannot start provide-mcp")?;
            providers.push(child);
        }
        Ok(HostedServers { hub, providers })
    }

    /// A `switchboard mcp` on this hub, initialized, once every one of
    /// `tools` is listed.
    pub async fn gateway(
        &self,
        hub_bin: &Path,
        name: &str,
        tools: &[String],
    ) -> anyhow::Result<StdioMcp> {
        let args = ["mcp".into(), "--dir".into(), hub_dir(&self.hub).into()];
        let log = self.hub.dir().join(format!("gateway-{name}.log"));
        let mut gateway = StdioMcp::start(hub_bin, &args, &[], &log).await?;
        for tool in tools {
            gateway.wait_for_tool(tool).await?;
        }
        Ok(gateway)
    }

    /// The PIDs of the hub, every `provide-mcp` and their servers.
    pub fn pids(&self) -> Vec<u32> {
        let mut pids = vec![self.hub.pid()];
        for provider in &self.providers {
            if let Some(pid) = provider.id() {
                pids.push(pid);
                pids.extend(procfs::descendants(pid));
            }
        }
        pids
    }
}

fn hub_dir(hub: &HubProcess) -> PathBuf {
    hub.dir().join("hub")
}

/// The summed resident memory of `pids`, in KiB (a PID gone is 0).
pub fn total_rss_kib(pids: &[u32]) -> u64 {
    pids.iter()
        .map(|&pid| procfs::rss_kib(pid).unwrap_or(0))
        .sum()
}
