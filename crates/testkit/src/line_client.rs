//! A blocking newline-delimited JSON-RPC client on the hub's Unix socket,
//! for tests that speak the wire protocol themselves. Reads are bounded by
//! [`WAIT`].

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;

use serde_json::{json, Value};

use crate::WAIT;

pub struct LineClient {
    writer: UnixStream,
    reader: BufReader<UnixStream>,
    next_id: u64,
}

impl LineClient {
    /// A connection that has not sent `initialize`.
    pub fn connect(socket: &Path) -> LineClient {
        let stream = UnixStream::connect(socket).expect("connect to the hub socket");
        stream.set_read_timeout(Some(WAIT)).expect("a read timeout");
        LineClient {
            reader: BufReader::new(stream.try_clone().expect("a second handle")),
            writer: stream,
            next_id: 1,
        }
    }

    pub fn send(&mut self, message: &Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.writer.write_all(line.as_bytes()).expect("write");
    }

    /// Writes `line` and a newline exactly as given (for byte-for-byte tests).
    pub fn send_raw(&mut self, line: &str) {
        self.writer
            .write_all(format!("{line}\n").as_bytes())
            .expect("write");
    }

    /// The next line exactly as the hub wrote it, without its newline.
    pub fn recv_raw(&mut self) -> String {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) => panic!("the hub closed the connection"),
            Ok(_) => line.trim_end_matches('\n').to_owned(),
            Err(error) => panic!("no message within {WAIT:?}: {error}"),
        }
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

    /// Sends `initialize` with `token`; returns the result.
    pub fn initialize(&mut self, token: &str) -> Value {
        let response = self.request("initialize", json!({"authToken": token}));
        assert!(response.get("result").is_some(), "initialize: {response}");
        response["result"].clone()
    }
}
