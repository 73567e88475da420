//! A WebSocket connection that goes idle after a large message gets a fresh
//! frame reader (`transport/ws.rs`, `IDLE_RELEASE`): nothing the client
//! sends before, during or after that is lost, reordered or taken for
//! something else. The client here writes raw bytes, so a frame can be cut
//! anywhere and left half-sent across the idle time.

use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::*;

/// Longer than the hub's idle release (1 s; it fires within twice that).
const IDLE: Duration = Duration::from_millis(2500);

/// A WebSocket client on a bare TCP socket: the handshake and the frames
/// are written byte by byte.
struct RawWs {
    stream: TcpStream,
    read: Vec<u8>,
}

impl RawWs {
    async fn connect(hub: &TestHub) -> RawWs {
        let address = hub
            .ws
            .trim_start_matches("ws://")
            .trim_end_matches('/')
            .to_owned();
        let mut stream = TcpStream::connect(&address).await.unwrap();
        let head = format!(
            "GET / HTTP/1.1\r\nHost: {address}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\
             Authorization: Bearer {}\r\n\r\n",
            hub.token
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut ws = RawWs {
            stream,
            read: Vec::new(),
        };
        let end = loop {
            if let Some(end) = ws.read.windows(4).position(|w| w == b"\r\n\r\n") {
                break end + 4;
            }
            ws.fill().await;
        };
        let head = String::from_utf8_lossy(&ws.read[..end]).into_owned();
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        ws.read.drain(..end);
        ws
    }

    /// Connected and through `initialize`.
    async fn initialized(hub: &TestHub) -> RawWs {
        let mut ws = RawWs::connect(hub).await;
        let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"clientInfo": {"name": "raw"}}});
        ws.write(&masked(1, initialize.to_string().as_bytes()))
            .await;
        assert!(ws.message().await["result"].is_object());
        ws
    }

    async fn fill(&mut self) {
        let mut buf = [0u8; 64 * 1024];
        let n = tokio::time::timeout(WAIT, self.stream.read(&mut buf))
            .await
            .expect("the hub answers")
            .unwrap();
        assert_ne!(n, 0, "the hub closed the connection");
        self.read.extend_from_slice(&buf[..n]);
    }

    async fn write(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.unwrap();
    }

    /// The next frame from the hub: opcode and payload.
    async fn frame(&mut self) -> (u8, Vec<u8>) {
        loop {
            if let Some((opcode, payload, used)) = parse(&self.read) {
                self.read.drain(..used);
                return (opcode, payload);
            }
            self.fill().await;
        }
    }

    /// The next text frame from the hub, as JSON.
    async fn message(&mut self) -> Value {
        let (opcode, payload) = self.frame().await;
        assert_eq!(opcode, 1, "a text frame");
        serde_json::from_slice(&payload).unwrap()
    }
}

/// A client's frame: final, masked (RFC 6455 §5.3).
fn masked(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut frame = vec![0x80 | opcode];
    match payload.len() {
        n @ 0..=125 => frame.push(0x80 | n as u8),
        n @ 126..=0xffff => {
            frame.push(0x80 | 126);
            frame.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            frame.push(0x80 | 127);
            frame.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    let mask = [0x37, 0xfa, 0x21, 0x3d];
    frame.extend_from_slice(&mask);
    frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    frame
}

/// A server frame at the start of `bytes`: opcode, payload, bytes used.
fn parse(bytes: &[u8]) -> Option<(u8, Vec<u8>, usize)> {
    let (&first, rest) = bytes.split_first()?;
    let (&second, rest) = rest.split_first()?;
    assert_eq!(second & 0x80, 0, "a server frame is not masked");
    let (length, header) = match second & 0x7f {
        126 => (
            u16::from_be_bytes(rest.get(..2)?.try_into().ok()?) as usize,
            4,
        ),
        127 => (
            u64::from_be_bytes(rest.get(..8)?.try_into().ok()?) as usize,
            10,
        ),
        n => (usize::from(n), 2),
    };
    let payload = bytes.get(header..header + length)?;
    Some((first & 0x0f, payload.to_vec(), header + length))
}

fn notification(service: &str, text: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({"jsonrpc": "2.0", "method": "clientService/notify",
        "params": {"serviceId": service, "method": "m", "params": {"text": text}}}))
    .unwrap()
}

/// The next notification the owner gets; its text.
async fn delivered(owner: &mut RawClient) -> String {
    let message = owner
        .receive(is_method("clientService/notification"), WAIT)
        .await;
    message["params"]["params"]["text"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn a_websocket_idle_after_a_large_message_loses_nothing_when_its_reader_is_renewed() {
    let hub = TestHub::start().await;
    let mut owner = hub.client("owner").await;
    let service = owner.register(json!({})).await;
    let mut ws = RawWs::initialized(&hub).await;

    // One 64 KiB message grows the reader's buffer past its first 8 KiB.
    let large = "x".repeat(64 * 1024);
    ws.write(&masked(1, &notification(&service, &large))).await;
    assert_eq!(delivered(&mut owner).await, large);

    // Idle: the reader is renewed. Then a ping, a frame cut in three writes,
    // a request: all as before.
    tokio::time::sleep(IDLE).await;
    ws.write(&masked(9, b"are you there")).await;
    assert_eq!(ws.frame().await, (10, b"are you there".to_vec()));
    let cut = masked(1, &notification(&service, "cut"));
    for piece in [&cut[..1], &cut[1..3], &cut[3..]] {
        ws.write(piece).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(delivered(&mut owner).await, "cut");
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"});
    ws.write(&masked(1, ping.to_string().as_bytes())).await;
    assert_eq!(ws.message().await["id"], 2);

    // Half a large frame left waiting across the idle time is not dropped:
    // the reader is not renewed while part of a frame is buffered.
    let half_sent = "y".repeat(40 * 1024);
    let frame = masked(1, &notification(&service, &half_sent));
    let (first, second) = frame.split_at(frame.len() / 2);
    ws.write(first).await;
    tokio::time::sleep(IDLE).await;
    ws.write(second).await;
    assert_eq!(delivered(&mut owner).await, half_sent);
    // And only a header's first byte, across the idle time.
    ws.write(&masked(1, &notification(&service, &large))).await;
    assert_eq!(delivered(&mut owner).await, large);
    tokio::time::sleep(IDLE).await;
    let frame = masked(1, &notification(&service, "after a byte"));
    ws.write(&frame[..1]).await;
    tokio::time::sleep(IDLE).await;
    ws.write(&frame[1..]).await;
    assert_eq!(delivered(&mut owner).await, "after a byte");

    // In order, nothing else: a burst after one more idle time.
    tokio::time::sleep(IDLE).await;
    let mut burst = Vec::new();
    for n in 0..100 {
        burst.extend(masked(1, &notification(&service, &format!("{n}"))));
    }
    ws.write(&burst).await;
    for n in 0..100 {
        assert_eq!(delivered(&mut owner).await, format!("{n}"));
    }
    owner.expect_silence(Duration::from_millis(200)).await;
}

#[tokio::test]
async fn a_websocket_closed_while_idle_without_a_reader_leaves_the_hub() {
    let hub = TestHub::start().await;
    let ws = RawWs::initialized(&hub).await;
    let connections = hub.metric("switchboard_connections");
    assert!(connections >= 1, "{}", hub.metrics());

    // Idle long enough that the connection dropped its reader and waits for
    // a first byte with none; then the peer goes away.
    tokio::time::sleep(IDLE).await;
    drop(ws);
    hub.eventually("the idle connection closed", |hub| {
        hub.metric("switchboard_connections") == connections - 1
    })
    .await;
    assert_hub_routes(&hub).await;
}
