//! `switchboard status`: is a hub running, where, and what its metrics say.

use std::path::Path;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use serde_json::{json, Value};
use switchboard_client::protocol::discovery::HubInfo;
use switchboard_client::protocol::modules::ModuleStatus;
use switchboard_discovery as dir;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

use crate::connect;
use crate::connect::HubArgs;
use crate::modules;
use crate::output::{emit, Emitted};
use crate::scrape::{self, Metric, Metrics};

/// How long the socket may take to answer `ping`.
const PING_WAIT: Duration = Duration::from_secs(5);

/// The lines printed, in order: label and metric name.
const SHOWN: [(&str, &str); 14] = [
    ("connections", "connections"),
    ("connections accepted", "connections_accepted_total"),
    ("connections refused", "connections_refused_total"),
    ("services", "services"),
    ("catalog subscribers", "catalog_subscribers"),
    ("requests in flight", "requests_in_flight"),
    ("requests started", "requests_started_total"),
    ("requests completed", "requests_completed_total"),
    ("requests failed", "requests_failed_total"),
    ("notifications forwarded", "notifications_forwarded_total"),
    ("notifications dropped", "notifications_dropped_total"),
    ("queued bytes", "queued_bytes"),
    ("protocol errors", "protocol_errors_total"),
    ("config reloads", "config_reloads_total"),
];

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Prints `key: value` lines: hub, dir, pid, socket, websocket, remote (the
TLS listener for other machines, or off), (on a hub of a federation:
federation, nats, hubs), then the counts
from the hub's /metrics (connections, services, catalog subscribers, requests
in flight, started, completed and failed, notifications forwarded and dropped,
queued bytes, …), counts by reason in parentheses, then the modules the hub
supervises, one line each (state, pid, services, restarts, last exit).

With --url (a hub on another machine) or --token-file (a named principal),
only what that principal may see: the hub's version, its principal, client
id, limits and the services it may discover.

Exit status: 0 when a hub runs (hub.json is there and its socket answers
ping; with --url, the hub answers initialize), 1 otherwise.")]
pub struct StatusArgs {
    #[command(flatten)]
    hub: HubArgs,
    /// Print one JSON object instead ({running, dir, pid, socket, ws, metrics}).
    #[arg(long)]
    json: bool,
    /// Print it again every 2 seconds, until interrupted (a hub that is not
    /// running is reported and looked for again).
    #[arg(long)]
    watch: bool,
}

/// How often `--watch` prints.
const WATCH_EVERY: Duration = Duration::from_secs(2);

pub async fn status(args: StatusArgs) -> anyhow::Result<()> {
    if !args.watch {
        return report(&args).await;
    }
    use tokio::signal::unix::{signal, SignalKind};
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
    let mut terminate = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
    loop {
        let when = humantime::format_rfc3339_seconds(std::time::SystemTime::now());
        if !args.json && matches!(emit(&format!("--- {when}\n"))?, Emitted::ReaderGone) {
            return Ok(());
        }
        if let Err(error) = report(&args).await {
            if !args.json {
                emit(&format!("hub: not running ({error:#})\n"))?;
            }
        }
        tokio::select! {
            () = tokio::time::sleep(WATCH_EVERY) => {}
            _ = interrupt.recv() => return Ok(()),
            _ = terminate.recv() => return Ok(()),
        }
    }
}

/// The status once.
async fn report(args: &StatusArgs) -> anyhow::Result<()> {
    if args.hub.url.is_some() || args.hub.token_file.is_some() {
        return as_principal(args).await;
    }
    let hub_dir = args.hub.hub_dir();
    let running = check_running(&hub_dir).await;
    let info = match running {
        Ok(info) => info,
        Err(error) => {
            if args.json {
                let report =
                    json!({"running": false, "dir": hub_dir, "error": format!("{error:#}")});
                emit(&format!("{report}\n"))?;
            }
            return Err(error);
        }
    };
    let metrics = match &info.ws {
        Some(ws) => scrape::scrape(ws).await,
        None => Err(anyhow!("the hub serves no WebSocket port, so no /metrics")),
    };
    let modules = supervised(&args.hub).await;
    let federation = info
        .federation
        .as_ref()
        .map(|federation| Federation::of(&federation.name, metrics.as_ref().ok()));
    if args.json {
        let mut report = json!({
            "running": true,
            "dir": hub_dir,
            "pid": info.pid,
            "socket": info.socket,
            "ws": info.ws,
            "remote": info.remote,
            "metrics": metrics.as_ref().map_or(Value::Null, metrics_json),
            "modules": modules.as_ref().ok(),
        });
        if let (Some(federation), Some(report)) = (&federation, report.as_object_mut()) {
            report.insert("federation".into(), federation.json());
        }
        if let (Err(error), Some(report)) = (&metrics, report.as_object_mut()) {
            report.insert("metricsError".into(), json!(format!("{error:#}")));
        }
        emit(&format!("{}\n", serde_json::to_string_pretty(&report)?))?;
        return Ok(());
    }
    let mut lines = vec![
        "hub: running".to_owned(),
        format!("dir: {}", hub_dir.display()),
        format!("pid: {}", info.pid),
        format!("socket: {}", info.socket.display()),
        format!("websocket: {}", info.ws.as_deref().unwrap_or("none")),
        format!("remote: {}", info.remote.as_deref().unwrap_or("off")),
    ];
    if let Some(federation) = &federation {
        lines.extend(federation.lines());
    }
    match &metrics {
        Ok(metrics) => lines.extend(metric_lines(metrics)),
        Err(error) => lines.push(format!("metrics: unavailable ({error:#})")),
    }
    match &modules {
        Ok(modules) => lines.extend(module_lines(modules)),
        Err(error) => lines.push(format!("modules: unavailable ({error:#})")),
    }
    emit(&format!("{}\n", lines.join("\n")))?;
    Ok(())
}

/// The hub's modules (`hub/modules`), on a connection of its own.
async fn supervised(hub: &HubArgs) -> anyhow::Result<Vec<ModuleStatus>> {
    let client = connect::connect(hub, "status").await?;
    let modules = modules::fetch(&client).await;
    client.close();
    modules
}

/// `status` as a named principal (`--url`, `--token-file`): the hub's
/// counters, modules and directory are its own user's, so this shows what
/// the principal's own connection says.
async fn as_principal(args: &StatusArgs) -> anyhow::Result<()> {
    let place = args
        .hub
        .url
        .clone()
        .unwrap_or_else(|| args.hub.hub_dir().display().to_string());
    let client = connect::connect(&args.hub, "status").await?;
    let session = client.session();
    let catalog = client.catalog().await.context("cannot read the catalog")?;
    let services = catalog.initial().len();
    client.close();
    if args.json {
        let report = json!({
            "running": true,
            "hub": place,
            "serverInfo": session.server_info,
            "protocolVersion": session.protocol_version,
            "principal": session.principal,
            "clientId": session.client_id,
            "services": services,
            "limits": session.limits,
        });
        emit(&format!("{}\n", serde_json::to_string_pretty(&report)?))?;
        return Ok(());
    }
    let lines = [
        "hub: running".to_owned(),
        format!("hub at: {place}"),
        format!(
            "version: {} {} (protocol {})",
            session.server_info.name, session.server_info.version, session.protocol_version
        ),
        format!("principal: {}", session.principal.label()),
        format!("client id: {}", session.client_id),
        format!("services you can see: {services}"),
    ];
    emit(&format!("{}\n", lines.join("\n")))?;
    Ok(())
}

/// `modules: 3 (2 running, 1 given-up)`, then one line per module.
fn module_lines(modules: &[ModuleStatus]) -> Vec<String> {
    let mut by_state: Vec<(&str, usize)> = Vec::new();
    for module in modules {
        match by_state
            .iter_mut()
            .find(|(state, _)| *state == module.state.name())
        {
            Some((_, count)) => *count += 1,
            None => by_state.push((module.state.name(), 1)),
        }
    }
    let summary: Vec<String> = by_state
        .iter()
        .map(|(state, count)| format!("{count} {state}"))
        .collect();
    let mut lines = vec![if modules.is_empty() {
        "modules: 0".to_owned()
    } else {
        format!("modules: {} ({})", modules.len(), summary.join(", "))
    }];
    for module in modules {
        let pid = module
            .pid
            .map_or_else(String::new, |pid| format!(", pid {pid}"));
        let exit = module
            .last_exit
            .as_deref()
            .map_or_else(String::new, |exit| format!(", last exit: {exit}"));
        lines.push(format!(
            "  {}: {}{pid}, services {}, restarts {}{exit}",
            module.name,
            module.state.name(),
            module.services,
            module.restarts
        ));
    }
    lines
}

/// `hub.json` read and its socket answering `ping`.
async fn check_running(hub_dir: &Path) -> anyhow::Result<HubInfo> {
    let info = dir::read_info(hub_dir)
        .map_err(|error| anyhow!("no hub is running on {}: {error}", hub_dir.display()))?;
    tokio::time::timeout(PING_WAIT, ping(&info.socket))
        .await
        .map_err(|_| anyhow!("no answer to ping within {PING_WAIT:?}"))
        .and_then(|answer| answer)
        .with_context(|| {
            format!(
                "no hub is running on {}: hub.json names pid {} but its socket {} does not answer",
                hub_dir.display(),
                info.pid,
                info.socket.display()
            )
        })?;
    Ok(info)
}

/// `ping` needs no `initialize` and no token: it only shows the hub is there.
async fn ping(socket: &Path) -> anyhow::Result<()> {
    let stream = UnixStream::connect(socket).await?;
    let (read, mut write) = stream.into_split();
    write
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n")
        .await?;
    let mut line = String::new();
    BufReader::new(read).read_line(&mut line).await?;
    let answer: Value = serde_json::from_str(&line).context("the answer is not JSON")?;
    if answer.get("id") != Some(&json!(1)) || answer.get("result") != Some(&Value::Null) {
        bail!("unexpected answer to ping: {}", line.trim_end());
    }
    Ok(())
}

/// What `/metrics` says of the fabric this hub is part of.
struct Federation {
    name: String,
    /// `None`: the metrics could not be read.
    connected: Option<bool>,
    joined: bool,
    name_conflict: bool,
    /// The other hubs seen, with the services each lists here.
    hubs: Vec<(String, u64)>,
}

impl Federation {
    fn of(name: &str, metrics: Option<&Metrics>) -> Federation {
        let value = |metric: &str| match metrics.and_then(|m| m.get(metric)) {
            Some(Metric::Value(value)) => Some(*value),
            _ => None,
        };
        let hubs = match metrics.and_then(|m| m.get("federation_remote_services")) {
            Some(Metric::ByReason(hubs)) => hubs.iter().map(|(h, n)| (h.clone(), *n)).collect(),
            _ => Vec::new(),
        };
        Federation {
            name: name.to_owned(),
            connected: value("federation_nats_connected").map(|v| v == 1),
            joined: value("federation_joined") == Some(1),
            name_conflict: value("federation_name_conflict") == Some(1),
            hubs,
        }
    }

    fn lines(&self) -> Vec<String> {
        let state = if self.name_conflict {
            " (another live hub holds this name: local clients only)"
        } else if !self.joined {
            " (not joined yet)"
        } else {
            ""
        };
        let nats = match self.connected {
            Some(true) => "connected",
            Some(false) => "disconnected (reconnecting)",
            None => "unknown",
        };
        let hubs = if self.hubs.is_empty() {
            "none".to_owned()
        } else {
            self.hubs
                .iter()
                .map(|(hub, n)| format!("{hub} ({n} service{})", if *n == 1 { "" } else { "s" }))
                .collect::<Vec<_>>()
                .join(", ")
        };
        vec![
            format!("federation: {}{state}", self.name),
            format!("nats: {nats}"),
            format!("hubs: {hubs}"),
        ]
    }

    fn json(&self) -> Value {
        json!({
            "name": self.name,
            "natsConnected": self.connected,
            "joined": self.joined,
            "nameConflict": self.name_conflict,
            "hubs": self.hubs.iter().map(|(hub, n)| json!({"name": hub, "services": n})).collect::<Vec<_>>(),
        })
    }
}

fn metric_lines(metrics: &Metrics) -> Vec<String> {
    SHOWN
        .iter()
        .filter_map(|(label, name)| {
            let metric = metrics.get(*name)?;
            Some(match metric {
                Metric::Value(value) => format!("{label}: {value}"),
                Metric::ByReason(by_reason) => {
                    let nonzero: Vec<String> = by_reason
                        .iter()
                        .filter(|(_, count)| **count > 0)
                        .map(|(reason, count)| format!("{reason} {count}"))
                        .collect();
                    if nonzero.is_empty() {
                        format!("{label}: {}", metric.total())
                    } else {
                        format!("{label}: {} ({})", metric.total(), nonzero.join(", "))
                    }
                }
            })
        })
        .collect()
}

fn metrics_json(metrics: &Metrics) -> Value {
    let object = metrics
        .iter()
        .map(|(name, metric)| {
            let value = match metric {
                Metric::Value(value) => json!(value),
                Metric::ByReason(by_reason) => json!(by_reason),
            };
            (name.clone(), value)
        })
        .collect();
    Value::Object(object)
}
