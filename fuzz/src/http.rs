//! A request head and an answer, as `httparse` reads them, and the HTTP
//! port's rules: no CORS, no token in an answer, the Origin/Host guard.

use switchboard_hub::fuzzing::http::Listener;

/// `input` with each placeholder replaced by its value.
pub fn substitute(input: &[u8], pairs: &[(&str, &str)]) -> Vec<u8> {
    let mut out = input.to_vec();
    for (placeholder, value) in pairs {
        let mut next = Vec::with_capacity(out.len());
        let mut rest = &out[..];
        while let Some(at) = memchr::memmem::find(rest, placeholder.as_bytes()) {
            next.extend_from_slice(&rest[..at]);
            next.extend_from_slice(value.as_bytes());
            rest = &rest[at + placeholder.len()..];
        }
        next.extend_from_slice(rest);
        out = next;
    }
    out
}

/// A complete request head.
pub struct Head {
    pub method: String,
    pub target: String,
    /// The target's path and query as the server reads them (the `http`
    /// crate's `Uri`, which hyper uses): an absolute or odd target such as
    /// `://host/ui/login` is routed by its path, `/ui/login`. A target it
    /// cannot read (the server answers 400) is split at its first `?`.
    path: String,
    query: Option<String>,
    /// Names lower-cased, in order; values as the bytes were, if UTF-8.
    pub headers: Vec<(String, Option<String>)>,
}

impl Head {
    /// The head at the start of `request`, if `httparse` reads a complete one.
    pub fn parse(request: &[u8]) -> Option<Head> {
        let mut headers = [httparse::EMPTY_HEADER; 128];
        let mut parsed = httparse::Request::new(&mut headers);
        match parsed.parse(request) {
            Ok(httparse::Status::Complete(_)) => {}
            _ => return None,
        }
        let target = parsed.path?.to_owned();
        let (path, query) = match target.parse::<http::Uri>() {
            Ok(uri) => (uri.path().to_owned(), uri.query().map(str::to_owned)),
            Err(_) => match target.split_once('?') {
                Some((path, query)) => (path.to_owned(), Some(query.to_owned())),
                None => (target.clone(), None),
            },
        };
        Some(Head {
            method: parsed.method?.to_owned(),
            target,
            path,
            query,
            headers: parsed
                .headers
                .iter()
                .map(|h| {
                    (
                        h.name.to_ascii_lowercase(),
                        std::str::from_utf8(h.value).ok().map(str::to_owned),
                    )
                })
                .collect(),
        })
    }

    /// The first value of header `name` (lower case) as text a server can
    /// read: visible ASCII only (else `Some("")`, as the hub reads it).
    pub fn header(&self, name: &str) -> Option<&str> {
        let (_, value) = self.headers.iter().find(|(n, _)| n == name)?;
        Some(
            value
                .as_deref()
                .filter(|v| v.bytes().all(|b| b == b'\t' || (0x20..0x7f).contains(&b)))
                .unwrap_or(""),
        )
    }

    /// Whether any value of header `name` lists `token` (comma-separated,
    /// case-insensitive).
    pub fn has_token(&self, name: &str, token: &str) -> bool {
        self.headers.iter().any(|(n, v)| {
            n == name
                && v.as_deref().is_some_and(|v| {
                    v.split(',')
                        .any(|part| part.trim().eq_ignore_ascii_case(token))
                })
        })
    }

    /// The target's path, as the server routes it.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The target's query (after the first `?`).
    pub fn query(&self) -> Option<&str> {
        self.query.as_deref()
    }
}

/// An answer: its status and headers if `httparse` reads a head, and all
/// its bytes.
pub struct Answer<'a> {
    pub status: Option<u16>,
    pub headers: Vec<(String, String)>,
    /// The head and body of the HTTP answer (a WebSocket's frames after a
    /// 101 are not part of it).
    pub http: &'a [u8],
    pub body: &'a [u8],
}

impl<'a> Answer<'a> {
    pub fn parse(bytes: &'a [u8]) -> Answer<'a> {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut parsed = httparse::Response::new(&mut headers);
        let Ok(httparse::Status::Complete(end)) = parsed.parse(bytes) else {
            return Answer {
                status: None,
                headers: Vec::new(),
                http: bytes,
                body: &[],
            };
        };
        let status = parsed.code;
        let headers = parsed
            .headers
            .iter()
            .map(|h| {
                (
                    h.name.to_ascii_lowercase(),
                    String::from_utf8_lossy(h.value).into_owned(),
                )
            })
            .collect();
        let http = if status == Some(101) {
            &bytes[..end]
        } else {
            bytes
        };
        Answer {
            status,
            headers,
            http,
            body: &http[end.min(http.len())..],
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// No answer grants a web page anything (no CORS).
    pub fn assert_no_cors(&self) {
        for (name, _) in &self.headers {
            assert!(
                !name.starts_with("access-control-"),
                "an answer carries {name}"
            );
        }
    }

    /// No secret appears in the HTTP answer.
    pub fn assert_hides(&self, secrets: &[&str]) {
        for secret in secrets {
            assert!(
                memchr::memmem::find(self.http, secret.as_bytes()).is_none(),
                "an answer holds a secret"
            );
        }
    }
}

/// Whether `host` (a Host header) names loopback: `localhost`, an IPv4
/// address in 127.0.0.0/8 or `[::1]`, with or without a port.
pub fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((name, _)) => name,
            None => rest,
        },
        None => match host.rsplit_once(':') {
            Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
            _ => host,
        },
    };
    if name.eq_ignore_ascii_case("localhost") {
        return true;
    }
    match name.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(v4)) => v4.octets()[0] == 127,
        Ok(std::net::IpAddr::V6(v6)) => v6 == std::net::Ipv6Addr::LOCALHOST,
        Err(_) => false,
    }
}

/// The statuses the port's router answers with when it serves a request
/// (anything else is hyper refusing the head, or the guard's 403).
fn served(status: u16) -> bool {
    status < 400 || matches!(status, 401 | 404 | 405 | 426 | 503)
}

/// The guard's rule: on a loopback listener a Host that is not loopback
/// (or none) is refused, and so is any Origin not in `allowed`, whatever
/// the path.
pub fn assert_guarded(head: &Head, status: u16, listener: Listener, allowed: &[&str]) {
    if listener == Listener::Loopback {
        let host = head.header("host").unwrap_or("");
        if !is_loopback_host(host) {
            assert!(
                !served(status),
                "served ({status}) with Host {host:?} on loopback"
            );
        }
    }
    if let Some(origin) = head.header("origin") {
        if !allowed.contains(&origin) {
            assert!(!served(status), "served ({status}) with Origin {origin:?}");
        }
    }
}
