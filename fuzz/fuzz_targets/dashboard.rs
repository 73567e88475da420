//! The dashboard's HTTP side: requests as a browser (or anything) writes
//! them, through the hub's HTTP port with the real dashboard attached
//! (`switchboard_dashboard::Dashboard::attach`, its routes under `/ui/`
//! mounted behind the port's Origin/Host guard), on a loopback, open or
//! remote listener (the first byte chooses). In the input, `$C$` is a fresh
//! one-time login code (minted with `hub/dashboardLogin`, as `switchboard
//! dashboard` does) and `$S$` a live session cookie's value.
//!
//! Checks, with the rules written out here: no CORS header; no token, code
//! or session value of another request in an answer; the guard's Host and
//! Origin rule; a session cookie is set only by `/ui/login` trading a fresh
//! code, and the same request again (the code used) sets none; a page other
//! than the help page's style sheet is served (200) only with the live
//! session; every answer of the dashboard's routes carries its CSP; no
//! connection left after the socket closes.
#![no_main]

use std::cell::RefCell;

use libfuzzer_sys::fuzz_target;
use serde_json::json;
use switchboard_fuzz::http::{self, Answer, Head};
use switchboard_hub::fuzzing::http::{HttpHarness, Listener};

const NAMED: &str = "explorer-token-0123456789abcdef";
const STYLE: &[u8] = include_bytes!("../../crates/dashboard/src/assets/style.css");

struct State {
    harness: HttpHarness,
}

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State {
        harness: HttpHarness::new(
            &format!(
                "[hub]\nallowed_origins = [\"http://allowed.example\"]\n\
                 [principals.explorer]\ntoken = \"{NAMED}\"\n"
            ),
            Some(Box::new(switchboard_dashboard::Dashboard::attach)),
        ),
    });
}

/// A fresh login code, as `switchboard dashboard` gets one.
fn code(harness: &mut HttpHarness) -> String {
    let answer = harness.direct_request("hub/dashboardLogin", json!({}));
    answer["result"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("no login code: {answer}"))
        .to_owned()
}

/// The session value a `Set-Cookie` sets, if it sets one.
fn session_set(answer: &Answer<'_>) -> Option<String> {
    let cookie = answer.header("set-cookie")?;
    let value = cookie
        .strip_prefix("switchboard_session=")?
        .split(';')
        .next()?;
    (!value.is_empty()).then(|| value.to_owned())
}

/// A live session: a code traded at `/ui/login` like a browser does.
fn session(harness: &mut HttpHarness) -> String {
    let code = code(harness);
    let request = format!("GET /ui/login?code={code} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    let bytes = harness.exchange(request.as_bytes(), Listener::Loopback);
    session_set(&Answer::parse(&bytes)).expect("a fresh code logs in")
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let listener = match first % 3 {
        0 => Listener::Loopback,
        1 => Listener::Open,
        _ => Listener::Remote,
    };
    STATE.with(|state| {
        let harness = &mut state.borrow_mut().harness;
        let direct = harness.direct_token();
        let has = |placeholder: &[u8]| memchr::memmem::find(rest, placeholder).is_some();
        let code = if has(b"$C$") {
            code(harness)
        } else {
            String::new()
        };
        let session = if has(b"$S$") {
            session(harness)
        } else {
            String::new()
        };
        let pairs = [("$C$", code.as_str()), ("$S$", session.as_str())];
        let request = http::substitute(rest, &pairs);
        let bytes = harness.exchange(&request, listener);
        let answer = Answer::parse(&bytes);
        answer.assert_no_cors();
        // The code and session were in the request; only a cookie being
        // set may name a session.
        answer.assert_hides(&[direct, NAMED]);
        for secret in [&code, &session] {
            if !secret.is_empty() {
                assert!(
                    memchr::memmem::find(answer.body, secret.as_bytes()).is_none(),
                    "an answer's body holds a code or session"
                );
            }
        }
        let Some(status) = answer.status else {
            assert!(session_set(&answer).is_none());
            return;
        };
        let head = Head::parse(&request);
        if let Some(head) = &head {
            http::assert_guarded(head, status, listener, &["http://allowed.example"]);
        }
        let has_session =
            !session.is_empty() && memchr::memmem::find(&request, session.as_bytes()).is_some();
        if let Some(set) = session_set(&answer) {
            let head = head.as_ref().expect("a cookie for a request hyper read");
            assert_eq!(
                head.path(),
                "/ui/login",
                "a session cookie from {}",
                head.target
            );
            assert!(!code.is_empty(), "a session cookie without a fresh code");
            assert_ne!(set, session, "a session handed out twice");
            // The code is used now: the same request again logs no one in.
            let again = harness.exchange(&request, listener);
            assert!(
                session_set(&Answer::parse(&again)).is_none(),
                "a login code worked twice"
            );
        }
        let Some(head) = head else {
            return;
        };
        if !head.path().starts_with("/ui") {
            return;
        }
        if matches!(status, 200 | 303 | 308 | 401) {
            assert!(
                answer.header("content-security-policy").is_some(),
                "{status} for {} without the CSP",
                head.target
            );
        }
        // The one file served without a session is the style sheet: its
        // bytes, or for HEAD (no body) its length and type.
        let style = answer.body == STYLE
            || (head.method.eq_ignore_ascii_case("HEAD")
                && answer.header("content-length") == Some(STYLE.len().to_string().as_str())
                && answer
                    .header("content-type")
                    .is_some_and(|kind| kind.starts_with("text/css")));
        if status == 200 && !style {
            assert!(has_session, "{} served without a session", head.target);
        }
    });
});
