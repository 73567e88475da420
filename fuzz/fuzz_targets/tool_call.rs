//! The `ToolCallRequest` decoder and the opaque-token validators on
//! arbitrary input: no panic; decode → encode → decode is stable; the
//! validators agree with the contract's rule stated independently here.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchboard_protocol::tool_call::{validate_token, SchemaPin, TokenError, TokenField};
use switchboard_protocol::ToolCallRequest;

fn rule(value: &str) -> Result<(), &'static str> {
    if value.is_empty() {
        Err("empty")
    } else if value.len() > 256 {
        Err("too_long")
    } else if !value.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
        Err("invalid_character")
    } else {
        Ok(())
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(request) = serde_json::from_slice::<ToolCallRequest>(data) {
        let encoded = serde_json::to_vec(&request).expect("a decoded request encodes");
        let again: ToolCallRequest =
            serde_json::from_slice(&encoded).expect("its encoding decodes");
        assert_eq!(request, again);
        let _ = request.validate();
    }
    if let Ok(text) = std::str::from_utf8(data) {
        for field in [
            TokenField::CallKey,
            TokenField::SchemaPin,
            TokenField::OriginCallKey,
        ] {
            let checked = validate_token(field, text);
            assert_eq!(
                checked.as_ref().map_err(TokenError::reason).copied(),
                rule(text).map(|_| ())
            );
            if let Err(error) = checked {
                assert_eq!(error.field(), field);
                assert!(error.to_string().starts_with(field.name()));
                if let TokenError::InvalidCharacter { index, .. } = error {
                    assert!(!(0x21..=0x7e).contains(&text.as_bytes()[index]));
                }
            }
        }
        if let Some(pin) = SchemaPin::parse(text) {
            assert_eq!(SchemaPin::format(pin.tool, pin.digest, pin.semantics), text);
        }
    }
});
