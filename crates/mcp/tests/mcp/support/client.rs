//! MCP clients on the gateway, in process: the official Rust client
//! (rmcp) over a pipe to [`Gateway::serve`], and a raw line client for what
//! rmcp's client cannot send (MCP 2025-11-25's tasks, 2026-07-28's
//! stateless requests).

#![allow(deprecated)]

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rmcp::model::{
    CancelledNotificationParam, ClientCapabilities, ClientConfig, CreateMessageRequestParams,
    CreateMessageResult, ElicitRequestParams, ElicitResult, ElicitationAction, ErrorData,
    Implementation, ListRootsResult, LoggingMessageNotificationParam, ProgressNotificationParam,
    ProtocolVersion, ResourceUpdatedNotificationParam, Root, SamplingMessage,
};
use rmcp::service::{NotificationContext, RequestContext, RunningService};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{json, Value};
use switchboard_mcp::{Gateway, ServedSession};
use switchboard_testkit::{within, WAIT};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, ReadHalf, WriteHalf};
use tokio::sync::Notify;

/// What an MCP client saw.
#[derive(Default)]
pub struct Events {
    /// The text of each `sampling/createMessage` (its first message).
    pub sampled: Mutex<Vec<String>>,
    pub elicited: Mutex<Vec<String>>,
    pub roots_asked: Mutex<u32>,
    pub progress: Mutex<Vec<ProgressNotificationParam>>,
    pub logs: Mutex<Vec<LoggingMessageNotificationParam>>,
    pub updated: Mutex<Vec<String>>,
    pub cancelled: Mutex<Vec<CancelledNotificationParam>>,
    pub tools_changed: Notify,
    pub resources_changed: Notify,
    pub prompts_changed: Notify,
    pub any: Notify,
}

/// How the client answers the server's requests.
#[derive(Clone, Copy, Default, PartialEq)]
pub enum Answers {
    #[default]
    Always,
    /// Elicitations are never answered.
    NeverElicit,
}

pub struct TestClient {
    name: String,
    events: Arc<Events>,
    answers: Answers,
}

impl ClientHandler for TestClient {
    fn get_info(&self) -> ClientConfig {
        let capabilities = ClientCapabilities::builder()
            .enable_roots()
            .enable_roots_list_changed()
            .enable_sampling()
            .enable_elicitation()
            .build();
        ClientConfig::new(capabilities, Implementation::new(&self.name, "1"))
            .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let asked = serde_json::to_value(&params).unwrap()["messages"][0]["content"]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        self.events.sampled.lock().push(asked.clone());
        self.events.any.notify_waiters();
        Ok(CreateMessageResult::new(
            SamplingMessage::assistant_text(format!("{} answers {asked}", self.name)),
            "test-model".into(),
        ))
    }

    async fn create_elicitation(
        &self,
        params: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let message = serde_json::to_value(&params).unwrap()["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        self.events.elicited.lock().push(message);
        self.events.any.notify_waiters();
        if self.answers == Answers::NeverElicit {
            std::future::pending::<()>().await;
        }
        Ok(ElicitResult::new(ElicitationAction::Accept))
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        *self.events.roots_asked.lock() += 1;
        Ok(ListRootsResult::new(vec![Root::new("file:///work")]))
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.events.progress.lock().push(params);
        self.events.any.notify_waiters();
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.events.logs.lock().push(params);
        self.events.any.notify_waiters();
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.events.updated.lock().push(params.uri);
        self.events.any.notify_waiters();
    }

    async fn on_cancelled(
        &self,
        params: CancelledNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.events.cancelled.lock().push(params);
        self.events.any.notify_waiters();
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.events.tools_changed.notify_one();
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.events.resources_changed.notify_one();
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.events.prompts_changed.notify_one();
    }
}

/// The official Rust MCP client on one session of `gateway`.
pub struct McpClient {
    pub service: RunningService<RoleClient, TestClient>,
    pub events: Arc<Events>,
    _session: ServedSession,
}

/// Starts one session of `gateway` on a pipe and returns both ends' halves.
async fn session_pipe(
    gateway: &Arc<Gateway>,
) -> (DuplexStream, tokio::task::JoinHandle<ServedSession>) {
    let (client_end, server_end) = tokio::io::duplex(1 << 20);
    let gateway = gateway.clone();
    let served = tokio::spawn(async move {
        let (read, write) = tokio::io::split(server_end);
        gateway
            .serve(read, write)
            .await
            .expect("the gateway serves")
    });
    (client_end, served)
}

impl McpClient {
    pub async fn connect(gateway: &Arc<Gateway>, name: &str, answers: Answers) -> McpClient {
        let (client_end, served) = session_pipe(gateway).await;
        let events = Arc::new(Events::default());
        let handler = TestClient {
            name: name.to_owned(),
            events: events.clone(),
            answers,
        };
        let service = within("the MCP client initializes", handler.serve(client_end))
            .await
            .expect("initialize");
        let session = within("the session starts", served).await.unwrap();
        McpClient {
            service,
            events,
            _session: session,
        }
    }

    pub async fn call(&self, name: &str, arguments: Value) -> Result<Value, rmcp::ServiceError> {
        let params = rmcp::model::CallToolRequestParams::new(name.to_owned())
            .with_arguments(arguments.as_object().cloned().unwrap_or_default());
        let result = within(
            &format!("tools/call {name}"),
            self.service.peer().call_tool(params),
        )
        .await?;
        Ok(serde_json::to_value(result).unwrap())
    }

    /// Waits (bounded) until `check` holds of what the client saw.
    pub async fn wait_for(&self, what: &str, check: impl Fn(&Events) -> bool) {
        within(what, async {
            loop {
                let notified = self.events.any.notified();
                if check(&self.events) {
                    return;
                }
                let _ = tokio::time::timeout(Duration::from_millis(50), notified).await;
            }
        })
        .await
    }
}

/// The text of a tool result's first content block.
pub fn text_of(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// A line client: JSON-RPC messages written and read by hand.
pub struct RawClient {
    lines: tokio::io::Lines<BufReader<ReadHalf<DuplexStream>>>,
    write: WriteHalf<DuplexStream>,
    /// Notifications read while waiting for an answer.
    pub notifications: Vec<Value>,
    next_id: i64,
    _session: tokio::task::JoinHandle<ServedSession>,
}

impl RawClient {
    /// A session whose first message is still to be sent (the gateway
    /// starts serving once it reads `initialize` or a 2026-07-28 request).
    pub async fn open(gateway: &Arc<Gateway>) -> RawClient {
        let (client_end, served) = session_pipe(gateway).await;
        let (read, write) = tokio::io::split(client_end);
        RawClient {
            lines: BufReader::new(read).lines(),
            write,
            notifications: Vec::new(),
            next_id: 0,
            _session: served,
        }
    }

    pub async fn send(&mut self, message: Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.write.write_all(line.as_bytes()).await.unwrap();
    }

    /// Sends `method` with `params` and returns the whole answer (`result`
    /// or `error`), keeping notifications read meanwhile.
    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        let lines = &mut self.lines;
        let notifications = &mut self.notifications;
        tokio::time::timeout(WAIT, async {
            loop {
                let line = lines
                    .next_line()
                    .await
                    .unwrap()
                    .expect("the gateway answers");
                let message: Value = serde_json::from_str(&line).unwrap();
                if message["id"] == json!(id) && message.get("method").is_none() {
                    return message;
                }
                notifications.push(message);
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no answer to {method} within {WAIT:?}"))
    }

    /// The next message the gateway writes, whatever it is.
    pub async fn next_message(&mut self) -> Value {
        let line = tokio::time::timeout(WAIT, self.lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("the gateway wrote nothing within {WAIT:?}"))
            .unwrap()
            .expect("the gateway is still there");
        serde_json::from_str(&line).unwrap()
    }

    /// `initialize` at `version` declaring `capabilities`, then `initialized`.
    pub async fn initialize(&mut self, version: &str, capabilities: Value) -> Value {
        let answer = self
            .request(
                "initialize",
                json!({"protocolVersion": version, "capabilities": capabilities,
                       "clientInfo": {"name": "raw", "version": "1"}}),
            )
            .await;
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        answer
    }
}

/// The `_meta` a 2026-07-28 request carries.
pub fn modern_meta(capabilities: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    })
}
