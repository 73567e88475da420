//! Shared setup for the fault-injection tests: `hub-fault-client` processes
//! (an owner that never answers, or callers) whose JSON-line events are
//! collected as they arrive, so a test can act on them and SIGKILL either
//! side. Every wait is bounded by `WAIT`.

#![allow(dead_code)]

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use switchboard_testkit::wait::poll;
use switchboard_testkit::workspace_binary;

/// A `hub-fault-client` process and the events it printed so far.
pub struct FaultClient {
    label: String,
    child: Child,
    events: Arc<Mutex<Vec<Value>>>,
    /// Ends when the process's stdout closes.
    reader: Option<std::thread::JoinHandle<()>>,
}

impl FaultClient {
    /// An owner: registers one service, never answers.
    pub fn owner(dir: &Path) -> FaultClient {
        Self::spawn("owner", dir, &["owner", "--hold-secs", "120"])
    }

    /// A caller: `requests` requests to `service` at once, params tagged `tag`.
    pub fn caller(dir: &Path, service: &str, requests: u64, tag: &str) -> FaultClient {
        let requests = requests.to_string();
        let args = [
            "caller",
            "--service",
            service,
            "--requests",
            &requests,
            "--tag",
            tag,
        ];
        Self::spawn(tag, dir, &args)
    }

    fn spawn(label: &str, dir: &Path, args: &[&str]) -> FaultClient {
        let mut child = Command::new(workspace_binary("hub-fault-client", "switchboard-testkit"))
            .arg("--dir")
            .arg(dir)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn hub-fault-client");
        let stdout = child.stdout.take().expect("piped stdout");
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = events.clone();
        // Reads until the process's stdout closes (it exits or is killed).
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let event: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("hub-fault-client printed {line:?}: {e}"));
                sink.lock().unwrap().push(event);
            }
        });
        FaultClient {
            label: label.to_owned(),
            child,
            events,
            reader: Some(reader),
        }
    }

    pub fn events(&self) -> Vec<Value> {
        self.events.lock().unwrap().clone()
    }

    /// Events named `name` (`"request"`, `"cancelled"`, `"answer"`, ...).
    pub fn events_named(&self, name: &str) -> Vec<Value> {
        self.events()
            .into_iter()
            .filter(|event| event["event"] == name)
            .collect()
    }

    /// Waits until `ready` holds on the events so far.
    pub fn wait_for(&self, what: &str, ready: impl Fn(&[Value]) -> bool) {
        poll(
            || ready(&self.events.lock().unwrap()).then_some(()),
            || {
                format!(
                    "{}: {what} did not happen; events: {:?}",
                    self.label,
                    self.events()
                )
            },
        )
    }

    /// Waits until `count` events named `name` were printed.
    pub fn wait_for_count(&self, name: &str, count: usize) {
        self.wait_for(&format!("{count} {name} events"), |events| {
            events.iter().filter(|e| e["event"] == name).count() >= count
        });
    }

    /// The owner's service id (waits for its `registered` event).
    pub fn registered_service(&self) -> String {
        self.wait_for_count("registered", 1);
        self.events_named("registered")[0]["serviceId"]
            .as_str()
            .expect("serviceId")
            .to_owned()
    }

    pub fn kill9(&mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reap");
    }

    /// Waits for the process to exit and for its last event to be read.
    pub fn wait_exit(&mut self) -> ExitStatus {
        let child = &mut self.child;
        let (label, events) = (&self.label, &self.events);
        let status = poll(
            || child.try_wait().expect("try_wait"),
            || {
                format!(
                    "{label}: still running; events: {:?}",
                    events.lock().unwrap()
                )
            },
        );
        // Every line the process wrote is read once its stdout closed.
        if let Some(reader) = self.reader.take() {
            reader.join().expect("the event reader panicked");
        }
        status
    }
}

impl Drop for FaultClient {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
