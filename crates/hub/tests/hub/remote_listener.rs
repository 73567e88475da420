//! The remote listener against the network (SECURITY.md, "The network"):
//! what a peer gets without TLS, without finishing a handshake, and without
//! a named principal's token, even where the config would admit it on the
//! local listeners.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite_029 as tungstenite_029;
use tungstenite_029::tungstenite::Message;

use crate::support::*;

/// A self-signed certificate for `localhost`: the PEM files, and the DER a
/// client trusts.
fn self_signed(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf, Vec<u8>) {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let cert = dir.join("remote-cert.pem");
    let key = dir.join("remote-key.pem");
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
    (cert, key, certified.cert.der().to_vec())
}

fn trusting(cert: Vec<u8>) -> tungstenite_029::Connector {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.into()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tungstenite_029::Connector::Rustls(Arc::new(config))
}

/// A hub with `config` and the remote listener; its `wss://localhost:PORT/`
/// and the DER of its certificate.
async fn remote_hub(
    temp: &tempfile::TempDir,
    config: &str,
) -> (switchboard_testkit::TestHub, String, Vec<u8>) {
    let (cert, key, der) = self_signed(temp.path());
    let hub = switchboard_testkit::TestHub::builder()
        .config(config)
        .remote(cert, key)
        .start()
        .await;
    let remote = hub.info().remote.clone().expect("the remote listener");
    let port = remote
        .trim_end_matches('/')
        .rsplit(':')
        .next()
        .unwrap()
        .to_owned();
    (hub, format!("wss://localhost:{port}/"), der)
}

fn port_of(url: &str) -> String {
    url.trim_end_matches('/')
        .rsplit(':')
        .next()
        .unwrap()
        .to_owned()
}

/// Reads until the peer closes; everything it sent, and how long it took.
async fn until_closed(stream: &mut TcpStream, limit: Duration) -> (Vec<u8>, Duration) {
    let started = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(limit, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return (got, started.elapsed()),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Err(_) => panic!("still open after {limit:?}"),
        }
    }
}

#[tokio::test]
async fn a_plain_text_client_of_the_remote_listener_gets_no_http_and_is_closed() {
    let temp = tempfile::tempdir().unwrap();
    let named = token_of("explorer");
    let (hub, base, _) = remote_hub(
        &temp,
        &format!("[principals.explorer]\ntoken = \"{named}\"\n"),
    )
    .await;
    let mut plain = TcpStream::connect(format!("127.0.0.1:{}", port_of(&base)))
        .await
        .unwrap();
    let head = format!(
        "GET /?token={named} HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    plain.write_all(head.as_bytes()).await.unwrap();
    let (got, _) = until_closed(&mut plain, Duration::from_secs(15)).await;
    // At most a TLS alert record (content type 21), never an HTTP answer.
    assert!(got.is_empty() || got[0] == 21, "{got:?}");
    assert!(
        !String::from_utf8_lossy(&got).contains("HTTP/"),
        "a plain-text peer got HTTP"
    );
    // And /metrics is not served in plain text there either.
    let mut plain = TcpStream::connect(format!("127.0.0.1:{}", port_of(&base)))
        .await
        .unwrap();
    plain
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let (got, _) = until_closed(&mut plain, Duration::from_secs(15)).await;
    assert!(
        !String::from_utf8_lossy(&got).contains("switchboard_"),
        "metrics in clear"
    );
    drop(hub);
}

#[tokio::test]
async fn handshakes_that_never_finish_hold_a_connection_slot_for_at_most_10_s() {
    let temp = tempfile::tempdir().unwrap();
    let named = token_of("explorer");
    let config =
        format!("[limits]\nmaxConnections = 2\n[principals.explorer]\ntoken = \"{named}\"\n");
    let (hub, base, der) = remote_hub(&temp, &config).await;
    let address = format!("127.0.0.1:{}", port_of(&base));
    // Two sockets that never start TLS take both connection slots.
    let started = Instant::now();
    let mut silent = Vec::new();
    for _ in 0..2 {
        silent.push(TcpStream::connect(&address).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let connect = || {
        tungstenite_029::connect_async_tls_with_config(
            format!("{base}?token={named}"),
            None,
            false,
            Some(trusting(der.clone())),
        )
    };
    // A third, with a good token, is refused while they hold them.
    match tokio::time::timeout(WAIT, connect()).await.unwrap() {
        Err(tungstenite_029::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status().as_u16(), 503)
        }
        other => panic!(
            "expected 503 while the slots are held, got {:?}",
            other.map(|_| ())
        ),
    }
    // The hub drops them at its 10 s bound on the handshake.
    for mut socket in silent {
        let (_, _) = until_closed(&mut socket, Duration::from_secs(15)).await;
    }
    let held = started.elapsed();
    assert!(held >= Duration::from_secs(9), "dropped after {held:?}");
    assert!(held < Duration::from_secs(14), "dropped after {held:?}");
    // Then the slots are free again.
    let (mut socket, _) = tokio::time::timeout(WAIT, connect())
        .await
        .unwrap()
        .expect("a slot is free once the silent sockets are dropped");
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}});
    futures_util::SinkExt::send(&mut socket, Message::text(initialize.to_string()))
        .await
        .unwrap();
    let answer = tokio::time::timeout(WAIT, futures_util::StreamExt::next(&mut socket))
        .await
        .unwrap();
    let Some(Ok(Message::Text(answer))) = answer else {
        panic!("no answer: {answer:?}");
    };
    assert!(answer.contains("\"result\""), "{answer}");
    drop(hub);
}

#[tokio::test]
async fn allow_unverified_never_admits_anyone_on_the_remote_listener() {
    let temp = tempfile::tempdir().unwrap();
    let (hub, base, der) = remote_hub(&temp, "[hub]\nallow_unverified = true\n").await;
    // Locally, no token is enough with allow_unverified.
    let local = hub.info().ws.clone().unwrap();
    let (mut socket, _) = tungstenite_029::connect_async(local).await.unwrap();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}});
    futures_util::SinkExt::send(&mut socket, Message::text(initialize.to_string()))
        .await
        .unwrap();
    let Some(Ok(Message::Text(answer))) =
        tokio::time::timeout(WAIT, futures_util::StreamExt::next(&mut socket))
            .await
            .unwrap()
    else {
        panic!("no answer locally");
    };
    assert!(answer.contains("\"unverified\""), "{answer}");
    // Remotely, the same is -32007, and the connection closes.
    let (mut socket, _) =
        tungstenite_029::connect_async_tls_with_config(base, None, false, Some(trusting(der)))
            .await
            .unwrap();
    futures_util::SinkExt::send(&mut socket, Message::text(initialize.to_string()))
        .await
        .unwrap();
    let Some(Ok(Message::Text(answer))) =
        tokio::time::timeout(WAIT, futures_util::StreamExt::next(&mut socket))
            .await
            .unwrap()
    else {
        panic!("no answer remotely");
    };
    let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(answer["error"]["code"], -32007, "{answer}");
    let closed = tokio::time::timeout(WAIT, async {
        loop {
            match futures_util::StreamExt::next(&mut socket).await {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return,
                Some(Ok(_)) => {}
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the refused connection stays open");
}

/// One HTTP GET of `path` over TLS to the remote listener; the whole answer.
async fn get_over_tls(base: &str, der: Vec<u8>, path: &str) -> String {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(der.into()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(format!("127.0.0.1:{}", port_of(base)))
        .await
        .unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut tls = connector.connect(name, tcp).await.unwrap();
    let head = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n");
    tls.write_all(head.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(15), tls.read_to_end(&mut got)).await;
    String::from_utf8_lossy(&got).into_owned()
}

#[tokio::test]
async fn the_remote_listener_serves_only_the_upgrade_and_the_health_check() {
    let temp = tempfile::tempdir().unwrap();
    let named = token_of("explorer");
    let (hub, base, der) = remote_hub(
        &temp,
        &format!("[principals.explorer]\ntoken = \"{named}\"\n"),
    )
    .await;
    let health = get_over_tls(&base, der.clone(), "/healthz").await;
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    // Nothing that answers without a token: not the metrics (module and
    // hub names), not the dashboard's pages or its login exchange.
    for path in ["/metrics", "/ui/", "/ui/login?code=x", "/nothing"] {
        let answer = get_over_tls(&base, der.clone(), path).await;
        assert!(answer.starts_with("HTTP/1.1 404"), "{path}: {answer}");
        assert!(
            answer.contains("not served on the remote listener"),
            "{answer}"
        );
        assert!(!answer.contains("switchboard_"), "{path}: {answer}");
    }
    drop(hub);
}
