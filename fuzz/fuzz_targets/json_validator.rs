//! The hub's one-pass JSON validator (`protocol::json`) against serde_json,
//! on arbitrary bytes: both accept exactly the same texts, and the envelope
//! decoder built on it classifies every message as the serde_json-based
//! decoder it replaced did (kept below as the reference).
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde::de::{Deserializer, IgnoredAny};
use serde::Deserialize;
use serde_json::value::RawValue;
use switchboard_protocol::json::{depth, validate, MemberIndex};
use switchboard_protocol::jsonrpc::{decode_indexed, Layout, Message, Outcome};
use switchboard_protocol::ErrorCode;

/// The envelope as serde_json decoded it before the one-pass walk.
#[derive(Deserialize)]
struct Reference<'a> {
    // Never read, only decoded: a second `jsonrpc` member fails the
    // reference (a duplicate field), as it failed the decoder it stands for.
    #[allow(dead_code)]
    #[serde(borrow, default, deserialize_with = "present")]
    jsonrpc: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    method: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    params: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    error: Option<&'a RawValue>,
}

fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(deserializer).map(Some)
}

fn raw(value: Option<&RawValue>) -> Option<&str> {
    value.map(RawValue::get)
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let serde_ok = serde_json::from_str::<IgnoredAny>(text).is_ok();
    assert_eq!(
        validate(text).is_ok(),
        serde_ok,
        "validate disagrees with serde_json on {text:?}: {:?}",
        validate(text)
    );

    let mut layout = Layout::default();
    let decoded = decode_indexed(data, &mut layout);
    if !serde_ok {
        let error = decoded.expect_err("invalid JSON is refused");
        assert_eq!(error.code, ErrorCode::ParseError, "{text:?}");
        return;
    }
    if !text.trim_start().starts_with('{') {
        return; // not an object: both paths share that code
    }
    if decoded.is_ok() {
        assert_eq!(Ok(layout.depth), depth(text), "the walk's depth of {text:?}");
    }
    let Ok(reference) = serde_json::from_str::<Reference<'_>>(text) else {
        // serde_json refuses a valid text here only for a duplicate envelope
        // member or a lone surrogate escape in a key (it decodes keys to
        // match them); the walk refuses the first (-32600 malformedEnvelope)
        // and, like the JSON grammar, accepts the second. Valid JSON is
        // never -32700 either way.
        if let Err(error) = decoded {
            assert_eq!(error.code, ErrorCode::InvalidRequest, "{text:?}");
        }
        return;
    };
    match decoded {
        Ok(Message::Request { id, method, params }) => {
            assert_eq!(raw(reference.id), Some(id.get()));
            assert_eq!(raw(reference.method), Some(method.raw().get()));
            // A name without Unicode text (a lone surrogate escape) is
            // refused (-32600 badMethod); every name accepted decodes as
            // serde_json decodes it.
            let expected = serde_json::from_str::<String>(method.raw().get());
            assert_eq!(method.name(), expected.expect("an accepted name has text"));
            assert_eq!(raw(reference.params), raw(params));
            check_index(params, &layout.params);
        }
        Ok(Message::Notification { method, params }) => {
            assert!(reference.id.is_none());
            assert_eq!(raw(reference.method), Some(method.raw().get()));
            assert_eq!(raw(reference.params), raw(params));
            check_index(params, &layout.params);
        }
        Ok(Message::Response { id, outcome }) => {
            assert_eq!(raw(reference.id), Some(id.get()));
            match outcome {
                Outcome::Result(result) => assert_eq!(raw(reference.result), Some(result.get())),
                Outcome::Error(error) => assert_eq!(raw(reference.error), Some(error.get())),
            }
        }
        Err(error) => {
            // Valid JSON that is not a JSON-RPC message: never -32700.
            assert_eq!(error.code, ErrorCode::InvalidRequest, "{text:?}");
            assert!(
                ["badId", "badVersion", "badMethod", "resultAndError", "responseWithoutId", "noMethod"]
                    .contains(&error.reason),
                "{}: {text:?}",
                error.reason
            );
        }
    }
});

/// The index holds the members of `params` exactly as a fresh walk finds them.
fn check_index(params: Option<&RawValue>, index: &MemberIndex<'_>) {
    let Some(params) = params.filter(|p| p.get().starts_with('{')) else {
        return;
    };
    let walked: Vec<_> = switchboard_protocol::scan::members(params).collect();
    match index.members_of(params.get()) {
        Some(members) => assert_eq!(members.collect::<Vec<_>>(), walked),
        None => assert!(walked.len() > MemberIndex::CAPACITY),
    }
}
