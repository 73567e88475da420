//! The SDK's entry point: [`Client`].

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::value::RawValue;
use switchboard_protocol::hub::{
    method, InitializeResult, NotifyParams, RequestParams, UnregisterServiceParams,
    UpdateServiceParams,
};
use switchboard_protocol::{Limits, Principal};

use crate::catalog::{Catalog, CatalogFeed};
use crate::connection::{Connection, LocalService};
use crate::error::Error;
use crate::service::Handler;
use crate::transport::Endpoint;

/// How long a hub method (register, subscribe, …) may take.
const HUB_CALL_WAIT: Duration = Duration::from_secs(30);
/// Beyond a request's own timeout (which the hub enforces and answers with
/// `-32051`), how long to wait before giving up locally.
const LOCAL_MARGIN: Duration = Duration::from_secs(5);

#[derive(Debug, Clone)]
pub struct ConnectOptions {
    pub endpoint: Endpoint,
    /// `clientInfo.name`, shown in the hub's logs.
    pub client_name: String,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            endpoint: Endpoint::Dir(None),
            client_name: "switchboard-client".into(),
        }
    }
}

/// A connection to the hub that can be cloned and shared between tasks.
///
/// Everything registered or subscribed through it survives
/// [`Client::reconnect`]: services are registered again (under new ids) and
/// the catalog is re-subscribed.
#[derive(Clone)]
pub struct Client {
    shared: Arc<Shared>,
}

struct Shared {
    options: ConnectOptions,
    conn: Mutex<Arc<Connection>>,
    services: Mutex<Vec<Arc<LocalService>>>,
    feed: Arc<CatalogFeed>,
    /// One reconnect at a time.
    reconnecting: tokio::sync::Mutex<()>,
}

/// A service this client registered. Dropping the handle keeps the service
/// registered until the client closes; call [`ServiceHandle::unregister`] to
/// remove it.
#[derive(Clone)]
pub struct ServiceHandle {
    client: Client,
    local: Arc<LocalService>,
}

/// Options of one request.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestOptions {
    /// `timeoutMs` for the hub; `None`: the hub's default.
    pub timeout: Option<Duration>,
}

impl Client {
    /// Connects to the hub of the default directory.
    pub async fn connect() -> Result<Client, Error> {
        Self::connect_with(ConnectOptions::default()).await
    }

    pub async fn connect_with(options: ConnectOptions) -> Result<Client, Error> {
        let feed = Arc::new(CatalogFeed::default());
        let conn = Connection::open(&options.endpoint, &options.client_name, feed.clone()).await?;
        Ok(Client {
            shared: Arc::new(Shared {
                options,
                conn: Mutex::new(conn),
                services: Mutex::new(Vec::new()),
                feed,
                reconnecting: tokio::sync::Mutex::new(()),
            }),
        })
    }

    fn conn(&self) -> Arc<Connection> {
        self.shared.conn.lock().clone()
    }

    /// What the hub answered to `initialize` on the current connection.
    pub fn session(&self) -> InitializeResult {
        self.conn().init().clone()
    }

    pub fn client_id(&self) -> String {
        self.conn().init().client_id.clone()
    }

    pub fn principal(&self) -> Principal {
        self.conn().init().principal.clone()
    }

    pub fn limits(&self) -> Limits {
        self.conn().init().limits.clone()
    }

    /// Registers a service served by `handler` (one handler for all methods).
    pub async fn register(
        &self,
        metadata: &impl Serialize,
        handler: impl Handler,
    ) -> Result<ServiceHandle, Error> {
        let metadata = serde_json::value::to_raw_value(metadata).map_err(Error::Encode)?;
        let local = LocalService::new(metadata, Arc::new(handler));
        self.conn().register(&local).await?;
        self.shared.services.lock().push(local.clone());
        Ok(ServiceHandle {
            client: self.clone(),
            local,
        })
    }

    /// A live view of the catalog (subscribes on first use).
    pub async fn catalog(&self) -> Result<Catalog, Error> {
        if !self.shared.feed.is_subscribed() {
            self.conn().subscribe().await?;
        }
        Ok(Catalog::new(self.shared.feed.clone()))
    }

    /// Sends a request to a service and decodes the result.
    pub async fn request<T: DeserializeOwned>(
        &self,
        service_id: &str,
        method: &str,
        params: &impl Serialize,
    ) -> Result<T, Error> {
        let params = serde_json::value::to_raw_value(params).map_err(Error::Encode)?;
        let raw = self
            .request_raw(service_id, method, Some(&params), RequestOptions::default())
            .await?;
        serde_json::from_str(raw.get()).map_err(Error::Decode)
    }

    /// Sends a request with raw params and returns the raw result. Dropping
    /// the future before the answer cancels the request on the hub.
    pub async fn request_raw(
        &self,
        service_id: &str,
        method_name: &str,
        params: Option<&RawValue>,
        options: RequestOptions,
    ) -> Result<Box<RawValue>, Error> {
        let conn = self.conn();
        let timeout = options.timeout.unwrap_or_else(|| {
            Duration::from_millis(conn.init().limits.default_request_timeout_ms)
        });
        let params = RequestParams {
            service_id: Cow::Borrowed(service_id),
            method: Cow::Borrowed(method_name),
            params,
            timeout_ms: options.timeout.map(|t| t.as_millis().max(1) as u64),
        };
        conn.call_inner(method::REQUEST, &params, timeout + LOCAL_MARGIN, true)
            .await
    }

    /// Sends a notification. Never waits for anything but the socket, and
    /// the hub never answers it.
    pub async fn notify(
        &self,
        service_id: &str,
        method: &str,
        params: &impl Serialize,
    ) -> Result<(), Error> {
        let params = serde_json::value::to_raw_value(params).map_err(Error::Encode)?;
        self.notify_raw(service_id, method, Some(&params)).await
    }

    pub async fn notify_raw(
        &self,
        service_id: &str,
        method_name: &str,
        params: Option<&RawValue>,
    ) -> Result<(), Error> {
        let params = NotifyParams {
            service_id: Cow::Borrowed(service_id),
            method: Cow::Borrowed(method_name),
            params,
        };
        self.conn().notify_raw(method::NOTIFY, &params).await
    }

    /// Calls a hub method directly (for example `hub/reload`).
    pub async fn call_hub(
        &self,
        method: &str,
        params: &impl Serialize,
    ) -> Result<Box<RawValue>, Error> {
        self.conn().call(method, params, HUB_CALL_WAIT).await
    }

    /// Opens a new connection and moves everything onto it: each service is
    /// registered again (new ids; an old id never routes to it) and the
    /// catalog is re-subscribed (listeners see `Resynced`). The old
    /// connection is closed.
    pub async fn reconnect(&self) -> Result<(), Error> {
        let _one_at_a_time = self.shared.reconnecting.lock().await;
        let options = &self.shared.options;
        let fresh = Connection::open(
            &options.endpoint,
            &options.client_name,
            self.shared.feed.clone(),
        )
        .await?;
        let services: Vec<Arc<LocalService>> = self.shared.services.lock().clone();
        for local in &services {
            fresh.register(local).await?;
        }
        let old = std::mem::replace(&mut *self.shared.conn.lock(), fresh.clone());
        old.stop_feeding_catalog();
        old.close();
        if self.shared.feed.is_subscribed() {
            fresh.subscribe().await?;
        }
        Ok(())
    }

    /// Whether the current connection has ended.
    pub fn is_closed(&self) -> bool {
        self.conn().is_closed()
    }

    /// Resolves when the current connection ends (the hub stopped, the
    /// connection broke, or [`Client::close`]).
    pub async fn closed(&self) {
        let conn = self.conn();
        conn.closed().await
    }

    /// Closes the connection; the hub removes this client's services.
    pub fn close(&self) {
        self.conn().close();
    }
}

impl ServiceHandle {
    /// The service's current id (a new one after each reconnect).
    pub fn id(&self) -> String {
        self.local.id()
    }

    /// Notifications dropped because the handler fell more than 4096 behind.
    pub fn dropped_notifications(&self) -> u64 {
        self.local.dropped_notifications()
    }

    /// Resolves once every notification this service received before the
    /// call has been handled. The handler runs on a worker of its own, while
    /// answers to this client's requests are delivered at once; a caller
    /// that must not act on an answer before the notifications sent ahead
    /// of it (MCP progress before a tool's result) awaits this first. Not
    /// bounded here: the worker is only as slow as the handler.
    pub async fn notifications_handled(&self) {
        self.local.notifications_handled().await
    }

    /// Replaces the service's metadata (subscribers see `updated`).
    pub async fn update(&self, metadata: &impl Serialize) -> Result<(), Error> {
        let metadata = serde_json::value::to_raw_value(metadata).map_err(Error::Encode)?;
        let id = self.id();
        let params = UpdateServiceParams {
            service_id: Cow::Borrowed(&id),
            metadata: &metadata,
        };
        self.client
            .call_hub(method::UPDATE_SERVICE, &params)
            .await?;
        *self.local.metadata.lock() = metadata;
        Ok(())
    }

    /// Unregisters the service; it is not registered again on reconnect.
    pub async fn unregister(self) -> Result<(), Error> {
        let id = self.id();
        self.client
            .shared
            .services
            .lock()
            .retain(|local| !Arc::ptr_eq(local, &self.local));
        let params = UnregisterServiceParams {
            service_id: Cow::Borrowed(&id),
        };
        let result = self
            .client
            .call_hub(method::UNREGISTER_SERVICE, &params)
            .await;
        self.client.conn().forget_service(&id);
        result.map(|_| ())
    }
}
