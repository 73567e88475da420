//! The hub under test, seen from outside: what `hub.json` says, and its
//! `GET /metrics` over the WebSocket port.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use switchboard_protocol::discovery::HubInfo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long one `/metrics` exchange may take.
const METRICS_WAIT: Duration = Duration::from_secs(5);

/// A running hub, found through its directory.
#[derive(Debug, Clone)]
pub struct HubTarget {
    pub dir: PathBuf,
    pub info: HubInfo,
    /// `127.0.0.1:PORT` of the WebSocket (and metrics) listener.
    metrics_address: String,
}

impl HubTarget {
    /// Reads `DIR/hub.json`; the hub must serve its WebSocket port, which
    /// carries `/metrics`.
    pub fn open(dir: &Path) -> anyhow::Result<HubTarget> {
        let info = switchboard_client::read_hub_info(Some(dir))
            .with_context(|| format!("no hub on {}", dir.display()))?;
        let Some(ws) = info.ws.as_deref() else {
            bail!(
                "the hub on {} runs without --ws; /metrics is needed",
                dir.display()
            );
        };
        let metrics_address = ws
            .trim_start_matches("ws://")
            .trim_end_matches('/')
            .to_owned();
        Ok(HubTarget {
            dir: dir.to_owned(),
            info,
            metrics_address,
        })
    }

    pub fn pid(&self) -> u32 {
        self.info.pid
    }

    /// `GET /metrics`.
    pub async fn metrics(&self) -> anyhow::Result<Metrics> {
        let exchange = async {
            let mut stream = TcpStream::connect(&self.metrics_address).await?;
            let head = format!(
                "GET /metrics HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
                self.metrics_address
            );
            stream.write_all(head.as_bytes()).await?;
            let mut response = Vec::new();
            stream.read_to_end(&mut response).await?;
            Ok::<_, std::io::Error>(response)
        };
        let response = tokio::time::timeout(METRICS_WAIT, exchange)
            .await
            .with_context(|| format!("GET /metrics took more than {METRICS_WAIT:?}"))?
            .context("GET /metrics")?;
        let text = String::from_utf8(response).context("/metrics is not UTF-8")?;
        let Some((head, body)) = text.split_once("\r\n\r\n") else {
            bail!("GET /metrics: not an HTTP response: {text:?}");
        };
        if !head.starts_with("HTTP/1.1 200") {
            bail!("GET /metrics: {}", head.lines().next().unwrap_or_default());
        }
        Ok(Metrics {
            text: body.to_owned(),
        })
    }
}

/// One scrape of `/metrics` (Prometheus text).
#[derive(Debug, Clone)]
pub struct Metrics {
    pub text: String,
}

impl Metrics {
    /// The integer value of one sample, e.g. `switchboard_requests_in_flight`
    /// or `switchboard_requests_failed_total{reason="timeout"}`.
    pub fn get(&self, sample: &str) -> Option<u64> {
        self.text
            .lines()
            .find_map(|line| line.strip_prefix(sample)?.strip_prefix(' '))
            .and_then(|value| value.trim().parse().ok())
    }

    /// Like [`Metrics::get`], 0 when the sample is missing.
    pub fn value(&self, sample: &str) -> u64 {
        self.get(sample).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_found_by_their_full_name() {
        let metrics = Metrics {
            text: "# HELP x\nswitchboard_requests_in_flight 7\nswitchboard_requests_in_flight_total 9\nswitchboard_requests_failed_total{reason=\"timeout\"} 3\n".into(),
        };
        assert_eq!(metrics.get("switchboard_requests_in_flight"), Some(7));
        assert_eq!(
            metrics.get("switchboard_requests_failed_total{reason=\"timeout\"}"),
            Some(3)
        );
        assert_eq!(metrics.get("switchboard_nothing"), None);
        assert_eq!(metrics.value("switchboard_nothing"), 0);
    }
}
