//! How a routed request ends, other than by its owner's answer (which is
//! `router::response`): its deadline passes, its caller cancels it, its
//! service is unregistered, or either side leaves. Each way takes the entry
//! from the owner's `pending` (`pending.rs`), and only whoever takes it
//! answers, so the caller gets exactly one answer whatever races.
//!
//! Lock order as everywhere: `O.pending` → `O.out` (a `$/cancelRequest` to
//! the owner is queued under `O.pending`, so it never overtakes the request
//! it cancels); `C.calls` is taken alone.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::value::RawValue;
use switchboard_protocol::error::GoneReason;
use switchboard_protocol::jsonrpc::ErrorObject;
use tokio::time::Instant;

use crate::conn::{Conn, Entry, Transport};
use crate::metrics::{Counters, RequestFailure};
use crate::outbound::{Class, Pushed};
use crate::registry::ServiceRoute;
use crate::reply;
use crate::state::HubState;
use crate::wire;

/// `$/cancelRequest {id}` from a caller.
pub fn cancel(hub: &HubState, caller: &Conn, params: Option<&RawValue>) {
    #[derive(Deserialize)]
    struct Cancel<'a> {
        #[serde(borrow)]
        id: &'a RawValue,
    }
    let Some(cancel) = params
        .filter(|p| p.get().starts_with('{'))
        .and_then(|p| serde_json::from_str::<Cancel<'_>>(p.get()).ok())
    else {
        return Counters::inc(&caller.counters.protocol_errors);
    };
    // Unknown or finished ids do nothing.
    let Some(call) = caller.calls.lock().remove(cancel.id.get()) else {
        return;
    };
    // No entry: the request was answered meanwhile, and that answer stands.
    let Some(entry) = take_and_tell_owner(&call.owner, call.forwarded_id) else {
        return;
    };
    hub.timers.remove(entry.deadline, call.forwarded_id);
    caller.counters.request_failed(RequestFailure::Cancelled);
    // A federation link's hub answered its own caller when it sent the
    // cancel (its entry is gone there): an answer would only be dropped.
    if caller.transport != Transport::Link {
        answer_caller(&entry, &reply::cancelled());
    }
}

/// Takes the entry of `forwarded_id` from `owner`, and if there was one,
/// queues `$/cancelRequest {id}` to the owner under the same lock (so it
/// cannot overtake the request it cancels).
fn take_and_tell_owner(owner: &Conn, forwarded_id: u64) -> Option<Entry> {
    let mut pending = owner.pending.lock();
    let entry = pending.take(forwarded_id)?;
    let _: Pushed = owner
        .out
        .push(Class::Essential, |buf| wire::cancel(buf, forwarded_id));
    Some(entry)
}

/// Forgets the rest of a request whose entry was just taken: its deadline
/// and the caller's index entry (unless the caller reused the id since).
pub fn forget(hub: &HubState, forwarded_id: u64, entry: &Entry) {
    hub.timers.remove(entry.deadline, forwarded_id);
    entry
        .caller
        .calls
        .lock()
        .remove_if_forwarded_as(&entry.caller_id, forwarded_id);
}

/// Answers the caller of a request whose entry was just taken.
fn answer_caller(entry: &Entry, error: &ErrorObject) {
    let _: Pushed = entry.caller.out.push(Class::Essential, |buf| {
        wire::error(buf, Some(entry.caller_id.as_str()), error)
    });
}

/// A deadline passed (its timer is already popped): answer -32051 and tell
/// the owner to stop.
fn expire(hub: &HubState, owner: &Conn, forwarded_id: u64) {
    let Some(entry) = take_and_tell_owner(owner, forwarded_id) else {
        return;
    };
    entry
        .caller
        .calls
        .lock()
        .remove_if_forwarded_as(&entry.caller_id, forwarded_id);
    hub.counters.request_failed(RequestFailure::Timeout);
    answer_caller(&entry, &reply::timeout(entry.timeout_ms));
}

/// Fails requests that can no longer be answered because their service is
/// gone, with -32052 and the reason.
fn fail_gone(hub: &HubState, entries: Vec<(u64, Entry)>, reason: GoneReason) {
    let error = reply::service_gone(reason);
    for (forwarded_id, entry) in entries {
        forget(hub, forwarded_id, &entry);
        hub.counters.request_failed(reason.into());
        answer_caller(&entry, &error);
    }
}

/// A service was unregistered: fail its pending requests.
pub fn service_unregistered(hub: &HubState, route: &ServiceRoute) {
    service_removed(hub, route, GoneReason::Unregistered);
}

/// A service was removed (unregistered, or its owner's hub gone): fail its
/// pending requests with `reason`.
pub fn service_removed(hub: &HubState, route: &ServiceRoute, reason: GoneReason) {
    let entries = route.owner.pending.lock().take_service(&route.in_flight);
    fail_gone(hub, entries, reason);
}

/// An owner that stays (a federation link) will not answer what is pending
/// on it: fail it all with `reason`; returns how many.
pub fn fail_all_pending(hub: &HubState, owner: &Conn, reason: GoneReason) -> usize {
    let entries = owner.pending.lock().take_all();
    let failed = entries.len();
    fail_gone(hub, entries, reason);
    failed
}

/// Fails one request pending on `owner` with `error` (a federation link
/// that could not send it); `false` if it was settled already.
pub fn fail_one(hub: &HubState, owner: &Conn, forwarded_id: u64, error: &ErrorObject) -> bool {
    let Some(entry) = owner.pending.lock().take(forwarded_id) else {
        return false;
    };
    forget(hub, forwarded_id, &entry);
    hub.counters.request_failed(RequestFailure::Limit);
    answer_caller(&entry, error);
    true
}

/// An owner left: fail every request pending on its services; accept no more.
pub fn owner_gone(hub: &HubState, owner: &Conn, reason: GoneReason) {
    let entries = owner.pending.lock().close();
    fail_gone(hub, entries, reason);
}

/// A caller left: release its pending requests and tell each owner.
pub fn caller_gone(hub: &HubState, caller: &Conn) {
    let calls = caller.calls.lock().take_all();
    for (_, call) in calls {
        if let Some(entry) = take_and_tell_owner(&call.owner, call.forwarded_id) {
            hub.timers.remove(entry.deadline, call.forwarded_id);
            hub.counters.request_failed(RequestFailure::CallerGone);
        }
    }
}

/// The timer task: answers requests whose deadline passed. Runs until the
/// hub shuts down; it holds the timers' lock only to pop due deadlines.
pub async fn run_timers(hub: Arc<HubState>) {
    let mut due = Vec::new();
    loop {
        let next = hub.timers.pop_due(Instant::now(), &mut due);
        for (forwarded_id, owner) in due.drain(..) {
            if let Some(owner) = owner.upgrade() {
                expire(&hub, &owner, forwarded_id);
            }
        }
        tokio::select! {
            () = tokio::time::sleep_until(next) => {}
            () = hub.timers.changed() => {}
            () = hub.stopping() => return,
        }
    }
}
