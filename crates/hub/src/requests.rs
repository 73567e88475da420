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
use tokio::time::Instant;

use crate::conn::{Conn, Entry};
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
    let entry = {
        let mut pending = call.owner.pending.lock();
        let entry = pending.take(call.forwarded_id);
        if entry.is_some() {
            tell_owner_cancelled(&call.owner, call.forwarded_id);
        }
        entry
    };
    // No entry: the request was answered meanwhile, and that answer stands.
    let Some(entry) = entry else { return };
    hub.timers.remove(entry.deadline, call.forwarded_id);
    caller.counters.request_failed(RequestFailure::Cancelled);
    let _: Pushed = caller.out.push(Class::Essential, |buf| {
        wire::error(buf, Some(entry.caller_id.as_str()), &reply::cancelled())
    });
}

/// Queues `$/cancelRequest {id}` to an owner; call with its `pending` held.
fn tell_owner_cancelled(owner: &Conn, forwarded_id: u64) {
    let _: Pushed = owner
        .out
        .push(Class::Essential, |buf| wire::cancel(buf, forwarded_id));
}

/// A deadline passed: answer -32051 and tell the owner to stop.
fn expire(hub: &HubState, owner: &Conn, forwarded_id: u64) {
    let entry = {
        let mut pending = owner.pending.lock();
        let entry = pending.take(forwarded_id);
        if entry.is_some() {
            tell_owner_cancelled(owner, forwarded_id);
        }
        entry
    };
    let Some(entry) = entry else { return };
    entry
        .caller
        .calls
        .lock()
        .remove_if_forwarded_as(&entry.caller_id, forwarded_id);
    hub.counters.request_failed(RequestFailure::Timeout);
    let _: Pushed = entry.caller.out.push(Class::Essential, |buf| {
        wire::error(
            buf,
            Some(entry.caller_id.as_str()),
            &reply::timeout(entry.timeout_ms),
        )
    });
}

/// Fails requests that can no longer be answered because their service is
/// gone, with -32052 and the reason.
fn fail_gone(hub: &HubState, entries: Vec<(u64, Entry)>, reason: GoneReason) {
    for (forwarded_id, entry) in entries {
        hub.timers.remove(entry.deadline, forwarded_id);
        entry
            .caller
            .calls
            .lock()
            .remove_if_forwarded_as(&entry.caller_id, forwarded_id);
        hub.counters.request_failed(reason.into());
        let _: Pushed = entry.caller.out.push(Class::Essential, |buf| {
            wire::error(
                buf,
                Some(entry.caller_id.as_str()),
                &reply::service_gone(reason),
            )
        });
    }
}

/// A service was unregistered: fail its pending requests.
pub fn service_unregistered(hub: &HubState, route: &ServiceRoute) {
    let entries = route.owner.pending.lock().take_service(&route.in_flight);
    fail_gone(hub, entries, GoneReason::Unregistered);
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
        let entry = {
            let mut pending = call.owner.pending.lock();
            let entry = pending.take(call.forwarded_id);
            if entry.is_some() {
                tell_owner_cancelled(&call.owner, call.forwarded_id);
            }
            entry
        };
        if let Some(entry) = entry {
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
