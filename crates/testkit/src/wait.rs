//! Bounded waits: a test that would hang fails instead, saying what it was
//! waiting for.

use std::future::Future;
use std::time::Duration;

/// The longest any one awaited event may take. Generous on purpose: it
/// only decides how soon a broken test fails, and CI runs release tests on
/// two busy cores next to real child processes.
pub const WAIT: Duration = Duration::from_secs(20);

/// How often the polling helpers look again.
pub(crate) const POLL: Duration = Duration::from_millis(10);

/// `future`'s output, or a panic naming `what` once [`WAIT`] has passed.
pub async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not happen within {WAIT:?}"))
}

/// Blocking: calls `attempt` until it yields a value, for at most [`WAIT`];
/// past that, panics with `failure()` (which can say what was seen).
pub fn poll<T>(mut attempt: impl FnMut() -> Option<T>, failure: impl FnOnce() -> String) -> T {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        if let Some(value) = attempt() {
            return value;
        }
        if std::time::Instant::now() >= deadline {
            panic!("{} (waited {WAIT:?})", failure());
        }
        std::thread::sleep(POLL);
    }
}

/// Polls `check` until it holds, for at most [`WAIT`]: for effects nothing
/// announces (a file written by a child process, a counter reaching a value).
pub async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what} did not happen within {WAIT:?}"
        );
        tokio::time::sleep(POLL).await;
    }
}
