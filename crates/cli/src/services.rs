//! `switchboard services`: the catalog as a table or JSON, once or live.

use std::time::SystemTime;

use anyhow::Context;
use serde_json::{json, Value};
use switchboard_client::protocol::hub::RemovalReason;
use switchboard_client::{CatalogEvent, ServiceInfo};
use tokio::signal::unix::{signal, SignalKind};

use crate::connect;
use crate::describe::{self, metadata_summary};
use crate::output::{emit, Emitted};

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Table columns: SERVICE (service id), OWNER (owner's client id), PRINCIPAL, METADATA
(protocol, version, label and namespace when present, else the JSON, shortened);
on a hub of a federation, HUB too (the hub that owns a service of another hub).

With --watch, each change prints one line after the table:
  TIME + ID SUMMARY     a service was added
  TIME ~ ID SUMMARY     a service's metadata changed
  TIME - ID (REASON)    a service went away (unregistered, disconnected, hidden)
TIME is UTC, RFC 3339. With --json --watch, every line is one JSON object
({\"event\": \"snapshot\"|\"added\"|\"updated\"|\"removed\"|\"resynced\", ...}).")]
pub struct ServicesArgs {
    #[command(flatten)]
    hub: connect::HubArgs,
    /// Print the services as JSON ({serviceId, clientId, principal, metadata} each).
    #[arg(long)]
    json: bool,
    /// Keep running and print every change of the catalog as it happens.
    #[arg(long)]
    watch: bool,
}

const HEADER: [&str; 4] = ["SERVICE", "OWNER", "PRINCIPAL", "METADATA"];
/// The header when some service is of another hub.
const HEADER_WITH_HUB: [&str; 5] = ["SERVICE", "HUB", "OWNER", "PRINCIPAL", "METADATA"];

pub async fn services(args: ServicesArgs) -> anyhow::Result<()> {
    let client = connect::connect(&args.hub, "services").await?;
    let mut catalog = client
        .catalog()
        .await
        .context("cannot subscribe to the catalog")?;
    let initial = catalog.initial().to_vec();
    let shown = if args.json && args.watch {
        emit(&json_line(
            "snapshot",
            json!({ "services": services_json(&initial) }),
        ))?
    } else if args.json {
        let list = Value::Array(services_json(&initial));
        emit(&format!("{}\n", serde_json::to_string_pretty(&list)?))?
    } else {
        emit(&table(&initial))?
    };
    if !args.watch || matches!(shown, Emitted::ReaderGone) {
        client.close();
        return Ok(());
    }

    let mut terminate = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
    loop {
        let event = tokio::select! {
            _ = terminate.recv() => break,
            _ = interrupt.recv() => break,
            _ = client.closed() => anyhow::bail!("the hub closed the connection"),
            event = catalog.next_event() => match event {
                Some(event) => event,
                None => anyhow::bail!("the hub closed the connection"),
            },
        };
        let line = if args.json {
            event_json(&event, &catalog.services())
        } else {
            event_text(&event, &catalog.services())
        };
        if let Emitted::ReaderGone = emit(&line)? {
            break;
        }
    }
    client.close();
    Ok(())
}

fn services_json(services: &[ServiceInfo]) -> Vec<Value> {
    services.iter().map(describe::service_json).collect()
}

fn table(services: &[ServiceInfo]) -> String {
    let with_hub = services.iter().any(|s| s.hub().is_some());
    let rows: Vec<Vec<String>> = services
        .iter()
        .map(|s| {
            let mut row = vec![
                s.service_id.clone(),
                s.client_id.clone(),
                s.principal.label().to_owned(),
                metadata_summary(&s.metadata),
            ];
            if with_hub {
                row.insert(1, s.hub().unwrap_or("-").to_owned());
            }
            row
        })
        .collect();
    if with_hub {
        describe::table(&HEADER_WITH_HUB, &rows)
    } else {
        describe::table(&HEADER, &rows)
    }
}

fn now() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

fn event_text(event: &CatalogEvent, services_now: &[ServiceInfo]) -> String {
    let time = now();
    match event {
        CatalogEvent::Added(service) => format!(
            "{time} + {} {}\n",
            service.service_id,
            metadata_summary(&service.metadata)
        ),
        CatalogEvent::Updated(service) => format!(
            "{time} ~ {} {}\n",
            service.service_id,
            metadata_summary(&service.metadata)
        ),
        CatalogEvent::Removed { service_id, reason } => {
            format!("{time} - {service_id} ({})\n", reason_name(reason))
        }
        CatalogEvent::Resynced => format!(
            "{time} = resynced after reconnecting\n{}",
            table(services_now)
        ),
    }
}

fn event_json(event: &CatalogEvent, services_now: &[ServiceInfo]) -> String {
    match event {
        CatalogEvent::Added(service) => json_line(
            "added",
            json!({ "service": describe::service_json(service) }),
        ),
        CatalogEvent::Updated(service) => json_line(
            "updated",
            json!({ "service": describe::service_json(service) }),
        ),
        CatalogEvent::Removed { service_id, reason } => json_line(
            "removed",
            json!({ "serviceId": service_id, "reason": reason_name(reason) }),
        ),
        CatalogEvent::Resynced => json_line(
            "resynced",
            json!({ "services": services_json(services_now) }),
        ),
    }
}

/// `{"time": …, "event": …, ...fields}` and a newline.
fn json_line(event: &str, fields: Value) -> String {
    let mut line = json!({ "time": now(), "event": event });
    if let (Some(line), Value::Object(fields)) = (line.as_object_mut(), fields) {
        line.extend(fields);
    }
    format!("{line}\n")
}

fn reason_name(reason: &RemovalReason) -> String {
    match serde_json::to_value(reason) {
        Ok(Value::String(name)) => name,
        _ => "unknown".to_owned(),
    }
}
