//! Who may see the page: one-time login codes, exchanged for sessions.
//!
//! `switchboard dashboard` asks the hub (`hub/dashboardLogin`, `direct`
//! principal only, over the Unix socket) for a code; the browser brings it
//! to `/ui/login?code=…` once, within its lifetime, and gets a session
//! cookie instead. The hub keeps only SHA-256 digests of both (a memory dump
//! or a log line holds nothing that logs in), and both are 128 or 256 random
//! bits, so they are looked up by digest, not compared one by one.
//!
//! Bounded: at most [`MAX_CODES`] codes and [`MAX_SESSIONS`] sessions are
//! held; a new one past the bound replaces the one closest to expiry.
//! Expired ones are dropped whenever the table is touched.

use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use switchboard_hub::observe::{mint, mint_token, token_digest};

/// Login codes outstanding at once.
pub const MAX_CODES: usize = 16;
/// Browser sessions held at once.
pub const MAX_SESSIONS: usize = 64;
/// How long a session lasts after login (it also ends with the hub).
pub const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 3600);

/// Secrets by digest, each with its expiry.
struct Table {
    entries: Vec<([u8; 32], Instant)>,
    max: usize,
}

impl Table {
    fn new(max: usize) -> Self {
        Table {
            entries: Vec::new(),
            max,
        }
    }

    fn insert(&mut self, digest: [u8; 32], expires: Instant, now: Instant) {
        self.entries.retain(|(_, at)| *at > now);
        if self.entries.len() >= self.max {
            if let Some(soonest) = (0..self.entries.len()).min_by_key(|&i| self.entries[i].1) {
                self.entries.swap_remove(soonest);
            }
        }
        self.entries.push((digest, expires));
    }

    /// Whether `digest` is held and not expired; `take` removes it.
    fn find(&mut self, digest: &[u8; 32], now: Instant, take: bool) -> bool {
        self.entries.retain(|(_, at)| *at > now);
        match self.entries.iter().position(|(d, _)| d == digest) {
            Some(index) if take => {
                self.entries.swap_remove(index);
                true
            }
            Some(_) => true,
            None => false,
        }
    }
}

pub struct Logins {
    codes: Mutex<Table>,
    sessions: Mutex<Table>,
    code_lifetime: Duration,
}

impl Logins {
    pub fn new(code_lifetime: Duration) -> Self {
        Logins {
            codes: Mutex::new(Table::new(MAX_CODES)),
            sessions: Mutex::new(Table::new(MAX_SESSIONS)),
            code_lifetime,
        }
    }

    pub fn code_lifetime(&self) -> Duration {
        self.code_lifetime
    }

    /// A new one-time code (32 hex characters), valid for the code lifetime.
    pub fn new_code(&self) -> String {
        self.new_code_at(Instant::now())
    }

    fn new_code_at(&self, now: Instant) -> String {
        let code = mint("");
        self.codes
            .lock()
            .insert(token_digest(&code), now + self.code_lifetime, now);
        code
    }

    /// Exchanges a code for a new session secret (64 hex characters): once
    /// only, and only within the code's lifetime.
    pub fn exchange(&self, code: &str) -> Option<String> {
        self.exchange_at(code, Instant::now())
    }

    fn exchange_at(&self, code: &str, now: Instant) -> Option<String> {
        if !self.codes.lock().find(&token_digest(code), now, true) {
            return None;
        }
        let session = mint_token();
        self.sessions
            .lock()
            .insert(token_digest(&session), now + SESSION_LIFETIME, now);
        Some(session)
    }

    /// Whether `session` (a cookie's value) is a live session.
    pub fn is_session(&self, session: &str) -> bool {
        self.sessions
            .lock()
            .find(&token_digest(session), Instant::now(), false)
    }

    /// Ends a session (logout).
    pub fn end_session(&self, session: &str) {
        self.sessions
            .lock()
            .find(&token_digest(session), Instant::now(), true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_logs_in_once_and_only_within_its_lifetime() {
        let logins = Logins::new(Duration::from_secs(60));
        let now = Instant::now();
        let code = logins.new_code_at(now);
        assert_eq!(code.len(), 32);
        let session = logins
            .exchange_at(&code, now + Duration::from_secs(59))
            .expect("a fresh code logs in");
        assert_eq!(session.len(), 64);
        assert!(logins.is_session(&session));
        assert!(logins.exchange_at(&code, now).is_none(), "used once only");

        let late = logins.new_code_at(now);
        assert!(
            logins
                .exchange_at(&late, now + Duration::from_secs(60))
                .is_none(),
            "expired"
        );
        assert!(logins.exchange_at("not-a-code", now).is_none());
        assert!(!logins.is_session(&code), "a code is not a session");

        logins.end_session(&session);
        assert!(!logins.is_session(&session));
    }

    #[test]
    fn tables_are_bounded() {
        let logins = Logins::new(Duration::from_secs(60));
        let now = Instant::now();
        let codes: Vec<String> = (0..MAX_CODES + 3)
            .map(|i| logins.new_code_at(now + Duration::from_millis(i as u64)))
            .collect();
        assert_eq!(logins.codes.lock().entries.len(), MAX_CODES);
        // The ones closest to expiry made room; the newest still work.
        assert!(logins.exchange_at(&codes[0], now).is_none());
        assert!(logins.exchange_at(&codes[MAX_CODES + 2], now).is_some());
        for _ in 0..MAX_SESSIONS + 5 {
            let code = logins.new_code_at(now);
            logins.exchange_at(&code, now).unwrap();
        }
        assert_eq!(logins.sessions.lock().entries.len(), MAX_SESSIONS);
    }
}
