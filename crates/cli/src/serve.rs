//! `switchboard serve` and `switchboard reload`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use switchboard_dashboard::Dashboard;
use switchboard_discovery as dir;
use switchboard_federation::{FederationOptions, Prepared};
use switchboard_hub::config::FederationSection;
use switchboard_hub::server::RemoteOptions;
use switchboard_hub::{AddOns, Config, Hub, HubOptions};
use switchboard_modules::Modules;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::signal::unix::{signal, SignalKind};

use crate::connect::{DirArgs, HubArgs};

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    dir: DirArgs,
    /// Address of the WebSocket and metrics listener: IP:PORT or
    /// localhost:PORT (port 0 picks a free one). Loopback only, unless
    /// --allow-non-loopback.
    #[arg(long, default_value = "127.0.0.1:0", value_parser = socket_address)]
    ws: SocketAddr,
    /// Let --ws listen on an address other machines reach. That listener has
    /// no TLS; for clients on other machines, --remote serves TLS instead.
    #[arg(long)]
    allow_non_loopback: bool,
    /// Serve the Unix socket only: no WebSocket, no /metrics.
    #[arg(long, conflicts_with = "ws")]
    no_ws: bool,
    /// TOML config file: principals, grants, origins, limits, [federation].
    #[arg(long)]
    config: Option<PathBuf>,
    /// Join a fabric of hubs over this NATS server (nats://HOST:PORT); needs
    /// --hub-name. Overrides [federation] nats.
    #[arg(long, value_name = "URL")]
    nats: Option<String>,
    /// This hub's name in the fabric: 1-64 characters a-z, 0-9 or -, unique
    /// among the hubs. Overrides [federation] name.
    #[arg(long, value_name = "NAME")]
    hub_name: Option<String>,
    /// Also listen for remote clients on ADDR: WebSocket over TLS (needs
    /// --tls-cert and --tls-key); only named principals of the config may
    /// authenticate there.
    #[arg(long, value_name = "ADDR", value_parser = socket_address)]
    remote: Option<SocketAddr>,
    /// PEM certificate chain of the remote listener.
    #[arg(long, value_name = "FILE")]
    tls_cert: Option<PathBuf>,
    /// PEM private key of the remote listener.
    #[arg(long, value_name = "FILE")]
    tls_key: Option<PathBuf>,
}

/// The federation options from the flags and `[federation]` (flags win);
/// `None` when neither names a NATS server.
fn federation_options(args: &ServeArgs) -> anyhow::Result<Option<FederationOptions>> {
    let section = match &args.config {
        Some(path) => Config::load(path)?.federation.unwrap_or_default(),
        None => FederationSection::default(),
    };
    let nats = args.nats.clone().or(section.nats);
    let name = args.hub_name.clone().or(section.name);
    let (nats, name) = match (nats, name) {
        (None, None) => return Ok(None),
        (Some(nats), Some(name)) => (nats, name),
        (Some(_), None) => {
            bail!("--nats needs --hub-name (or name in [federation]): the hub's name in the fabric")
        }
        (None, Some(_)) => bail!(
            "--hub-name needs --nats (or nats in [federation]): the NATS server of the fabric"
        ),
    };
    Ok(Some(FederationOptions {
        nats,
        name,
        credentials: section.credentials,
        tls_ca: section.tls_ca,
        service_ttl: section.service_ttl_ms.map_or(
            switchboard_federation::DEFAULT_SERVICE_TTL,
            Duration::from_millis,
        ),
    }))
}

/// `--remote` serves TLS only: without both files it does not start.
fn remote_options(args: &ServeArgs) -> anyhow::Result<Option<RemoteOptions>> {
    match (args.remote, &args.tls_cert, &args.tls_key) {
        (Some(address), Some(cert), Some(key)) => Ok(Some(RemoteOptions {
            address,
            cert: cert.clone(),
            key: key.clone(),
        })),
        (Some(_), _, _) => bail!(
            "--remote needs both --tls-cert FILE and --tls-key FILE: the remote listener serves TLS only"
        ),
        (None, None, None) => Ok(None),
        (None, _, _) => bail!("--tls-cert and --tls-key are for the remote listener: add --remote ADDR"),
    }
}

/// `HOST:PORT` where HOST is an IP address or `localhost` (127.0.0.1).
fn socket_address(text: &str) -> Result<SocketAddr, String> {
    if let Ok(address) = text.parse() {
        return Ok(address);
    }
    let port = text.strip_prefix("localhost:").ok_or_else(|| {
        format!("{text:?} is not HOST:PORT with an IP address or localhost, such as 127.0.0.1:0")
    })?;
    let port: u16 = port
        .parse()
        .map_err(|_| format!("{port:?} is not a port (0 to 65535)"))?;
    Ok(SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, port)))
}

/// The WebSocket port serves anyone with a token and has no TLS: off this
/// machine only when asked for in so many words.
fn check_ws(args: &ServeArgs) -> anyhow::Result<()> {
    if !args.no_ws && !args.ws.ip().is_loopback() && !args.allow_non_loopback {
        bail!(
            "--ws {} listens where other machines reach it, without TLS; \
             add --allow-non-loopback if you mean it (for other machines, --remote \
             serves TLS to named principals only)",
            args.ws
        );
    }
    Ok(())
}

pub async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    check_ws(&args)?;
    let mut terminate = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
    let mut hangup = signal(SignalKind::hangup()).context("cannot watch SIGHUP")?;
    let prepared = match federation_options(&args)? {
        Some(options) => Some(Prepared::connect(options).await?),
        None => None,
    };
    let options = HubOptions {
        dir: dir::hub_dir(args.dir.dir.as_deref()),
        ws: (!args.no_ws).then_some(args.ws),
        remote: remote_options(&args)?,
        config: args.config,
        federated: prepared.as_ref().map(Prepared::federated),
    };
    let add_ons = AddOns {
        observer: Some(Box::new(Dashboard::attach)),
        supervisor: Some(Box::new(Modules::start)),
        endpoint: Some(Box::new(switchboard_mcp::http::attach)),
    };
    let hub = match Hub::start_with(options, add_ons).await {
        Ok(hub) => hub,
        Err(error) => {
            if let Some(prepared) = prepared {
                prepared.abandon().await;
            }
            return Err(error.into());
        }
    };
    let federation = prepared.map(|prepared| prepared.start(hub.state().clone()));
    loop {
        tokio::select! {
            _ = terminate.recv() => break,
            _ = interrupt.recv() => break,
            _ = hangup.recv() => match hub.reload() {
                Ok(_) => {}
                Err(error) => tracing::error!(%error, "reload failed; the old config stays in force"),
            },
        }
    }
    if let Some(federation) = federation {
        federation.leave().await;
    }
    hub.shutdown().await;
    Ok(())
}

/// Asks the hub to reload through `hub/reload`, so a bad config is reported
/// here instead of only in the hub's log.
pub async fn reload(args: HubArgs) -> anyhow::Result<()> {
    // Reloading is the hub's own user's (`direct`), on its machine.
    args.local_only("switchboard reload")?;
    let dir = args.hub_dir();
    let info =
        dir::read_info(&dir).with_context(|| format!("no hub is running on {}", dir.display()))?;
    let stream = UnixStream::connect(&info.socket)
        .await
        .with_context(|| format!("cannot connect to {}", info.socket.display()))?;
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    let initialize = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"authToken": info.token, "clientInfo": {"name": "switchboard reload"}},
    });
    let reload = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "hub/reload"});
    for message in [initialize, reload] {
        write.write_all(format!("{message}\n").as_bytes()).await?;
    }
    while let Some(line) = lines.next_line().await? {
        let message: serde_json::Value = serde_json::from_str(&line)?;
        if let Some(error) = message.get("error") {
            bail!("{}", error["message"].as_str().unwrap_or("the hub refused"));
        }
        if message["id"] == 2 {
            let result = &message["result"];
            let mut text = format!(
                "reloaded: {} principals, {} grants, {} connections closed",
                result["principals"], result["grants"], result["closed"]
            );
            for change in ["added", "removed", "restarted"] {
                let names: Vec<&str> = result["modules"][change]
                    .as_array()
                    .map(|names| names.iter().filter_map(|n| n.as_str()).collect())
                    .unwrap_or_default();
                if !names.is_empty() {
                    text.push_str(&format!("; modules {change}: {}", names.join(", ")));
                }
            }
            println!("{text}");
            return Ok(());
        }
    }
    bail!("the hub closed the connection before answering")
}
