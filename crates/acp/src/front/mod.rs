//! The ACP side: one connection to the editor, its request handlers, and the
//! teardown when it closes.
//!
//! Handlers run on the SDK's dispatch loop, so none of them waits for the
//! peer or for a turn: each validates what it can synchronously (so a
//! malformed request is refused before anything changes), then moves the
//! waiting part into a task that answers through its responder. Those tasks
//! are plain tokio tasks tracked here, not connection tasks: a failure in one
//! session is answered to that session's request and can never shut the
//! connection down.
//!
//! Opening sessions (`session/new`, `load`, `resume`) is in `open.rs`; a
//! session's settings (`set_mode`, `set_config_option`) in `settings.rs`.

mod open;
mod settings;

pub use settings::{MODEL_OPTION, MODE_OPTION};

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    self as acp, AgentCapabilities, CancelNotification, ClientCapabilities, CloseSessionRequest,
    CloseSessionResponse, ContentBlock, ContentChunk, Implementation, InitializeRequest,
    InitializeResponse, ListSessionsRequest, ListSessionsResponse, McpCapabilities,
    PromptCapabilities, PromptRequest, PromptResponse, SessionAdditionalDirectoriesCapabilities,
    SessionCapabilities, SessionCloseCapabilities, SessionInfo, SessionListCapabilities,
    SessionNotification, SessionResumeCapabilities, SessionUpdate, StopReason,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Client, Error, ErrorCode};
use serde_json::{json, Value};
use switchboard_tools::consumer::{ConsumerOptions, HubTools};
use tokio::sync::OnceCell;
use tokio_util::task::TaskTracker;

use crate::guard::Launcher;
use crate::jobs::{EditorTerminals, JobExecutor, JobLimits};
use crate::mcp::ServerContext;
use crate::models::ModelCatalog;
use crate::options::{AcpOptions, FrontLimits};
use crate::output::SessionOutput;
use crate::prompt;
use crate::requests::MCP_HTTP;
use crate::session::{Session, TurnRefused};
use crate::sessions::{Routes, SessionTable, TableError};
use crate::store::{EventKind, Store, StoreError};
use crate::tools::files::FileAccess;
use crate::turn::{self, TurnContext, TurnEnd};

/// How long a turn's end may wait for its log to be committed.
const STORE_SYNC_WAIT: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum FrontError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Model(#[from] crate::model::ModelError),
    #[error("cannot create the job guards' lifeline pipe: {0}")]
    Guard(std::io::Error),
    #[error("the ACP connection failed: {0}")]
    Connection(String),
}

/// Everything one editor connection shares.
pub struct Front {
    limits: Arc<FrontLimits>,
    sessions: Arc<SessionTable>,
    routes: Arc<Routes>,
    store: Arc<Store>,
    /// The models sessions may use; each session names its own.
    models: Arc<ModelCatalog>,
    hub: HubTools,
    jobs: Arc<JobExecutor>,
    /// What sessions' MCP servers are started with.
    servers: ServerContext,
    /// What the editor said it can do (`initialize`): its file system and
    /// terminals.
    client: parking_lot::RwLock<ClientCapabilities>,
    /// Every task that answers a request later.
    tasks: TaskTracker,
    teardown: OnceCell<()>,
}

fn invalid_params(message: impl Into<String>) -> Error {
    Error::new(ErrorCode::INVALID_PARAMS, message)
}

fn table_error(error: TableError) -> Error {
    match error {
        TableError::Unknown(id) => {
            let mut error: Error = acp::Error::session_not_found(id.clone()).into();
            error.message = format!("session {id} not found");
            error
        }
        other => invalid_params(other.to_string()),
    }
}

fn internal(message: impl Into<String>) -> Error {
    Error::new(ErrorCode::INTERNAL_ERROR, message)
}

fn require_absolute(cwd: &Path) -> Result<(), Error> {
    if cwd.is_absolute() {
        Ok(())
    } else {
        Err(invalid_params(format!(
            "cwd must be an absolute path, got {:?}",
            cwd.display().to_string()
        )))
    }
}

/// Answers a request, logging (not failing) when the editor is gone.
fn answer<T: agent_client_protocol::JsonRpcResponse>(
    responder: Responder<T>,
    result: Result<T, Error>,
) {
    if let Err(error) = responder.respond_with_result(result) {
        tracing::debug!(%error, "cannot answer a request (the editor has gone)");
    }
}

impl Front {
    pub async fn start(options: &AcpOptions) -> Result<Arc<Front>, FrontError> {
        let store = Arc::new(Store::open(&options.store_path()).await?);
        let models = Arc::new(ModelCatalog::new(&options.model, &options.models)?);
        let limits = Arc::new(options.limits.clone());
        let launcher = Launcher::new(options.guard_program.clone()).map_err(FrontError::Guard)?;
        let jobs = Arc::new(JobExecutor::new(
            JobLimits {
                max_running_per_session: limits.max_running_jobs_per_session,
                output_bytes: limits.job_output_bytes,
                retained_per_session: limits
                    .retained_jobs_per_session
                    .max(limits.max_running_jobs_per_session + 1),
            },
            Some(launcher.clone()),
        ));
        let servers = ServerContext {
            launcher,
            start_timeout: limits.mcp_start_timeout,
            call_timeout: limits.tool_call_timeout,
        };
        Ok(Arc::new(Front {
            sessions: SessionTable::new(limits.max_sessions),
            routes: Arc::new(Routes::default()),
            hub: HubTools::start(ConsumerOptions {
                endpoint: options.endpoint.clone(),
                client_name: "switchboard acp".into(),
            }),
            store,
            models,
            jobs,
            servers,
            limits,
            client: parking_lot::RwLock::new(ClientCapabilities::default()),
            tasks: TaskTracker::new(),
            teardown: OnceCell::new(),
        }))
    }

    pub fn initialize(&self, request: InitializeRequest) -> InitializeResponse {
        tracing::info!(
            client = ?request.client_info.map(|c| c.name),
            fs_read = request.client_capabilities.fs.read_text_file,
            fs_write = request.client_capabilities.fs.write_text_file,
            terminal = request.client_capabilities.terminal,
            "initialize"
        );
        *self.client.write() = request.client_capabilities;
        InitializeResponse::new(ProtocolVersion::V1)
            .agent_capabilities(
                AgentCapabilities::new()
                    .load_session(true)
                    .mcp_capabilities(McpCapabilities::new().http(MCP_HTTP))
                    // Text and resource links are the baseline every agent
                    // takes; images, audio and embedded resources are not.
                    .prompt_capabilities(PromptCapabilities::new())
                    .session_capabilities(
                        SessionCapabilities::new()
                            .list(SessionListCapabilities::new())
                            .close(SessionCloseCapabilities::new())
                            .resume(SessionResumeCapabilities::new())
                            .additional_directories(
                                SessionAdditionalDirectoriesCapabilities::new(),
                            ),
                    ),
            )
            .agent_info(Implementation::new(
                "switchboard",
                env!("CARGO_PKG_VERSION"),
            ))
    }

    pub fn list_sessions(
        self: &Arc<Self>,
        request: ListSessionsRequest,
        responder: Responder<ListSessionsResponse>,
    ) {
        if let Some(cwd) = &request.cwd {
            if let Err(error) = require_absolute(cwd) {
                return answer(responder, Err(error));
            }
        }
        let front = self.clone();
        self.tasks.spawn(async move {
            let result = match front.store.list(request.cwd, request.cursor).await {
                Ok((sessions, next)) => Ok(ListSessionsResponse::new(
                    sessions
                        .into_iter()
                        .map(|s| {
                            SessionInfo::new(s.session_id, s.cwd)
                                .title(s.title)
                                .updated_at(s.updated_at)
                                .additional_directories(s.additional_directories)
                        })
                        .collect(),
                )
                .next_cursor(next)),
                Err(StoreError::BadCursor(cursor)) => Err(invalid_params(format!(
                    "cursor {cursor:?} is not one this agent issued"
                ))),
                Err(error) => Err(internal(format!("cannot list sessions: {error}"))),
            };
            answer(responder, result);
        });
    }

    pub fn close_session(
        self: &Arc<Self>,
        request: CloseSessionRequest,
        responder: Responder<CloseSessionResponse>,
    ) {
        let id = request.session_id.0.to_string();
        let session = match self.sessions.get(&id) {
            Ok(session) => session,
            Err(error) => return answer(responder, Err(table_error(error))),
        };
        // Cancel at once (in dispatch order), wind down in the task.
        session.close();
        let front = self.clone();
        self.tasks.spawn(async move {
            front.dispose(&session).await;
            front.sessions.remove(&id);
            tracing::info!(session = %id, "session closed");
            answer(responder, Ok(CloseSessionResponse::new()));
        });
    }

    /// Waits for the session's turn to end, then kills its jobs.
    async fn dispose(&self, session: &Session) {
        let bound = self.limits.cancel_grace + STORE_SYNC_WAIT;
        if !session.wait_idle(bound).await {
            tracing::warn!(session = %session.id, "turn still running {bound:?} after cancel");
        }
        self.jobs.kill_session(&session.id).await;
        session.stop_servers().await;
    }

    pub fn cancel(&self, notification: CancelNotification) {
        let id = notification.session_id.0.to_string();
        // An unknown (or still loading) session has nothing to cancel.
        if let Ok(session) = self.sessions.get(&id) {
            let settled = session.cancel();
            tracing::info!(session = %id, settled_permissions = settled, in_flight = self.routes.count_for(&id), "cancel");
        }
    }

    pub fn prompt(
        self: &Arc<Self>,
        request: PromptRequest,
        responder: Responder<PromptResponse>,
        cx: ConnectionTo<Client>,
    ) {
        let id = request.session_id.0.to_string();
        let session = match self.sessions.get(&id) {
            Ok(session) => session,
            Err(error) => return answer(responder, Err(table_error(error))),
        };
        if let Err(problem) = prompt::check(&request.prompt) {
            return answer(responder, Err(invalid_params(problem)));
        }
        let ticket = match session.begin_turn() {
            Ok(ticket) => ticket,
            Err(refused @ (TurnRefused::Busy | TurnRefused::Closing)) => {
                return answer(responder, Err(invalid_params(refused.to_string())))
            }
        };
        let prompt_json = serde_json::to_value(&request.prompt).unwrap_or(Value::Null);
        self.store.append_turn_start(
            &id,
            ticket.number,
            &prompt_json,
            prompt::title_of(&request.prompt),
        );
        let client = self.client.read().clone();
        let files = FileAccess::new(cx.clone(), &id, session.roots.clone(), &client);
        let terminals = client
            .terminal
            .then(|| EditorTerminals::new(cx.clone(), &id));
        let output = SessionOutput::new(cx, self.store.clone(), &id, ticket.number);
        let context = TurnContext {
            session: session.clone(),
            ticket: ticket.clone(),
            output,
            // The session's model as of this prompt; a switch applies to the
            // next one.
            model: self.models.client(&session.settings().model),
            hub: self.hub.clone(),
            jobs: self.jobs.clone(),
            terminals,
            files,
            routes: self.routes.clone(),
            limits: self.limits.clone(),
        };
        let user = turn::user_message(&request.prompt);
        if session.commit(ticket.generation, std::slice::from_ref(&user)) {
            context.output.record_messages(&[user]);
        }
        let front = self.clone();
        self.tasks.spawn(async move {
            let end = front.supervise(context).await;
            let record = match &end {
                TurnEnd::Stop(reason) => json!({"stopReason": reason}),
                TurnEnd::Failed(error) => json!({"error": error}),
            };
            front
                .store
                .append(&id, ticket.number, EventKind::TurnEnd, &record);
            // An answered prompt is a stored turn: a crash after this point
            // loads back with the turn in it.
            match tokio::time::timeout(STORE_SYNC_WAIT, front.store.sync()).await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => tracing::error!(session = %id, %error, "turn not fully stored"),
                Err(_) => {
                    tracing::error!(session = %id, "turn not stored within {STORE_SYNC_WAIT:?}")
                }
            }
            // Free the slot before answering, so the editor's next prompt is
            // accepted as soon as it has this answer.
            session.end_turn(ticket.generation);
            tracing::info!(session = %id, turn = ticket.number, ?end, "turn ended");
            answer(
                responder,
                match end {
                    TurnEnd::Stop(reason) => Ok(PromptResponse::new(reason)),
                    TurnEnd::Failed(message) => Err(internal(message)),
                },
            );
        });
    }

    /// Runs the turn in its own task. Once cancelled, the turn has
    /// `cancel_grace` to wind down; after that it is dropped and the prompt
    /// answers `cancelled` anyway.
    async fn supervise(&self, context: TurnContext) -> TurnEnd {
        let cancel = context.ticket.cancel.clone();
        let mut turn = tokio::spawn(async move { turn::run(&context).await });
        let joined = tokio::select! {
            joined = &mut turn => joined,
            _ = cancel.cancelled() => match tokio::time::timeout(self.limits.cancel_grace, &mut turn).await {
                Ok(joined) => joined,
                Err(_) => {
                    turn.abort();
                    tracing::warn!("a cancelled turn did not wind down in time; dropped");
                    return TurnEnd::Stop(StopReason::Cancelled);
                }
            },
        };
        match joined {
            // After a cancel the answer is `cancelled`, whatever the turn hit
            // on its way out.
            Ok(TurnEnd::Failed(_)) if cancel.is_cancelled() => TurnEnd::Stop(StopReason::Cancelled),
            Ok(end) => end,
            Err(error) => {
                tracing::error!(%error, "a turn task failed");
                TurnEnd::Failed(format!("the turn failed: {error}"))
            }
        }
    }

    /// Connection teardown, exactly once: every session is disposed (its
    /// pending prompt answers `cancelled`), every job is killed, the hub link
    /// and the store are closed. Later calls wait for the first to finish.
    pub async fn teardown(&self) {
        self.teardown
            .get_or_init(|| async {
                let sessions = self.sessions.drain();
                tracing::info!(sessions = sessions.len(), "connection closed; tearing down");
                for session in &sessions {
                    session.close();
                }
                self.tasks.close();
                let bound = self.limits.cancel_grace + STORE_SYNC_WAIT * 2;
                if tokio::time::timeout(bound, self.tasks.wait())
                    .await
                    .is_err()
                {
                    tracing::warn!("some requests were still unanswered {bound:?} after close");
                }
                self.jobs.kill_all().await;
                futures_util::future::join_all(sessions.iter().map(|s| s.stop_servers())).await;
                self.hub.close();
                self.store.close().await;
                if !self.routes.is_empty() {
                    tracing::warn!(
                        handles = self.routes.len(),
                        "handles outlived their sessions"
                    );
                }
            })
            .await;
    }
}

/// Tells the user, in the session, what did not come back as asked (an MCP
/// server that did not start, a stored model that cannot be used): one
/// agent message each. The session itself works.
fn notify(cx: &ConnectionTo<Client>, session_id: &str, notices: &[String]) {
    for notice in notices {
        let text = format!("{notice}\n");
        send(
            cx,
            session_id,
            SessionUpdate::AgentMessageChunk(ContentChunk::new(ContentBlock::from(text))),
        );
    }
}

fn send(cx: &ConnectionTo<Client>, session_id: &str, update: SessionUpdate) {
    if let Err(error) =
        cx.send_notification(SessionNotification::new(session_id.to_owned(), update))
    {
        tracing::debug!(%error, "cannot send an update");
    }
}
