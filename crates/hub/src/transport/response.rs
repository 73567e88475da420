//! The plain answers of the HTTP port, shared by its routes (`http.rs`) and
//! the WebSocket handshake (`ws.rs`).

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

/// A plain-text response.
pub fn text(status: StatusCode, body: &'static str) -> Response {
    text_owned(status, body.to_owned())
}

/// A plain-text response with a body made at run time.
pub fn text_owned(status: StatusCode, body: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body,
    )
        .into_response()
}
