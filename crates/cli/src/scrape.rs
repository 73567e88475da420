//! Reading the hub's `GET /metrics` (Prometheus text) over loopback HTTP.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long the whole exchange may take.
const SCRAPE_WAIT: Duration = Duration::from_secs(5);
/// The most bytes of response read (the hub's page is a few KiB).
const MAX_RESPONSE: u64 = 1024 * 1024;

/// One metric: its unlabelled value, or its values by its one label
/// (`reason`, or `kind`, `hub`).
#[derive(Debug, Clone, PartialEq)]
pub enum Metric {
    Value(u64),
    ByReason(BTreeMap<String, u64>),
}

impl Metric {
    pub fn total(&self) -> u64 {
        match self {
            Metric::Value(value) => *value,
            Metric::ByReason(values) => values.values().sum(),
        }
    }
}

/// The metrics by name, without the `switchboard_` prefix.
pub type Metrics = BTreeMap<String, Metric>;

/// `GET /metrics` on the hub's WebSocket address (`ws://HOST:PORT/`).
pub async fn scrape(ws_url: &str) -> anyhow::Result<Metrics> {
    let authority = ws_url
        .strip_prefix("ws://")
        .and_then(|rest| rest.split('/').next())
        .filter(|authority| !authority.is_empty())
        .ok_or_else(|| anyhow!("{ws_url} is not a ws:// address"))?;
    let body = tokio::time::timeout(SCRAPE_WAIT, get(authority, "/metrics"))
        .await
        .map_err(|_| {
            anyhow!("no answer from http://{authority}/metrics within {SCRAPE_WAIT:?}")
        })??;
    Ok(parse(&body))
}

async fn get(authority: &str, path: &str) -> anyhow::Result<String> {
    let mut stream = TcpStream::connect(authority)
        .await
        .with_context(|| format!("cannot connect to {authority}"))?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut response = Vec::new();
    (&mut stream)
        .take(MAX_RESPONSE)
        .read_to_end(&mut response)
        .await?;
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut head = httparse::Response::new(&mut headers);
    let body_start = match head.parse(&response) {
        Ok(httparse::Status::Complete(len)) => len,
        _ => bail!("http://{authority}{path} answered something that is not HTTP"),
    };
    if head.code != Some(200) {
        bail!(
            "http://{authority}{path} answered {} {}",
            head.code.unwrap_or_default(),
            head.reason.unwrap_or_default()
        );
    }
    Ok(String::from_utf8_lossy(&response[body_start..]).into_owned())
}

/// Samples `switchboard_NAME VALUE` and `switchboard_NAME{reason="R"} VALUE`;
/// comments and anything else are skipped.
pub fn parse(text: &str) -> Metrics {
    let mut metrics = Metrics::new();
    for line in text.lines() {
        let Some((sample, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Some(sample) = sample.strip_prefix("switchboard_") else {
            continue;
        };
        let Ok(value) = value.parse::<u64>() else {
            continue;
        };
        match sample.split_once('{') {
            None => {
                metrics.insert(sample.to_owned(), Metric::Value(value));
            }
            Some((name, labels)) => {
                // One label (`reason`, `kind`, `hub`, ...): keyed by its value.
                let reason = labels
                    .split_once("=\"")
                    .and_then(|(_, rest)| rest.strip_suffix("\"}"))
                    .filter(|value| !value.contains('"'));
                let Some(reason) = reason else { continue };
                let entry = metrics
                    .entry(name.to_owned())
                    .or_insert_with(|| Metric::ByReason(BTreeMap::new()));
                if let Metric::ByReason(values) = entry {
                    values.insert(reason.to_owned(), value);
                }
            }
        }
    }
    metrics
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_plain_and_reason_labelled_samples() {
        let text = "# HELP switchboard_services Registered services.\n\
            # TYPE switchboard_services gauge\n\
            switchboard_services 2\n\
            switchboard_notifications_dropped_total{reason=\"shed\"} 3\n\
            switchboard_notifications_dropped_total{reason=\"closed\"} 1\n\
            other_metric 9\n";
        let metrics = parse(text);
        assert_eq!(metrics["services"], Metric::Value(2));
        assert_eq!(metrics["notifications_dropped_total"].total(), 4);
        assert!(!metrics.contains_key("other_metric"));
    }
}
