//! What an MCP server is and how to reach it: a prepared child process on
//! stdio, a Streamable HTTP endpoint, or a server already running at the
//! other end of two byte streams.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite};

/// Stops a stdio server's process, given its pid, in place of closing its
/// stdin and waiting (the ACP front's job guard: a SIGTERM to it stops the
/// server and everything the server started).
pub type StopHook = Arc<dyn Fn(u32) + Send + Sync>;

/// One MCP server to start.
pub struct Upstream {
    /// How messages name it: `MCP server "files" (/usr/bin/srv)`, `the MCP
    /// server `srv --flag``. Every start error begins or ends with it.
    pub label: String,
    pub transport: Transport,
}

pub enum Transport {
    Stdio(Stdio),
    Http(Http),
    Streams(Streams),
}

/// A server that is a child process speaking MCP on its stdin and stdout.
pub struct Stdio {
    /// Program, arguments, environment and directory as the caller wants
    /// them (a wrapper such as a job guard included); stdin and stdout are
    /// set here.
    pub command: tokio::process::Command,
    pub stderr: Stderr,
    /// Called before the connection closes, on every stop and on a failed
    /// start; `None`: closing stdin is how it is stopped (then SIGTERM, then
    /// SIGKILL, as rmcp does).
    pub stop: Option<StopHook>,
}

/// Where a stdio server's stderr goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stderr {
    /// To this process's stderr, as it is.
    Inherit,
    /// Logged line by line (debug, target `switchboard_mcp_client::stderr`),
    /// its last KiB kept for the report of a failed start (`it said: …`).
    Capture,
}

/// A server already running at the other end of two byte streams, framed
/// as on stdio (one message per line): one in this process (the fuzz
/// targets run their scripted servers so, on virtual time), or one
/// reached over a socket. Served as a stdio server is (`tools/call` around
/// rmcp, the same tap); stopping it closes its input, the end a stdio
/// server is told to exit by: there is no process to signal or wait for.
pub struct Streams {
    /// What the server writes (a stdio server's stdout).
    pub output: Box<dyn AsyncRead + Send + Unpin>,
    /// What it reads (a stdio server's stdin).
    pub input: Box<dyn AsyncWrite + Send + Unpin>,
}

/// A server reached over Streamable HTTP.
pub struct Http {
    pub url: String,
    /// Sent with every request; a pair that is not a valid header is left
    /// out.
    pub headers: Vec<(String, String)>,
    /// Asked for a token before every request (`Authorization: Bearer`),
    /// so that one that expires mid-session is replaced (OAuth).
    pub bearer: Option<Arc<dyn BearerSource>>,
}

/// Where a remote server's bearer token comes from when it changes while
/// the connection lives: an OAuth access token, refreshed before it
/// expires.
pub trait BearerSource: Send + Sync {
    /// The token to send now. An error fails the request it was for, with
    /// the error's text as that request's JSON-RPC error.
    fn token(&self) -> Pin<Box<dyn Future<Output = Result<String, BearerError>> + Send + '_>>;

    /// The server refused `token` (401): the next [`BearerSource::token`]
    /// should not return it again (refresh it, or say login is needed).
    fn rejected(&self, token: &str);
}

/// Why no bearer token can be sent: said to the caller of the request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BearerError(pub String);

impl Upstream {
    pub fn stdio(label: impl Into<String>, command: tokio::process::Command) -> Self {
        Upstream {
            label: label.into(),
            transport: Transport::Stdio(Stdio {
                command,
                stderr: Stderr::Inherit,
                stop: None,
            }),
        }
    }

    /// A server that writes `output` and reads `input` (see [`Streams`]).
    pub fn streams(
        label: impl Into<String>,
        output: impl AsyncRead + Send + Unpin + 'static,
        input: impl AsyncWrite + Send + Unpin + 'static,
    ) -> Self {
        Upstream {
            label: label.into(),
            transport: Transport::Streams(Streams {
                output: Box::new(output),
                input: Box::new(input),
            }),
        }
    }

    pub fn http(label: impl Into<String>, url: impl Into<String>) -> Self {
        Upstream {
            label: label.into(),
            transport: Transport::Http(Http {
                url: url.into(),
                headers: Vec::new(),
                bearer: None,
            }),
        }
    }

    /// A stdio server's stderr captured (see [`Stderr::Capture`]); no effect
    /// on any other.
    pub fn capture_stderr(mut self) -> Self {
        if let Transport::Stdio(stdio) = &mut self.transport {
            stdio.stderr = Stderr::Capture;
        }
        self
    }

    /// A stdio server stopped by `stop` (see [`Stdio::stop`]); no effect on
    /// any other.
    pub fn stopped_by(mut self, stop: StopHook) -> Self {
        if let Transport::Stdio(stdio) = &mut self.transport {
            stdio.stop = Some(stop);
        }
        self
    }

    /// An HTTP server's headers; no effect on any other.
    pub fn headers(mut self, headers: Vec<(String, String)>) -> Self {
        if let Transport::Http(http) = &mut self.transport {
            http.headers = headers;
        }
        self
    }

    /// An HTTP server's changing bearer token (see [`BearerSource`]); no
    /// effect on a stdio server.
    pub fn bearer(mut self, bearer: Arc<dyn BearerSource>) -> Self {
        if let Transport::Http(http) = &mut self.transport {
            http.bearer = Some(bearer);
        }
        self
    }
}

/// Why a remote server's URL is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    /// The text itself is left out: it may hold a secret.
    #[error("the MCP server's URL is not a URL: {reason}")]
    NotAUrl { reason: String },
    #[error("{url:?}: an MCP server's URL begins with https:// (or http:// on this machine)")]
    Scheme { url: String },
    #[error(
        "{url} is not on this machine: use https:// (a plain http:// URL would send its requests, tokens included, unencrypted)"
    )]
    PlainHttpRemote { url: String },
}

/// Why a header for a remote server is refused: by name, never by value
/// (a value may be a secret).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error("{name:?} is not an HTTP header name")]
    Name { name: String },
    #[error("the value of the header {name:?} is not one HTTP can carry")]
    Value { name: String },
}

/// Checks a header by the HTTP client's own rules, so that none is left
/// out silently when a request is built.
pub fn check_header(name: &str, value: &str) -> Result<(), HeaderError> {
    reqwest::header::HeaderName::from_bytes(name.as_bytes()).map_err(|_| HeaderError::Name {
        name: name.to_owned(),
    })?;
    reqwest::header::HeaderValue::from_str(value).map_err(|_| HeaderError::Value {
        name: name.to_owned(),
    })?;
    Ok(())
}

/// Checks the URL of a server reached over Streamable HTTP: `https://`
/// anywhere, `http://` only to this machine (loopback), so that a header
/// or bearer token never crosses a network in the clear.
pub fn check_url(text: &str) -> Result<url::Url, UrlError> {
    let url = url::Url::parse(text).map_err(|error| UrlError::NotAUrl {
        reason: error.to_string(),
    })?;
    match url.scheme() {
        "https" => Ok(url),
        "http" if is_loopback(&url) => Ok(url),
        "http" => Err(UrlError::PlainHttpRemote {
            url: shown_url(&url),
        }),
        _ => Err(UrlError::Scheme {
            url: shown_url(&url),
        }),
    }
}

fn is_loopback(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// `url` as messages and labels show it: without user info, query or
/// fragment, where a secret may be.
pub fn shown_url(url: &url::Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.set_query(None);
    shown.set_fragment(None);
    shown.to_string()
}

impl fmt::Debug for Upstream {
    /// The label only: environment values and headers are where tokens go.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Upstream")
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn https_anywhere_plain_http_only_on_loopback() {
        assert!(check_url("https://mcp.example.com/mcp").is_ok());
        assert!(check_url("http://127.0.0.1:8080/mcp").is_ok());
        assert!(check_url("http://localhost/mcp").is_ok());
        assert!(check_url("http://[::1]:9/mcp").is_ok());
        assert!(matches!(
            check_url("http://mcp.example.com/mcp"),
            Err(UrlError::PlainHttpRemote { .. })
        ));
        assert!(matches!(
            check_url("http://10.0.0.1/mcp"),
            Err(UrlError::PlainHttpRemote { .. })
        ));
        assert!(matches!(
            check_url("ftp://localhost/x"),
            Err(UrlError::Scheme { .. })
        ));
        assert!(matches!(
            check_url("mcp.example.com"),
            Err(UrlError::NotAUrl { .. })
        ));
    }

    #[test]
    fn a_shown_url_leaves_out_credentials_and_query() {
        let url = check_url("https://user:secret@mcp.example.com/mcp?key=secret#x").unwrap();
        assert_eq!(shown_url(&url), "https://mcp.example.com/mcp");
        let error = check_url("http://u:secret@example.com/?t=secret").unwrap_err();
        assert!(!error.to_string().contains("secret"), "{error}");
    }
}
