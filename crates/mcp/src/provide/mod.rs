//! `switchboard provide-mcp`: an MCP server (a child on stdio, or a remote
//! one over Streamable HTTP), supervised, published on
//! the hub as a version-2 tool provider (so the fence and pins apply to its
//! tools, and the rest of its surface reaches the hub's callers:
//! `docs/reference/tool-calls.md` section 9).
//!
//! The MCP client layer (`switchboard-mcp-client`) starts, watches and
//! restarts the child ([`Backoff::DEFAULT`]) and is the only writer of its
//! connection: tool calls read it, and fail with `tool_unavailable`
//! (nothing ran) while the child is down. This module publishes the
//! child's tools, capabilities and list revisions again after each restart
//! and each change, and tells a restarted child what the callers had asked
//! of the last one (subscriptions, logging level).
//!
//! - `backend.rs`: each hub call to the child, registered while it runs;
//! - `calls.rs`: the calls in flight and the tasks they created, and the
//!   attribution of what the child asks;
//! - `callbacks.rs`: the child's requests and notifications, to the callers;
//! - `surface.rs`: resources, prompts, completion, logging, tasks;
//! - `listeners.rs`: subscriptions and logging levels;
//! - `relay.rs`: what they share, the counters, the outbox.

mod backend;
mod callbacks;
mod calls;
mod listeners;
mod relay;
mod surface;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use switchboard_client::{CatalogEvent, Client, ConnectOptions, Endpoint};
use switchboard_mcp_client::{
    check_header, check_url, shown_url, Backoff, Event, ListKind, Restart, StartOptions,
    Supervised, SupervisedStart, Upstream,
};
use switchboard_tools::{
    check_tool_spec, keep_connected, validate_namespace, ListRevision, Provider, ToolHandler,
    ToolSpec,
};
use tokio_util::sync::CancellationToken;

use backend::RelayHandler;
use callbacks::Callbacks;
use relay::Relay;
pub use relay::RelayStats;
use surface::Surface;

use crate::oauth::{OAuthBearer, PreRegisteredClient};
use crate::Error;

/// How long the child may take to answer `initialize` and `tools/list`.
pub const CHILD_START_TIMEOUT: Duration = Duration::from_secs(30);

/// What `provide-mcp` runs.
#[derive(Debug, Clone)]
pub struct ProvideOptions {
    /// The hub directory, where the ledger lives (this machine's, also for
    /// a hub reached by URL).
    pub hub_dir: PathBuf,
    /// Where the hub is (its directory, or a URL and a named principal's token).
    pub endpoint: Endpoint,
    pub namespace: String,
    pub server: McpServer,
}

/// The MCP server a provider publishes.
#[derive(Debug, Clone)]
pub enum McpServer {
    /// A child process speaking MCP on its stdin and stdout.
    Command {
        command: OsString,
        args: Vec<OsString>,
    },
    /// A server reached over Streamable HTTP.
    Remote(RemoteServer),
}

/// A server reached over Streamable HTTP, and what each request carries.
#[derive(Clone)]
pub struct RemoteServer {
    url: url::Url,
    /// Sent with every request.
    headers: Vec<(String, String)>,
    /// Read at every (re)start, so that a rotated token is picked up: its
    /// first line is sent as `Authorization: Bearer <token>`.
    bearer_token_file: Option<PathBuf>,
    /// The OAuth credentials `switchboard mcp login` saved
    /// ([`crate::oauth::credentials_path`]): their access token is sent,
    /// refreshed before it expires.
    oauth_credentials: Option<PathBuf>,
    /// The client those credentials belong to, when it was registered
    /// beforehand (a confidential one refreshes with its secret).
    oauth_client: Option<PreRegisteredClient>,
}

impl std::fmt::Debug for RemoteServer {
    /// The URL as shown and the header names: values are where tokens go.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteServer")
            .field("url", &shown_url(&self.url))
            .field(
                "headers",
                &self
                    .headers
                    .iter()
                    .map(|(name, _)| name)
                    .collect::<Vec<_>>(),
            )
            .field("bearer_token_file", &self.bearer_token_file)
            .field("oauth_credentials", &self.oauth_credentials)
            .field("oauth_client", &self.oauth_client)
            .finish()
    }
}

impl RemoteServer {
    /// Checks the URL ([`switchboard_mcp_client::check_url`]) and each
    /// header ([`switchboard_mcp_client::check_header`]).
    pub fn new(
        url: &str,
        headers: Vec<(String, String)>,
        bearer_token_file: Option<PathBuf>,
    ) -> Result<RemoteServer, Error> {
        let url = check_url(url).map_err(|error| Error::Options(error.to_string()))?;
        for (name, value) in &headers {
            check_header(name, value).map_err(|error| Error::Options(error.to_string()))?;
        }
        Ok(RemoteServer {
            url,
            headers,
            bearer_token_file,
            oauth_credentials: None,
            oauth_client: None,
        })
    }

    /// Sends the access token of the OAuth login saved at `credentials`
    /// (instead of a bearer token file), made with `client` if it was
    /// registered beforehand.
    pub fn with_oauth(
        mut self,
        credentials: PathBuf,
        client: Option<PreRegisteredClient>,
    ) -> Result<RemoteServer, Error> {
        if self.bearer_token_file.is_some() {
            return Err(Error::Options(
                "a bearer token file and an OAuth login are two ways to send one token: give one"
                    .into(),
            ));
        }
        self.oauth_credentials = Some(credentials);
        self.oauth_client = client;
        Ok(self)
    }

    /// The bearer token from [`RemoteServer::bearer_token_file`], if one is
    /// given: its first line, trimmed, not empty.
    fn bearer_token(&self) -> Result<Option<String>, Error> {
        let Some(path) = &self.bearer_token_file else {
            return Ok(None);
        };
        let text = std::fs::read_to_string(path).map_err(|error| {
            Error::Options(format!(
                "cannot read the bearer token file {}: {error}",
                path.display()
            ))
        })?;
        match text.lines().next().map(str::trim) {
            Some(token) if !token.is_empty() => Ok(Some(token.to_owned())),
            _ => Err(Error::Options(format!(
                "the bearer token file {} is empty",
                path.display()
            ))),
        }
    }
}

/// Where the fence ledger of `namespace` lives under a hub directory.
pub fn ledger_path(hub_dir: &Path, namespace: &str) -> PathBuf {
    hub_dir
        .join("tool-ledgers")
        .join(format!("{namespace}.sqlite"))
}

/// Runs until `shutdown` is cancelled; fails if the first start of the
/// child or the registration fails.
pub async fn run_provider(
    options: ProvideOptions,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    validate_namespace(&options.namespace)?;
    // A token file that cannot be read, or a login not done, is the user's
    // to fix: said at once, not after a start that the server refuses.
    let mut oauth = None;
    if let McpServer::Remote(remote) = &options.server {
        remote.bearer_token()?;
        if let Some(credentials) = &remote.oauth_credentials {
            let bearer = OAuthBearer::load(
                &options.namespace,
                &remote.url,
                credentials.clone(),
                remote.oauth_client.as_ref(),
            )
            .await?;
            oauth = Some(Arc::new(bearer));
        }
    }
    // Never cancelled without OAuth.
    let needs_login = oauth
        .as_ref()
        .map_or_else(CancellationToken::new, |bearer| bearer.needs_login());
    let child = {
        let server = options.server.clone();
        let bearer = oauth.clone();
        move || {
            let upstream = upstream(&server);
            match &bearer {
                Some(bearer) => upstream.bearer(bearer.clone()),
                None => upstream,
            }
        }
    };
    let start = StartOptions {
        client_name: "switchboard provide-mcp".into(),
        initialize_timeout: CHILD_START_TIMEOUT,
        list_timeout: CHILD_START_TIMEOUT,
    };
    let (relay, mut inboxes) = Relay::new(&options.namespace);
    let SupervisedStart {
        server,
        tools,
        mut events,
    } = Supervised::start(
        child,
        start,
        Arc::new(Callbacks(relay.clone())),
        Restart::After(Backoff::DEFAULT),
    )
    .await
    .map_err(|error| {
        if needs_login.is_cancelled() {
            Error::from(crate::oauth::OAuthError::NeedsLogin {
                name: options.namespace.clone(),
            })
        } else {
            Error::Start(error)
        }
    })?;
    let _ = relay.server.set(server.clone());
    let tool_handler: Arc<dyn ToolHandler> = Arc::new(RelayHandler::new(relay.clone()));
    let (client, provider) = match register(&options, &tools, &tool_handler, &relay).await {
        Ok(registered) => registered,
        Err(error) => {
            server.stop().await;
            return Err(error);
        }
    };
    let _ = relay.hub.set(client.clone());
    tracing::info!(namespace = %options.namespace, tools = tools.len(), "serving the MCP server");
    let delivery = tokio::spawn(relay::deliver(client.clone(), inboxes.outbox));
    let watch = tokio::spawn(watch_callback_services(client.clone(), relay.clone()));
    let connection = tokio::spawn(keep_connected(client.clone(), shutdown.clone(), |_| {}));

    let mut ended = Ok(());
    loop {
        tokio::select! {
            event = events.recv() => match event {
                Some(Event::Restarted(tools)) => restarted(&provider, &relay, &tools, &tool_handler).await,
                Some(Event::ToolsChanged(tools)) => publish(&provider, &tools, &tool_handler).await,
                Some(Event::Ended) => {}
                None => break,
            },
            Some(list) = inboxes.changes.recv() => bump(&provider, list).await,
            () = shutdown.cancelled() => break,
            // Its tools leave the catalog with the provider; the hub's
            // supervisor shows `needs-login` until a login restarts it.
            () = needs_login.cancelled() => {
                ended = Err(crate::oauth::OAuthError::NeedsLogin { name: options.namespace.clone() }.into());
                break;
            }
        }
    }

    server.stop().await;
    let _ = provider.unregister().await;
    client.close();
    for task in [delivery, watch, connection] {
        task.abort();
    }
    tracing::info!(namespace = %options.namespace, stats = ?relay.stats(), "the MCP server's relay stopped");
    ended
}

/// Connects to the hub and registers the provider with the child's tools
/// and capabilities.
async fn register(
    options: &ProvideOptions,
    tools: &[Value],
    tool_handler: &Arc<dyn ToolHandler>,
    relay: &Arc<Relay>,
) -> Result<(Client, Provider), Error> {
    let client = Client::connect_with(ConnectOptions {
        endpoint: options.endpoint.clone(),
        client_name: format!("switchboard provide-mcp {}", options.namespace),
    })
    .await?;
    let capabilities = relay
        .connection()
        .map_or_else(|| json!({}), |connection| connection.server_capabilities());
    let provider = Provider::builder(&options.namespace)
        .ledger_path(ledger_path(&options.hub_dir, &options.namespace))
        .tools(tool_specs(tools, tool_handler))
        .capabilities(capabilities)
        .surface(Arc::new(Surface(relay.clone())))
        .metadata("command", Value::String(server_metadata(&options.server)))
        .register(&client)
        .await?;
    Ok((client, provider))
}

/// A new child: its tools, capabilities and lists published again (its
/// resources and prompts may differ from the last one's), and what the
/// callers asked of the last one asked of it.
async fn restarted(
    provider: &Provider,
    relay: &Relay,
    tools: &[Value],
    tool_handler: &Arc<dyn ToolHandler>,
) {
    publish(provider, tools, tool_handler).await;
    let Some(connection) = relay.connection() else {
        return;
    };
    if let Err(error) = provider
        .set_capabilities(connection.server_capabilities())
        .await
    {
        tracing::warn!(%error, "cannot publish the MCP server's capabilities");
    }
    bump(provider, ListKind::Resources).await;
    bump(provider, ListKind::Prompts).await;
    relay.restore(&connection).await;
}

/// The child said a list changed: consumers list it again.
async fn bump(provider: &Provider, list: ListKind) {
    let list = match list {
        ListKind::Resources => ListRevision::Resources,
        ListKind::Prompts => ListRevision::Prompts,
        ListKind::Tools => return,
    };
    if let Err(error) = provider.bump_revision(list).await {
        tracing::warn!(%error, ?list, "cannot publish a list change of the MCP server");
    }
}

/// Forgets the subscriptions and logging levels of callback services that
/// leave the catalog.
async fn watch_callback_services(client: Client, relay: Arc<Relay>) {
    let Ok(mut catalog) = client.catalog().await else {
        return;
    };
    while let Some(event) = catalog.next_event().await {
        if let CatalogEvent::Removed { service_id, .. } = event {
            relay.service_gone(&service_id).await;
        }
    }
}

/// The server, started (or connected to) again on each restart; a child's
/// stderr is this process's.
fn upstream(server: &McpServer) -> Upstream {
    match server {
        McpServer::Command { command, args } => {
            let mut process = tokio::process::Command::new(command);
            process.args(args);
            Upstream::stdio(
                format!("the MCP server `{}`", command_line(command, args)),
                process,
            )
        }
        McpServer::Remote(remote) => {
            let mut headers = remote.headers.clone();
            match remote.bearer_token() {
                Ok(Some(token)) => {
                    headers.push(("Authorization".into(), format!("Bearer {token}")))
                }
                Ok(None) => {}
                // Gone since the first start: the server will refuse, and
                // the supervisor tries again after its backoff.
                Err(error) => tracing::warn!(%error, "connecting without a bearer token"),
            }
            Upstream::http(
                format!("the MCP server at {}", shown_url(&remote.url)),
                remote.url.as_str(),
            )
            .headers(headers)
        }
    }
}

/// What the provider's `command` metadata says the server is: the command
/// line, or the URL as shown.
fn server_metadata(server: &McpServer) -> String {
    match server {
        McpServer::Command { command, .. } => command.to_string_lossy().into_owned(),
        McpServer::Remote(remote) => shown_url(&remote.url),
    }
}

fn command_line(command: &OsString, args: &[OsString]) -> String {
    std::iter::once(command)
        .chain(args)
        .map(|part| part.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The child's tools as the provider declares them (same names, every
/// other MCP member kept); a tool the SDK would refuse (bad name,
/// uncompilable schema) is skipped and logged.
fn tool_specs(
    tools: &[Value],
    relay: &Arc<dyn ToolHandler>,
) -> Vec<(ToolSpec, Arc<dyn ToolHandler>)> {
    tools
        .iter()
        .filter_map(|value| {
            let mut spec = ToolSpec::new(
                value["name"].as_str().unwrap_or_default(),
                value.get("inputSchema").cloned().unwrap_or(Value::Null),
            );
            spec.title = value["title"].as_str().map(str::to_owned);
            spec.description = value["description"].as_str().map(str::to_owned);
            spec.output_schema = value.get("outputSchema").cloned();
            spec.annotations = value.get("annotations").and_then(Value::as_object).cloned();
            if let Some(members) = value.as_object() {
                spec.extra = members
                    .iter()
                    .filter(|(key, _)| !LISTED.contains(&key.as_str()))
                    .map(|(key, value)| (key.clone(), value.clone()))
                    .collect();
            }
            match check_tool_spec(&spec) {
                Ok(()) => Some((spec, relay.clone())),
                Err(error) => {
                    tracing::warn!(%error, "skipping a tool of the MCP server");
                    None
                }
            }
        })
        .collect()
}

/// The members of a tool `ToolSpec` has fields for.
const LISTED: &[&str] = &[
    "name",
    "title",
    "description",
    "inputSchema",
    "outputSchema",
    "annotations",
];

async fn publish(provider: &Provider, tools: &[Value], relay: &Arc<dyn ToolHandler>) {
    if let Err(error) = provider.set_tools(tool_specs(tools, relay)).await {
        tracing::warn!(%error, "cannot publish the MCP server's new tool list");
    }
}
