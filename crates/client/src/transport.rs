//! Reaching the hub: where it is, and the two framings (lines on a Unix
//! socket or an in-process pipe, text frames on a WebSocket) behind one
//! reader and one writer.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use switchboard_protocol::discovery::HubInfo;
use switchboard_socket::{ReadOutcome, ReadableStream};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream, ReadHalf, WriteHalf};
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
    /// A client in the hub's own process (an add-on of the hub, such as
    /// the MCP gateway behind `/mcp`): each connection is a pipe in memory
    /// the hub serves as it serves its Unix socket, with no system call
    /// per message.
    InProcess {
        connect: Connector,
        token: Option<String>,
    },
}

/// Makes an in-process connection: the client's end of a pipe whose other
/// end the hub serves.
#[derive(Clone)]
pub struct Connector(Arc<dyn Fn() -> std::io::Result<DuplexStream> + Send + Sync>);

impl Connector {
    pub fn new(
        connect: impl Fn() -> std::io::Result<DuplexStream> + Send + Sync + 'static,
    ) -> Self {
        Connector(Arc::new(connect))
    }
}

impl fmt::Debug for Connector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Connector(in-process)")
    }
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
    /// `buf[..filled]` is the start of a line not yet complete.
    Lines {
        source: LineSource,
        buf: Vec<u8>,
        filled: usize,
    },
    Ws(SplitStream<Ws>),
}

/// Where lines come from.
pub(crate) enum LineSource {
    Unix(ReadableStream),
    InProcess(ReadHalf<DuplexStream>),
}

impl LineSource {
    /// Reads what is there into `buf`; `None` at the end of the stream.
    async fn read(&mut self, buf: &mut [u8]) -> std::io::Result<Option<usize>> {
        match self {
            LineSource::Unix(socket) => {
                match std::future::poll_fn(|cx| socket.poll_read(cx, buf)).await {
                    ReadOutcome::Bytes(n) => Ok(Some(n)),
                    ReadOutcome::Closed => Ok(None),
                }
            }
            LineSource::InProcess(pipe) => match pipe.read(buf).await? {
                0 => Ok(None),
                n => Ok(Some(n)),
            },
        }
    }
}

pub(crate) enum Writer {
    Unix(switchboard_socket::Writer),
    InProcess(WriteHalf<DuplexStream>),
    Ws(SplitSink<Ws, Message>),
}

/// A Unix connection's read buffer: what one read may take, and what it
/// shrinks back to after a longer message.
const READ_BYTES: usize = 64 * 1024;

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
        Endpoint::InProcess { connect, token } => {
            let pipe = (connect.0)().map_err(|error| Error::Connect {
                endpoint: "the hub (in-process)".into(),
                error,
            })?;
            let (read, write) = tokio::io::split(pipe);
            Ok((
                lines_from(LineSource::InProcess(read)),
                Writer::InProcess(write),
                token.clone(),
            ))
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
    // Registered for readable only: with tokio's default registration,
    // every read the hub makes of what we wrote would wake us for nothing.
    let socket = ReadableStream::new(stream).map_err(|source| Error::Connect {
        endpoint: path.display().to_string(),
        error: source,
    })?;
    let writer = socket.writer();
    Ok((lines_from(LineSource::Unix(socket)), Writer::Unix(writer)))
}

fn lines_from(source: LineSource) -> Reader {
    Reader::Lines {
        source,
        buf: vec![0; READ_BYTES],
        filled: 0,
    }
}

impl Reader {
    /// Reads what is available and calls `on_message` for each complete
    /// message. `Ok(false)`: the hub closed the connection.
    pub(crate) async fn read_batch(
        &mut self,
        mut on_message: impl FnMut(&[u8]),
    ) -> std::io::Result<bool> {
        match self {
            Reader::Lines {
                source,
                buf,
                filled,
            } => {
                if buf.len() - *filled < READ_BYTES / 4 {
                    // A message longer than the buffer: room for more of it.
                    buf.resize(buf.len() * 2, 0);
                }
                let Some(n) = source.read(&mut buf[*filled..]).await? else {
                    return Ok(false);
                };
                // The line carried over has no newline: only new bytes are
                // searched.
                let end = *filled + n;
                let mut start = 0;
                for newline in memchr::memchr_iter(b'\n', &buf[*filled..end]) {
                    let newline = *filled + newline;
                    on_message(&buf[start..newline]);
                    start = newline + 1;
                }
                buf.copy_within(start..end, 0);
                *filled = end - start;
                if *filled == 0 && buf.len() > READ_BYTES {
                    *buf = vec![0; READ_BYTES];
                }
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
            Writer::Unix(writer) => writer.write_all(batch).await,
            Writer::InProcess(pipe) => pipe.write_all(batch).await,
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
            Writer::Unix(writer) => writer.shutdown(),
            Writer::InProcess(pipe) => {
                let _ = pipe.shutdown().await;
            }
            Writer::Ws(sink) => {
                let _ = sink.close().await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    fn reader_of(stream: UnixStream) -> Reader {
        lines_from(LineSource::Unix(ReadableStream::new(stream).unwrap()))
    }

    /// Lines split across reads, one longer than the buffer, and a last
    /// line without its newline (not handed on: the hub sends none).
    async fn lines_are_whole_however_they_arrive(
        mut reader: Reader,
        mut theirs: impl tokio::io::AsyncWrite + Send + Unpin + 'static,
    ) -> Reader {
        let long = "x".repeat(3 * READ_BYTES);
        let writer = tokio::spawn(async move {
            theirs.write_all(b"{\"a\":").await.unwrap();
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            theirs.write_all(b"1}\n{\"b\":2}\n").await.unwrap();
            theirs.write_all(long.as_bytes()).await.unwrap();
            theirs.write_all(b"\n{\"c\"").await.unwrap();
        });
        let mut lines: Vec<Vec<u8>> = Vec::new();
        while reader
            .read_batch(|line| lines.push(line.to_vec()))
            .await
            .unwrap()
        {}
        writer.await.unwrap();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0], b"{\"a\":1}");
        assert_eq!(lines[1], b"{\"b\":2}");
        assert_eq!(lines[2].len(), 3 * READ_BYTES);
        reader
    }

    #[tokio::test]
    async fn in_process_lines_are_whole_however_they_arrive() {
        let (ours, theirs) = tokio::io::duplex(1024);
        let (read, _write) = tokio::io::split(ours);
        lines_are_whole_however_they_arrive(lines_from(LineSource::InProcess(read)), theirs).await;
    }

    #[tokio::test]
    async fn unix_lines_are_whole_however_they_arrive() {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let reader = lines_are_whole_however_they_arrive(reader_of(ours), theirs).await;
        let Reader::Lines { buf, filled, .. } = &reader else {
            unreachable!()
        };
        assert_eq!(&buf[..*filled], b"{\"c\"");
    }

    #[tokio::test]
    async fn the_buffer_shrinks_back_after_a_long_line() {
        let (ours, mut theirs) = UnixStream::pair().unwrap();
        let mut reader = reader_of(ours);
        let mut long = "y".repeat(2 * READ_BYTES).into_bytes();
        long.push(b'\n');
        let writer = tokio::spawn(async move { theirs.write_all(&long).await.unwrap() });
        let mut got = 0;
        while got == 0 {
            reader.read_batch(|line| got = line.len()).await.unwrap();
        }
        writer.await.unwrap();
        assert_eq!(got, 2 * READ_BYTES);
        let Reader::Lines { buf, filled, .. } = &reader else {
            unreachable!()
        };
        assert_eq!((*filled, buf.len()), (0, READ_BYTES));
    }
}
