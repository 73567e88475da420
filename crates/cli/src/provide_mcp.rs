//! `switchboard provide-mcp`: publish an MCP server's tools (a stdio child,
//! or a remote server over Streamable HTTP) on the hub (logic in
//! `switchboard-mcp`).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::Context;
use switchboard_mcp::{McpServer, RemoteServer};
use tokio::signal::unix::{signal, SignalKind};
use tokio_util::sync::CancellationToken;

use switchboard_client::protocol::modules::EXIT_NEEDS_LOGIN;

use crate::connect::HubArgs;
use crate::Exit;

#[derive(clap::Args, Debug)]
pub struct ProvideMcpArgs {
    /// The namespace the tools are published under (`[A-Za-z0-9_.-]`, at most 64 bytes).
    #[arg(long)]
    namespace: String,
    #[command(flatten)]
    hub: HubArgs,
    /// A remote MCP server to publish instead of a command: its Streamable
    /// HTTP URL (https://, or http:// on this machine).
    #[arg(long, value_name = "URL", conflicts_with = "command")]
    mcp_url: Option<String>,
    /// With --mcp-url: a header sent with every request, `NAME: VALUE`
    /// (repeatable). A command line is visible to other users: put secrets
    /// in --bearer-token-file or in SWITCHBOARD_MCP_HEADERS (a JSON object of
    /// headers, as a module's `headers` are passed).
    #[arg(long = "header", value_name = "NAME: VALUE", requires = "mcp_url")]
    headers: Vec<String>,
    /// With --mcp-url: send `Authorization: Bearer <the file's first line>`,
    /// read again at every reconnect.
    #[arg(long, value_name = "FILE", requires = "mcp_url")]
    bearer_token_file: Option<PathBuf>,
    /// With --mcp-url: send the access token of the OAuth login that
    /// `switchboard mcp login NAMESPACE` saved, refreshed before it
    /// expires. Without a login (or once a refresh is refused) it ends
    /// with status 77: a hub's module then shows `needs-login`.
    #[arg(long, requires = "mcp_url", conflicts_with = "bearer_token_file")]
    oauth: bool,
    /// With --oauth: the login was made with this client, registered with
    /// the authorization server beforehand (`oauth_client_id`).
    #[arg(long, value_name = "ID", requires = "oauth")]
    oauth_client_id: Option<String>,
    /// With --oauth-client-id: the file whose first line is that client's
    /// secret (a confidential client), read when the provider starts.
    #[arg(long, value_name = "FILE", requires = "oauth_client_id")]
    oauth_client_secret_file: Option<PathBuf>,
    /// The MCP server to run, and its arguments (after `--`).
    #[arg(
        required_unless_present = "mcp_url",
        last = true,
        value_name = "COMMAND"
    )]
    command: Vec<OsString>,
}

/// The environment variable a module's `headers` reach `provide-mcp` by (a
/// JSON object), out of its command line.
const HEADERS_ENV: &str = "SWITCHBOARD_MCP_HEADERS";

fn server(args: &ProvideMcpArgs) -> anyhow::Result<McpServer> {
    let Some(url) = &args.mcp_url else {
        let mut parts = args.command.iter().cloned();
        let command = parts.next().context("no MCP server command after --")?;
        return Ok(McpServer::Command {
            command,
            args: parts.collect(),
        });
    };
    let mut headers = Vec::new();
    if let Some(json) = std::env::var_os(HEADERS_ENV) {
        let object: BTreeMap<String, String> = serde_json::from_slice(json.as_encoded_bytes())
            .with_context(|| format!("{HEADERS_ENV} is not a JSON object of strings"))?;
        headers.extend(object);
    }
    for header in &args.headers {
        let (name, value) = header.split_once(':').with_context(|| {
            let name = header.split(':').next().unwrap_or_default();
            format!("--header {name:?}: write it as `NAME: VALUE`")
        })?;
        headers.push((name.trim().to_owned(), value.trim().to_owned()));
    }
    let remote = RemoteServer::new(url, headers, args.bearer_token_file.clone())?;
    let remote = if args.oauth {
        let credentials =
            switchboard_mcp::oauth::credentials_path(&args.hub.hub_dir(), &args.namespace);
        let client =
            args.oauth_client_id
                .clone()
                .map(|id| switchboard_mcp::oauth::PreRegisteredClient {
                    id,
                    secret_file: args.oauth_client_secret_file.clone(),
                });
        remote.with_oauth(credentials, client)?
    } else {
        remote
    };
    Ok(McpServer::Remote(remote))
}

pub async fn provide_mcp(args: ProvideMcpArgs) -> anyhow::Result<()> {
    let mut terminate = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
    let options = switchboard_mcp::ProvideOptions {
        server: server(&args)?,
        hub_dir: args.hub.hub_dir(),
        endpoint: args.hub.endpoint()?.0,
        namespace: args.namespace,
    };
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
        stop.cancel();
    });
    match switchboard_mcp::run_provider(options, shutdown).await {
        Err(error) if error.needs_login() => Err(Exit {
            status: EXIT_NEEDS_LOGIN as u8,
            message: error.to_string(),
        }
        .into()),
        outcome => Ok(outcome?),
    }
}
