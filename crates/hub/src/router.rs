//! The two routing paths: notifications (fire and forget) and requests
//! (forwarded under a fresh id), and an owner's answer on its way back.
//! The other ways a request ends (its deadline, a cancel, either side
//! leaving) are in `requests.rs`; the bookkeeping and its lock order in
//! `pending.rs`.
//!
//! Everything here runs inside the reader task of the connection whose
//! message is being handled. Nothing awaits: a message to another
//! connection is appended to its queue, so a slow peer can never stall the
//! task that routes to it.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::value::RawValue;
use switchboard_protocol::error::GoneReason;
use switchboard_protocol::hub::{check_method_name, MethodNameError};
use switchboard_protocol::json::{Member, MemberIndex};
use switchboard_protocol::jsonrpc::{ErrorObject, Layout, Outcome};
use switchboard_protocol::limits::{names, MAX_FORWARDED_DEPTH, MAX_PAYLOAD_DEPTH};
use switchboard_protocol::scan;
use switchboard_protocol::ErrorCode;
use tokio::time::Instant;

use crate::conn::{Call, Conn, Entry, Identity, Transport};
use crate::metrics::{Counters, NotifyDrop, RequestFailure};
use crate::outbound::{Class, Pushed};
use crate::pending::CallerId;
use crate::policy::Action;
use crate::registry::{LastRoute, ServiceRoute};
use crate::reply;
use crate::requests;
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
/// is a silent, counted drop. `last`: the [`LastRoute`] of this sender (a
/// session's, or one remote caller's on a link: an identity that never
/// changes).
pub fn notify(
    hub: &HubState,
    sender: &Conn,
    identity: &Identity,
    params: Option<&RawValue>,
    layout: &Layout<'_>,
    last: &mut LastRoute,
) {
    let counters = &sender.counters;
    let Ok(RawCall {
        service_id: Some(service_id),
        method: Some(method),
        params,
        ..
    }) = RawCall::scan(params, &layout.params)
    else {
        return counters.notification_dropped(NotifyDrop::Malformed);
    };
    let Ok(service_id) = service_id.value_str() else {
        return counters.notification_dropped(NotifyDrop::Malformed);
    };
    if method_name(&method, hub.limits.max_method_bytes).is_err() {
        return counters.notification_dropped(NotifyDrop::Malformed);
    }
    // The forwarded message nests as deeply as this one (the payload keeps
    // its place, two levels down): past what a receiver reads, drop it.
    if layout.depth > MAX_FORWARDED_DEPTH {
        return counters.notification_dropped(NotifyDrop::TooDeep);
    }
    let Some((route, allowed)) = hub
        .registry
        .notify_route(last, sender, identity, &service_id)
    else {
        return counters.notification_dropped(NotifyDrop::UnknownService);
    };
    if !allowed {
        if sender.transport == Transport::Link {
            log_remote_refusal(identity, &route, Action::Notify);
        }
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

/// Why a request is answered by the hub instead of forwarded.
struct Refusal {
    error: ErrorObject,
    why: RequestFailure,
}

impl Refusal {
    fn new(error: ErrorObject, why: RequestFailure) -> Self {
        Refusal { error, why }
    }

    /// A bad parameter: `-32050` for a bound it passed, else `-32602`.
    fn invalid(error: ErrorObject) -> Self {
        let why = if error.code == ErrorCode::LimitExceeded.code() {
            RequestFailure::Limit
        } else {
            RequestFailure::InvalidParams
        };
        Refusal { error, why }
    }
}

/// Routes `clientService/request` with id `caller_id` (raw JSON): forwards
/// it to the service's owner, or answers the caller with why not.
pub fn request(
    hub: &HubState,
    caller: &Arc<Conn>,
    identity: &Identity,
    caller_id: &RawValue,
    params: Option<&RawValue>,
    layout: &Layout<'_>,
) {
    match route_request(hub, caller, identity, caller_id, params, layout) {
        Ok(()) => Counters::inc(&caller.counters.requests_started),
        Err(Refusal { error, why }) => {
            caller.counters.request_failed(why);
            let _: Pushed = caller.out.push(Class::Essential, |buf| {
                wire::error(buf, Some(caller_id.get()), &error)
            });
        }
    }
}

/// The steps of a request, each under its own lock and none held into the
/// next; one that refuses leaves nothing behind: params (no lock) → route
/// and grants (the catalog's read lock) → the caller's slot (`C.calls`) →
/// the owner's entry, deadline and queued message (`O.pending`, with
/// `O.out` and the timers taken under it, as the lock order allows).
fn route_request(
    hub: &HubState,
    caller: &Arc<Conn>,
    identity: &Identity,
    caller_id: &RawValue,
    params: Option<&RawValue>,
    layout: &Layout<'_>,
) -> Result<(), Refusal> {
    let request = check_request(hub, params, layout)?;
    let route = find_route(hub, caller, identity, &request.service_id)?;
    let forwarded_id = hub.forward_ids.next();
    let caller_key = CallerId::from(caller_id.get());
    reserve_call(hub, caller, &caller_key, &route.owner, forwarded_id)?;
    let forwarded = forward(
        hub,
        caller,
        identity,
        &route,
        &request,
        &caller_key,
        forwarded_id,
    );
    if forwarded.is_err() {
        caller
            .calls
            .lock()
            .remove_if_forwarded_as(&caller_key, forwarded_id);
    }
    forwarded
}

/// Step one: the params, with no state.
fn check_request<'a>(
    hub: &HubState,
    params: Option<&'a RawValue>,
    layout: &Layout<'a>,
) -> Result<Accepted<'a>, Refusal> {
    const SHAPE: &str = "clientService/request params are {serviceId, method, params?, timeoutMs?}";
    let request = RawCall::scan(params, &layout.params).map_err(|field| {
        Refusal::invalid(match field {
            "params" => reply::invalid_params("params", SHAPE),
            field => reply::invalid_params(field, format!("{field} appears twice")),
        })
    })?;
    let service_id = request
        .service_id
        .ok_or_else(|| reply::invalid_params("serviceId", "serviceId is required"))
        .and_then(|member| {
            member
                .value_str()
                .map_err(|error| reply::invalid_params("serviceId", format!("serviceId {error}")))
        })
        .map_err(Refusal::invalid)?;
    let method = request
        .method
        .ok_or_else(|| reply::invalid_params("method", "method is required"))
        .and_then(|method| method_name(&method, hub.limits.max_method_bytes).map(|()| method))
        .map_err(Refusal::invalid)?;
    let limits = &hub.limits;
    let timeout_ms = match request.timeout_ms {
        None => limits.default_request_timeout_ms,
        // `"timeoutMs": null` is refused like any other non-integer, not
        // taken for "absent" (which would mean the default timeout).
        Some(raw) => match raw.parse::<u64>() {
            Ok(ms) if ms >= 1 && ms <= limits.max_request_timeout_ms => ms,
            _ => {
                let max = limits.max_request_timeout_ms;
                let message = format!(
                    "timeoutMs must be an integer from 1 to {max} (maxRequestTimeoutMs), not {raw}"
                );
                return Err(Refusal::invalid(reply::invalid_params(
                    "timeoutMs",
                    message,
                )));
            }
        },
    };
    // The forwarded request nests as deeply as this one (the payload keeps
    // its place, two levels down).
    if layout.depth > MAX_FORWARDED_DEPTH {
        let message = format!(
            "the request nests {} levels deep; a message the hub forwards may nest at most \
             {MAX_FORWARDED_DEPTH} (what serde_json reads), so params may nest at most \
             {MAX_PAYLOAD_DEPTH}",
            layout.depth
        );
        return Err(Refusal::invalid(reply::invalid_params("params", message)));
    }
    Ok(Accepted {
        service_id,
        method: method.value,
        params: request.params,
        timeout_ms,
    })
}

/// Step two: the service, and whether the caller may see it (`-32008` as
/// if it did not exist) and send it requests (`-32009`).
///
/// A caller of another hub (its link is the caller) saw the service because
/// its own hub's grants let it: discovery is that hub's to decide
/// (`federation.md` section 4), and `-32008` would contradict the catalog
/// it sees. So here only `request` is checked, and a refusal is `-32009`
/// naming this hub and the grant it lacks.
fn find_route(
    hub: &HubState,
    caller: &Conn,
    identity: &Identity,
    service_id: &str,
) -> Result<Arc<ServiceRoute>, Refusal> {
    let not_found = || Refusal::new(reply::unknown_service(service_id), RequestFailure::NotFound);
    let route = hub.registry.route(service_id).ok_or_else(not_found)?;
    if caller.transport == Transport::Link {
        if !hub
            .registry
            .authorize(caller, identity, &route, Action::Request)
        {
            log_remote_refusal(identity, &route, Action::Request);
            let this_hub = hub.federated.as_ref().map_or("", |f| f.name.as_str());
            let error = reply::refused_by_hub(
                this_hub,
                Action::Request.name(),
                &identity.principal.principal,
                &route.owner_principal.principal,
            );
            return Err(Refusal::new(error, RequestFailure::PermissionDenied));
        }
        return Ok(route);
    }
    if !hub
        .registry
        .authorize(caller, identity, &route, Action::Discover)
    {
        return Err(not_found());
    }
    if !hub
        .registry
        .authorize(caller, identity, &route, Action::Request)
    {
        let error = reply::permission_denied(format!(
            "principal {} may not send requests to service {service_id:?}",
            identity.principal.principal.label(),
        ));
        return Err(Refusal::new(error, RequestFailure::PermissionDenied));
    }
    Ok(route)
}

/// A caller of another hub was refused `action` on `route` by this hub's
/// grants: said at debug with both principals (`b/direct`, `direct`) and
/// the service id; never a payload, never a token.
fn log_remote_refusal(identity: &Identity, route: &ServiceRoute, action: Action) {
    tracing::debug!(
        caller = %identity.principal.principal,
        owner = %route.owner_principal.principal,
        action = %action.name(),
        service = %route.id,
        "refused a caller of another hub: no grant here allows it"
    );
}

/// Step three, under `C.calls`: the caller's slot for X, within
/// `maxInFlightPerClient` and unless X is in flight already.
fn reserve_call(
    hub: &HubState,
    caller: &Conn,
    caller_key: &CallerId,
    owner: &Arc<Conn>,
    forwarded_id: u64,
) -> Result<(), Refusal> {
    let mut calls = caller.calls.lock();
    let max = hub.limits.max_in_flight_per_client;
    if calls.len() as u64 >= max {
        drop(calls);
        let error = reply::limit(
            names::MAX_IN_FLIGHT_PER_CLIENT,
            max,
            format!("this connection already has {max} requests in flight"),
        );
        return Err(Refusal::new(error, RequestFailure::Limit));
    }
    if calls.contains(caller_key) {
        drop(calls);
        let error = reply::invalid_request(
            "duplicateId",
            format!("a request with id {caller_key} is already in flight on this connection"),
        );
        return Err(Refusal::new(error, RequestFailure::InvalidParams));
    }
    calls.insert(
        caller_key.clone(),
        Call {
            owner: owner.clone(),
            forwarded_id,
        },
    );
    Ok(())
}

/// How much later than its `timeoutMs` a request of `caller` expires here.
/// A federated request's deadline is its caller's hub's (docs/federation.md):
/// that hub started the clock first and answers `-32051`; the owner's hub
/// keeps the same `timeoutMs` only as a backstop, set this much later, so
/// that a timer of the caller's hub running late under load still fires
/// first and is counted there. Local callers: none.
const LINK_DEADLINE_GRACE: Duration = Duration::from_secs(1);

fn deadline_grace(caller: &Conn) -> Duration {
    if caller.transport == Transport::Link {
        LINK_DEADLINE_GRACE
    } else {
        Duration::ZERO
    }
}

/// Step four, under `O.pending`: unless the service is gone or at
/// `maxInFlightPerService`, the entry for Y (which makes the request
/// answerable), its deadline, and `clientService/handleRequest` queued to
/// the owner.
fn forward(
    hub: &HubState,
    caller: &Arc<Conn>,
    identity: &Identity,
    route: &ServiceRoute,
    request: &Accepted<'_>,
    caller_key: &CallerId,
    forwarded_id: u64,
) -> Result<(), Refusal> {
    let deadline =
        Instant::now() + Duration::from_millis(request.timeout_ms) + deadline_grace(caller);
    let mut pending = route.owner.pending.lock();
    let max = hub.limits.max_in_flight_per_service;
    if let Some(reason) = route
        .gone()
        .or(pending.is_closed().then_some(GoneReason::Disconnected))
    {
        return Err(Refusal::new(reply::service_gone(reason), reason.into()));
    }
    if route.in_flight.get() >= max {
        let error = reply::limit(
            names::MAX_IN_FLIGHT_PER_SERVICE,
            max,
            format!(
                "service {:?} already has {max} requests in flight",
                request.service_id
            ),
        );
        return Err(Refusal::new(error, RequestFailure::Limit));
    }
    pending.insert(
        forwarded_id,
        Entry {
            caller: caller.clone(),
            caller_id: caller_key.clone(),
            service: route.in_flight.clone(),
            deadline,
            timeout_ms: request.timeout_ms,
        },
    );
    hub.timers.insert(deadline, forwarded_id, &route.owner);
    let header = RoutedHeader {
        service_id_json: &route.id_json,
        sender_fields: &identity.sender_fields,
    };
    // Queued under `pending` so a later `$/cancelRequest` for this id (also
    // queued under it) can never overtake the request itself. If the
    // owner's queue refuses it, the owner is going away and its teardown
    // fails this entry with -32052.
    // A federation link takes the deadline along to the owner's hub.
    let kind = match route.owner.transport {
        Transport::Link => Routed::LinkRequest {
            id: forwarded_id,
            timeout_ms: request.timeout_ms,
        },
        _ => Routed::Request(forwarded_id),
    };
    let pushed = route.owner.out.push(Class::Essential, |buf| {
        wire::routed(buf, kind, &header, request.method, request.params)
    });
    drop(pending);
    if pushed == Pushed::Congested {
        caller.wait_for(&route.owner);
    }
    Ok(())
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

/// An owner answered one of the requests the hub forwarded to it: whoever
/// takes the entry from `O.pending` answers, so a late answer (after a
/// timeout, a cancel or the caller leaving) finds none and is dropped.
///
/// `depth`: how deeply the owner's message nests. The answer keeps its
/// place in the message forwarded to the caller, so past
/// `MAX_FORWARDED_DEPTH` the caller gets `-32603` instead.
pub fn response(hub: &HubState, owner: &Conn, id: &RawValue, outcome: Outcome<'_>, depth: usize) {
    // Forwarded ids are the hub's integers; anything else answers nothing.
    let entry =
        id.get().parse::<u64>().ok().and_then(|forwarded_id| {
            Some((forwarded_id, owner.pending.lock().take(forwarded_id)?))
        });
    let Some((forwarded_id, entry)) = entry else {
        // Late (after timeout, cancel or the caller leaving) or never issued.
        return Counters::inc(&owner.counters.responses_dropped);
    };
    requests::forget(hub, forwarded_id, &entry);
    // The entry knows when the request was forwarded: its deadline less its timeout.
    if let Some(start) = entry
        .deadline
        .checked_sub(Duration::from_millis(entry.timeout_ms) + deadline_grace(&entry.caller))
    {
        owner.counters.latency.record(start.elapsed());
    }
    let caller_id = entry.caller_id.as_str();
    let max_data = hub.limits.max_error_data_bytes;
    let pushed = entry
        .caller
        .out
        .push(Class::Essential, |buf| match outcome {
            _ if depth > MAX_FORWARDED_DEPTH => wire::error(
                buf,
                Some(caller_id),
                &ErrorObject::new(
                    ErrorCode::InternalError,
                    format!(
                        "the service's answer nests {depth} levels deep; at most \
                         {MAX_FORWARDED_DEPTH} can be forwarded (what serde_json reads)"
                    ),
                ),
            ),
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
