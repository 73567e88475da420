//! A raw JSON-RPC line client on the hub's Unix socket.
//!
//! The soak driver reads the wire itself rather than through the SDK: the
//! SDK matches answers to ids and drops an answer it does not expect, so a
//! request answered twice would be invisible through it.

use std::io;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;

/// How long `initialize` may take.
const INITIALIZE_WAIT: Duration = Duration::from_secs(30);

/// The reading half: whole lines, parsed.
pub struct WireReader {
    reader: BufReader<OwnedReadHalf>,
    /// Bytes of a line not complete yet; kept across calls so [`WireReader::recv`]
    /// is cancel safe in `select!`.
    line: Vec<u8>,
}

/// The writing half: one message per line.
pub struct WireWriter {
    writer: OwnedWriteHalf,
    buf: Vec<u8>,
}

/// Connects to the hub's socket.
pub async fn connect(socket: &Path) -> io::Result<(WireReader, WireWriter)> {
    let stream = UnixStream::connect(socket).await?;
    let (read, write) = stream.into_split();
    Ok((
        WireReader {
            reader: BufReader::with_capacity(4 * 1024, read),
            line: Vec::new(),
        },
        WireWriter {
            writer: write,
            buf: Vec::with_capacity(512),
        },
    ))
}

impl WireReader {
    /// The next message; `Ok(None)` when the hub closed the connection.
    /// Cancel safe: a partly read line is kept for the next call.
    pub async fn recv(&mut self) -> anyhow::Result<Option<Value>> {
        loop {
            let n = self.reader.read_until(b'\n', &mut self.line).await?;
            if n == 0 {
                return Ok(None);
            }
            if self.line.last() != Some(&b'\n') {
                continue;
            }
            let parsed = serde_json::from_slice(&self.line);
            let text = String::from_utf8_lossy(&self.line).into_owned();
            self.line.clear();
            return parsed
                .map(Some)
                .with_context(|| format!("the hub sent a line that is not JSON: {text:?}"));
        }
    }

    /// Waits for the response to `id`, skipping anything else.
    pub async fn response(&mut self, id: &Value) -> anyhow::Result<Value> {
        loop {
            match self.recv().await? {
                None => bail!("the hub closed the connection before answering {id}"),
                Some(message) if message.get("method").is_none() && message["id"] == *id => {
                    return Ok(message)
                }
                Some(_) => {}
            }
        }
    }
}

impl WireWriter {
    pub async fn send(&mut self, message: &Value) -> io::Result<()> {
        self.buf.clear();
        serde_json::to_writer(&mut self.buf, message)?;
        self.buf.push(b'\n');
        self.writer.write_all(&self.buf).await
    }

    pub async fn request(&mut self, id: u64, method: &str, params: Value) -> io::Result<()> {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await
    }

    pub async fn notify(&mut self, method: &str, params: Value) -> io::Result<()> {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await
    }

    pub async fn respond(&mut self, id: &Value, result: Value) -> io::Result<()> {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}))
            .await
    }

    pub async fn respond_error(&mut self, id: &Value, error: Value) -> io::Result<()> {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "error": error}))
            .await
    }

    /// Closes the writing side: the hub sees the end of the stream.
    pub async fn close(&mut self) {
        let _ = self.writer.shutdown().await;
    }
}

/// Connects and initializes with `token`; returns both halves and the
/// `initialize` result (or the hub's error as `Err`).
pub async fn open(
    socket: &Path,
    token: &str,
    name: &str,
) -> anyhow::Result<(WireReader, WireWriter, Value)> {
    let (mut reader, mut writer) = connect(socket)
        .await
        .with_context(|| format!("cannot connect to {}", socket.display()))?;
    let result = initialize(&mut reader, &mut writer, token, name).await?;
    Ok((reader, writer, result))
}

/// Sends `initialize` (id 0) with `token`; returns its result, or the hub's
/// error as `Err`.
pub async fn initialize(
    reader: &mut WireReader,
    writer: &mut WireWriter,
    token: &str,
    name: &str,
) -> anyhow::Result<Value> {
    let params = json!({"authToken": token, "clientInfo": {"name": name}});
    writer.request(0, "initialize", params).await?;
    let response = tokio::time::timeout(INITIALIZE_WAIT, reader.response(&json!(0)))
        .await
        .with_context(|| format!("no answer to initialize within {INITIALIZE_WAIT:?}"))??;
    match response.get("result") {
        Some(result) => Ok(result.clone()),
        None => bail!("initialize refused: {}", response["error"]),
    }
}

/// Joins the two halves back into the socket, to hold an idle connection
/// without its buffers. Bytes already buffered by the reader are dropped.
pub fn reunite(reader: WireReader, writer: WireWriter) -> UnixStream {
    reader
        .reader
        .into_inner()
        .reunite(writer.writer)
        .expect("the halves of one stream reunite")
}
