//! The two routing paths: notifications (fire and forget) and requests
//! (forwarded under a fresh id, answered exactly once).
//!
//! Everything here runs inside the reader task of the connection whose
//! message is being handled (or the timer task, for deadlines). Nothing
//! awaits: a message to another connection is appended to its queue, so a
//! slow peer can never stall the task that routes to it. See `pending.rs`
//! for the bookkeeping and its lock order.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::value::RawValue;
use switchboard_protocol::error::GoneReason;
use switchboard_protocol::hub::{check_method_name, MethodNameError};
use switchboard_protocol::json::{Member, MemberIndex};
use switchboard_protocol::jsonrpc::{ErrorObject, Outcome};
use switchboard_protocol::limits::names;
use switchboard_protocol::scan;
use switchboard_protocol::ErrorCode;
use tokio::time::Instant;

use crate::conn::{Conn, Identity};
use crate::metrics::{Counters, NotifyDrop, RequestFailure};
use crate::outbound::{Class, Pushed};
use crate::pending::{Call, CallerId, Entry};
use crate::policy::Action;
use crate::reply;
use crate::state::HubState;
use crate::wire::{self, Routed, RoutedHeader};

/// The members of `clientService/notify` and `clientService/request`
/// params. `jsonrpc::decode_indexed` records them while it validates the
/// message (`MemberIndex`), so the payload is walked once, not twice; an
/// object with more members than the index holds is walked again with
/// `protocol::scan`, which skips values without validating them again.
#[derive(Default)]
struct RawCall<'a> {
    service_id: Option<Member<'a>>,
    method: Option<Member<'a>>,
    params: Option<&'a str>,
    timeout_ms: Option<&'a str>,
}

impl<'a> RawCall<'a> {
    /// `Err(field)`: params are not an object (`params`), or a member appears
    /// twice (that member).
    fn scan(params: Option<&'a RawValue>, index: &MemberIndex<'a>) -> Result<Self, &'static str> {
        // Params are an object, as for every hub method.
        let params = params
            .filter(|p| p.get().starts_with('{'))
            .ok_or("params")?;
        let mut call = RawCall::default();
        match index.members_of(params.get()) {
            Some(mut members) => members.try_for_each(|member| call.take(member))?,
            None => scan::members(params).try_for_each(|member| call.take(member))?,
        }
        Ok(call)
    }

    fn take(&mut self, member: Member<'a>) -> Result<(), &'static str> {
        // A key without text (a lone surrogate escape) names no member.
        let (taken, field) = match member.key.text().as_deref() {
            Some("serviceId") => (self.service_id.replace(member).is_some(), "serviceId"),
            Some("method") => (self.method.replace(member).is_some(), "method"),
            Some("params") => (self.params.replace(member.value).is_some(), "params"),
            Some("timeoutMs") => (self.timeout_ms.replace(member.value).is_some(), "timeoutMs"),
            _ => return Ok(()),
        };
        if taken {
            Err(field)
        } else {
            Ok(())
        }
    }
}

/// Forwards `clientService/notify`. Never answers the sender: every failure
/// is a silent, counted drop.
pub fn notify(
    hub: &HubState,
    sender: &Conn,
    identity: &Identity,
    params: Option<&RawValue>,
    index: &MemberIndex<'_>,
) {
    let counters = &sender.counters;
    let Ok(RawCall {
        service_id: Some(service_id),
        method: Some(method),
        params,
        ..
    }) = RawCall::scan(params, index)
    else {
        return counters.notification_dropped(NotifyDrop::Malformed);
    };
    let Ok(service_id) = service_id.value_str() else {
        return counters.notification_dropped(NotifyDrop::Malformed);
    };
    if method_name(&method, hub.limits.max_method_bytes).is_err() {
        return counters.notification_dropped(NotifyDrop::Malformed);
    }
    let Some(route) = hub.registry.route(&service_id) else {
        return counters.notification_dropped(NotifyDrop::UnknownService);
    };
    if !hub
        .registry
        .authorize(sender, identity, &route, Action::Notify)
    {
        return counters.notification_dropped(NotifyDrop::NotPermitted);
    }
    let header = RoutedHeader {
        service_id_json: &route.id_json,
        sender_fields: &identity.sender_fields,
    };
    // The `gone` check runs under the owner's queue lock: an unregister sets
    // the flag before it queues its response, so no notification can follow
    // that response on the owner's connection.
    let pushed = route.owner.out.push_if(
        Class::Sheddable,
        || route.gone().is_none(),
        |buf| wire::routed(buf, Routed::Notification, &header, method.value, params),
    );
    match pushed {
        Pushed::Queued => Counters::inc(&counters.notifications_forwarded),
        Pushed::Congested => {
            Counters::inc(&counters.notifications_forwarded);
            sender.wait_for(&route.owner);
        }
        Pushed::Shed => counters.notification_dropped(NotifyDrop::Shed),
        Pushed::Closed | Pushed::SlowConsumer => counters.notification_dropped(NotifyDrop::Closed),
    }
}

/// Checks the member `method` (a JSON string) against the spec's rule.
fn method_name(method: &Member<'_>, max: u64) -> Result<(), ErrorObject> {
    let name = method
        .value_str()
        .map_err(|error| reply::invalid_params("method", format!("method {error}")))?;
    check_method_name(&name, max).map_err(|error| match error {
        MethodNameError::TooLong { .. } => {
            reply::limit(names::MAX_METHOD_BYTES, max, error.to_string())
        }
        _ => reply::invalid_params("method", error.to_string()),
    })
}

/// A request that passed every check that needs no state.
struct Accepted<'a> {
    service_id: std::borrow::Cow<'a, str>,
    method: &'a str,
    params: Option<&'a str>,
    timeout_ms: u64,
}

fn check_request<'a>(
    hub: &HubState,
    params: Option<&'a RawValue>,
    index: &MemberIndex<'a>,
) -> Result<Accepted<'a>, ErrorObject> {
    const SHAPE: &str = "clientService/request params are {serviceId, method, params?, timeoutMs?}";
    let request = RawCall::scan(params, index).map_err(|field| match field {
        "params" => reply::invalid_params("params", SHAPE),
        field => reply::invalid_params(field, format!("{field} appears twice")),
    })?;
    let service_id = request
        .service_id
        .ok_or_else(|| reply::invalid_params("serviceId", "serviceId is required"))?
        .value_str()
        .map_err(|error| reply::invalid_params("serviceId", format!("serviceId {error}")))?;
    let method = request
        .method
        .ok_or_else(|| reply::invalid_params("method", "method is required"))?;
    method_name(&method, hub.limits.max_method_bytes)?;
    let method = method.value;
    let limits = &hub.limits;
    let timeout_ms = match request.timeout_ms {
        None => limits.default_request_timeout_ms,
        // `"timeoutMs": null` is refused like any other non-integer, not
        // taken for "absent" (which would mean the default timeout).
        Some(raw) => match raw.parse::<u64>() {
            Ok(ms) if ms >= 1 && ms <= limits.max_request_timeout_ms => ms,
            _ => {
                return Err(reply::invalid_params(
                    "timeoutMs",
                    format!(
                    "timeoutMs must be an integer from 1 to {} (maxRequestTimeoutMs), not {raw}",
                    limits.max_request_timeout_ms,
                ),
                ))
            }
        },
    };
    Ok(Accepted {
        service_id,
        method,
        params: request.params,
        timeout_ms,
    })
}

/// Routes `clientService/request` with id `caller_id` (raw JSON).
pub fn request(
    hub: &HubState,
    caller: &Arc<Conn>,
    identity: &Identity,
    caller_id: &RawValue,
    params: Option<&RawValue>,
    index: &MemberIndex<'_>,
) {
    let counters = &caller.counters;
    let answer_error = |error: &ErrorObject, why: RequestFailure| {
        counters.request_failed(why);
        let _ = caller.out.push(Class::Essential, |buf| {
            wire::error(buf, Some(caller_id.get()), error)
        });
    };

    let request = match check_request(hub, params, index) {
        Ok(accepted) => accepted,
        Err(error) => {
            let why = if error.code == ErrorCode::LimitExceeded.code() {
                RequestFailure::Limit
            } else {
                RequestFailure::InvalidParams
            };
            return answer_error(&error, why);
        }
    };
    let Some(route) = hub.registry.route(&request.service_id) else {
        return answer_error(
            &reply::unknown_service(&request.service_id),
            RequestFailure::NotFound,
        );
    };
    if !hub
        .registry
        .authorize(caller, identity, &route, Action::Discover)
    {
        return answer_error(
            &reply::unknown_service(&request.service_id),
            RequestFailure::NotFound,
        );
    }
    if !hub
        .registry
        .authorize(caller, identity, &route, Action::Request)
    {
        let error = reply::permission_denied(format!(
            "principal {} may not send requests to service {:?}",
            identity.principal.principal.label(),
            request.service_id
        ));
        return answer_error(&error, RequestFailure::PermissionDenied);
    }

    let forwarded_id = hub.forward_ids.next();
    let caller_key = CallerId::from(caller_id.get());
    {
        let mut calls = caller.calls.lock();
        let max = hub.limits.max_in_flight_per_client;
        if calls.len() as u64 >= max {
            drop(calls);
            let error = reply::limit(
                names::MAX_IN_FLIGHT_PER_CLIENT,
                max,
                format!("this connection already has {max} requests in flight"),
            );
            return answer_error(&error, RequestFailure::Limit);
        }
        if calls.contains(&caller_key) {
            drop(calls);
            let error = reply::invalid_request(
                "duplicateId",
                format!(
                    "a request with id {} is already in flight on this connection",
                    caller_id.get()
                ),
            );
            return answer_error(&error, RequestFailure::InvalidParams);
        }
        calls.insert(
            caller_key.clone(),
            Call {
                owner: route.owner.clone(),
                forwarded_id,
            },
        );
    }

    let deadline = Instant::now() + Duration::from_millis(request.timeout_ms);
    let refused = {
        let mut pending = route.owner.pending.lock();
        let max = hub.limits.max_in_flight_per_service;
        if let Some(reason) = route
            .gone()
            .or(pending.is_closed().then_some(GoneReason::Disconnected))
        {
            Some((reply::service_gone(reason), gone_failure(reason)))
        } else if route.in_flight.load(Ordering::Relaxed) >= max {
            let error = reply::limit(
                names::MAX_IN_FLIGHT_PER_SERVICE,
                max,
                format!(
                    "service {:?} already has {max} requests in flight",
                    request.service_id
                ),
            );
            Some((error, RequestFailure::Limit))
        } else {
            pending.insert(
                forwarded_id,
                Entry {
                    caller: caller.clone(),
                    caller_id: caller_key.clone(),
                    service: route.clone(),
                    deadline,
                    timeout_ms: request.timeout_ms,
                },
            );
            hub.timers.insert(deadline, forwarded_id, &route.owner);
            let header = RoutedHeader {
                service_id_json: &route.id_json,
                sender_fields: &identity.sender_fields,
            };
            // Queued under `pending` so a later `$/cancelRequest` for this id
            // (also queued under it) can never overtake the request itself.
            // If the owner's queue refuses it, the owner is going away and its
            // teardown fails this entry with -32052.
            let pushed = route.owner.out.push(Class::Essential, |buf| {
                wire::routed(
                    buf,
                    Routed::Request(forwarded_id),
                    &header,
                    request.method,
                    request.params,
                )
            });
            if pushed == Pushed::Congested {
                caller.wait_for(&route.owner);
            }
            None
        }
    };
    match refused {
        Some((error, why)) => {
            caller
                .calls
                .lock()
                .remove_if_forwarded_as(&caller_key, forwarded_id);
            answer_error(&error, why);
        }
        None => Counters::inc(&counters.requests_started),
    }
}

fn gone_failure(reason: GoneReason) -> RequestFailure {
    match reason {
        GoneReason::Disconnected => RequestFailure::Disconnected,
        GoneReason::Unregistered => RequestFailure::Unregistered,
    }
}

/// An error object as an owner may write it; `message` and `data` stay raw.
#[derive(Deserialize)]
struct OwnerError<'a> {
    code: i64,
    #[serde(borrow)]
    message: &'a RawValue,
    #[serde(borrow, default, deserialize_with = "present")]
    data: Option<&'a RawValue>,
}

fn present<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(deserializer).map(Some)
}

/// An owner answered one of the requests the hub forwarded to it.
pub fn response(hub: &HubState, owner: &Conn, id: &RawValue, outcome: Outcome<'_>) {
    // Forwarded ids are the hub's integers; anything else answers nothing.
    let entry =
        id.get().parse::<u64>().ok().and_then(|forwarded_id| {
            Some((forwarded_id, owner.pending.lock().take(forwarded_id)?))
        });
    let Some((forwarded_id, entry)) = entry else {
        // Late (after timeout, cancel or the caller leaving) or never issued.
        return Counters::inc(&owner.counters.responses_dropped);
    };
    hub.timers.remove(entry.deadline, forwarded_id);
    entry
        .caller
        .calls
        .lock()
        .remove_if_forwarded_as(&entry.caller_id, forwarded_id);
    let caller_id = entry.caller_id.as_str();
    let max_data = hub.limits.max_error_data_bytes;
    let pushed = entry
        .caller
        .out
        .push(Class::Essential, |buf| match outcome {
            Outcome::Result(result) => wire::result(buf, caller_id, result.get()),
            Outcome::Error(error) => match serde_json::from_str::<OwnerError<'_>>(error.get()) {
                Ok(e) if e.message.get().starts_with('"') => {
                    wire::passthrough_error(buf, caller_id, e.code, e.message, e.data, max_data)
                }
                _ => wire::error(
                    buf,
                    Some(caller_id),
                    &ErrorObject::new(
                        ErrorCode::InternalError,
                        "the service answered with a malformed error object",
                    ),
                ),
            },
        });
    if pushed == Pushed::Congested {
        owner.wait_for(&entry.caller);
    }
    Counters::inc(&owner.counters.requests_completed);
}

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
        hub.counters.request_failed(gone_failure(reason));
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
pub fn service_unregistered(hub: &HubState, route: &crate::registry::ServiceRoute) {
    let entries = route.owner.pending.lock().take_service(route);
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
