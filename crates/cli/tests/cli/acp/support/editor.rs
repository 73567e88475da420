//! The editor side: `switchboard acp` run as a child process, driven by the
//! official ACP client (`Client.v1()`) over its stdin and stdout.
//!
//! The transport is the SDK's `Lines` over the child's pipes, with stdin
//! written by a task of ours so a test can close it (the editor hanging up)
//! while still reading what the agent answers.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    CancelNotification, ClientCapabilities, CloseSessionRequest, CloseSessionResponse,
    ContentBlock, CreateTerminalRequest, FileSystemCapabilities, InitializeRequest,
    InitializeResponse, KillTerminalRequest, ListSessionsRequest, ListSessionsResponse,
    LoadSessionRequest, LoadSessionResponse, NewSessionRequest, NewSessionResponse, PromptRequest,
    PromptResponse, ReadTextFileRequest, ReleaseTerminalRequest, RequestPermissionOutcome,
    RequestPermissionRequest, RequestPermissionResponse, ResumeSessionRequest,
    ResumeSessionResponse, SelectedPermissionOutcome, SessionNotification, SessionUpdate,
    SetSessionConfigOptionRequest, SetSessionConfigOptionResponse, TerminalOutputRequest,
    ToolCallContent, ToolCallStatus, WaitForTerminalExitRequest, WriteTextFileRequest,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, Error, JsonRpcRequest, Lines};
use futures::{SinkExt, StreamExt};
use serde_json::Value;
use switchboard_testkit::switchboard_binary;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use super::client_side::{ClientSide, EditorCaps};
use super::WAIT;

/// Every `session/update` the editor received, in arrival order.
#[derive(Default)]
struct UpdateLog {
    entries: Mutex<Vec<(String, SessionUpdate)>>,
    version: watch::Sender<usize>,
}

/// A `session/request_permission` waiting for the test to answer.
pub struct Permission {
    pub request: RequestPermissionRequest,
    responder: Responder<RequestPermissionResponse>,
}

impl Permission {
    pub fn session(&self) -> String {
        self.request.session_id.0.to_string()
    }

    /// Whether the agent has withdrawn the request (`$/cancel_request`).
    pub fn withdrawn(&self) -> bool {
        self.responder.cancellation().is_cancelled()
    }

    pub async fn wait_withdrawn(&self) {
        tokio::time::timeout(WAIT, self.responder.cancellation().cancelled())
            .await
            .expect("the permission request was not withdrawn");
    }

    pub fn answer(self, option_id: &str) {
        let outcome = RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(
            option_id.to_owned(),
        ));
        self.responder
            .respond(RequestPermissionResponse::new(outcome))
            .expect("answer the permission request");
    }
}

/// Aborts a task when dropped.
pub struct AbortOnDrop<T>(pub JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

pub struct Editor {
    pub cx: ConnectionTo<Agent>,
    pub pid: u32,
    child: tokio::process::Child,
    updates: Arc<UpdateLog>,
    permissions: tokio::sync::Mutex<mpsc::UnboundedReceiver<Permission>>,
    close_stdin: Option<oneshot::Sender<()>>,
    _connection: AbortOnDrop<Result<(), Error>>,
    _writer: AbortOnDrop<()>,
    pub log: PathBuf,
    /// What the agent answered to `initialize`.
    pub init: InitializeResponse,
    /// The editor's files and terminals, as the agent reached them.
    pub client: Arc<ClientSide>,
}

/// A prompt in flight.
pub type PromptHandle = JoinHandle<Result<PromptResponse, Error>>;

impl Editor {
    /// Starts `switchboard acp` and initializes the connection.
    pub async fn spawn(
        hub_dir: &Path,
        model_url: &str,
        extra: &[&str],
        log: PathBuf,
        caps: EditorCaps,
    ) -> Editor {
        let stderr = std::fs::File::create(&log).expect("create the agent log");
        let mut child = tokio::process::Command::new(switchboard_binary())
            .arg("acp")
            .arg("--dir")
            .arg(hub_dir)
            .args(["--model-url", model_url, "--model", "test-model"])
            .args(extra)
            .env("SWITCHBOARD_MODEL_API_KEY", "test-key")
            .env("RUST_LOG", "info,switchboard_acp=debug")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("spawn switchboard acp");
        let pid = child.id().expect("the agent's pid");
        let mut stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");

        let (lines_out, mut lines_to_write) = futures::channel::mpsc::unbounded::<String>();
        let (close_stdin, mut closing) = oneshot::channel::<()>();
        let writer = tokio::spawn(async move {
            loop {
                tokio::select! {
                    line = lines_to_write.next() => {
                        let Some(mut line) = line else { break };
                        if !line.ends_with('\n') {
                            line.push('\n');
                        }
                        if stdin.write_all(line.as_bytes()).await.is_err() || stdin.flush().await.is_err() {
                            break;
                        }
                    }
                    _ = &mut closing => break,
                }
            }
            // Dropping stdin closes the agent's input: the editor hung up.
            // Whatever the client still sends is discarded, so its side of
            // the connection keeps reading the agent's answers.
            drop(stdin);
            while lines_to_write.next().await.is_some() {}
        });
        let incoming = futures::stream::unfold(BufReader::new(stdout).lines(), |mut lines| async {
            match lines.next_line().await {
                Ok(Some(line)) => Some((Ok(line), lines)),
                Ok(None) => None,
                Err(error) => Some((Err(error), lines)),
            }
        });
        let outgoing = lines_out.sink_map_err(io::Error::other);
        let transport = Lines::new(outgoing, incoming);

        let updates = Arc::new(UpdateLog::default());
        let (permission_tx, permissions) = mpsc::unbounded_channel();
        let (cx_tx, cx_rx) = oneshot::channel();
        let log_updates = updates.clone();
        let client = Arc::new(ClientSide::default());
        let connection = tokio::spawn(
            Client
                .v1()
                .name("test-editor")
                .on_receive_notification(
                    async move |notification: SessionNotification, _cx| {
                        log_updates
                            .entries
                            .lock()
                            .unwrap()
                            .push((notification.session_id.0.to_string(), notification.update));
                        log_updates.version.send_modify(|v| *v += 1);
                        Ok(())
                    },
                    agent_client_protocol::on_receive_notification!(),
                )
                .on_receive_request(
                    async move |request: RequestPermissionRequest, responder, _cx| {
                        let _ = permission_tx.send(Permission { request, responder });
                        Ok(())
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .on_receive_request(
                    {
                        let client = client.clone();
                        async move |request: ReadTextFileRequest, responder, _cx| {
                            let _ = responder.respond_with_result(client.read_text_file(request));
                            Ok(())
                        }
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .on_receive_request(
                    {
                        let client = client.clone();
                        async move |request: WriteTextFileRequest, responder, _cx| {
                            let _ = responder.respond_with_result(client.write_text_file(request));
                            Ok(())
                        }
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .on_receive_request(
                    {
                        let client = client.clone();
                        async move |request: CreateTerminalRequest, responder, _cx| {
                            let _ = responder.respond_with_result(client.create_terminal(request));
                            Ok(())
                        }
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .on_receive_request(
                    {
                        let client = client.clone();
                        async move |request: TerminalOutputRequest, responder, _cx| {
                            let _ = responder.respond_with_result(client.terminal_output(request));
                            Ok(())
                        }
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .on_receive_request(
                    {
                        let client = client.clone();
                        async move |request: WaitForTerminalExitRequest, responder, _cx| {
                            // Waits for the command: answered from a task of
                            // its own, never on the dispatch loop.
                            let client = client.clone();
                            tokio::spawn(async move {
                                let _ = responder
                                    .respond_with_result(client.wait_for_exit(request).await);
                            });
                            Ok(())
                        }
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .on_receive_request(
                    {
                        let client = client.clone();
                        async move |request: KillTerminalRequest, responder, _cx| {
                            let _ = responder.respond_with_result(client.kill_terminal(request));
                            Ok(())
                        }
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .on_receive_request(
                    {
                        let client = client.clone();
                        async move |request: ReleaseTerminalRequest, responder, _cx| {
                            let _ = responder.respond_with_result(client.release_terminal(request));
                            Ok(())
                        }
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .connect_with(transport, async move |cx| {
                    let _ = cx_tx.send(cx.clone());
                    std::future::pending::<()>().await;
                    Ok(())
                }),
        );
        let cx = tokio::time::timeout(WAIT, cx_rx)
            .await
            .expect("connect to the agent")
            .expect("connection task alive");
        let capabilities = ClientCapabilities::new()
            .fs(FileSystemCapabilities::new()
                .read_text_file(caps.fs)
                .write_text_file(caps.fs))
            .terminal(caps.terminal);
        let init = tokio::time::timeout(
            WAIT,
            cx.send_request(
                InitializeRequest::new(ProtocolVersion::V1).client_capabilities(capabilities),
            )
            .block_task(),
        )
        .await
        .expect("the agent did not answer initialize in time")
        .expect("initialize");
        assert_eq!(init.protocol_version, ProtocolVersion::V1);
        Editor {
            cx,
            pid,
            child,
            updates,
            permissions: tokio::sync::Mutex::new(permissions),
            close_stdin: Some(close_stdin),
            _connection: AbortOnDrop(connection),
            _writer: AbortOnDrop(writer),
            log,
            init,
            client,
        }
    }

    /// Sends a request and waits (bounded) for its answer.
    pub async fn request<R: JsonRpcRequest>(&self, request: R) -> Result<R::Response, Error> {
        tokio::time::timeout(WAIT, self.cx.send_request(request).block_task())
            .await
            .expect("the agent did not answer in time")
    }

    pub async fn new_session(&self, cwd: &Path) -> String {
        self.request(NewSessionRequest::new(cwd))
            .await
            .expect("session/new")
            .session_id
            .0
            .to_string()
    }

    /// `session/new` with `mcpServers` as raw JSON (which may be malformed).
    pub async fn new_session_with_servers(
        &self,
        cwd: &Path,
        servers: Value,
    ) -> Result<NewSessionResponse, Error> {
        let request = agent_client_protocol::UntypedMessage::new(
            "session/new",
            serde_json::json!({"cwd": cwd, "mcpServers": servers}),
        )
        .expect("an untyped request");
        let answer = tokio::time::timeout(WAIT, self.cx.send_request(request).block_task())
            .await
            .expect("the agent did not answer in time")?;
        Ok(serde_json::from_value(answer).expect("a session/new answer"))
    }

    pub async fn load_session(&self, id: &str, cwd: &Path) -> Result<LoadSessionResponse, Error> {
        self.request(LoadSessionRequest::new(id.to_owned(), cwd))
            .await
    }

    pub async fn resume_session(
        &self,
        id: &str,
        cwd: &Path,
    ) -> Result<ResumeSessionResponse, Error> {
        self.request(ResumeSessionRequest::new(id.to_owned(), cwd))
            .await
    }

    /// `session/set_config_option` with a value id.
    pub async fn set_option(
        &self,
        id: &str,
        option: &str,
        value: &str,
    ) -> Result<SetSessionConfigOptionResponse, Error> {
        self.request(SetSessionConfigOptionRequest::new(
            id.to_owned(),
            option.to_owned(),
            value,
        ))
        .await
    }

    pub async fn close_session(&self, id: &str) -> Result<CloseSessionResponse, Error> {
        self.request(CloseSessionRequest::new(id.to_owned())).await
    }

    pub async fn list_sessions(&self) -> ListSessionsResponse {
        self.request(ListSessionsRequest::new())
            .await
            .expect("session/list")
    }

    /// Sends a prompt without waiting for its answer.
    pub fn prompt(&self, session: &str, text: &str) -> PromptHandle {
        let request = PromptRequest::new(
            session.to_owned(),
            vec![ContentBlock::from(text.to_owned())],
        );
        let sent = self.cx.send_request(request);
        tokio::spawn(sent.block_task())
    }

    /// Sends a prompt and waits for its answer.
    pub async fn prompt_and_wait(
        &self,
        session: &str,
        text: &str,
    ) -> Result<PromptResponse, Error> {
        settle(self.prompt(session, text)).await
    }

    pub fn cancel(&self, session: &str) {
        self.cx
            .send_notification(CancelNotification::new(session.to_owned()))
            .expect("send session/cancel");
    }

    /// The next permission request (bounded wait).
    pub async fn next_permission(&self) -> Permission {
        let mut permissions = self.permissions.lock().await;
        tokio::time::timeout(WAIT, permissions.recv())
            .await
            .expect("no permission request arrived")
            .expect("connection alive")
    }

    /// The next permission request, however long it takes (for a caller
    /// that bounds the wait itself).
    pub async fn next_permission_unbounded(&self) -> Permission {
        let mut permissions = self.permissions.lock().await;
        match permissions.recv().await {
            Some(permission) => permission,
            None => std::future::pending().await,
        }
    }

    /// A permission request that already arrived, if any.
    pub async fn pending_permission(&self) -> Option<Permission> {
        self.permissions.lock().await.try_recv().ok()
    }

    /// The updates of one session, in order.
    pub fn updates(&self, session: &str) -> Vec<SessionUpdate> {
        self.updates
            .entries
            .lock()
            .unwrap()
            .iter()
            .filter(|(id, _)| id == session)
            .map(|(_, update)| update.clone())
            .collect()
    }

    /// Every update of every session, with its session id.
    pub fn all_updates(&self) -> Vec<(String, SessionUpdate)> {
        self.updates.entries.lock().unwrap().clone()
    }

    /// Waits until the updates of `session` satisfy `done`.
    pub async fn wait_updates(
        &self,
        session: &str,
        what: &str,
        done: impl Fn(&[SessionUpdate]) -> bool,
    ) {
        let mut version = self.updates.version.subscribe();
        let waited = tokio::time::timeout(WAIT, async {
            loop {
                if done(&self.updates(session)) {
                    return;
                }
                version.changed().await.expect("update log alive");
            }
        })
        .await;
        if waited.is_err() {
            panic!(
                "session {session}: {what} did not happen; updates: {:#?}",
                self.updates(session)
            );
        }
    }

    /// Closes the agent's stdin (the editor hanging up) without closing our
    /// side of its stdout.
    pub fn hang_up(&mut self) {
        if let Some(close) = self.close_stdin.take() {
            let _ = close.send(());
        }
    }

    /// Waits (bounded) for the agent process to exit.
    pub async fn wait_exit(&mut self) -> ExitStatus {
        tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("the agent did not exit")
            .expect("wait for the agent")
    }

    /// SIGKILLs the agent.
    pub async fn kill(&mut self) {
        self.child.start_kill().expect("kill the agent");
        self.wait_exit().await;
    }

    /// The agent's log so far (stderr).
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Editor {
    /// Hangs up rather than killing: the agent then tears down as it would
    /// for a real editor (killing its jobs) and exits by itself, even when a
    /// test fails.
    fn drop(&mut self) {
        self.hang_up();
    }
}

/// Waits (bounded) for a prompt's answer.
pub async fn settle(prompt: PromptHandle) -> Result<PromptResponse, Error> {
    tokio::time::timeout(WAIT, prompt)
        .await
        .expect("the prompt was not answered in time")
        .expect("prompt task")
}

/// The agent's message text in `updates`.
pub fn text_of(updates: &[SessionUpdate]) -> String {
    updates
        .iter()
        .filter_map(|update| match update {
            SessionUpdate::AgentMessageChunk(chunk) => match &chunk.content {
                ContentBlock::Text(text) => Some(text.text.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// The agent's thought text in `updates`.
pub fn thoughts_of(updates: &[SessionUpdate]) -> String {
    updates
        .iter()
        .filter_map(|update| match update {
            SessionUpdate::AgentThoughtChunk(chunk) => match &chunk.content {
                ContentBlock::Text(text) => Some(text.text.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// One tool call as the updates tell it.
#[derive(Debug, Clone, Default)]
pub struct ToolCallView {
    pub id: String,
    pub title: String,
    /// Every status it went through, in order.
    pub statuses: Vec<ToolCallStatus>,
    pub raw_input: Option<Value>,
    pub raw_output: Option<Value>,
    /// The text of its latest content.
    pub text: String,
    pub kind: Option<agent_client_protocol::v1::schema::ToolKind>,
    /// The paths of its latest locations.
    pub locations: Vec<PathBuf>,
    /// Every diff it showed: (path, old text, new text).
    pub diffs: Vec<(PathBuf, Option<String>, String)>,
    /// The terminals embedded in it.
    pub terminals: Vec<String>,
}

fn note_content(view: &mut ToolCallView, content: &[ToolCallContent]) {
    for item in content {
        match item {
            ToolCallContent::Diff(diff) => view.diffs.push((
                diff.path.clone(),
                diff.old_text.clone(),
                diff.new_text.clone(),
            )),
            ToolCallContent::Terminal(terminal) => {
                view.terminals.push(terminal.terminal_id.0.to_string())
            }
            _ => {}
        }
    }
}

/// The tool calls in `updates`, in the order they started.
pub fn tool_calls(updates: &[SessionUpdate]) -> Vec<ToolCallView> {
    let mut calls: Vec<ToolCallView> = Vec::new();
    for update in updates {
        match update {
            SessionUpdate::ToolCall(call) => calls.push(ToolCallView {
                id: call.tool_call_id.0.to_string(),
                title: call.title.clone(),
                statuses: vec![call.status],
                raw_input: call.raw_input.clone(),
                raw_output: call.raw_output.clone(),
                kind: Some(call.kind),
                locations: call.locations.iter().map(|l| l.path.clone()).collect(),
                ..ToolCallView::default()
            }),
            SessionUpdate::ToolCallUpdate(update) => {
                let id = update.tool_call_id.0.to_string();
                let Some(view) = calls.iter_mut().find(|c| c.id == id) else {
                    panic!("an update for unknown tool call {id}");
                };
                if let Some(status) = update.fields.status {
                    view.statuses.push(status);
                }
                if let Some(output) = &update.fields.raw_output {
                    view.raw_output = Some(output.clone());
                }
                if let Some(locations) = &update.fields.locations {
                    view.locations = locations.iter().map(|l| l.path.clone()).collect();
                }
                if let Some(content) = &update.fields.content {
                    note_content(view, content);
                }
                if let Some(content) = &update.fields.content {
                    view.text = content
                        .iter()
                        .filter_map(|c| match c {
                            ToolCallContent::Content(content) => match &content.content {
                                ContentBlock::Text(text) => Some(text.text.clone()),
                                _ => None,
                            },
                            _ => None,
                        })
                        .collect::<Vec<_>>()
                        .join("\n");
                }
            }
            _ => {}
        }
    }
    calls
}
