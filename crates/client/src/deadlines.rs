//! When each of a connection's calls gives up waiting for its answer,
//! watched by one task per connection instead of a timer per call.
//!
//! Why not `tokio::time::timeout` around each call: registering a timer
//! that falls before the runtime's next planned wake-up makes tokio's time
//! driver wake the runtime (a write to its eventfd, then an extra turn of
//! `epoll_wait`; on a multi-thread runtime, a parked worker woken on
//! another CPU). A client making one call after another, as the MCP
//! gateway does, paid that on every call, since each call's timer was the
//! earliest. Here the watcher's one timer stays armed at the earliest
//! deadline it knows of; a call whose deadline is later (every call, when
//! they all wait as long) changes nothing, and a call that ends leaves the
//! timer where it is: when it fires with nothing due, it moves on to the
//! next deadline, which is later, and moving a timer later costs no wake.

use std::collections::BTreeSet;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

/// The deadlines of the calls waiting on one connection.
#[derive(Default)]
pub(crate) struct Deadlines {
    inner: Mutex<Inner>,
    /// Woken when a deadline earlier than the armed one arrives.
    earlier: Notify,
}

#[derive(Default)]
struct Inner {
    /// By deadline, then request id.
    due: BTreeSet<(Instant, i64)>,
    /// Where the watcher's timer is (or is about to be) set; `None` while
    /// it is idle.
    armed: Option<Instant>,
}

impl Deadlines {
    /// Watches call `id` until `deadline`.
    pub(crate) fn add(&self, id: i64, deadline: Instant) {
        let mut inner = self.inner.lock();
        inner.due.insert((deadline, id));
        if inner.armed.is_none_or(|armed| deadline < armed) {
            inner.armed = Some(deadline);
            drop(inner);
            self.earlier.notify_one();
        }
    }

    /// Call `id` got its answer (or was dropped): no longer watched. The
    /// timer stays where it is.
    pub(crate) fn remove(&self, id: i64, deadline: Instant) {
        self.inner.lock().due.remove(&(deadline, id));
    }

    /// Takes out every call whose deadline is not after `now`, and arms the
    /// timer at the next deadline (or leaves it idle).
    pub(crate) fn expire(&self, now: Instant) -> Vec<i64> {
        let mut inner = self.inner.lock();
        let mut expired = Vec::new();
        while let Some(&(deadline, id)) = inner.due.first() {
            if deadline > now {
                break;
            }
            inner.due.pop_first();
            expired.push(id);
        }
        inner.armed = inner.due.first().map(|&(deadline, _)| deadline);
        expired
    }

    /// Where the timer should be now.
    pub(crate) fn armed(&self) -> Option<Instant> {
        self.inner.lock().armed
    }

    /// Forgets every deadline (the connection is gone).
    pub(crate) fn clear(&self) {
        let mut inner = self.inner.lock();
        inner.due.clear();
        inner.armed = None;
    }

    /// Resolves when a deadline earlier than the armed one was added.
    pub(crate) async fn earlier_added(&self) {
        self.earlier.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn only_an_earlier_deadline_moves_the_timer() {
        let deadlines = Deadlines::default();
        let start = Instant::now();
        assert_eq!(deadlines.armed(), None);
        deadlines.add(1, start + Duration::from_secs(10));
        assert_eq!(deadlines.armed(), Some(start + Duration::from_secs(10)));
        // A later call leaves the timer where it is.
        deadlines.add(2, start + Duration::from_secs(11));
        assert_eq!(deadlines.armed(), Some(start + Duration::from_secs(10)));
        // So does the end of the call it is armed for.
        deadlines.remove(1, start + Duration::from_secs(10));
        assert_eq!(deadlines.armed(), Some(start + Duration::from_secs(10)));
        // An earlier one moves it.
        deadlines.add(3, start + Duration::from_secs(5));
        assert_eq!(deadlines.armed(), Some(start + Duration::from_secs(5)));
    }

    #[test]
    fn expiring_takes_what_is_due_and_arms_at_the_next() {
        let deadlines = Deadlines::default();
        let start = Instant::now();
        deadlines.add(1, start + Duration::from_secs(1));
        deadlines.add(2, start + Duration::from_secs(1));
        deadlines.add(3, start + Duration::from_secs(3));
        deadlines.add(4, start + Duration::from_secs(2));
        deadlines.remove(4, start + Duration::from_secs(2));
        // Nothing due yet: nothing taken, the timer at the earliest.
        assert!(deadlines.expire(start).is_empty());
        assert_eq!(deadlines.armed(), Some(start + Duration::from_secs(1)));
        // A deadline is due at its instant, not after it.
        assert_eq!(deadlines.expire(start + Duration::from_secs(1)), [1, 2]);
        assert_eq!(deadlines.armed(), Some(start + Duration::from_secs(3)));
        assert_eq!(deadlines.expire(start + Duration::from_secs(9)), [3]);
        assert_eq!(deadlines.armed(), None);
    }

    #[test]
    fn clearing_forgets_every_deadline() {
        let deadlines = Deadlines::default();
        let start = Instant::now();
        deadlines.add(1, start);
        deadlines.clear();
        assert_eq!(deadlines.armed(), None);
        assert!(deadlines.expire(start + Duration::from_secs(1)).is_empty());
    }
}
