//! The calls in flight on a connection, by the progress token rmcp gave
//! each: a server's `notifications/progress` goes to its call's sink, and a
//! server's own request whose `_meta.progressToken` names a call is told
//! which call (its [`CallTag`]).
//!
//! A call registers its route while its request is queued. rmcp runs each
//! incoming notification on a task of its own, so one the server sent just
//! before its answer may be handled just after it, and reports of one call
//! may reach the sink out of order (a sink that needs them increasing drops
//! the late ones, as the tools SDK's `Progress` does). So a call's answer
//! waits (bounded) until every report the server wrote before it was
//! handled; then the route is removed at once and its tag kept among the
//! last [`ENDED_TAGS`] ended, for a late log or request that names the
//! call (what the server reports after its answer, MCP forbids, and is
//! dropped). A route with a sink whose reports did not settle in time, or
//! whose call ended without an answer, is removed [`ROUTE_LINGER`] later,
//! for the reports still on their way.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use tokio::sync::{Mutex, MutexGuard, Notify};

use crate::handler::{CallTag, HandlerFuture};

/// How long a call's route with a sink outlives the call when its reports
/// did not settle, for those rmcp hands on after its answer; and how long
/// an answer waits for them to settle.
pub(crate) const ROUTE_LINGER: Duration = Duration::from_secs(1);

/// How many ended calls' tags are kept for what the server sent before an
/// answer and rmcp hands on after it (a route without a progress sink is
/// removed at once, not after [`ROUTE_LINGER`]).
pub(crate) const ENDED_TAGS: usize = 1024;

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

/// What a connection knows of one call in flight.
#[derive(Clone, Default)]
pub(crate) struct CallRoute {
    pub(crate) sink: Option<Arc<dyn ProgressSink>>,
    pub(crate) tag: Option<CallTag>,
    /// How many of the call's reports were handed on (or dropped) so far.
    pub(crate) handled: u64,
}

pub(crate) type RouteMap = HashMap<ProgressToken, CallRoute>;

/// The routes of a connection's calls in flight, by progress token. A tokio
/// mutex: a call holds it while its request is queued, so neither the
/// server's first report nor its first request can be looked up before the
/// route exists.
#[derive(Default)]
pub(crate) struct ProgressRoutes {
    routes: Mutex<RouteMap>,
    /// Woken each time a report was handled.
    handled: Notify,
    /// The tags of the calls whose routes were removed at once, newest
    /// last, at most [`ENDED_TAGS`]: a log message the server sent during
    /// a call, handled after the call's answer, still belongs to that
    /// call's client and no other.
    ended: parking_lot::Mutex<VecDeque<(ProgressToken, CallTag)>>,
}

impl ProgressRoutes {
    /// Held from before a request is queued until its route is added.
    pub(crate) async fn hold(&self) -> MutexGuard<'_, RouteMap> {
        self.routes.lock().await
    }

    /// Hands a report to its call's sink; one for no call in flight (or a
    /// call that wants no progress) is dropped.
    pub(crate) async fn report(&self, params: ProgressNotificationParam) {
        let sink = self
            .routes
            .lock()
            .await
            .get(&params.progress_token)
            .and_then(|route| route.sink.clone());
        let token = params.progress_token.clone();
        if let Some(sink) = sink {
            sink.report(ProgressUpdate {
                progress: params.progress,
                total: params.total,
                message: params.message,
            })
            .await;
        }
        if let Some(route) = self.routes.lock().await.get_mut(&token) {
            route.handled += 1;
        }
        self.handled.notify_waiters();
    }

    /// Returns once `seen` reports of `token`'s call were handled (at most
    /// [`ROUTE_LINGER`] later): the reports the server wrote before its
    /// answer go on before the answer does. `false`: some were not handled
    /// in time (the call's route is then to linger for them).
    pub(crate) async fn settled(&self, token: &ProgressToken, seen: u64) -> bool {
        let settled = async {
            loop {
                let woken = self.handled.notified();
                tokio::pin!(woken);
                woken.as_mut().enable();
                let handled = self
                    .routes
                    .lock()
                    .await
                    .get(token)
                    .map_or(u64::MAX, |route| route.handled);
                if handled >= seen {
                    return;
                }
                woken.await;
            }
        };
        tokio::time::timeout(ROUTE_LINGER, settled).await.is_ok()
    }

    /// The tag of the call in flight (or just ended) that `token` belongs
    /// to.
    pub(crate) async fn tag_of(&self, token: &ProgressToken) -> Option<CallTag> {
        let in_flight = self
            .routes
            .lock()
            .await
            .get(token)
            .and_then(|route| route.tag);
        in_flight.or_else(|| {
            self.ended
                .lock()
                .iter()
                .rev()
                .find(|(ended, _)| ended == token)
                .map(|&(_, tag)| tag)
        })
    }

    /// How many calls have a route now.
    #[cfg(test)]
    pub(crate) async fn routed(&self) -> usize {
        self.routes.lock().await.len()
    }

    fn remember_ended(&self, token: ProgressToken, tag: CallTag) {
        let mut ended = self.ended.lock();
        if ended.len() >= ENDED_TAGS {
            ended.pop_front();
        }
        ended.push_back((token, tag));
    }
}

/// Removes a call's route when the call ends: at once unless it is to
/// `linger`, else [`ROUTE_LINGER`] later.
pub(crate) struct Route {
    pub(crate) routes: Arc<ProgressRoutes>,
    pub(crate) token: ProgressToken,
    /// The call has a progress sink whose reports may still be on their
    /// way: set while the call runs, cleared once its answer came and its
    /// reports settled ([`ProgressRoutes::settled`]). A route removed at
    /// once (no task and no timer per call, which cost more than the rest
    /// of its bookkeeping) keeps its tag among the [`ENDED_TAGS`] last, for
    /// what the server sent before the answer and rmcp hands on after it.
    pub(crate) linger: bool,
}

impl Drop for Route {
    fn drop(&mut self) {
        if !self.linger {
            if let Ok(mut routes) = self.routes.routes.try_lock() {
                let removed = routes.remove(&self.token);
                drop(routes);
                if let Some(tag) = removed.and_then(|route| route.tag) {
                    self.routes.remember_ended(self.token.clone(), tag);
                }
                return;
            }
        }
        let routes = self.routes.clone();
        let token = self.token.clone();
        tokio::spawn(async move {
            tokio::time::sleep(ROUTE_LINGER).await;
            routes.routes.lock().await.remove(&token);
        });
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::NumberOrString;

    use super::*;

    fn token(n: i64) -> ProgressToken {
        ProgressToken(NumberOrString::Number(n))
    }

    async fn end_call(routes: &Arc<ProgressRoutes>, n: i64) {
        routes.hold().await.insert(
            token(n),
            CallRoute {
                tag: Some(n as CallTag),
                ..CallRoute::default()
            },
        );
        drop(Route {
            routes: routes.clone(),
            token: token(n),
            linger: false,
        });
    }

    /// A route without a sink goes at once, but what the server sent during
    /// the call and rmcp hands on after its answer still finds the call.
    #[tokio::test]
    async fn an_ended_calls_tag_is_still_found_until_newer_ones_push_it_out() {
        let routes = Arc::new(ProgressRoutes::default());
        end_call(&routes, 0).await;
        assert!(routes.hold().await.is_empty(), "removed at once");
        assert_eq!(routes.tag_of(&token(0)).await, Some(0));
        for n in 1..=ENDED_TAGS as i64 {
            end_call(&routes, n).await;
        }
        assert_eq!(routes.tag_of(&token(0)).await, None);
        assert_eq!(routes.tag_of(&token(1)).await, Some(1));
        assert_eq!(routes.tag_of(&token(-1)).await, None);
    }
}
