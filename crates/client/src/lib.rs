//! Async Rust SDK for the Switchboard hub.
//!
//! ```no_run
//! # async fn demo() -> Result<(), switchboard_client::Error> {
//! use switchboard_client::{handler_fn, reply, Client};
//!
//! let owner = Client::connect().await?;
//! let service = owner
//!     .register(&serde_json::json!({"protocol": "echo"}), handler_fn(|request| async move {
//!         reply(&request.params::<serde_json::Value>()?)
//!     }))
//!     .await?;
//!
//! let caller = Client::connect().await?;
//! let echoed: serde_json::Value = caller.request(&service.id(), "echo", &[1, 2, 3]).await?;
//! # Ok(()) }
//! ```
//!
//! - [`Client`]: connect, register, request, notify, catalog, reconnect;
//! - [`Handler`] / [`handler_fn`]: serve a service;
//! - [`Catalog`]: the live view of the services this client may discover;
//! - [`Error`] / [`ErrorKind`]: every hub error code, typed;
//! - [`launch`]: a supervised module's launch credential, presented for it.

mod catalog;
mod client;
mod connection;
mod deadlines;
mod error;
pub mod launch;
mod service;
mod tls;
mod transport;

pub use catalog::{Catalog, CatalogEvent, Selector, ServiceInfo};
pub use client::{Client, ConnectOptions, RequestOptions, ServiceHandle};
pub use error::{Error, ErrorKind, RpcError};
pub use service::{
    handler_fn, method_not_found, reply, BoxFuture, FnHandler, Handler, Notification, Reply,
    Request,
};
pub use transport::{read_hub_info, Connector, Endpoint};

pub use switchboard_protocol as protocol;
