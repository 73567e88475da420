//! Unguessable identifiers: 128 bits from the OS random generator.
//!
//! Session and job ids are capabilities in the loose sense that nothing else
//! names them, but knowing one grants nothing by itself: every use is still
//! checked against its owner. They are unguessable so that a client cannot
//! probe for other sessions' state by enumeration.

use switchboard_tools::consumer::fresh_call_key;

/// `bytes` random bytes as lowercase hex.
pub fn random_hex(bytes: usize) -> String {
    let mut buffer = vec![0u8; bytes];
    // The OS generator failing is not something a peer can cause; there is
    // no sensible way to continue minting ids without it.
    getrandom::fill(&mut buffer).expect("the OS random generator is unavailable");
    hex::encode(buffer)
}

/// A new ACP `sessionId`: `sess_` and 32 hex digits.
pub fn session_id() -> String {
    format!("sess_{}", random_hex(16))
}

/// A new job id: `job_` and 32 hex digits.
pub fn job_id() -> String {
    format!("job_{}", random_hex(16))
}

/// A `call_key` for one tool call of one session: `acp:<sessionId>:` and
/// a fresh random part ([`fresh_call_key`]: unique across restarts, as the
/// providers' fence ledgers are durable).
pub fn call_key(session_id: &str) -> String {
    fresh_call_key(&format!("acp:{session_id}:"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_distinct_and_well_formed() {
        let a = session_id();
        let b = session_id();
        assert_ne!(a, b);
        assert_eq!(a.len(), "sess_".len() + 32);
        let key = call_key(&a);
        switchboard_protocol::tool_call::validate_token(
            switchboard_protocol::tool_call::TokenField::CallKey,
            &key,
        )
        .unwrap();
    }
}
