//! The JSON-RPC envelope decoder on arbitrary bytes: it never panics, and
//! what it accepts is self-consistent (raw members are valid JSON, ids are
//! ids, every error names a code the spec allows).
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;
use switchboard_protocol::jsonrpc::{decode, Message, Outcome};
use switchboard_protocol::ErrorCode;

/// Valid by JSON's grammar. (Not `serde_json::Value`: it refuses numbers
/// beyond f64's range, which JSON allows and the hub passes on untouched.)
fn valid_json(raw: &RawValue) {
    serde_json::from_str::<IgnoredAny>(raw.get()).expect("a raw member is valid JSON");
}

fn valid_id(id: &RawValue) {
    valid_json(id);
    assert!(
        matches!(id.get().as_bytes()[0], b'"' | b'-' | b'0'..=b'9' | b'n'),
        "bad id {id}"
    );
    if id.get().starts_with('n') {
        assert_eq!(id.get(), "null");
    }
}

fuzz_target!(|data: &[u8]| {
    match decode(data) {
        Ok(Message::Request { id, method, params }) => {
            valid_id(id);
            let _ = method.name();
            params.map(valid_json);
        }
        Ok(Message::Notification { method, params }) => {
            let _ = method.name();
            params.map(valid_json);
        }
        Ok(Message::Response { id, outcome }) => {
            valid_id(id);
            match outcome {
                Outcome::Result(raw) | Outcome::Error(raw) => valid_json(raw),
            }
        }
        Err(error) => {
            assert!(matches!(
                error.code,
                ErrorCode::ParseError | ErrorCode::InvalidRequest
            ));
            if let Some(id) = error.id {
                valid_id(id);
            }
            if error.code == ErrorCode::ParseError {
                // (`from_str`: `from_slice` does not check the UTF-8 of
                // strings it skips.)
                let json = std::str::from_utf8(data)
                    .is_ok_and(|text| serde_json::from_str::<IgnoredAny>(text).is_ok());
                assert!(!json, "-32700 for valid JSON");
            }
        }
    }
});
