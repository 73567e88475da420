//! The JSON-RPC envelope decoder on arbitrary bytes: it never panics, and
//! what it accepts is self-consistent (raw members are valid JSON, ids are
//! ids, every error names a code the spec allows).
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::value::RawValue;
use switchboard_protocol::jsonrpc::{decode, Message, Outcome};
use switchboard_protocol::ErrorCode;

fn valid_json(raw: &RawValue) {
    serde_json::from_str::<serde_json::Value>(raw.get()).expect("a raw member is valid JSON");
}

fn valid_id(id: &RawValue) {
    let value: serde_json::Value = serde_json::from_str(id.get()).expect("an id is JSON");
    assert!(
        value.is_string() || value.is_number() || value.is_null(),
        "bad id {id}"
    );
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
                assert!(serde_json::from_slice::<serde_json::Value>(data).is_err());
            }
        }
    }
});
