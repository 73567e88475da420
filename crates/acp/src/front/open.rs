//! Opening sessions: `session/new`, and `session/load` and `session/resume`
//! of a stored one (the same, except that only a load replays the history).
//!
//! Each handler checks its request synchronously (`cwd`,
//! `additionalDirectories`) and reserves the session's slot in dispatch
//! order, then a task reads the store, starts the session's MCP servers
//! and answers. A reopened session gets back the mode and model it was
//! stored with; one stored before settings were kept starts `read-only`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, LoadSessionResponse, NewSessionResponse, ResumeSessionResponse,
    SessionConfigOption, SessionUpdate,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Client, Error};

use super::{answer, internal, invalid_params, notify, require_absolute, send, table_error, Front};
use crate::mcp::{ServerSpec, SessionServers};
use crate::models::DEFAULT_MODEL;
use crate::modes::Mode;
use crate::requests::{LoadSession, NewSession, ResumeSession};
use crate::session::{Session, Settings};
use crate::sessions::{Reservation, TableError};
use crate::store::{StoredSession, StoredSettings};
use crate::tools::paths::Roots;

/// Whether a stored session is loaded (its history replayed) or resumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reopen {
    Load,
    Resume,
}

/// What `session/load` and `session/resume` ask for.
struct StoredRequest {
    how: Reopen,
    id: String,
    roots: Roots,
    servers: Vec<ServerSpec>,
}

/// A reopened session, and what to tell the user in it after the answer.
struct Reopened {
    session: Arc<Session>,
    notices: Vec<String>,
}

/// Checks `additionalDirectories`: each absolute, and an existing directory.
pub(super) fn check_directories(directories: &[PathBuf]) -> Result<(), Error> {
    for (index, dir) in directories.iter().enumerate() {
        let shown = dir.display().to_string();
        if !dir.is_absolute() {
            return Err(invalid_params(format!(
                "additionalDirectories[{index}] must be an absolute path, got {shown:?}"
            )));
        }
        match std::fs::metadata(dir) {
            Ok(metadata) if metadata.is_dir() => {}
            Ok(_) => {
                return Err(invalid_params(format!(
                    "additionalDirectories[{index}] ({shown:?}) is not a directory"
                )))
            }
            Err(error) => {
                return Err(invalid_params(format!(
                    "additionalDirectories[{index}] ({shown:?}) cannot be used: {error}"
                )))
            }
        }
    }
    Ok(())
}

fn check_roots(cwd: &Path, additional: &[PathBuf]) -> Result<(), Error> {
    require_absolute(cwd)?;
    check_directories(additional)
}

impl Front {
    pub fn new_session(
        self: &Arc<Self>,
        NewSession { request, servers }: NewSession,
        responder: Responder<NewSessionResponse>,
        cx: ConnectionTo<Client>,
    ) {
        if let Err(error) = check_roots(&request.cwd, &request.additional_directories) {
            return answer(responder, Err(error));
        }
        let id = crate::ids::session_id();
        let reservation = match self.sessions.reserve(&id) {
            Ok(reservation) => reservation,
            Err(error) => return answer(responder, Err(table_error(error))),
        };
        let front = self.clone();
        self.tasks.spawn(async move {
            let roots = Roots::new(request.cwd, request.additional_directories);
            let settings = Settings::default();
            let created = front
                .store
                .create_session(&id, &roots.cwd, &roots.additional, to_stored(&settings))
                .await;
            if let Err(error) = created {
                // Free the slot before answering (see `reopen`).
                drop(reservation);
                let error = internal(format!("cannot record the session: {error}"));
                return answer(responder, Err(error));
            }
            let session = Session::new(id.clone(), roots, settings.clone(), Vec::new(), 0);
            let failures = front.start_servers(&session, servers).await;
            if let Err(error) = reservation.complete(session.clone()) {
                session.stop_servers().await;
                return answer(responder, Err(table_error(error)));
            }
            tracing::info!(session = %id, "session created");
            let response = NewSessionResponse::new(id.clone())
                .modes(settings.mode.state())
                .config_options(front.config_options(&settings));
            answer(responder, Ok(response));
            notify(&cx, &id, &failures);
        });
    }

    /// Starts `specs` for `session` (bounded by the start timeout); returns
    /// what failed, one line each.
    pub(super) async fn start_servers(
        &self,
        session: &Arc<Session>,
        specs: Vec<ServerSpec>,
    ) -> Vec<String> {
        if specs.is_empty() {
            return Vec::new();
        }
        let servers = SessionServers::start(&self.servers, &session.id, session.cwd(), specs).await;
        let failures = servers
            .failures
            .iter()
            .map(|failure| format!("{failure}. Its tools are not available in this session."))
            .collect();
        session.attach_servers(Arc::new(servers));
        failures
    }

    pub fn load_session(
        self: &Arc<Self>,
        LoadSession { request, servers }: LoadSession,
        responder: Responder<LoadSessionResponse>,
        cx: ConnectionTo<Client>,
    ) {
        let id = request.session_id.0.to_string();
        let roots = Roots::new(request.cwd, request.additional_directories);
        let stored = StoredRequest {
            how: Reopen::Load,
            id,
            roots,
            servers,
        };
        self.reopen_stored(stored, responder, cx, |settings, options| {
            LoadSessionResponse::new()
                .modes(settings.mode.state())
                .config_options(options)
        });
    }

    /// `session/resume`: `session/load` without the replay.
    pub fn resume_session(
        self: &Arc<Self>,
        ResumeSession { request, servers }: ResumeSession,
        responder: Responder<ResumeSessionResponse>,
        cx: ConnectionTo<Client>,
    ) {
        let id = request.session_id.0.to_string();
        let roots = Roots::new(request.cwd, request.additional_directories);
        let stored = StoredRequest {
            how: Reopen::Resume,
            id,
            roots,
            servers,
        };
        self.reopen_stored(stored, responder, cx, |settings, options| {
            ResumeSessionResponse::new()
                .modes(settings.mode.state())
                .config_options(options)
        });
    }

    /// Both: the roots checked and the id reserved now, in dispatch order;
    /// the store read, the servers started and the answer made by a task.
    fn reopen_stored<T: agent_client_protocol::JsonRpcResponse + Send + 'static>(
        self: &Arc<Self>,
        StoredRequest {
            how,
            id,
            roots,
            servers,
        }: StoredRequest,
        responder: Responder<T>,
        cx: ConnectionTo<Client>,
        response: impl FnOnce(&Settings, Vec<SessionConfigOption>) -> T + Send + 'static,
    ) {
        let reservation = match self.reserve_stored(&id, &roots) {
            Ok(reservation) => reservation,
            Err(error) => return answer(responder, Err(error)),
        };
        let front = self.clone();
        self.tasks.spawn(async move {
            let opened = front.reopen(how, reservation, roots, servers, &cx).await;
            front.answer_reopened(opened, responder, &cx, response);
        });
    }

    fn reserve_stored(&self, id: &str, roots: &Roots) -> Result<Reservation, Error> {
        check_roots(&roots.cwd, &roots.additional)?;
        self.sessions.reserve(id).map_err(table_error)
    }

    fn answer_reopened<T: agent_client_protocol::JsonRpcResponse>(
        &self,
        opened: Result<Reopened, Error>,
        responder: Responder<T>,
        cx: &ConnectionTo<Client>,
        response: impl FnOnce(&Settings, Vec<SessionConfigOption>) -> T,
    ) {
        match opened {
            Err(error) => answer(responder, Err(error)),
            Ok(Reopened { session, notices }) => {
                let settings = session.settings();
                answer(
                    responder,
                    Ok(response(&settings, self.config_options(&settings))),
                );
                notify(cx, &session.id, &notices);
            }
        }
    }

    /// Reads the stored session, replays it (for a load), restores its
    /// settings, starts its MCP servers and makes it live.
    async fn reopen(
        &self,
        how: Reopen,
        reservation: Reservation,
        roots: Roots,
        servers: Vec<ServerSpec>,
        cx: &ConnectionTo<Client>,
    ) -> Result<Reopened, Error> {
        let id = reservation.id().to_owned();
        let stored = match self.store.load(&id).await {
            Ok(Some(stored)) => stored,
            failed => {
                // Free the id before answering: an editor that has heard
                // "not found" may use the id at once, and must not find it
                // still reserved ("still loading").
                drop(reservation);
                return Err(match failed {
                    Err(error) => internal(format!("cannot read the session: {error}")),
                    _ => table_error(TableError::Unknown(id)),
                });
            }
        };
        if how == Reopen::Load {
            replay(cx, &id, &stored);
        }
        let history = stored
            .turns
            .iter()
            .flat_map(|turn| turn.messages.iter().cloned())
            .collect();
        self.store.set_roots(&id, &roots.cwd, &roots.additional);
        let (settings, mut notices) = self.restore(&stored);
        if stored.settings.as_ref() != Some(&to_stored(&settings)) {
            // What it runs with from now on (the safe mode, the default
            // model) is what the next reopen finds.
            if let Err(error) = self.store.set_settings(&id, to_stored(&settings)).await {
                tracing::warn!(session = %id, %error, "cannot record the session's settings");
            }
        }
        let turns = stored.turns.len();
        let session = Session::new(id.clone(), roots, settings, history, stored.next_turn);
        notices.extend(self.start_servers(&session, servers).await);
        if let Err(error) = reservation.complete(session.clone()) {
            session.stop_servers().await;
            return Err(table_error(error));
        }
        tracing::info!(session = %id, turns, ?how, mode = session.mode().id(), "session reopened");
        Ok(Reopened { session, notices })
    }

    /// The settings a stored session comes back with, and what to tell the
    /// user about any it could not get back.
    fn restore(&self, stored: &StoredSession) -> (Settings, Vec<String>) {
        let Some(saved) = &stored.settings else {
            let notice = format!(
                "This session was stored before sessions kept their mode, so it starts in \
                 the safest mode, {}. Switch modes to allow changes.",
                Mode::ReadOnly.id()
            );
            return (
                Settings {
                    mode: Mode::ReadOnly,
                    model: DEFAULT_MODEL.into(),
                },
                vec![notice],
            );
        };
        let mut notices = Vec::new();
        let mode = Mode::from_id(&saved.mode).unwrap_or_else(|| {
            notices.push(format!(
                "This session's stored mode {:?} is not one this agent has; it starts in {}.",
                saved.mode,
                Mode::ReadOnly.id()
            ));
            Mode::ReadOnly
        });
        let model = match self.models.check(&saved.model) {
            Ok(()) => saved.model.clone(),
            Err(problem) => {
                notices.push(format!(
                    "This session's model {:?} cannot be used now ({problem}); it uses the \
                     {DEFAULT_MODEL} model instead.",
                    saved.model
                ));
                DEFAULT_MODEL.into()
            }
        };
        (Settings { mode, model }, notices)
    }
}

/// The settings as the store keeps them.
pub(super) fn to_stored(settings: &Settings) -> StoredSettings {
    StoredSettings {
        mode: settings.mode.id().to_owned(),
        model: settings.model.clone(),
    }
}

/// Replays a stored session: each complete turn's prompt, then its updates
/// as they were sent.
fn replay(cx: &ConnectionTo<Client>, id: &str, stored: &StoredSession) {
    for turn in &stored.turns {
        let blocks: Vec<ContentBlock> =
            serde_json::from_value(turn.prompt.clone()).unwrap_or_default();
        for block in blocks {
            send(
                cx,
                id,
                SessionUpdate::UserMessageChunk(ContentChunk::new(block)),
            );
        }
        for update in &turn.updates {
            match serde_json::from_value::<SessionUpdate>(update.clone()) {
                Ok(update) => send(cx, id, update),
                Err(error) => {
                    tracing::warn!(session = %id, %error, "skipping a stored update that no longer decodes")
                }
            }
        }
    }
}
