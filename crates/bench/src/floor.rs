//! The floor: the least work a relay between Unix socket connections can do,
//! built the way the hub's Unix transport is (one task per connection that
//! polls its reader and writer together, a per-thread read buffer, an
//! outbound byte queue swapped out whole by the writer), minus everything
//! the hub adds: no JSON parsing, no auth, no registry, no bookkeeping.
//!
//! Protocol, one message per line:
//! - a connection's first line is its name; the relay answers `ok` (or
//!   `err <why>` and closes, for a name already taken);
//! - every later line is `<target> <rest>`; the relay writes
//!   `<sender> <rest>` to the connection named `<target>` (the sender's name
//!   replaces the target's, so a reply can find its way back). A line for
//!   an unknown target is dropped.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use tokio::io::AsyncWriteExt;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Notify;

const READ_CHUNK: usize = 64 * 1024;
/// Longest accepted name line.
const MAX_NAME: usize = 256;
/// A write buffer larger than this is freed after use (as the hub does).
const KEEP_CAPACITY: usize = 64 * 1024;

thread_local! {
    static READ_BUF: RefCell<Box<[u8]>> = RefCell::new(vec![0; READ_CHUNK].into_boxed_slice());
}

/// Connections by name. Invariant: a name maps to the live connection that
/// claimed it; the connection removes itself when its reader ends.
#[derive(Default)]
pub struct Relay {
    peers: RwLock<HashMap<Box<[u8]>, Arc<Peer>>>,
}

/// One connection's outbound side: any reader appends, only its writer drains.
struct Peer {
    name: Box<[u8]>,
    out: Mutex<Outbound>,
    wake: Notify,
}

struct Outbound {
    buf: Vec<u8>,
    closing: bool,
}

impl Peer {
    /// Appends `<from> <rest>\n`; wakes the writer on the first bytes of a batch.
    fn push(&self, from: &[u8], rest: &[u8]) {
        let mut out = self.out.lock();
        if out.closing {
            return;
        }
        let was_empty = out.buf.is_empty();
        out.buf.reserve(from.len() + rest.len() + 2);
        out.buf.extend_from_slice(from);
        out.buf.push(b' ');
        out.buf.extend_from_slice(rest);
        out.buf.push(b'\n');
        drop(out);
        if was_empty {
            self.wake.notify_one();
        }
    }

    fn push_raw(&self, line: &[u8]) {
        let mut out = self.out.lock();
        let was_empty = out.buf.is_empty();
        out.buf.extend_from_slice(line);
        drop(out);
        if was_empty {
            self.wake.notify_one();
        }
    }

    fn close(&self) {
        self.out.lock().closing = true;
        self.wake.notify_one();
    }
}

impl Relay {
    /// Accepts connections until the listener fails.
    pub async fn serve(self: Arc<Self>, listener: UnixListener) -> io::Result<()> {
        loop {
            let (stream, _) = listener.accept().await?;
            tokio::spawn(self.clone().connection(stream));
        }
    }

    async fn connection(self: Arc<Self>, stream: UnixStream) {
        let (read, write) = stream.into_split();
        let mut partial = Vec::new();
        let Some(name) = read_name(&read, &mut partial).await else {
            return;
        };
        let peer = Arc::new(Peer {
            name: name.into_boxed_slice(),
            out: Mutex::new(Outbound {
                buf: Vec::new(),
                closing: false,
            }),
            wake: Notify::new(),
        });
        let taken = {
            let mut peers = self.peers.write();
            if peers.contains_key(&peer.name) {
                true
            } else {
                peers.insert(peer.name.clone(), peer.clone());
                false
            }
        };
        if taken {
            let mut write = write;
            let _ = write.write_all(b"err name taken\n").await;
            return;
        }
        peer.push_raw(b"ok\n");
        let reader = async {
            self.read_lines(&peer, read, partial).await;
            let mut peers = self.peers.write();
            if peers.get(&peer.name).is_some_and(|p| Arc::ptr_eq(p, &peer)) {
                peers.remove(&peer.name);
            }
            drop(peers);
            peer.close();
        };
        tokio::join!(reader, write_batches(&peer, write));
    }

    async fn read_lines(&self, peer: &Peer, socket: OwnedReadHalf, mut partial: Vec<u8>) {
        // Lines that came with the name.
        if !partial.is_empty() {
            let pending = std::mem::take(&mut partial);
            self.split_lines(peer, &pending, &mut partial);
        }
        loop {
            if socket.readable().await.is_err() {
                return;
            }
            let open = READ_BUF.with_borrow_mut(|buf| {
                for _ in 0..16 {
                    match socket.try_read(buf) {
                        Ok(0) => return false,
                        Ok(n) => self.split_lines(peer, &buf[..n], &mut partial),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(_) => return false,
                    }
                }
                true
            });
            if !open {
                return;
            }
            tokio::task::consume_budget().await;
        }
    }

    fn split_lines(&self, peer: &Peer, chunk: &[u8], partial: &mut Vec<u8>) {
        let mut rest = chunk;
        while let Some(end) = memchr::memchr(b'\n', rest) {
            if partial.is_empty() {
                self.route(peer, &rest[..end]);
            } else {
                partial.extend_from_slice(&rest[..end]);
                self.route(peer, partial);
                partial.clear();
                if partial.capacity() > KEEP_CAPACITY {
                    *partial = Vec::new();
                }
            }
            rest = &rest[end + 1..];
        }
        partial.extend_from_slice(rest);
    }

    fn route(&self, from: &Peer, line: &[u8]) {
        let Some(at) = memchr::memchr(b' ', line) else {
            return;
        };
        let target = self.peers.read().get(&line[..at]).cloned();
        if let Some(target) = target {
            target.push(&from.name, &line[at + 1..]);
        }
    }
}

/// Reads the first line (the name); keeps whatever followed it.
async fn read_name(socket: &OwnedReadHalf, rest: &mut Vec<u8>) -> Option<Vec<u8>> {
    let mut buf = [0u8; 512];
    loop {
        socket.readable().await.ok()?;
        match socket.try_read(&mut buf) {
            Ok(0) => return None,
            Ok(n) => {
                rest.extend_from_slice(&buf[..n]);
                if let Some(at) = memchr::memchr(b'\n', rest) {
                    let name = rest[..at].to_vec();
                    rest.drain(..=at);
                    let valid = !name.is_empty()
                        && name.len() <= MAX_NAME
                        && name.iter().all(|b| b.is_ascii_graphic());
                    return valid.then_some(name);
                }
                if rest.len() > MAX_NAME {
                    return None;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

async fn write_batches(peer: &Peer, mut socket: OwnedWriteHalf) {
    let mut batch = Vec::new();
    loop {
        let closing = {
            let mut out = peer.out.lock();
            std::mem::swap(&mut out.buf, &mut batch);
            out.closing
        };
        if batch.is_empty() {
            if closing {
                break;
            }
            peer.wake.notified().await;
            continue;
        }
        if socket.write_all(&batch).await.is_err() {
            break;
        }
        batch.clear();
        if batch.capacity() > KEEP_CAPACITY {
            batch = Vec::new();
        }
    }
    let _ = socket.shutdown().await;
}
