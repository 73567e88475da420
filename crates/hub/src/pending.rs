//! Bookkeeping of routed requests: the id mapping and the deadlines.
//!
//! A request X from caller C to a service of owner O is forwarded as Y, an
//! integer minted from one hub-wide counter (so a Y is never reused, and a late
//! answer to an old Y can never complete a newer request). Three structures
//! hold it, each behind its own short lock:
//!
//! - `O.pending` ([`OwnerPending`]): Y → [`Entry`]. **The one source of truth:**
//!   the task that removes the entry is the one that answers X, so X is
//!   answered exactly once whatever races (answer, timeout, cancel, either
//!   side leaving).
//! - `C.calls` ([`CallerIndex`]): X → (O, Y), to find Y from a
//!   `$/cancelRequest {id: X}` and to release everything when C leaves. Its
//!   size is C's in-flight count.
//! - [`Timers`]: (deadline, Y) → O, one ordered map for the whole hub.
//!
//! Lock order: `O.pending` → `O.out` and `O.pending` → timers. `C.calls` is
//! never held while another lock is taken, so no cycle exists.
//!
//! The tables are generic over the connection type `C` they point at: a
//! connection holds its own tables, so naming `Conn` here would make this
//! file and `conn.rs` import each other. Nothing here looks inside a `C`.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use compact_str::CompactString;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// The raw JSON of a caller's request id (`7`, `"a"`, `null`), stored inline
/// when short so routing a request does not allocate for it.
pub type CallerId = CompactString;

/// How many requests are pending on one service: shared by the service's
/// route (which checks `maxInFlightPerService`) and each of its entries.
/// Changed only under the owner's `pending` lock.
#[derive(Debug, Default)]
pub struct InFlight(AtomicU64);

impl InFlight {
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// One forwarded request, held by its owner's connection.
pub struct Entry<C> {
    pub caller: Arc<C>,
    pub caller_id: CallerId,
    /// The in-flight count of the service it went to.
    pub service: Arc<InFlight>,
    pub deadline: Instant,
    pub timeout_ms: u64,
}

pub struct OwnerPending<C> {
    entries: FastMap<u64, Entry<C>>,
    /// Set when the owner leaves: nothing new is accepted after.
    closed: bool,
}

impl<C> Default for OwnerPending<C> {
    fn default() -> Self {
        OwnerPending {
            entries: FastMap::default(),
            closed: false,
        }
    }
}

impl<C> OwnerPending<C> {
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    pub fn insert(&mut self, id: u64, entry: Entry<C>) {
        entry.service.0.fetch_add(1, Ordering::Relaxed);
        self.entries.insert(id, entry);
    }

    /// Takes the entry of `id`, which settles it: the caller must answer.
    pub fn take(&mut self, id: u64) -> Option<Entry<C>> {
        let entry = self.entries.remove(&id)?;
        entry.service.0.fetch_sub(1, Ordering::Relaxed);
        Some(entry)
    }

    /// Takes every entry of one service (it was unregistered).
    pub fn take_service(&mut self, service: &Arc<InFlight>) -> Vec<(u64, Entry<C>)> {
        let taken: Vec<(u64, Entry<C>)> = self
            .entries
            .extract_if(|_, entry| Arc::ptr_eq(&entry.service, service))
            .collect();
        for (_, entry) in &taken {
            entry.service.0.fetch_sub(1, Ordering::Relaxed);
        }
        taken
    }

    /// Closes the table and takes every entry (the owner left).
    pub fn close(&mut self) -> Vec<(u64, Entry<C>)> {
        self.closed = true;
        self.take_all()
    }

    /// Takes every entry, leaving the table open (a federation link whose
    /// hub stopped answering: what was sent is lost, what comes is not).
    pub fn take_all(&mut self) -> Vec<(u64, Entry<C>)> {
        let taken: Vec<(u64, Entry<C>)> = self.entries.drain().collect();
        for (_, entry) in &taken {
            entry.service.0.fetch_sub(1, Ordering::Relaxed);
        }
        taken
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Where a caller's request went.
pub struct Call<C> {
    pub owner: Arc<C>,
    pub forwarded_id: u64,
}

pub struct CallerIndex<C> {
    calls: FastMap<CallerId, Call<C>>,
}

impl<C> Default for CallerIndex<C> {
    fn default() -> Self {
        CallerIndex {
            calls: FastMap::default(),
        }
    }
}

impl<C> CallerIndex<C> {
    pub fn len(&self) -> usize {
        self.calls.len()
    }

    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    pub fn contains(&self, caller_id: &str) -> bool {
        self.calls.contains_key(caller_id)
    }

    pub fn insert(&mut self, caller_id: CallerId, call: Call<C>) {
        self.calls.insert(caller_id, call);
    }

    pub fn remove(&mut self, caller_id: &str) -> Option<Call<C>> {
        self.calls.remove(caller_id)
    }

    /// Removes `caller_id` only if it still maps to `forwarded_id`.
    pub fn remove_if_forwarded_as(&mut self, caller_id: &str, forwarded_id: u64) {
        if self
            .calls
            .get(caller_id)
            .is_some_and(|call| call.forwarded_id == forwarded_id)
        {
            self.calls.remove(caller_id);
        }
    }

    pub fn take_all(&mut self) -> Vec<(CallerId, Call<C>)> {
        let calls = std::mem::take(&mut self.calls);
        calls.into_iter().collect()
    }
}

/// Mints forwarded ids: one counter for the hub, starting at 1.
#[derive(Debug)]
pub struct ForwardIds(AtomicU64);

impl Default for ForwardIds {
    fn default() -> Self {
        ForwardIds(AtomicU64::new(1))
    }
}

impl ForwardIds {
    pub fn next(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed)
    }
}

/// Deadlines of every pending request, earliest first.
///
/// Keys are `(deadline, forwarded id)`, unique because forwarded ids are, so
/// removing a settled request's deadline can never remove another's. Only the
/// timer task (`requests::run_timers`) pops; anyone inserts and removes.
pub struct Timers<C> {
    queue: Mutex<Deadlines<C>>,
    wake: Notify,
}

struct Deadlines<C> {
    /// Each deadline's owner, weakly: a deadline never keeps a connection alive.
    by_time: BTreeMap<(Instant, u64), Weak<C>>,
    /// When the timer task will next look. An insert wakes it only for a
    /// deadline before this, so routine requests (deadlines far ahead) cost
    /// no wake-up at all.
    next_look: Instant,
}

/// The timer task looks at least this often, so `next_look` is never far
/// ahead and an insert rarely has to wake it.
const LOOK_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

impl<C> Default for Timers<C> {
    fn default() -> Self {
        Timers {
            queue: Mutex::new(Deadlines {
                by_time: BTreeMap::new(),
                next_look: Instant::now(),
            }),
            wake: Notify::new(),
        }
    }
}

impl<C> Timers<C> {
    pub fn insert(&self, deadline: Instant, id: u64, owner: &Arc<C>) {
        let mut queue = self.queue.lock();
        queue.by_time.insert((deadline, id), Arc::downgrade(owner));
        let sooner = deadline < queue.next_look;
        if sooner {
            queue.next_look = deadline;
        }
        drop(queue);
        if sooner {
            self.wake.notify_one();
        }
    }

    pub fn remove(&self, deadline: Instant, id: u64) {
        self.queue.lock().by_time.remove(&(deadline, id));
    }

    /// Pops every deadline at or before `now` into `due`; returns when the
    /// timer task should look next.
    pub fn pop_due(&self, now: Instant, due: &mut Vec<(u64, Weak<C>)>) -> Instant {
        let mut queue = self.queue.lock();
        let mut next = now + LOOK_EVERY;
        while let Some(entry) = queue.by_time.first_entry() {
            if entry.key().0 > now {
                next = next.min(entry.key().0);
                break;
            }
            let ((_, id), owner) = entry.remove_entry();
            due.push((id, owner));
        }
        queue.next_look = next;
        next
    }

    /// Resolves when a deadline earlier than all others was inserted.
    pub async fn changed(&self) {
        self.wake.notified().await
    }

    pub fn len(&self) -> usize {
        self.queue.lock().by_time.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.lock().by_time.is_empty()
    }
}
