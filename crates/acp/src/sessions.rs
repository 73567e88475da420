//! The session table (`sessionId → session record`) and the reverse map from
//! internal handles back to their session.
//!
//! Everything session-scoped is found by id here and nowhere else: there is
//! no broadcast listener. The table bounds how many sessions may be live at
//! once; a session being created or loaded holds a reserved slot, which is
//! what makes loading the same id twice at once impossible while different
//! ids load side by side.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::session::Session;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TableError {
    #[error("at most {max} sessions may be live at once; close one first")]
    Full { max: usize },
    #[error("session {0} is already being loaded")]
    AlreadyLoading(String),
    #[error("session {0} is already open on this connection")]
    AlreadyOpen(String),
    #[error("session {0} not found")]
    Unknown(String),
    #[error("session {0} is still loading")]
    StillLoading(String),
    #[error("the agent is shutting down")]
    ShuttingDown,
}

enum Slot {
    /// Being created or loaded.
    Reserved,
    Live(Arc<Session>),
}

struct TableState {
    slots: HashMap<String, Slot>,
    shutting_down: bool,
}

pub struct SessionTable {
    state: Mutex<TableState>,
    max_sessions: usize,
}

/// A reserved slot; dropping it unused frees the slot.
pub struct Reservation {
    table: Arc<SessionTable>,
    id: String,
    completed: bool,
}

impl std::fmt::Debug for Reservation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reservation").field("id", &self.id).finish()
    }
}

impl Reservation {
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Makes the session live under the reserved id. Refused (and the
    /// session not kept) if the table shut down meanwhile.
    pub fn complete(mut self, session: Arc<Session>) -> Result<(), TableError> {
        let mut state = self.table.state.lock();
        self.completed = true;
        if state.shutting_down {
            state.slots.remove(&self.id);
            return Err(TableError::ShuttingDown);
        }
        state.slots.insert(self.id.clone(), Slot::Live(session));
        Ok(())
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if !self.completed {
            let mut state = self.table.state.lock();
            if matches!(state.slots.get(&self.id), Some(Slot::Reserved)) {
                state.slots.remove(&self.id);
            }
        }
    }
}

impl SessionTable {
    pub fn new(max_sessions: usize) -> Arc<Self> {
        Arc::new(SessionTable {
            state: Mutex::new(TableState {
                slots: HashMap::new(),
                shutting_down: false,
            }),
            max_sessions,
        })
    }

    /// Reserves a slot for session `id` (a new one, or one to load).
    pub fn reserve(self: &Arc<Self>, id: &str) -> Result<Reservation, TableError> {
        let mut state = self.state.lock();
        if state.shutting_down {
            return Err(TableError::ShuttingDown);
        }
        match state.slots.get(id) {
            Some(Slot::Reserved) => return Err(TableError::AlreadyLoading(id.to_owned())),
            Some(Slot::Live(_)) => return Err(TableError::AlreadyOpen(id.to_owned())),
            None => {}
        }
        if state.slots.len() >= self.max_sessions {
            return Err(TableError::Full {
                max: self.max_sessions,
            });
        }
        state.slots.insert(id.to_owned(), Slot::Reserved);
        Ok(Reservation {
            table: self.clone(),
            id: id.to_owned(),
            completed: false,
        })
    }

    pub fn get(&self, id: &str) -> Result<Arc<Session>, TableError> {
        match self.state.lock().slots.get(id) {
            Some(Slot::Live(session)) => Ok(session.clone()),
            Some(Slot::Reserved) => Err(TableError::StillLoading(id.to_owned())),
            None => Err(TableError::Unknown(id.to_owned())),
        }
    }

    pub fn remove(&self, id: &str) -> Option<Arc<Session>> {
        let mut state = self.state.lock();
        match state.slots.remove(id) {
            Some(Slot::Live(session)) => Some(session),
            Some(Slot::Reserved) => {
                // Not ours to free: put the reservation back.
                state.slots.insert(id.to_owned(), Slot::Reserved);
                None
            }
            None => None,
        }
    }

    /// Refuses everything from now on and hands out every live session.
    pub fn drain(&self) -> Vec<Arc<Session>> {
        let mut state = self.state.lock();
        state.shutting_down = true;
        let sessions = state
            .slots
            .drain()
            .filter_map(|(_, slot)| match slot {
                Slot::Live(session) => Some(session),
                Slot::Reserved => None,
            })
            .collect();
        sessions
    }

    pub fn live(&self) -> usize {
        self.state.lock().slots.len()
    }
}

/// An internal handle that belongs to one session.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Handle {
    /// A hub tool call, by its `call_key`.
    ToolCall(String),
    /// A `session/request_permission` awaiting the editor.
    Permission(String),
}

/// The reverse map: handle → sessionId. Entries live exactly as long as
/// their [`Route`] guard, so nothing outlives the work it names.
#[derive(Default)]
pub struct Routes {
    owners: Mutex<HashMap<Handle, String>>,
}

/// Removes its handle from [`Routes`] when dropped.
pub struct Route {
    routes: Arc<Routes>,
    handle: Handle,
}

impl Routes {
    pub fn bind(self: &Arc<Self>, handle: Handle, session_id: &str) -> Route {
        self.owners
            .lock()
            .insert(handle.clone(), session_id.to_owned());
        Route {
            routes: self.clone(),
            handle,
        }
    }

    pub fn session_of(&self, handle: &Handle) -> Option<String> {
        self.owners.lock().get(handle).cloned()
    }

    /// How many handles session `session_id` has in flight.
    pub fn count_for(&self, session_id: &str) -> usize {
        self.owners
            .lock()
            .values()
            .filter(|owner| owner.as_str() == session_id)
            .count()
    }

    pub fn len(&self) -> usize {
        self.owners.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Drop for Route {
    fn drop(&mut self) {
        self.routes.owners.lock().remove(&self.handle);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(id: &str) -> Arc<Session> {
        Session::new(
            id.into(),
            crate::tools::paths::Roots::cwd_only("/"),
            crate::session::Settings::default(),
            Vec::new(),
            0,
        )
    }

    #[test]
    fn the_bound_counts_reserved_and_live_slots() {
        let table = SessionTable::new(2);
        let a = table.reserve("a").unwrap();
        let _b = table.reserve("b").unwrap();
        assert_eq!(table.reserve("c").unwrap_err(), TableError::Full { max: 2 });
        assert_eq!(
            table.reserve("a").unwrap_err(),
            TableError::AlreadyLoading("a".into())
        );
        assert_eq!(
            table.get("a").unwrap_err(),
            TableError::StillLoading("a".into())
        );
        a.complete(session("a")).unwrap();
        assert_eq!(
            table.reserve("a").unwrap_err(),
            TableError::AlreadyOpen("a".into())
        );
        drop(_b);
        table.reserve("c").unwrap().complete(session("c")).unwrap();
        assert!(table.remove("a").is_some());
        assert_eq!(table.get("a").unwrap_err(), TableError::Unknown("a".into()));
        assert_eq!(table.drain().len(), 1);
        assert_eq!(table.reserve("d").unwrap_err(), TableError::ShuttingDown);
    }

    #[test]
    fn routes_live_as_long_as_their_guard() {
        let routes = Arc::new(Routes::default());
        let handle = Handle::ToolCall("k".into());
        let route = routes.bind(handle.clone(), "s1");
        assert_eq!(routes.session_of(&handle).as_deref(), Some("s1"));
        assert_eq!(routes.count_for("s1"), 1);
        assert_eq!(routes.count_for("s2"), 0);
        drop(route);
        assert!(routes.is_empty());
    }
}
