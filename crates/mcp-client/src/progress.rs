//! A server's `notifications/progress`, routed to the call they belong to.
//!
//! rmcp gives every request a progress token of its own; a call that wants
//! progress registers its sink under that token while its request is
//! queued, and the route is removed when the call ends, however it ends.
//! rmcp runs each incoming notification on a task of its own, so reports of
//! one call may reach the sink out of order: a sink that needs them
//! increasing drops the late ones (the tools SDK's `Progress` does).

use std::collections::HashMap;
use std::sync::Arc;

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use tokio::sync::{Mutex, MutexGuard};

use crate::handler::HandlerFuture;

/// One progress report, as the server sent it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProgressUpdate {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// Where one call's progress goes.
pub trait ProgressSink: Send + Sync + 'static {
    fn report(&self, update: ProgressUpdate) -> HandlerFuture<'_, ()>;
}

/// The sinks of a connection's calls in flight, by progress token. A tokio
/// mutex: a call holds it while its request is queued, so the server's
/// first report cannot arrive before the route exists.
#[derive(Default)]
pub(crate) struct ProgressRoutes {
    routes: Mutex<HashMap<ProgressToken, Arc<dyn ProgressSink>>>,
}

impl ProgressRoutes {
    /// Held from before a request is queued until its route is added.
    pub(crate) async fn hold(
        &self,
    ) -> MutexGuard<'_, HashMap<ProgressToken, Arc<dyn ProgressSink>>> {
        self.routes.lock().await
    }

    /// Hands a report to its call's sink; one for no call in flight is
    /// dropped.
    pub(crate) async fn report(&self, params: ProgressNotificationParam) {
        let sink = self
            .routes
            .lock()
            .await
            .get(&params.progress_token)
            .cloned();
        if let Some(sink) = sink {
            sink.report(ProgressUpdate {
                progress: params.progress,
                total: params.total,
                message: params.message,
            })
            .await;
        }
    }
}

/// Removes a call's route when the call ends, however it ends.
pub(crate) struct Route {
    pub(crate) routes: Arc<ProgressRoutes>,
    pub(crate) token: ProgressToken,
}

impl Drop for Route {
    fn drop(&mut self) {
        let routes = self.routes.clone();
        let token = self.token.clone();
        tokio::spawn(async move {
            routes.routes.lock().await.remove(&token);
        });
    }
}
