//! One HTTP/1.1 exchange with the hub's WebSocket port (`/metrics`,
//! `/healthz`, refused upgrades), blocking and bounded by [`WAIT`].
//!
//! Blocking, so plain `#[test]`s can use it; an async test against an
//! in-process hub runs it on a blocking thread (`spawn_blocking`) so the
//! hub keeps serving.

use std::io::{Read, Write};
use std::net::TcpStream;

use crate::WAIT;

/// One response: its status, head and body.
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

/// `GET path` on `address` (`127.0.0.1:PORT`), with `Host: address` unless
/// `headers` names a Host.
pub fn get(address: &str, path: &str, headers: &[(&str, &str)]) -> HttpResponse {
    let mut request = format!("GET {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        request.push_str(&format!("Host: {address}\r\n"));
    }
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    exchange(address, &request)
}

/// Sends `request` (a whole HTTP request, head and body) to `address` and
/// reads the response until the hub closes the connection. For an upgrade
/// that succeeds, reads only the head.
pub fn exchange(address: &str, request: &str) -> HttpResponse {
    let mut stream = TcpStream::connect(address).expect("connect to the WebSocket port");
    stream.set_read_timeout(Some(WAIT)).expect("a read timeout");
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

/// `127.0.0.1:PORT` of a `ws://127.0.0.1:PORT/` URL.
pub fn address_of(ws_url: &str) -> String {
    ws_url
        .trim_start_matches("ws://")
        .trim_end_matches('/')
        .to_owned()
}
