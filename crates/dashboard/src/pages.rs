//! The routes under `/ui/`, merged into the HTTP port's router (behind its
//! Origin/Host guard) when the dashboard is on.
//!
//! | path | what |
//! |---|---|
//! | `/ui/login?code=…` | exchanges a one-time code for a session cookie, 303 to `/ui/` |
//! | `/ui/` | the page, with a session; else the login help page (401) |
//! | `/ui/stream` | the live stream (`stream.rs`), with a session |
//! | `/ui/static/…` | the embedded assets, with a session (but `style.css`, which the help page uses) |
//! | `/ui/logout` | ends the session |
//!
//! Every answer carries a strict Content-Security-Policy (scripts and
//! styles from this origin only, no inline script, nothing framed),
//! `Referrer-Policy: no-referrer` (the login URL's code never leaves in a
//! `Referer`) and `nosniff`. No URL, query or cookie is logged.

use std::sync::Arc;

use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::auth::SESSION_LIFETIME;
use crate::state::DashboardState;
use crate::stream;

/// The session cookie's name.
pub const COOKIE: &str = "switchboard_session";

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

/// The embedded files under `/ui/static/`: name, type, content, and whether
/// the login help page may load it without a session.
const ASSETS: &[(&str, &str, &str, bool)] = &[
    ("style.css", CSS, include_str!("assets/style.css"), true),
    ("app.js", JS, include_str!("assets/app.js"), false),
    (
        "uPlot.min.css",
        CSS,
        include_str!("assets/vendor/uPlot.min.css"),
        false,
    ),
    (
        "uPlot.iife.min.js",
        JS,
        include_str!("assets/vendor/uPlot.iife.min.js"),
        false,
    ),
];

const INDEX: &str = include_str!("assets/index.html");
const HELP: &str = include_str!("assets/help.html");
const REFUSED: &str = include_str!("assets/refused.html");

pub fn routes(state: Arc<DashboardState>) -> Router {
    Router::new()
        .route(
            "/ui",
            get(|| async { redirect(StatusCode::PERMANENT_REDIRECT, "/ui/") }),
        )
        .route("/ui/", get(index))
        .route("/ui/login", get(login))
        .route("/ui/logout", get(logout))
        .route("/ui/stream", get(stream_with_session))
        .route("/ui/static/{file}", get(asset))
        .layer(middleware::map_response(defences))
        .with_state(state)
}

async fn defences(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        "cross-origin-resource-policy",
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("same-origin"),
    );
    response
}

/// The session cookie's value, if the request carries one.
fn session_cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value)
}

fn has_session(state: &DashboardState, headers: &HeaderMap) -> bool {
    session_cookie(headers).is_some_and(|value| state.logins.is_session(value))
}

fn page(status: StatusCode, content_type: &'static str, body: &'static str) -> Response {
    (status, [(header::CONTENT_TYPE, content_type)], body).into_response()
}

fn help() -> Response {
    page(StatusCode::UNAUTHORIZED, HTML, HELP)
}

fn redirect(status: StatusCode, to: &'static str) -> Response {
    (status, [(header::LOCATION, to)]).into_response()
}

async fn index(State(state): State<Arc<DashboardState>>, headers: HeaderMap) -> Response {
    if !has_session(&state, &headers) {
        return help();
    }
    page(StatusCode::OK, HTML, INDEX)
}

async fn asset(
    State(state): State<Arc<DashboardState>>,
    Path(file): Path<String>,
    headers: HeaderMap,
) -> Response {
    let Some((_, content_type, body, public)) = ASSETS.iter().find(|(name, ..)| *name == file)
    else {
        return (StatusCode::NOT_FOUND, "not found\n").into_response();
    };
    if !public && !has_session(&state, &headers) {
        return help();
    }
    page(StatusCode::OK, content_type, body)
}

async fn stream_with_session(
    State(state): State<Arc<DashboardState>>,
    headers: HeaderMap,
) -> Response {
    if !has_session(&state, &headers) {
        return help();
    }
    stream::stream(State(state)).await
}

/// `code=` of the query, if present.
fn code_of(request: &Request) -> Option<&str> {
    request
        .uri()
        .query()?
        .split('&')
        .find_map(|pair| pair.strip_prefix("code="))
}

async fn login(State(state): State<Arc<DashboardState>>, request: Request) -> Response {
    let session = code_of(&request).and_then(|code| state.logins.exchange(code));
    let Some(session) = session else {
        tracing::info!("refused a dashboard login: the code is unknown, used or expired");
        return page(StatusCode::FORBIDDEN, HTML, REFUSED);
    };
    tracing::info!("dashboard login");
    let cookie = format!(
        "{COOKIE}={session}; HttpOnly; SameSite=Strict; Path=/ui; Max-Age={}",
        SESSION_LIFETIME.as_secs()
    );
    let mut response = redirect(StatusCode::SEE_OTHER, "/ui/");
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

async fn logout(State(state): State<Arc<DashboardState>>, headers: HeaderMap) -> Response {
    if let Some(session) = session_cookie(&headers) {
        state.logins.end_session(session);
    }
    let mut response = redirect(StatusCode::SEE_OTHER, "/ui/");
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static(
            "switchboard_session=; HttpOnly; SameSite=Strict; Path=/ui; Max-Age=0",
        ),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_session_cookie_among_others() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; switchboard_session=abc; b=2"),
        );
        assert_eq!(session_cookie(&headers), Some("abc"));
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("xswitchboard_session=abc"),
        );
        assert_eq!(session_cookie(&headers), None);
    }
}
