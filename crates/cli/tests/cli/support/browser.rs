//! A real browser for the dashboard's tests: Debian's `chromium`, headless,
//! driven through the DevTools protocol (CDP) over its WebSocket, with
//! tokio-tungstenite. Only what the tests need: navigate, evaluate
//! JavaScript, wait for a condition, take a screenshot.
//!
//! Each browser has a fresh profile in a temporary directory and is killed
//! (by its PID) when dropped.

#![allow(dead_code)] // the screenshot and timing helpers serve ignored tests too

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine;
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use switchboard_testkit::WAIT;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// The flags every test browser runs with: headless, no sandbox (CI runs
/// as root), and nothing that reaches the network on its own.
const FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--remote-debugging-port=0",
    "--window-size=1440,1000",
    // A name for the hub that is not a loopback name (DNS rebinding).
    "--host-resolver-rules=MAP rebound.test 127.0.0.1",
];

/// Resolves to 127.0.0.1 in the test browser (see [`FLAGS`]).
pub const REBOUND_HOST: &str = "rebound.test";

/// The chromium process, killed (by its PID) when dropped, also when a
/// launch fails half-way.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub struct Browser {
    _child: Process,
    /// The browser's DevTools socket.
    page: WebSocketStream<MaybeTlsStream<TcpStream>>,
    next_id: u64,
    /// The page's CDP session (browser-level commands go without one).
    session: Option<String>,
    _profile: tempfile::TempDir,
}

/// `chromium` on PATH; a test that needs it fails saying how to get it.
fn chromium() -> PathBuf {
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        if let Some(path) = std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(name))
                .find(|candidate| candidate.is_file())
        }) {
            return path;
        }
    }
    panic!("no chromium on PATH: the dashboard's browser tests need it (apt-get install chromium; .ci/run installs it)");
}

impl Browser {
    /// Starts a headless chromium on `about:blank` and attaches to its page.
    pub async fn launch() -> Browser {
        let profile = tempfile::tempdir().expect("a profile directory");
        let log = std::fs::File::create(profile.path().join("chromium.log")).expect("a log file");
        let child = Command::new(chromium())
            .args(FLAGS)
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map(Process)
            .expect("start chromium");
        // Chromium writes its DevTools port and path into the profile once
        // it listens: `PORT\n/devtools/browser/ID`.
        let port_file = profile.path().join("DevToolsActivePort");
        let endpoint = switchboard_testkit::wait::poll(
            || {
                let text = std::fs::read_to_string(&port_file).ok()?;
                let mut lines = text.lines();
                let port: u16 = lines.next()?.trim().parse().ok()?;
                let path = lines.next()?.trim().to_owned();
                Some(format!("ws://127.0.0.1:{port}{path}"))
            },
            || {
                format!(
                    "chromium did not open its DevTools port: {}",
                    log_of(profile.path())
                )
            },
        );
        let (page, _) = tokio::time::timeout(WAIT, tokio_tungstenite::connect_async(endpoint))
            .await
            .expect("attach to the browser in time")
            .expect("attach to the browser");
        let mut browser = Browser {
            _child: child,
            page,
            next_id: 1,
            session: None,
            _profile: profile,
        };
        // The page chromium opened, attached in "flat" mode: its commands go
        // over this socket with its session id.
        let targets = browser.call("Target.getTargets", json!({})).await;
        let target = targets["targetInfos"]
            .as_array()
            .and_then(|list| list.iter().find(|t| t["type"] == "page"))
            .and_then(|page| page["targetId"].as_str())
            .unwrap_or_else(|| panic!("no page among {targets}"))
            .to_owned();
        let attached = browser
            .call(
                "Target.attachToTarget",
                json!({"targetId": target, "flatten": true}),
            )
            .await;
        browser.session = attached["sessionId"].as_str().map(str::to_owned);
        browser.call("Page.enable", json!({})).await;
        browser.call("Runtime.enable", json!({})).await;
        browser
    }

    /// One CDP command and its result (events meanwhile are skipped).
    pub async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = &self.session {
            message["sessionId"] = json!(session);
        }
        let answer = async {
            self.page
                .send(Message::text(message.to_string()))
                .await
                .expect("send a CDP command");
            loop {
                let frame = self.page.next().await.expect("the page is attached");
                let Ok(Message::Text(text)) = frame else {
                    continue;
                };
                let value: Value = serde_json::from_str(&text).expect("CDP sends JSON");
                if value["id"] == id {
                    return value;
                }
            }
        };
        let answer = tokio::time::timeout(WAIT, answer)
            .await
            .unwrap_or_else(|_| panic!("chromium did not answer {method} within {WAIT:?}"));
        if let Some(error) = answer.get("error") {
            panic!("{method} failed: {error}");
        }
        answer["result"].clone()
    }

    /// Opens `url` and waits until its document has loaded.
    pub async fn navigate(&mut self, url: &str) {
        let result = self.call("Page.navigate", json!({"url": url})).await;
        if let Some(error) = result.get("errorText") {
            panic!("cannot open {url}: {error}");
        }
        self.wait_for("the page to load", "document.readyState === 'complete'")
            .await;
    }

    /// The value of a JavaScript expression (awaited if it is a promise).
    pub async fn eval(&mut self, expression: &str) -> Value {
        let result = self
            .call(
                "Runtime.evaluate",
                json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
            )
            .await;
        if let Some(exception) = result.get("exceptionDetails") {
            panic!("{expression} threw: {exception}");
        }
        result["result"]["value"].clone()
    }

    /// Evaluates `expression` until it is truthy, for at most [`WAIT`];
    /// returns its value.
    pub async fn wait_for(&mut self, what: &str, expression: &str) -> Value {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let value = self.eval(expression).await;
            let truthy = !matches!(&value, Value::Null | Value::Bool(false))
                && value != json!(0)
                && value != json!("");
            if truthy {
                return value;
            }
            if tokio::time::Instant::now() >= deadline {
                let body = self
                    .eval("document.body ? document.body.innerText : ''")
                    .await;
                panic!(
                    "{what}: `{expression}` stayed {value} for {WAIT:?}; the page shows: {body}"
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A PNG of the viewport, `width`×`height` CSS pixels, written to `path`.
    pub async fn screenshot(&mut self, path: &Path, width: u32, height: u32) {
        self.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}),
        )
        .await;
        tokio::time::sleep(Duration::from_millis(300)).await; // charts follow the resize
        let shot = self
            .call("Page.captureScreenshot", json!({"format": "png"}))
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().expect("screenshot data"))
            .expect("base64");
        std::fs::write(path, png).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    }
}

fn log_of(profile: &Path) -> String {
    std::fs::read_to_string(profile.join("chromium.log")).unwrap_or_default()
}
