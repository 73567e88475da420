//! One session's record: its agent (the conversation the model sees and the
//! "always" permission answers), its settings (mode and model, stored with
//! it), its directories, its in-flight prompt, its pending permission
//! requests and its cancellation.
//!
//! Invariants, all kept under the one `state` lock (never held across an
//! await):
//! - at most one turn runs; a turn is identified by its generation, and only
//!   the turn whose generation is current may add to the conversation or end
//!   the in-flight slot, so a late end of an old turn touches nothing;
//! - cancelling settles exactly this session's pending permission requests.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;

use switchboard_tools::consumer::ToolTable;

use crate::mcp::SessionServers;
use crate::modes::Mode;
use crate::tools::paths::Roots;

/// What the user answered "always" to, for one tool in this session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Remembered {
    Allow,
    Reject,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TurnRefused {
    #[error("a prompt is already in flight for this session")]
    Busy,
    #[error("the session is closing")]
    Closing,
}

/// What a session is set to: its config options. Stored with the session
/// and brought back by `session/load` and `session/resume`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub mode: Mode,
    /// The id of its model in the front's [`crate::models::ModelCatalog`].
    pub model: String,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            mode: Mode::default(),
            model: crate::models::DEFAULT_MODEL.into(),
        }
    }
}

/// The right to run one turn, handed out by [`Session::begin_turn`].
#[derive(Debug, Clone)]
pub struct TurnTicket {
    pub generation: u64,
    /// The turn's number in the session's stored log.
    pub number: u64,
    /// Cancelled by `session/cancel`, `session/close` or the connection
    /// closing.
    pub cancel: CancellationToken,
}

struct RunningTurn {
    generation: u64,
    cancel: CancellationToken,
}

struct SessionState {
    next_generation: u64,
    next_turn_number: u64,
    running: Option<RunningTurn>,
    /// The conversation as the model sees it (without the system message).
    history: Vec<Value>,
    /// Permission requests awaiting the editor, each with the sender that
    /// settles it as cancelled.
    pending_permissions: HashMap<u64, oneshot::Sender<()>>,
    next_permission: u64,
    remembered: HashMap<String, Remembered>,
    settings: Settings,
    closing: bool,
}

pub struct Session {
    pub id: String,
    /// `cwd` and the additional directories the file tools may reach.
    pub roots: Roots,
    state: Mutex<SessionState>,
    /// The session's own MCP servers, once started.
    servers: Mutex<Option<Arc<SessionServers>>>,
    /// `true` while no turn runs.
    idle: watch::Sender<bool>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.id)
            .field("roots", &self.roots)
            .finish_non_exhaustive()
    }
}

impl Session {
    pub fn new(
        id: String,
        roots: Roots,
        settings: Settings,
        history: Vec<Value>,
        next_turn_number: u64,
    ) -> Arc<Self> {
        Arc::new(Session {
            id,
            roots,
            state: Mutex::new(SessionState {
                next_generation: 1,
                next_turn_number,
                running: None,
                history,
                pending_permissions: HashMap::new(),
                next_permission: 0,
                remembered: HashMap::new(),
                settings,
                closing: false,
            }),
            servers: Mutex::new(None),
            idle: watch::Sender::new(true),
        })
    }

    pub fn attach_servers(&self, servers: Arc<SessionServers>) {
        *self.servers.lock() = Some(servers);
    }

    /// The tools this session's model calls are offered: the hub's, then
    /// the session's own MCP servers'.
    pub fn tool_table(&self, hub: Arc<ToolTable>) -> Arc<ToolTable> {
        match self.servers.lock().clone() {
            Some(servers) => servers.table(hub),
            None => hub,
        }
    }

    /// Stops the session's MCP servers (bounded); idempotent.
    pub async fn stop_servers(&self) {
        let servers = self.servers.lock().take();
        if let Some(servers) = servers {
            servers.stop().await;
        }
    }

    pub fn cwd(&self) -> &Path {
        &self.roots.cwd
    }

    /// Claims the in-flight slot for a new turn.
    pub fn begin_turn(&self) -> Result<TurnTicket, TurnRefused> {
        let mut state = self.state.lock();
        if state.closing {
            return Err(TurnRefused::Closing);
        }
        if state.running.is_some() {
            return Err(TurnRefused::Busy);
        }
        let generation = state.next_generation;
        state.next_generation += 1;
        let number = state.next_turn_number;
        state.next_turn_number += 1;
        let cancel = CancellationToken::new();
        state.running = Some(RunningTurn {
            generation,
            cancel: cancel.clone(),
        });
        self.idle.send_replace(false);
        Ok(TurnTicket {
            generation,
            number,
            cancel,
        })
    }

    /// Frees the slot if turn `generation` still holds it.
    pub fn end_turn(&self, generation: u64) {
        let mut state = self.state.lock();
        if state.running.as_ref().map(|t| t.generation) == Some(generation) {
            state.running = None;
            self.idle.send_replace(true);
        }
    }

    /// `session/cancel`: cancels the running turn (if any) and settles this
    /// session's pending permission requests as cancelled. Returns how many
    /// permission requests were settled.
    pub fn cancel(&self) -> usize {
        let mut state = self.state.lock();
        if let Some(turn) = &state.running {
            turn.cancel.cancel();
        }
        let pending: Vec<_> = state.pending_permissions.drain().collect();
        let settled = pending.len();
        for (_, settle) in pending {
            let _ = settle.send(());
        }
        settled
    }

    /// Cancels, and refuses every later turn.
    pub fn close(&self) {
        self.state.lock().closing = true;
        self.cancel();
    }

    /// Waits (at most `bound`) until no turn runs.
    pub async fn wait_idle(&self, bound: Duration) -> bool {
        let mut idle = self.idle.subscribe();
        let waited = tokio::time::timeout(bound, idle.wait_for(|idle| *idle)).await;
        waited.is_ok()
    }

    pub fn history(&self) -> Vec<Value> {
        self.state.lock().history.clone()
    }

    /// Adds `messages` to the conversation if turn `generation` is the one
    /// running; returns whether it was.
    pub fn commit(&self, generation: u64, messages: &[Value]) -> bool {
        let mut state = self.state.lock();
        if state.running.as_ref().map(|t| t.generation) != Some(generation) {
            return false;
        }
        state.history.extend_from_slice(messages);
        true
    }

    /// Registers a pending permission request; the receiver fires if the
    /// session cancels it.
    pub fn register_permission(&self) -> (u64, oneshot::Receiver<()>) {
        let mut state = self.state.lock();
        let (settle, settled) = oneshot::channel();
        let id = state.next_permission;
        state.next_permission += 1;
        state.pending_permissions.insert(id, settle);
        (id, settled)
    }

    pub fn forget_permission(&self, id: u64) {
        self.state.lock().pending_permissions.remove(&id);
    }

    pub fn pending_permissions(&self) -> usize {
        self.state.lock().pending_permissions.len()
    }

    pub fn remembered(&self, tool: &str) -> Option<Remembered> {
        self.state.lock().remembered.get(tool).copied()
    }

    pub fn mode(&self) -> Mode {
        self.state.lock().settings.mode
    }

    pub fn settings(&self) -> Settings {
        self.state.lock().settings.clone()
    }

    /// Switches this session's mode (the next tool call is gated by it);
    /// returns the settings as they now are.
    pub fn set_mode(&self, mode: Mode) -> Settings {
        let mut state = self.state.lock();
        state.settings.mode = mode;
        state.settings.clone()
    }

    /// Switches this session's model (its next prompt uses it); returns the
    /// settings as they now are.
    pub fn set_model(&self, model: &str) -> Settings {
        let mut state = self.state.lock();
        state.settings.model = model.to_owned();
        state.settings.clone()
    }

    pub fn remember(&self, tool: &str, answer: Remembered) {
        self.state.lock().remembered.insert(tool.to_owned(), answer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_stale_generation_neither_commits_nor_frees_the_slot() {
        let session = Session::new(
            "s".into(),
            Roots::cwd_only("/"),
            Settings::default(),
            Vec::new(),
            0,
        );
        let first = session.begin_turn().unwrap();
        assert_eq!(session.begin_turn().unwrap_err(), TurnRefused::Busy);
        session.cancel();
        assert!(first.cancel.is_cancelled());
        session.end_turn(first.generation);
        let second = session.begin_turn().unwrap();
        assert_eq!(second.number, first.number + 1);
        // The first turn ending late changes nothing.
        assert!(!session.commit(first.generation, &[json!("late")]));
        session.end_turn(first.generation);
        assert_eq!(session.begin_turn().unwrap_err(), TurnRefused::Busy);
        assert!(session.commit(second.generation, &[json!("ok")]));
        assert_eq!(session.history(), vec![json!("ok")]);
    }

    #[test]
    fn cancel_settles_only_this_sessions_permissions() {
        let a = Session::new(
            "a".into(),
            Roots::cwd_only("/"),
            Settings::default(),
            Vec::new(),
            0,
        );
        let b = Session::new(
            "b".into(),
            Roots::cwd_only("/"),
            Settings::default(),
            Vec::new(),
            0,
        );
        let (_, mut a_settled) = a.register_permission();
        let (_, mut b_settled) = b.register_permission();
        assert_eq!(a.cancel(), 1);
        assert!(a_settled.try_recv().is_ok());
        assert!(b_settled.try_recv().is_err());
        assert_eq!(b.pending_permissions(), 1);
    }
}
