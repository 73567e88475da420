//! The HTTP port (the one `hub.json` names as `ws`): `GET /` upgrades to a
//! WebSocket connection (`ws.rs`), `GET /metrics` and `GET /healthz` answer
//! directly. HTTP itself is hyper's, one request per socket (every answer
//! but an upgrade, and those of an endpoint add-on's `keep_alive_paths`,
//! says `Connection: close`; a kept connection waits at most
//! [`HEAD_TIMEOUT`] for its next request); routing is an axum `Router`,
//! so further pages mount beside these routes.
//!
//! Bounded before any work: the accept loop takes a connection slot (or a
//! refusal slot, see `admission.rs`) before it spawns the task that reads
//! the request head, so a socket that never sends its head holds a slot, not
//! an unbounded task; the head is bounded by [`MAX_HEAD`] bytes and
//! [`HEAD_TIMEOUT`]. A socket in a refusal slot is still served `/metrics`
//! and `/healthz`; its upgrade gets 503.
//!
//! The remote listener (`--remote`, `tls.rs`) serves the same router over
//! TLS, limited to `/` and `/healthz` ([`REMOTE_PATHS`]): the accept loop
//! is the same, and the TLS handshake runs inside the socket's slot,
//! bounded by [`HEAD_TIMEOUT`] like the head.
//!
//! Browser defences, first thing after the head (`guard`): an `Origin`
//! header not in the allow-list gets 403 (web pages always send one; other
//! clients do not), and on a loopback listener a `Host` that is not a
//! loopback name gets 403 too (DNS rebinding). No response carries CORS
//! headers.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

use crate::state::HubState;
use crate::transport::response::text;
use crate::transport::socket::Socket;
use crate::transport::{ws, AcceptBackoff};

/// The most a request head (request line and headers) may take.
pub const MAX_HEAD: usize = 16 * 1024;
/// How long a peer may take to send its request head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// Accepts until shutdown begins. Each socket takes a slot before a task is
/// spawned for it; with neither a connection nor a refusal slot free it is
/// closed at once. With `tls` (the remote listener) each socket's task first
/// runs the TLS handshake.
pub async fn accept_loop(
    hub: Arc<HubState>,
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    tasks: TaskTracker,
) {
    let loopback = listener.local_addr().is_ok_and(|a| a.ip().is_loopback());
    let router = router(hub.clone());
    let mut backoff = AcceptBackoff::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = hub.stopping() => return,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => {
                backoff.succeeded();
                accepted
            }
            Err(error) => {
                let delay = backoff.failed();
                tracing::warn!(%error, ?delay, "accept failed on the HTTP listener");
                tokio::time::sleep(delay).await;
                continue;
            }
        };
        let Some(slot) = hub.admission.at_accept() else {
            continue; // closed by the drop
        };
        let _ = stream.set_nodelay(true);
        let socket = Socket {
            peer,
            loopback,
            remote: tls.is_some(),
            slot: Arc::new(Mutex::new(Some(slot))),
            tasks: tasks.clone(),
        };
        let router = router.clone();
        match &tls {
            None => tasks.spawn(serve_socket(router, stream, socket)),
            Some(tls) => {
                let handshake = tls.accept(stream);
                tasks.spawn(async move {
                    // A failed or slow handshake is the peer's: nothing to report.
                    if let Ok(Ok(stream)) = tokio::time::timeout(HEAD_TIMEOUT, handshake).await {
                        serve_socket(router, stream, socket).await;
                    }
                })
            }
        };
    }
}

/// One request on one socket, within the slot it was accepted in. An
/// upgraded connection outlives this: its task holds the slot then.
pub(crate) async fn serve_socket<S>(router: Router, stream: S, socket: Socket)
where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let service = hyper::service::service_fn(move |mut request: hyper::Request<_>| {
        request.extensions_mut().insert(socket.clone());
        router.clone().oneshot(request.map(Body::new))
    });
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .max_buf_size(MAX_HEAD);
    // Errors here are the peer's (a bad head, a reset): nothing to report.
    let _ = http
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades()
        .await;
}

/// The routes of the HTTP port, behind the browser defences.
pub(crate) fn router(hub: Arc<HubState>) -> Router {
    let mut routes = Router::new()
        .route("/", get(upgrade))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .with_state(hub.clone());
    // The observer's pages (the dashboard's `/ui/`), behind the same guard.
    if let Some(pages) = hub.observer.get().and_then(|observer| observer.routes()) {
        routes = routes.merge(pages);
    }
    // An endpoint add-on's routes (the MCP gateway's `/mcp`), likewise.
    if let Some(endpoint) = hub.endpoint.get() {
        routes = routes.merge(endpoint.routes.clone());
    }
    routes
        .fallback(fallback)
        .layer(middleware::from_fn_with_state(hub, guard))
}

/// Origin and Host checks, before any route runs; and every answer,
/// refusals included, is `Cache-Control: no-store` (metrics and health are
/// live) and closes its socket (one request per socket).
async fn guard(State(hub): State<Arc<HubState>>, request: Request, next: Next) -> Response {
    // The endpoint add-on's paths that keep their connection (`/mcp`).
    let keep_alive = hub
        .endpoint
        .get()
        .is_some_and(|endpoint| endpoint.keep_alive_paths.contains(&request.uri().path()));
    let mut response = match refusal(&hub, &request) {
        Some(refused) => refused,
        None => next.run(request).await,
    };
    let upgraded = response.status() == StatusCode::SWITCHING_PROTOCOLS;
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    // One request per socket (see the module's comment); an upgrade keeps
    // its `Connection: Upgrade`. hyper's own `keep_alive(false)` would
    // overwrite that too.
    if !upgraded && !keep_alive {
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// What the remote listener serves: the upgrade and the health check (and
/// the endpoint add-on's `remote_paths`, which authenticate themselves).
const REMOTE_PATHS: [&str; 2] = ["/", "/healthz"];

/// The browser defences: a 403 for a non-loopback Host on a loopback
/// socket (DNS rebinding) or an Origin the policy does not allow.
fn refusal(hub: &HubState, request: &Request) -> Option<Response> {
    let socket = request.extensions().get::<Socket>().cloned();
    let loopback = socket.as_ref().is_some_and(|s| s.loopback);
    let remote = socket.as_ref().is_some_and(|s| s.remote);
    let peer = socket.map(|s| s.peer);
    let headers = request.headers();
    if loopback {
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        if !is_loopback_host(host) {
            tracing::info!(?peer, host, "refused a request for a non-loopback Host");
            return Some(text(StatusCode::FORBIDDEN, "Host is not a loopback name\n"));
        }
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        if !hub.registry.policy().origin_allowed(origin) {
            tracing::info!(
                ?peer,
                origin,
                "refused a request from a web origin that is not allowed"
            );
            return Some(text(StatusCode::FORBIDDEN, "Origin not allowed\n"));
        }
    }
    // After the browser defences (a refused page gets their 403). Least
    // privilege on the network: the remote listener serves the
    // upgrade (which then needs a named principal's token) and `/healthz`,
    // nothing that answers without a token (`/metrics` names modules and
    // hubs; the dashboard's pages and login are the hub owner's, on
    // loopback).
    let path = request.uri().path();
    let endpoint_serves = hub
        .endpoint
        .get()
        .is_some_and(|endpoint| endpoint.remote_paths.contains(&path));
    if remote && !REMOTE_PATHS.contains(&path) && !endpoint_serves {
        return Some(text(
            StatusCode::NOT_FOUND,
            "not served on the remote listener\n",
        ));
    }
    None
}

/// `GET /`: the WebSocket handshake (`ws.rs`), with the socket's facts and slot.
async fn upgrade(State(hub): State<Arc<HubState>>, request: Request) -> Response {
    let Some(socket) = request.extensions().get::<Socket>().cloned() else {
        return text(StatusCode::INTERNAL_SERVER_ERROR, "no socket\n");
    };
    ws::upgrade(hub, socket, request).await
}

async fn healthz(State(hub): State<Arc<HubState>>) -> Response {
    if hub.is_stopping() {
        text(StatusCode::SERVICE_UNAVAILABLE, "shutting down\n")
    } else {
        text(StatusCode::OK, "ok\n")
    }
}

async fn metrics(State(hub): State<Arc<HubState>>) -> Response {
    let content_type = "text/plain; version=0.0.4; charset=utf-8";
    ([(header::CONTENT_TYPE, content_type)], hub.metrics_text()).into_response()
}

/// Anything else: 404 for a GET, 405 otherwise; a WebSocket upgrade
/// elsewhere than `/` is told where the endpoint is.
async fn fallback(request: Request) -> Response {
    if request.method() != Method::GET {
        let mut response = text(StatusCode::METHOD_NOT_ALLOWED, "");
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET"));
        return response;
    }
    if ws::is_upgrade(&request) {
        return text(StatusCode::NOT_FOUND, "the WebSocket endpoint is /\n");
    }
    text(StatusCode::NOT_FOUND, "not found\n")
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
