//! Joining the fabric: the options checked, the NATS connection, the
//! bucket, and the claim on this hub's name.
//!
//! The claim is the key `hub.<name>`, created only if absent (or deleted):
//! a second hub with a live hub's name is refused. A claim left by a hub
//! that died ages out within `serviceTtlMs`; before that, a starting hub
//! asks the holder (`switchboard.probe.<name>`), and takes the claim over
//! (compare-and-set on its revision) only if no one answers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, kv};
use async_nats::{ConnectErrorKind, ServerAddr};
use bytes::Bytes;
use futures_util::StreamExt;
use parking_lot::Mutex;
use tokio::sync::watch as channel;

use crate::fabric::{self, Claim};
use crate::metrics::Metrics;
use crate::nats_log::{ConnectionLog, Say};
use crate::shared::{Fabric, FederationOptions, Joined, PreparedFabric};

/// How long the first connection attempt may take before the hub starts
/// without NATS (and keeps trying in the background).
const FIRST_CONNECT: Duration = Duration::from_secs(5);
/// How long a holder of the name has to answer a probe.
const PROBE_WAIT: Duration = Duration::from_secs(2);
/// Pause between attempts to claim the name once NATS is up.
const RETRY: Duration = Duration::from_millis(500);

#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    #[error("hub name {0:?} is not valid: use 1-64 characters a-z, 0-9 or -")]
    Name(String),
    #[error("--nats {url} is not a NATS URL: {error}")]
    Url { url: String, error: String },
    #[error("cannot read the NATS credentials file {path}: {error}")]
    Credentials { path: String, error: std::io::Error },
    #[error("cannot read the NATS CA file {path}: {error}")]
    TlsCa { path: String, error: std::io::Error },
    #[error("NATS at {url} refused this hub: {error}")]
    Refused { url: String, error: String },
    #[error("hub name {name:?} is taken: a live hub (instance {instance}) holds it on this NATS; choose another --hub-name")]
    NameTaken { name: String, instance: String },
    #[error("the shared catalog (JetStream KV bucket {bucket}) is unusable: {error}")]
    Bucket { bucket: &'static str, error: String },
    #[error("cannot claim hub name {name:?}: {error}")]
    Claim { name: String, error: String },
}

/// `nats://user:pass@host` → `nats://…@host` for messages (no secrets in
/// logs): everything before the last `@` goes, but a scheme made of scheme
/// characters only (a text that is no URL at all may have `://` after
/// its secret).
pub fn redacted(url: &str) -> String {
    let Some((_, host)) = url.rsplit_once('@') else {
        return url.to_owned();
    };
    match url.split_once("://") {
        Some((scheme, _)) if is_scheme(scheme) => format!("{scheme}://…@{host}"),
        _ => format!("…@{host}"),
    }
}

/// RFC 3986: a letter, then letters, digits, `+`, `-`, `.`.
fn is_scheme(text: &str) -> bool {
    let mut chars = text.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// Everything that can be checked before connecting.
pub(crate) fn check(options: &FederationOptions) -> Result<ServerAddr, JoinError> {
    if !fabric::is_hub_name(&options.name) {
        return Err(JoinError::Name(options.name.clone()));
    }
    let url = redacted(&options.nats);
    let address: ServerAddr =
        options
            .nats
            .parse()
            .map_err(|error: std::io::Error| JoinError::Url {
                url: url.clone(),
                error: error.to_string(),
            })?;
    if !matches!(address.scheme(), "nats" | "tls" | "ws" | "wss") {
        return Err(JoinError::Url {
            url,
            error: format!("unknown scheme {:?}", address.scheme()),
        });
    }
    if let Some(path) = &options.tls_ca {
        std::fs::metadata(path).map_err(|error| JoinError::TlsCa {
            path: path.display().to_string(),
            error,
        })?;
    }
    Ok(address)
}

/// The connect options, reporting the connection state to `connected` and
/// to the log (`log`: each change once, repeats at most once a minute).
/// A user and password in the URL (`nats://user:pass@host`), or a token
/// (`nats://token@host`), authenticate the hub (async-nats reads them only
/// from the options).
async fn connect_options(
    options: &FederationOptions,
    address: &ServerAddr,
    connected: channel::Sender<bool>,
    metrics: Arc<Metrics>,
    log: Arc<Mutex<ConnectionLog>>,
) -> Result<async_nats::ConnectOptions, JoinError> {
    let url: Arc<str> = redacted(&options.nats).into();
    let mut connect = match &options.credentials {
        Some(path) => async_nats::ConnectOptions::with_credentials_file(path)
            .await
            .map_err(|error| JoinError::Credentials {
                path: path.display().to_string(),
                error,
            })?,
        None => async_nats::ConnectOptions::new(),
    };
    if let Some(path) = &options.tls_ca {
        connect = connect.add_root_certificates(path.clone());
    }
    match (address.username(), address.password()) {
        (Some(user), Some(password)) => {
            connect = connect.user_and_password(user.to_owned(), password.to_owned());
        }
        (Some(token), None) => connect = connect.token(token.to_owned()),
        _ => {}
    }
    // A hub cut from NATS notices within a third of the TTL (the server
    // notices a dead client by its own pings).
    let ping = (options.service_ttl / 3).clamp(Duration::from_secs(1), Duration::from_secs(60));
    Ok(connect
        .name(format!("switchboard hub {}", options.name))
        .ping_interval(ping)
        .connection_timeout(FIRST_CONNECT)
        .max_reconnects(None)
        // The inbound lines of every other hub come through one
        // subscription: room for bursts (messages past it are dropped, and
        // counted by the client as a slow consumer).
        .subscription_capacity(1 << 16)
        .event_callback(move |event| {
            let connected = connected.clone();
            let metrics = metrics.clone();
            let said = log.lock().see(&event, Instant::now());
            if let Some(said) = said {
                said.log(&url);
            }
            async move {
                match event {
                    async_nats::Event::Connected => {
                        connected.send_replace(true);
                        if metrics
                            .lost
                            .swap(false, std::sync::atomic::Ordering::Relaxed)
                        {
                            Metrics::inc(&metrics.reconnects);
                        }
                        metrics
                            .connected
                            .store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                    async_nats::Event::Disconnected => {
                        connected.send_replace(false);
                        metrics
                            .lost
                            .store(true, std::sync::atomic::Ordering::Relaxed);
                        metrics
                            .connected
                            .store(false, std::sync::atomic::Ordering::Relaxed);
                    }
                    _ => {}
                }
            }
        }))
}

/// Connects and claims the name; NATS not answering is not an error.
pub async fn prepare(options: FederationOptions) -> Result<PreparedFabric, JoinError> {
    let address = check(&options)?;
    let url = redacted(&options.nats);
    let metrics = Arc::new(Metrics::default());
    let instance = fabric::new_instance();
    let (connected_tx, connected) = channel::channel(false);
    let log = Arc::new(Mutex::new(ConnectionLog::default()));
    let first = connect_options(
        &options,
        &address,
        connected_tx.clone(),
        metrics.clone(),
        log.clone(),
    )
    .await?
    .connect(address.clone())
    .await;
    let (client, joined) = match first {
        Ok(client) => {
            connected_tx.send_replace(true);
            metrics
                .connected
                .store(true, std::sync::atomic::Ordering::Relaxed);

            let joined = claim(&client, &options, &instance).await?;
            tracing::info!(nats = %url, name = %options.name, "joined the fabric");
            (client, Some(joined))
        }
        Err(error) => match error.kind() {
            ConnectErrorKind::Io | ConnectErrorKind::TimedOut | ConnectErrorKind::Dns => {
                // The first line of this state: the retries that follow
                // repeat it (`nats_log.rs`).
                let _: Option<Say> = log.lock().failed(error.to_string(), Instant::now());
                tracing::warn!(nats = %url, %error, "NATS is not reachable; serving local clients, joining once it is");
                let client =
                    connect_options(&options, &address, connected_tx, metrics.clone(), log)
                        .await?
                        .retry_on_initial_connect()
                        .connect(address)
                        .await
                        .map_err(|error| JoinError::Refused {
                            url: url.clone(),
                            error: error.to_string(),
                        })?;
                (client, None)
            }
            _ => {
                return Err(JoinError::Refused {
                    url,
                    error: error.to_string(),
                })
            }
        },
    };
    metrics
        .joined
        .store(joined.is_some(), std::sync::atomic::Ordering::Relaxed);
    Ok(PreparedFabric {
        name: options.name.clone(),
        instance,
        client,
        metrics,
        options,
        connected,
        joined,
    })
}

/// The bucket, created if no hub made it yet. Its `max_age` is the TTL of
/// the whole fabric: a hub configured otherwise follows it (and says so).
pub async fn open_bucket(
    client: &async_nats::Client,
    ttl: Duration,
) -> Result<(kv::Store, Duration), JoinError> {
    let bucket_error = |error: String| JoinError::Bucket {
        bucket: fabric::BUCKET,
        error,
    };
    let js = jetstream::new(client.clone());
    let store = match js.get_key_value(fabric::BUCKET).await {
        Ok(store) => store,
        Err(_) => {
            let config = kv::Config {
                bucket: fabric::BUCKET.into(),
                description: "Switchboard: the services of every hub of the fabric".into(),
                history: 1,
                max_age: ttl,
                // Aged-out keys reach watchers as markers (server 2.11+).
                limit_markers: Some(ttl.max(Duration::from_secs(1))),
                ..Default::default()
            };
            match js.create_key_value(config).await {
                Ok(store) => store,
                // Another hub made it meanwhile.
                Err(create) => js
                    .get_key_value(fabric::BUCKET)
                    .await
                    .map_err(|_| bucket_error(format!("cannot create it: {create}")))?,
            }
        }
    };
    let fabric_ttl = store.stream.cached_info().config.max_age;
    if fabric_ttl.is_zero() {
        return Err(bucket_error(
            "it has no max_age, so dead hubs' services would never leave the catalog".into(),
        ));
    }
    if fabric_ttl != ttl {
        tracing::warn!(
            configured_ms = ttl.as_millis() as u64,
            fabric_ms = fabric_ttl.as_millis() as u64,
            "serviceTtlMs differs from the shared catalog's; the catalog's applies"
        );
    }
    Ok((store, fabric_ttl))
}

fn claim_value(instance: &str) -> Bytes {
    let claim = Claim {
        instance: instance.to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
    };
    serde_json::to_vec(&claim)
        .expect("a claim serializes")
        .into()
}

/// Claims `hub.<name>`: created if absent; taken over only from a holder
/// that does not answer its probe.
pub async fn claim(
    client: &async_nats::Client,
    options: &FederationOptions,
    instance: &str,
) -> Result<Joined, JoinError> {
    let (store, ttl) = open_bucket(client, options.service_ttl).await?;
    let key = fabric::claim_key(&options.name);
    let value = claim_value(instance);
    let claim_error = |error: String| JoinError::Claim {
        name: options.name.clone(),
        error,
    };
    for _ in 0..3 {
        let held = match store.create(&key, value.clone()).await {
            Ok(revision) => {
                return Ok(Joined {
                    store,
                    claim_revision: revision,
                    ttl,
                })
            }
            Err(error) if error.kind() == kv::CreateErrorKind::AlreadyExists => {
                match store.entry(&key).await {
                    Ok(Some(entry)) if entry.operation == kv::Operation::Put => entry,
                    // Gone meanwhile: create again.
                    Ok(_) => continue,
                    Err(error) => return Err(claim_error(error.to_string())),
                }
            }
            Err(error) => return Err(claim_error(error.to_string())),
        };
        let holder: Option<Claim> = serde_json::from_slice(&held.value).ok();
        if holder.as_ref().is_some_and(|h| h.instance == instance) {
            return Ok(Joined {
                store,
                claim_revision: held.revision,
                ttl,
            });
        }
        let probe = client
            .send_request(
                fabric::probe_subject(&options.name),
                async_nats::Request::new().timeout(Some(PROBE_WAIT)),
            )
            .await;
        match probe {
            Ok(answer) => {
                return Err(JoinError::NameTaken {
                    name: options.name.clone(),
                    instance: String::from_utf8_lossy(&answer.payload).into_owned(),
                })
            }
            Err(error)
                if matches!(
                    error.kind(),
                    async_nats::RequestErrorKind::NoResponders
                        | async_nats::RequestErrorKind::TimedOut
                ) =>
            {
                tracing::info!(
                    name = %options.name,
                    "the hub that held this name does not answer; taking it over"
                );
                match store.update(&key, value.clone(), held.revision).await {
                    Ok(revision) => {
                        return Ok(Joined {
                            store,
                            claim_revision: revision,
                            ttl,
                        })
                    }
                    // Someone else took it meanwhile: look again.
                    Err(error) if error.kind() == kv::UpdateErrorKind::WrongLastRevision => {
                        continue
                    }
                    Err(error) => return Err(claim_error(error.to_string())),
                }
            }
            Err(error) => return Err(claim_error(error.to_string())),
        }
    }
    Err(claim_error("the claim kept changing under this hub".into()))
}

/// Joins when NATS comes up (if it was down at start), answers probes for
/// this hub's name, and registers the hub with NATS's service API (ADR-32:
/// `nats micro ls` lists the hubs).
pub async fn keep_joined(fabric: Arc<Fabric>) {
    let mut connected = fabric.connected.clone();
    let mut joined = fabric.joined.subscribe();
    // Wait until joined, claiming whenever NATS is up and no hub holds the name.
    while joined.borrow().is_none() {
        tokio::select! {
            () = fabric.stop.cancelled() => return,
            _ = connected.wait_for(|up| *up) => {}
        }
        match claim(&fabric.client, &fabric.options, &fabric.instance).await {
            Ok(claimed) => {
                tracing::info!(name = %fabric.name, "joined the fabric");
                fabric
                    .metrics
                    .joined
                    .store(true, std::sync::atomic::Ordering::Relaxed);
                fabric.joined.send_replace(Some(claimed));
            }
            Err(error) => {
                if matches!(error, JoinError::NameTaken { .. }) {
                    fabric
                        .metrics
                        .name_conflict
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                }
                tracing::error!(%error, "cannot join the fabric yet");
                tokio::select! {
                    () = fabric.stop.cancelled() => return,
                    () = tokio::time::sleep(RETRY * 10) => {}
                }
            }
        }
        let _ = joined.borrow_and_update();
    }
    let service = register_service(&fabric).await;
    let Some(mut probes) = fabric
        .subscribe(
            fabric::probe_subject(&fabric.name),
            "probes for this hub's name",
        )
        .await
    else {
        return;
    };
    let instance = Bytes::from(fabric.instance.clone());
    loop {
        let probe = tokio::select! {
            () = fabric.stop.cancelled() => break,
            probe = probes.next() => probe,
        };
        let Some(probe) = probe else { break };
        if let Some(reply) = probe.reply {
            if fabric.joined.borrow().is_some() {
                let _ = fabric.client.publish(reply, instance.clone()).await;
            }
        }
    }
    if let Some(service) = service {
        let _ = service.stop().await;
    }
}

async fn register_service(fabric: &Fabric) -> Option<async_nats::service::Service> {
    use async_nats::service::ServiceExt;
    let metadata = [("hub".to_owned(), fabric.name.clone())].into();
    match fabric
        .client
        .service_builder()
        .description("A Switchboard hub of this fabric")
        .metadata(metadata)
        .start("switchboard-hub", env!("CARGO_PKG_VERSION"))
        .await
    {
        Ok(service) => Some(service),
        Err(error) => {
            tracing::warn!(%error, "cannot register with the NATS service API (nats micro ls will not list this hub)");
            None
        }
    }
}

/// Leaving: this hub's services and claim removed from the bucket now.
pub async fn leave(fabric: &Fabric) {
    let Some(joined) = fabric.joined.send_replace(None) else {
        return;
    };
    if !*fabric.connected.borrow() {
        return; // the keys age out: no one can be told sooner
    }
    fabric
        .metrics
        .joined
        .store(false, std::sync::atomic::Ordering::Relaxed);
    let prefix = fabric::service_key(&fabric.name, "");
    if let Ok(keys) = joined.store.keys().await {
        let keys: Vec<String> = keys
            .filter_map(|key| async move { key.ok() })
            .filter(|key| std::future::ready(key.starts_with(&prefix)))
            .collect()
            .await;
        let purges = keys.iter().map(|key| joined.store.purge(key));
        for result in futures_util::future::join_all(purges).await {
            if let Err(error) = result {
                tracing::debug!(%error, "a service key stayed in the catalog (it ages out)");
            }
        }
    }
    let _ = joined.store.delete(fabric::claim_key(&fabric.name)).await;
    let _ = fabric.client.flush().await;
    tracing::info!(name = %fabric.name, "left the fabric");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_their_secrets() {
        assert_eq!(redacted("nats://u:p@host:4222"), "nats://…@host:4222");
        assert_eq!(redacted("nats://host:4222"), "nats://host:4222");
        assert_eq!(redacted("u:p@host"), "…@host");
        // Found by the config fuzzer: `://` after the secret, not a scheme.
        assert_eq!(
            redacted("na:x//:secret-pass@[:y]sut://u:p@[::1]"),
            "…@[::1]"
        );
        assert_eq!(redacted("tls://a@b@host"), "tls://…@host");
    }
}
