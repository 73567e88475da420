//! The HTTP head of a WebSocket upgrade and its token: bytes as a client
//! writes them, through the hub's HTTP port (hyper's bounded head, the
//! Origin/Host guard, the handshake and `upgrade_token.rs`, then the
//! upgraded connection's frame reader for whatever follows the head), on a
//! loopback, open or remote listener (the first byte chooses). `$D$` in the
//! input is the `direct` token, `$N$` the named principal's.
//!
//! Checks, with the rules written out here from the reference (not taken
//! from the hub): no CORS header; no token in an HTTP answer; 101 only for
//! `GET /` with a version 13 handshake, a loopback Host on a loopback
//! listener, no Origin but an allowed one, a `token` parameter (if any)
//! given once and naming a principal, and never the `direct` principal on
//! the remote listener; every connection gone after the socket closes. And
//! the `?token=` decoder alone agrees with the rule, on the request
//! target's query and on the whole input.
#![no_main]

use std::cell::RefCell;

use libfuzzer_sys::fuzz_target;
use switchboard_fuzz::http::{self, Answer};
use switchboard_hub::fuzzing::http::{query_token, HttpHarness, Listener, Refusal};

const NAMED: &str = "explorer-token-0123456789abcdef";

thread_local! {
    static HARNESS: RefCell<HttpHarness> = RefCell::new(HttpHarness::new(&config(), None));
}

fn config() -> String {
    format!(
        "[hub]\nallowed_origins = [\"http://allowed.example\"]\n\
         [principals.explorer]\ntoken = \"{NAMED}\"\n\
         [[grants]]\nfrom = \"*\"\nto = \"*\"\nallow = [\"discover\", \"request\", \"notify\"]\n"
    )
}

/// The rule for `?token=`: the one `token` parameter, percent-decoded
/// strictly (a `%` without two hex digits is wrong), UTF-8, not empty.
fn token_rule(query: &str) -> Result<Option<String>, Refusal> {
    let values: Vec<&str> = query
        .split('&')
        .filter_map(|pair| {
            let (name, value) = match pair.find('=') {
                Some(at) => (&pair[..at], &pair[at + 1..]),
                None => (pair, ""),
            };
            (name == "token").then_some(value)
        })
        .collect();
    let raw = match values.as_slice() {
        [] => return Ok(None),
        [raw] => *raw,
        _ => return Err(Refusal::QueryRepeated),
    };
    if raw.is_empty() {
        return Err(Refusal::QueryEmpty);
    }
    let bytes = raw.as_bytes();
    let mut decoded = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'%' {
            let hex = bytes.get(at + 1..at + 3).ok_or(Refusal::QueryBadEncoding)?;
            let text = std::str::from_utf8(hex).map_err(|_| Refusal::QueryBadEncoding)?;
            if !text.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(Refusal::QueryBadEncoding);
            }
            decoded.push(u8::from_str_radix(text, 16).map_err(|_| Refusal::QueryBadEncoding)?);
            at += 3;
        } else {
            decoded.push(bytes[at]);
            at += 1;
        }
    }
    let token = String::from_utf8(decoded).map_err(|_| Refusal::QueryBadEncoding)?;
    if token.is_empty() {
        return Err(Refusal::QueryEmpty);
    }
    Ok(Some(token))
}

fn check_decoder(query: &str) {
    assert_eq!(
        query_token(Some(query)),
        token_rule(query),
        "the token decoder and the rule disagree on {query:?}"
    );
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    if let Ok(text) = std::str::from_utf8(rest) {
        check_decoder(text);
    }
    let listener = match first % 3 {
        0 => Listener::Loopback,
        1 => Listener::Open,
        _ => Listener::Remote,
    };
    HARNESS.with(|harness| {
        let mut harness = harness.borrow_mut();
        let direct = harness.direct_token();
        let request = http::substitute(rest, &[("$D$", direct), ("$N$", NAMED)]);
        let bytes = harness.exchange(&request, listener);
        let answer = Answer::parse(&bytes);
        answer.assert_no_cors();
        answer.assert_hides(&[direct, NAMED]);
        let Some(head) = http::Head::parse(&request) else {
            return;
        };
        if let Some(query) = head.query() {
            check_decoder(query);
        }
        let Some(status) = answer.status else {
            return;
        };
        http::assert_guarded(&head, status, listener, &["http://allowed.example"]);
        if status != 101 {
            return;
        }
        assert_eq!(head.method, "GET", "101 for {}", head.method);
        assert_eq!(head.path(), "/", "101 for {}", head.target);
        assert!(
            head.has_token("upgrade", "websocket"),
            "101 without Upgrade: websocket"
        );
        assert_eq!(
            head.header("sec-websocket-version").map(str::trim),
            Some("13")
        );
        assert!(
            head.header("sec-websocket-key").is_some(),
            "101 without a key"
        );
        let from_query = match head.query().map(token_rule) {
            Some(Ok(token)) => token,
            Some(Err(refusal)) => panic!("101 with a token parameter that is wrong: {refusal:?}"),
            None => None,
        };
        if let Some(token) = &from_query {
            assert!(
                token == direct || token == NAMED,
                "101 with a token parameter that names no one"
            );
        }
        if listener == Listener::Remote {
            let bearer = head
                .header("authorization")
                .and_then(|value| {
                    value
                        .strip_prefix("Bearer ")
                        .or_else(|| value.strip_prefix("bearer "))
                })
                .map(str::trim);
            assert_ne!(
                from_query.as_deref(),
                Some(direct),
                "the direct token upgraded on the remote listener"
            );
            assert_ne!(
                bearer,
                Some(direct),
                "the direct token upgraded on the remote listener"
            );
        }
    });
});
