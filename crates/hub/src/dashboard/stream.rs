//! The page's live stream: one Server-Sent Events response per open page.
//!
//! Events, in order: `snapshot` (the dashboard's snapshot, see `mod.rs`),
//! then as they come `actions` (catalog actions, each line one JSON-RPC
//! `action` message exactly as a catalog subscriber gets it) and `tick`
//! (every second: totals, rates, the connection table). If the page falls
//! behind, `resync` and the end: the browser's `EventSource` reconnects and
//! starts again from a new snapshot.
//!
//! Bounded like any consumer: actions wait in a queue of at most
//! [`QUEUE_BYTES`] (an `Outbound`, the same type a connection's queue is);
//! past that the catalog drops it (a flood of changes costs a resync, never
//! hub memory), and ticks are only ever the latest one.

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, Stream};
use tokio::sync::{watch, OwnedSemaphorePermit};

use crate::outbound::{Batch, Framing, Outbound};
use crate::state::HubState;

/// The most catalog actions a page's queue holds before the page is dropped.
pub const QUEUE_BYTES: u64 = 4 * 1024 * 1024;

/// `GET /ui/stream` (behind the session check in `pages.rs`).
pub async fn stream(State(hub): State<Arc<HubState>>) -> Response {
    let Ok(permit) = hub.dashboard.streams.clone().try_acquire_owned() else {
        let busy = "too many dashboard pages are open\n";
        return (StatusCode::SERVICE_UNAVAILABLE, busy).into_response();
    };
    let id = hub.dashboard.next_watcher_id();
    let queue = Arc::new(Outbound::new(QUEUE_BYTES, QUEUE_BYTES, Framing::Lines));
    let ticks = hub.dashboard.ticks.subscribe();
    let (services, seq) = hub.registry.watch(id, queue.clone());
    let snapshot = super::snapshot(&hub, &services, seq);
    drop(services);
    let state = Page {
        watch: Watch { hub, id },
        queue,
        ticks,
        batch: Vec::new(),
        first: Some(snapshot),
        ended: false,
        _permit: permit,
    };
    Sse::new(events(state)).into_response()
}

/// Removes the page from the catalog's watchers however its stream ends.
struct Watch {
    hub: Arc<HubState>,
    id: u64,
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.hub.registry.unwatch(self.id);
    }
}

struct Page {
    watch: Watch,
    queue: Arc<Outbound>,
    ticks: watch::Receiver<Arc<str>>,
    batch: Vec<u8>,
    first: Option<String>,
    ended: bool,
    _permit: OwnedSemaphorePermit,
}

fn events(state: Page) -> impl Stream<Item = Result<Event, Infallible>> {
    stream::unfold(state, |mut page| async move {
        if page.ended {
            return None;
        }
        if let Some(snapshot) = page.first.take() {
            page.ticks.mark_unchanged();
            return Some((Ok(event("snapshot", snapshot.into_bytes())), page));
        }
        let hub = page.watch.hub.clone();
        tokio::select! {
            batch = page.queue.next_batch(&mut page.batch) => match batch {
                Batch::Write => {
                    let data = page.batch.clone();
                    page.queue.written(&mut page.batch);
                    Some((Ok(event("actions", data)), page))
                }
                // The catalog dropped this page's queue: it fell behind.
                Batch::Done => {
                    page.ended = true;
                    Some((Ok(Event::default().event("resync").data("behind")), page))
                }
            },
            changed = page.ticks.changed() => {
                if changed.is_err() {
                    return None;
                }
                let tick = page.ticks.borrow_and_update().clone();
                Some((Ok(Event::default().event("tick").data(&*tick)), page))
            }
            () = hub.stopping() => None,
        }
    })
}

/// An event whose data is JSON text; raw carriage returns (JSON whitespace
/// a client may have put in metadata) become spaces, so the page's split on
/// line ends is a split between messages only.
fn event(name: &'static str, mut data: Vec<u8>) -> Event {
    for byte in &mut data {
        if *byte == b'\r' {
            *byte = b' ';
        }
    }
    if data.last() == Some(&b'\n') {
        data.pop();
    }
    let text = String::from_utf8(data)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    Event::default().event(name).data(text)
}
