//! Which connections the hub takes, and the table of those it holds.
//!
//! `maxConnections` is a pool of connection slots (a semaphore, as in
//! mini-redis's `server.rs`). An accept loop takes a slot before it spawns a
//! task or reads a byte, and the slot lives as long as the connection: it is
//! stored beside the connection in the table and freed when the connection
//! is released, under the table's lock, so the count of open connections and
//! the free slots always agree.
//!
//! A connection that finds no slot is refused inside one of a few refusal
//! slots (a `-32050` line on the Unix socket; on the WebSocket port, HTTP 503
//! for an upgrade, while `/metrics` and `/healthz` are still served), and
//! when those are all taken it is closed at once. A flood of connections
//! therefore costs bounded work and memory: at most `maxConnections`
//! connections and [`REFUSALS`] refusals exist at any time.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};
use switchboard_protocol::Limits;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::conn::{Conn, Transport};
use crate::ids::{self, ConnId};
use crate::metrics::Counters;
use crate::outbound::Outbound;

type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// Connections past `maxConnections` being refused at once (each told why,
/// within a bounded time); past this they are closed without a word.
pub const REFUSALS: usize = 64;

/// What an accepted socket may do, decided before anything is read from it.
pub enum Slot {
    /// It may become a connection: the slot goes to [`Admission::admit`].
    Connection(ConnectionSlot),
    /// The hub is full: it may only be told so (or, on the WebSocket port,
    /// served `/metrics` or `/healthz`). Dropping it frees the refusal slot.
    Refusal(OwnedSemaphorePermit),
}

/// One of the `maxConnections` slots, held from accept until the
/// connection is released.
pub struct ConnectionSlot {
    /// Returned to the pool when dropped.
    _permit: OwnedSemaphorePermit,
}

pub struct Admission {
    table: Mutex<Table>,
    slots: Arc<Semaphore>,
    refusals: Arc<Semaphore>,
    max: u64,
    accepted: AtomicU64,
    refused: AtomicU64,
    /// `Conn`s not yet freed (each holds a clone and decrements it on drop).
    allocated: Arc<AtomicUsize>,
}

struct Table {
    /// Every open connection, with the slot it holds.
    open: FastMap<ConnId, Admitted>,
    /// Set at shutdown: nothing is admitted after.
    closed: bool,
}

struct Admitted {
    conn: Arc<Conn>,
    /// `None` for the hub's own connections (links, the feed), which take
    /// no slot of `maxConnections`.
    _slot: Option<ConnectionSlot>,
}

/// Why a connection was not admitted.
#[derive(Debug)]
pub struct ShuttingDown;

impl Admission {
    pub fn new(max_connections: u64) -> Self {
        let slots = usize::try_from(max_connections)
            .unwrap_or(usize::MAX)
            .min(Semaphore::MAX_PERMITS);
        Admission {
            table: Mutex::new(Table {
                open: FastMap::default(),
                closed: false,
            }),
            slots: Arc::new(Semaphore::new(slots)),
            refusals: Arc::new(Semaphore::new(REFUSALS)),
            max: max_connections,
            accepted: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            allocated: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// `maxConnections`.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Called by an accept loop for each socket, before anything is read: a
    /// connection slot, else a refusal slot, else `None` (close it now; it
    /// is counted as refused).
    pub fn at_accept(&self) -> Option<Slot> {
        if let Ok(permit) = self.slots.clone().try_acquire_owned() {
            return Some(Slot::Connection(ConnectionSlot { _permit: permit }));
        }
        match self.refusals.clone().try_acquire_owned() {
            Ok(permit) => Some(Slot::Refusal(permit)),
            Err(_) => {
                self.count_refused();
                None
            }
        }
    }

    /// Counts a connection turned away at `maxConnections` (or at shutdown).
    pub fn count_refused(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }

    /// Makes a connection of a socket that holds `slot`; refused only once
    /// shutdown has begun (checked under the table's lock, so a connection
    /// is either in the table that shutdown closes, or never admitted).
    pub fn admit(
        &self,
        slot: ConnectionSlot,
        transport: Transport,
        limits: &Limits,
    ) -> Result<Arc<Conn>, ShuttingDown> {
        let bounds = (limits.notify_shed_bytes, limits.slow_consumer_bytes);
        let conn = self.insert(Some(slot), transport, bounds)?;
        self.accepted.fetch_add(1, Ordering::Relaxed);
        Ok(conn)
    }

    /// A connection the hub makes for itself (a federation link, a
    /// catalog feed): in the table like any other, so shutdown closes it and
    /// scrapes count its queue and requests, but without a slot. Its queue
    /// sheds notifications past `shed_bytes` and closes past `max_bytes`.
    pub fn admit_internal(
        &self,
        transport: Transport,
        shed_bytes: u64,
        max_bytes: u64,
    ) -> Result<Arc<Conn>, ShuttingDown> {
        debug_assert!(!transport.is_client());
        self.insert(None, transport, (shed_bytes, max_bytes))
    }

    fn insert(
        &self,
        slot: Option<ConnectionSlot>,
        transport: Transport,
        (shed_bytes, max_bytes): (u64, u64),
    ) -> Result<Arc<Conn>, ShuttingDown> {
        let mut table = self.table.lock();
        if table.closed {
            if slot.is_some() {
                self.count_refused();
            }
            return Err(ShuttingDown);
        }
        let out = Outbound::new(shed_bytes, max_bytes, transport.framing());
        let conn = Conn::new(ids::next_conn_id(), transport, out, self.allocated.clone());
        table.open.insert(
            conn.id,
            Admitted {
                conn: conn.clone(),
                _slot: slot,
            },
        );
        Ok(conn)
    }

    /// Forgets a connection whose task has ended and frees its slot; its
    /// counters go into `totals` under the same lock, so a scrape counts
    /// them exactly once.
    pub fn release(&self, conn: &Conn, totals: &Counters) {
        let mut table = self.table.lock();
        let admitted = table.open.remove(&conn.id);
        totals.absorb(&conn.counters);
        let (sent, _) = conn.out.sent();
        totals
            .messages_sent
            .fetch_add(sent.messages, Ordering::Relaxed);
        totals.bytes_sent.fetch_add(sent.bytes, Ordering::Relaxed);
        // The slot is freed here, under the lock: once a reader sees the
        // connection gone from the table, its slot is free too.
        drop(admitted);
    }

    /// Shutdown: admit nothing more; returns every open connection.
    pub fn close(&self) -> Vec<Arc<Conn>> {
        let mut table = self.table.lock();
        table.closed = true;
        table.open.values().map(|a| a.conn.clone()).collect()
    }

    /// The open connections, under the table's lock (hold it briefly).
    pub fn open(&self) -> Open<'_> {
        Open(self.table.lock())
    }

    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }

    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// `Conn`s allocated and not yet freed.
    pub fn allocated(&self) -> usize {
        self.allocated.load(Ordering::Relaxed)
    }
}

/// The table of open connections, locked.
pub struct Open<'a>(MutexGuard<'a, Table>);

impl Open<'_> {
    pub fn len(&self) -> usize {
        self.0.open.len()
    }

    /// Open connections of clients (links and the feed left out).
    pub fn clients(&self) -> usize {
        self.iter()
            .filter(|conn| conn.transport.is_client())
            .count()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<Conn>> {
        self.0.open.values().map(|admitted| &admitted.conn)
    }

    /// A copy of the list, to act on without the lock.
    pub fn to_vec(&self) -> Vec<Arc<Conn>> {
        self.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_past_the_bound_become_refusals_then_nothing() {
        let admission = Admission::new(2);
        let limits = Limits::default();
        let mut slots = Vec::new();
        for _ in 0..2 {
            match admission.at_accept() {
                Some(Slot::Connection(slot)) => slots.push(slot),
                _ => panic!("a connection slot is free"),
            }
        }
        let refusals: Vec<_> = (0..REFUSALS)
            .map(|_| match admission.at_accept() {
                Some(Slot::Refusal(permit)) => permit,
                _ => panic!("a refusal slot is free"),
            })
            .collect();
        assert!(admission.at_accept().is_none());
        assert_eq!(admission.refused(), 1);
        drop(refusals);

        // A released connection frees its slot.
        let conn = admission
            .admit(slots.pop().unwrap(), Transport::Unix, &limits)
            .unwrap();
        assert!(matches!(admission.at_accept(), Some(Slot::Refusal(_))));
        admission.release(&conn, &Counters::default());
        assert_eq!(admission.open().len(), 0);
        assert!(matches!(admission.at_accept(), Some(Slot::Connection(_))));
        drop(conn);
        assert_eq!(admission.allocated(), 0);
    }

    #[test]
    fn nothing_is_admitted_after_close() {
        let admission = Admission::new(4);
        let Some(Slot::Connection(slot)) = admission.at_accept() else {
            panic!("a slot is free");
        };
        assert!(admission.close().is_empty());
        assert!(admission
            .admit(slot, Transport::Unix, &Limits::default())
            .is_err());
        assert_eq!(admission.refused(), 1);
    }
}
