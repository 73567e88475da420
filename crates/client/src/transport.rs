//! Reaching the hub: where it is, and the two framings (lines on a Unix
//! socket, text frames on a WebSocket) behind one reader and one writer.

use std::path::{Path, PathBuf};

use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use switchboard_protocol::discovery::HubInfo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpStream, UnixStream};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::error::Error;

/// Where the hub is and which token to present.
#[derive(Debug, Clone)]
pub enum Endpoint {
    /// Read `hub.json` from this hub directory (`None`: the default directory
    /// rule: `$SWITCHBOARD_DIR`, `$XDG_RUNTIME_DIR/switchboard`, `/tmp/switchboard-<uid>`).
    /// A module the hub in that directory started presents its launch
    /// credential ([`crate::launch`]) instead of the `hub.json` token.
    Dir(Option<PathBuf>),
    /// A Unix socket; the token is `None` for an unverified connection.
    Unix {
        path: PathBuf,
        token: Option<String>,
    },
    /// A WebSocket URL such as `ws://127.0.0.1:7000/`, or `wss://HOST:PORT/`
    /// (a hub's remote listener): its certificate is checked against the
    /// system's roots, or only against the PEM certificates in `ca_cert`
    /// when it is given (a private CA, a self-signed hub).
    WebSocket {
        url: String,
        token: Option<String>,
        ca_cert: Option<PathBuf>,
    },
}

/// Reads `hub.json` from a hub directory (`None`: the directory rule, as a
/// client applies it: `client_hub_dir`).
pub fn read_hub_info(dir: Option<&Path>) -> Result<HubInfo, Error> {
    read_info_in(&switchboard_discovery::client_hub_dir(dir))
}

fn read_info_in(dir: &Path) -> Result<HubInfo, Error> {
    switchboard_discovery::read_info(dir).map_err(|error| Error::Discovery(error.to_string()))
}

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

pub(crate) enum Reader {
    Unix { half: OwnedReadHalf, buf: Vec<u8> },
    Ws(SplitStream<Ws>),
}

pub(crate) enum Writer {
    Unix(OwnedWriteHalf),
    Ws(SplitSink<Ws, Message>),
}

/// Opens the connection an endpoint names; returns it and the token to use.
pub(crate) async fn open(endpoint: &Endpoint) -> Result<(Reader, Writer, Option<String>), Error> {
    match endpoint {
        Endpoint::Dir(dir) => {
            let dir = switchboard_discovery::client_hub_dir(dir.as_deref());
            let info = read_info_in(&dir)?;
            let token = match crate::launch::init() {
                Some(launch) if launch.is_for(&dir) => launch.secret().to_owned(),
                _ => info.token,
            };
            let (reader, writer) = open_unix(&info.socket).await?;
            Ok((reader, writer, Some(token)))
        }
        Endpoint::Unix { path, token } => {
            let (reader, writer) = open_unix(path).await?;
            Ok((reader, writer, token.clone()))
        }
        Endpoint::WebSocket {
            url,
            token,
            ca_cert,
        } => {
            let connector = if url.starts_with("wss://") {
                Some(crate::tls::connector(ca_cert.as_deref())?)
            } else {
                None
            };
            let (socket, _) = tokio_tungstenite::connect_async_tls_with_config(
                url.as_str(),
                None,
                false,
                connector,
            )
            .await
            .map_err(|error| Error::WebSocket(format!("cannot connect to {url}: {error}")))?;
            let (sink, stream) = socket.split();
            Ok((Reader::Ws(stream), Writer::Ws(sink), token.clone()))
        }
    }
}

async fn open_unix(path: &Path) -> Result<(Reader, Writer), Error> {
    let stream = UnixStream::connect(path)
        .await
        .map_err(|source| Error::Connect {
            endpoint: path.display().to_string(),
            error: source,
        })?;
    let (half, write) = stream.into_split();
    Ok((
        Reader::Unix {
            half,
            buf: Vec::with_capacity(64 * 1024),
        },
        Writer::Unix(write),
    ))
}

impl Reader {
    /// Reads what is available and calls `on_message` for each complete
    /// message. `Ok(false)`: the hub closed the connection.
    pub(crate) async fn read_batch(
        &mut self,
        mut on_message: impl FnMut(&[u8]),
    ) -> std::io::Result<bool> {
        match self {
            Reader::Unix { half, buf } => {
                if buf.capacity() - buf.len() < 16 * 1024 {
                    buf.reserve(64 * 1024);
                }
                let n = half.read_buf(buf).await?;
                if n == 0 {
                    return Ok(false);
                }
                let mut start = 0;
                for end in memchr::memchr_iter(b'\n', buf) {
                    on_message(&buf[start..end]);
                    start = end + 1;
                }
                buf.drain(..start);
                Ok(true)
            }
            Reader::Ws(stream) => loop {
                match stream.next().await {
                    None => return Ok(false),
                    Some(Ok(Message::Text(text))) => {
                        on_message(text.as_bytes());
                        return Ok(true);
                    }
                    Some(Ok(Message::Binary(bytes))) => {
                        on_message(&bytes);
                        return Ok(true);
                    }
                    Some(Ok(Message::Close(_))) => return Ok(false),
                    Some(Ok(_)) => continue,
                    Some(Err(error)) => return Err(std::io::Error::other(error)),
                }
            },
        }
    }
}

impl Writer {
    /// Writes a batch of `\n`-terminated messages.
    pub(crate) async fn write_batch(&mut self, batch: &[u8]) -> std::io::Result<()> {
        match self {
            Writer::Unix(half) => half.write_all(batch).await,
            Writer::Ws(sink) => {
                let mut start = 0;
                for end in memchr::memchr_iter(b'\n', batch) {
                    let text = String::from_utf8_lossy(&batch[start..end]).into_owned();
                    sink.feed(Message::text(text))
                        .await
                        .map_err(std::io::Error::other)?;
                    start = end + 1;
                }
                sink.flush().await.map_err(std::io::Error::other)
            }
        }
    }

    pub(crate) async fn close(&mut self) {
        match self {
            Writer::Unix(half) => {
                let _ = half.shutdown().await;
            }
            Writer::Ws(sink) => {
                let _ = sink.close().await;
            }
        }
    }
}
