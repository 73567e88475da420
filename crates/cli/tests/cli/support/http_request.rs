//! Reading one HTTP/1.1 request on a scripted server's socket (the model
//! servers the ACP and MCP host tests run on loopback).

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::WAIT;

/// The next request's body as JSON (waiting at most `WAIT`). A body that is
/// not JSON is answered 400 here; either way `None` means there is nothing
/// more to do on this connection.
pub async fn read_json_request(stream: &mut TcpStream) -> Option<Value> {
    let body = tokio::time::timeout(WAIT, read_request(stream))
        .await
        .ok()
        .flatten()?;
    match serde_json::from_slice(&body) {
        Ok(body) => Some(body),
        Err(_) => {
            let _ = stream
                .write_all(
                    b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                )
                .await;
            None
        }
    }
}

/// The body of the next request on `stream` (as long as its
/// `Content-Length`), or `None` if the peer closed or sent no request.
pub async fn read_request(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let read = stream.read(&mut chunk).await.ok()?;
        if read == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..read]);
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut request = httparse::Request::new(&mut headers);
        if let httparse::Status::Complete(head) = request.parse(&buffer).ok()? {
            let length: usize = request
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                .and_then(|h| std::str::from_utf8(h.value).ok()?.trim().parse().ok())
                .unwrap_or(0);
            while buffer.len() < head + length {
                let read = stream.read(&mut chunk).await.ok()?;
                if read == 0 {
                    return None;
                }
                buffer.extend_from_slice(&chunk[..read]);
            }
            return Some(buffer[head..head + length].to_vec());
        }
    }
}
