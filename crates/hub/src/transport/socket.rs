//! What the HTTP port knows of an accepted socket, shared by its routes
//! (`http.rs`) and the WebSocket handshake (`ws.rs`), so neither imports the
//! other for it.

use std::net::SocketAddr;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio_util::task::TaskTracker;

use crate::admission::Slot;

/// What the router knows of the socket a request came on.
#[derive(Clone)]
pub struct Socket {
    pub peer: SocketAddr,
    /// On a loopback listener, `Host` must name loopback.
    pub loopback: bool,
    /// The remote (TLS) listener: only named principals authenticate.
    pub remote: bool,
    /// The slot the socket was accepted in; an upgrade takes it for the
    /// connection (`ws::upgrade`), otherwise it is freed with the socket.
    pub slot: Arc<Mutex<Option<Slot>>>,
    /// Where an upgraded connection's task is spawned (shutdown waits on it).
    pub tasks: TaskTracker,
}
