//! A service as routing sees it ([`ServiceRoute`]), and the notify path's
//! shortcut to the one a connection last notified ([`LastRoute`]).

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Weak};

use switchboard_protocol::error::GoneReason;

use super::entries::into_text;
use crate::conn::Conn;
use crate::pending::InFlight;
use crate::policy::PrincipalRef;
use crate::wire;

/// What routing needs of a service. Immutable but for the two atomics.
pub struct ServiceRoute {
    pub id: Box<str>,
    /// The id as a JSON string, spliced into routed messages.
    pub id_json: Box<str>,
    pub owner: Arc<Conn>,
    pub owner_principal: Arc<PrincipalRef>,
    /// A callback service (metadata `"callback": true`, hub protocol
    /// section 13). Fixed at registration: `client/updateService` may not
    /// change it, so a decision kept in a [`LastRoute`] stays right.
    pub callback: bool,
    /// Pending requests; changed only under `owner.pending`'s lock.
    pub in_flight: Arc<InFlight>,
    gone: AtomicU8,
}

const LIVE: u8 = 0;
const UNREGISTERED: u8 = 1;
const DISCONNECTED: u8 = 2;

impl ServiceRoute {
    pub(super) fn new(
        id: &str,
        owner: &Arc<Conn>,
        owner_principal: Arc<PrincipalRef>,
        callback: bool,
    ) -> Arc<Self> {
        let mut id_json = Vec::with_capacity(id.len() + 2);
        wire::json_string(&mut id_json, id);
        Arc::new(ServiceRoute {
            id: id.into(),
            id_json: into_text(id_json),
            owner: owner.clone(),
            owner_principal,
            callback,
            in_flight: Arc::default(),
            gone: AtomicU8::new(LIVE),
        })
    }

    pub fn gone(&self) -> Option<GoneReason> {
        match self.gone.load(Ordering::Acquire) {
            UNREGISTERED => Some(GoneReason::Unregistered),
            DISCONNECTED => Some(GoneReason::Disconnected),
            _ => None,
        }
    }

    pub(super) fn set_gone(&self, reason: GoneReason) {
        let value = match reason {
            GoneReason::Unregistered => UNREGISTERED,
            GoneReason::Disconnected => DISCONNECTED,
        };
        self.gone.store(value, Ordering::Release);
    }
}

/// The service one connection last notified, and whether it was allowed
/// to: the next notification to the same service skips the catalog's lock,
/// its hash lookup and the policy (`Registry::notify_route`; ~280
/// instructions and four atomic operations of a 200-byte notification).
/// Owned by that connection's reader, never shared. Holds the route weakly:
/// it keeps no gone connection alive.
///
/// It cannot go stale. A route leaves the catalog only through
/// `Catalog::remove` or `remove_connection`, and both mark it gone; an id is
/// never listed twice at once; so a route not gone is still the catalog's
/// route for its id (a removal racing with this check is ordered before it,
/// exactly as with a lookup, and `push_if` checks `gone` again under the
/// owner's queue lock). The decision is kept with the policy generation it
/// was made under, and the caller's identity never changes once set.
#[derive(Default)]
pub struct LastRoute {
    /// Reused: a sender that alternates between services (a fan-out)
    /// misses on every message, and should not allocate on each.
    pub(super) service_id: String,
    pub(super) route: Weak<ServiceRoute>,
    pub(super) policy_generation: u64,
    pub(super) allowed: bool,
}
