//! Identifiers the hub mints: unguessable, never reused.

use std::sync::atomic::{AtomicU64, Ordering};

/// A connection's index inside the hub, for maps. Never on the wire.
pub type ConnId = u64;

static NEXT_CONN: AtomicU64 = AtomicU64::new(1);

pub fn next_conn_id() -> ConnId {
    NEXT_CONN.fetch_add(1, Ordering::Relaxed)
}

/// 128 random bits, hex, behind a short prefix that says what the id names.
///
/// With 128 bits from the OS generator a collision is not a practical event;
/// the registry still refuses a duplicate so "never reused" does not rest on
/// probability alone.
pub fn mint(prefix: &str) -> String {
    let mut bytes = [0u8; 16];
    fill_random(&mut bytes);
    let mut id = String::with_capacity(prefix.len() + 32);
    id.push_str(prefix);
    id.push_str(&hex::encode(bytes));
    id
}

/// A secret of 32 random bytes as 64 hex characters (the `hub.json` token).
pub fn mint_token() -> String {
    let mut bytes = [0u8; 32];
    fill_random(&mut bytes);
    hex::encode(bytes)
}

fn fill_random(bytes: &mut [u8]) {
    // The OS generator failing is not something the hub can route around.
    getrandom::fill(bytes).expect("the operating system's random generator failed");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_prefixed_and_distinct() {
        let a = mint("svc-");
        let b = mint("svc-");
        assert!(a.starts_with("svc-") && a.len() == 36);
        assert_ne!(a, b);
        assert_eq!(mint_token().len(), 64);
    }
}
