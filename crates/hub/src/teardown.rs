//! The end of a connection, and of the hub.
//!
//! A connection leaving is undone exactly once, in its own task, after its
//! reader stopped ([`disconnect`]), and forgotten once its writer finished
//! ([`release`]). Shutdown is one small protocol ([`begin_shutdown`]): stop
//! admitting, fail what is pending, ask every connection to flush and close;
//! `Hub::shutdown` then waits (bounded) for their tasks to end.

use std::sync::Arc;

use switchboard_protocol::error::GoneReason;

use crate::conn::Conn;
use crate::metrics::Counters;
use crate::requests;
use crate::state::HubState;

/// Tears down what a connection held: its services (published as
/// `removed`), the requests pending on them (-32052), its own pending
/// requests (owners get `$/cancelRequest`). Runs once, in the connection's
/// task, after its reader stopped.
pub fn disconnect(hub: &HubState, conn: &Arc<Conn>) {
    conn.out.drain_and_close();
    let routes = hub.registry.remove_connection(conn);
    requests::owner_gone(hub, conn, GoneReason::Disconnected);
    requests::caller_gone(hub, conn);
    if conn.out.was_slow_consumer() {
        Counters::inc(&conn.counters.slow_consumer_disconnects);
        tracing::warn!(client = conn.label(), "disconnected a slow consumer");
    }
    tracing::debug!(
        client = conn.label(),
        services = routes.len(),
        "connection closed"
    );
}

/// Closes every connection that authenticated with the token (or launch
/// credential) of this digest: a module run that ended takes the
/// connections made with its credential along, a descendant's included.
/// Each one's own task then tears it down.
pub fn close_authenticated_with(hub: &HubState, digest: &[u8; 32]) -> usize {
    let conns = hub.admission.open().to_vec();
    let mut closed = 0;
    for conn in conns {
        let matches = conn
            .identity()
            .is_some_and(|identity| identity.token_digest.as_ref() == Some(digest));
        if matches {
            conn.out.drain_and_close();
            closed += 1;
        }
    }
    closed
}

/// Forgets a connection whose task has ended, keeping its counts, and frees
/// its slot.
pub fn release(hub: &HubState, conn: &Conn) {
    hub.admission.release(conn, &hub.counters);
}

/// Shutdown, step one: refuse new connections, fail every pending request
/// with -32052, and ask every connection to flush and close.
pub fn begin_shutdown(hub: &HubState) {
    hub.stop();
    let conns = hub.admission.close();
    for conn in &conns {
        requests::owner_gone(hub, conn, GoneReason::Disconnected);
    }
    for conn in &conns {
        conn.out.drain_and_close();
    }
}
