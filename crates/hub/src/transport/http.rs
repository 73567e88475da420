//! The little HTTP the WebSocket port speaks before an upgrade:
//! `GET /metrics`, `GET /healthz`, and refusals.

use std::io;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The most a request head may take.
const MAX_HEAD: usize = 16 * 1024;
/// How long a peer may take to send its request head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// A parsed request head. Header names are lower-cased.
#[derive(Debug)]
pub struct Head {
    pub method: String,
    pub path: String,
    headers: Vec<(String, String)>,
    /// Bytes read past the head (a client's first frame, if it was eager).
    pub leftover: Vec<u8>,
}

impl Head {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Whether a comma-separated header holds `token` (case-insensitive).
    pub fn header_has_token(&self, name: &str, token: &str) -> bool {
        self.header(name).is_some_and(|value| {
            value
                .split(',')
                .any(|part| part.trim().eq_ignore_ascii_case(token))
        })
    }
}

/// Reads and parses one request head. `Ok(None)`: the peer closed or sent
/// something that is not HTTP/1.x.
pub async fn read_head(stream: &mut TcpStream) -> io::Result<Option<Head>> {
    let mut buf = Vec::with_capacity(1024);
    loop {
        let mut chunk = [0u8; 2048];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 48];
        let mut request = httparse::Request::new(&mut headers);
        match request.parse(&buf) {
            Ok(httparse::Status::Complete(len)) => {
                let head = Head {
                    method: request.method.unwrap_or_default().to_owned(),
                    path: request.path.unwrap_or_default().to_owned(),
                    headers: request
                        .headers
                        .iter()
                        .map(|h| {
                            (
                                h.name.to_ascii_lowercase(),
                                String::from_utf8_lossy(h.value).trim().to_owned(),
                            )
                        })
                        .collect(),
                    leftover: buf[len..].to_vec(),
                };
                return Ok(Some(head));
            }
            Ok(httparse::Status::Partial) if buf.len() < MAX_HEAD => continue,
            _ => return Ok(None),
        }
    }
}

/// Writes a complete response and closes the connection.
pub async fn respond(
    stream: &mut TcpStream,
    status: u16,
    reason: &str,
    content_type: &str,
    extra_headers: &str,
    body: &[u8],
) {
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n{extra_headers}\r\n",
        body.len()
    );
    let _ = tokio::time::timeout(HEAD_TIMEOUT, async {
        let _ = stream.write_all(head.as_bytes()).await;
        let _ = stream.write_all(body).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

/// A plain-text response.
pub async fn text(stream: &mut TcpStream, status: u16, reason: &str, body: &str) {
    respond(
        stream,
        status,
        reason,
        "text/plain; charset=utf-8",
        "",
        body.as_bytes(),
    )
    .await
}

/// Whether a `Host` header names this machine's loopback (any port). Checked
/// on a loopback listener so a page on a rebound DNS name cannot reach it.
pub fn is_loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or_default()
    } else {
        host.rsplit_once(':').map_or(host, |(name, port)| {
            if port.bytes().all(|b| b.is_ascii_digit()) {
                name
            } else {
                host
            }
        })
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts() {
        for host in [
            "127.0.0.1:8080",
            "localhost",
            "LOCALHOST:1",
            "[::1]:9",
            "127.1.2.3",
        ] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in [
            "evil.example:8080",
            "10.0.0.1",
            "localhost.evil.example",
            "[::2]:1",
        ] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }
}
