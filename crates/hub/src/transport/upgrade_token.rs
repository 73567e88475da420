//! The token a WebSocket upgrade carries: `Authorization: Bearer <token>`,
//! or `?token=<token>` in the request target (AHP clients rarely set
//! headers; hub-protocol.md section 11).
//!
//! Both are compared in constant time against the same principals
//! (`Policy::authenticate`). A `token` parameter that is empty, repeated,
//! not valid percent-encoding or not a known token gets 401 here; a wrong
//! header is answered at `initialize` (-32007), as before tokens in URLs
//! existed. With both present they must name the same principal. On the
//! remote listener a token that authenticates a principal other than a
//! named one (the user's `direct` token) gets 401 too.
//!
//! Nothing here logs or stores the request target, the query or a token:
//! refusals are described by [`Refusal`], which holds none of them.

use std::fmt;

use axum::extract::Request;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use switchboard_protocol::Principal;

use crate::policy::Authenticated;
use crate::session::Bearer;
use crate::state::HubState;

/// Why an upgrade was refused with 401 (no token text in it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    QueryEmpty,
    QueryRepeated,
    QueryBadEncoding,
    QueryUnknown,
    Mismatch,
    NotNamed,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Refusal::QueryEmpty => "the token parameter is empty",
            Refusal::QueryRepeated => "the token parameter is given more than once",
            Refusal::QueryBadEncoding => "the token parameter is not valid percent-encoded UTF-8",
            Refusal::QueryUnknown => "the token parameter is not a valid token",
            Refusal::Mismatch => {
                "the Authorization header and the token parameter do not name the same principal"
            }
            Refusal::NotNamed => {
                "only named principals may connect on the remote listener; the hub's own \
                 (direct) token is refused here"
            }
        })
    }
}

/// What the upgrade's token says: `None` without any, `Bearer::Invalid`
/// for a header that does not authenticate (refused at `initialize`).
pub fn check(hub: &HubState, request: &Request, remote: bool) -> Result<Option<Bearer>, Refusal> {
    let policy = hub.registry.policy();
    let header = request.headers().get(header::AUTHORIZATION).map(|value| {
        let token = value.to_str().ok().and_then(|value| {
            value
                .strip_prefix("Bearer ")
                .or_else(|| value.strip_prefix("bearer "))
                .map(str::trim)
        });
        match token.and_then(|t| policy.authenticate(Some(t))) {
            Some(authenticated) => Bearer::Valid(authenticated),
            None => Bearer::Invalid,
        }
    });
    let query = match query_token(request.uri().query())? {
        Some(token) => Some(
            policy
                .authenticate(Some(&token))
                .ok_or(Refusal::QueryUnknown)?,
        ),
        None => None,
    };
    let bearer = match (header, query) {
        (header, None) => header,
        (None, Some(query)) => Some(Bearer::Valid(query)),
        (Some(Bearer::Valid(header)), Some(query)) if same_principal(&header, &query) => {
            Some(Bearer::Valid(header))
        }
        (Some(_), Some(_)) => return Err(Refusal::Mismatch),
    };
    if remote {
        if let Some(Bearer::Valid(authenticated)) = &bearer {
            if !matches!(
                authenticated.principal.principal,
                Principal::Reserved { .. }
            ) {
                return Err(Refusal::NotNamed);
            }
        }
    }
    Ok(bearer)
}

fn same_principal(a: &Authenticated, b: &Authenticated) -> bool {
    a.principal.principal == b.principal.principal
}

/// The decoded value of the one `token` parameter of `query`, if there is
/// one. Other parameters are ignored. `+` is taken literally (tokens are
/// hex; a form-encoded space would not be part of one anyway).
pub(crate) fn query_token(query: Option<&str>) -> Result<Option<String>, Refusal> {
    let mut found = None;
    for pair in query.unwrap_or_default().split('&') {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        if name != "token" {
            continue;
        }
        if found.is_some() {
            return Err(Refusal::QueryRepeated);
        }
        found = Some(value);
    }
    let Some(raw) = found else {
        return Ok(None);
    };
    if raw.is_empty() {
        return Err(Refusal::QueryEmpty);
    }
    // percent-encoding's decoder passes a stray `%` through; refuse it.
    let bytes = raw.as_bytes();
    let well_formed = bytes.iter().enumerate().all(|(index, &byte)| {
        byte != b'%'
            || bytes
                .get(index + 1..index + 3)
                .is_some_and(|hex| hex.iter().all(u8::is_ascii_hexdigit))
    });
    if !well_formed {
        return Err(Refusal::QueryBadEncoding);
    }
    let token = percent_encoding::percent_decode_str(raw)
        .decode_utf8()
        .map_err(|_| Refusal::QueryBadEncoding)?;
    if token.is_empty() {
        return Err(Refusal::QueryEmpty);
    }
    Ok(Some(token.into_owned()))
}

/// 401 with `WWW-Authenticate: Bearer`; the body says why, never the token.
pub fn unauthorized(refusal: Refusal) -> Response {
    let headers = [
        (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
        (header::WWW_AUTHENTICATE, "Bearer"),
    ];
    (StatusCode::UNAUTHORIZED, headers, format!("{refusal}\n")).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_parameter_is_found_once_and_decoded_strictly() {
        assert_eq!(query_token(None), Ok(None));
        assert_eq!(query_token(Some("")), Ok(None));
        assert_eq!(query_token(Some("a=1&b")), Ok(None));
        assert_eq!(query_token(Some("token=abc")), Ok(Some("abc".into())));
        assert_eq!(
            query_token(Some("x=1&token=a%62c&y")),
            Ok(Some("abc".into()))
        );
        assert_eq!(query_token(Some("tokens=abc")), Ok(None));
        assert_eq!(query_token(Some("token=")), Err(Refusal::QueryEmpty));
        assert_eq!(query_token(Some("token")), Err(Refusal::QueryEmpty));
        assert_eq!(
            query_token(Some("token=a&token=a")),
            Err(Refusal::QueryRepeated)
        );
        assert_eq!(
            query_token(Some("token=&token=a")),
            Err(Refusal::QueryRepeated)
        );
        for bad in ["token=a%", "token=a%4", "token=%zz", "token=%ff%fe"] {
            assert_eq!(
                query_token(Some(bad)),
                Err(Refusal::QueryBadEncoding),
                "{bad}"
            );
        }
    }
}
