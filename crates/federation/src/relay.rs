//! Lines between hubs.
//!
//! Out: one writer per link takes the link's whole queue (every line the
//! hub routed to that hub since the last batch) and publishes it in
//! messages of about 60 KiB of lines each, on `switchboard.hub.<to>.<me>`,
//! with both instances in headers and a reply subject where NATS says at
//! once if no one listens (that hub is gone: what is pending on it fails
//! with -32052 `disconnected`). Batching is what lets many notifications
//! cost one publish.
//!
//! In: one reader takes `switchboard.hub.<me>.*`, names the sender from the
//! subject (never from the payload), checks the instances, and hands each
//! line to the sender's link, in order: that is what keeps the order of one
//! sender's notifications to one service across hubs.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use async_nats::HeaderMap;
use bytes::Bytes;
use futures_util::StreamExt;
use switchboard_protocol::jsonrpc::{self, ErrorObject, Message};
use switchboard_protocol::limits::names;
use switchboard_protocol::ErrorCode;
use tokio::sync::mpsc;

use crate::fabric;
use crate::metrics::{Ignored, LineKind, Metrics, SendFailure};
use crate::shared::{Fabric, Peer, Window};
use crate::split::{Piece, Pieces};

/// Room left in a NATS message for its headers and reply subject.
const HEADROOM: usize = 1024;
/// Lines per NATS message, in bytes, unless one line alone is larger (up to
/// `max_payload`). A message this size, with its headers, fits the NATS
/// client's 64 KiB read buffer on the receiving hub, so it is read in one
/// piece and handed on without a copy; a message of a megabyte grew that
/// buffer by doubling, copying what it held each time (`memmove` fell from
/// 10.5 % to 6.5 % of the receiving hub's samples under a burst), and the
/// receiver pauses for its local queues every 64 KiB of lines anyway
/// (`DRAIN_EVERY`).
const MESSAGE_TARGET: usize = 60 * 1024;
/// How long one publish may wait for the client's queue.
const PUBLISH_WAIT: Duration = Duration::from_secs(5);
/// Bytes of lines the reader hands to the hub between two pauses for the
/// queues they congested (`Link::let_destinations_drain`).
const DRAIN_EVERY: usize = 64 * 1024;
/// How long the reader may wait to queue a credit (it reads for every hub).
const CREDIT_PUBLISH_WAIT: Duration = Duration::from_millis(100);

/// Drains `peer`'s link until it closes; reports a link the overload policy
/// aborted on `broken` (the watcher opens another).
pub async fn write(
    fabric: Arc<Fabric>,
    peer: Arc<Peer>,
    broken: mpsc::UnboundedSender<(String, String)>,
) {
    let subject = fabric::lines_subject(&peer.name, &fabric.name);
    let reply = format!("{}.{}", fabric.no_responders, peer.name);
    let mut headers = HeaderMap::new();
    headers.insert(fabric::FROM_INSTANCE, fabric.instance.as_str());
    headers.insert(fabric::TO_INSTANCE, peer.instance.as_str());
    let mut batch = Vec::new();
    loop {
        let more = tokio::select! {
            () = fabric.stop.cancelled() => return,
            more = peer.link.next_batch(&mut batch) => more,
        };
        if !more {
            if peer.link.is_aborted() {
                let _ = broken.send((peer.name.clone(), peer.instance.clone()));
            }
            return;
        }
        // The batch's buffer goes to NATS as it is (messages are slices of
        // it), not copied; the link's queue starts a new one.
        let lines = Bytes::from(std::mem::take(&mut batch));
        let mut outcome = Progress::default();
        if *fabric.connected.borrow() {
            send(
                &fabric,
                &peer,
                &subject,
                &reply,
                &headers,
                &lines,
                &mut outcome,
            )
            .await;
        }
        if outcome.accounted < lines.len() {
            lost(&fabric, &peer);
            peer.link.written_len(lines.len() - outcome.accounted);
        }
    }
}

/// Lines for `peer` NATS would not take: what is pending on its link will
/// not be answered.
fn lost(fabric: &Fabric, peer: &Peer) {
    fabric.metrics.send_failed(SendFailure::Disconnected);
    let failed = peer.link.fail_pending();
    Metrics::add(&fabric.metrics.requests_failed_unreachable, failed as u64);
}

/// How far [`send`] got through a batch.
#[derive(Debug, Default)]
struct Progress {
    /// Bytes of the batch published (or dropped as too large) and so taken
    /// off the link's queue count.
    accounted: usize,
}

impl Progress {
    /// `len` more bytes of the batch are gone from this hub. Counted per
    /// message, not per batch: a batch of several messages may wait on the
    /// window between them, and a sender paused for this link's queue
    /// (`let_destinations_drain`) sees it drain as each one goes.
    fn account(&mut self, peer: &Peer, len: usize) {
        self.accounted += len;
        peer.link.written_len(len);
    }
}

/// Publishes `batch` (whole lines) in messages of about `MESSAGE_TARGET`
/// (a larger line alone, up to `max_payload`; cut by `split.rs`),
/// accounting each one in `outcome` as it goes; stops at the first NATS
/// would not take.
async fn send(
    fabric: &Fabric,
    peer: &Peer,
    subject: &str,
    reply: &str,
    headers: &HeaderMap,
    batch: &Bytes,
    outcome: &mut Progress,
) {
    let max = (fabric.client.server_info().max_payload)
        .saturating_sub(HEADROOM)
        .max(HEADROOM);
    let mut replacement = Vec::new();
    let count_line = |line: &[u8]| fabric.metrics.sent(LineKind::of(line));
    for piece in Pieces::new(batch, MESSAGE_TARGET, max, count_line) {
        match piece {
            Piece::Message(range) => {
                let length = range.len();
                let message = batch.slice(range);
                if !publish(fabric, peer, subject, reply, headers, message).await {
                    return;
                }
                outcome.account(peer, length);
            }
            Piece::TooLarge(range) => {
                // Answered for instead of sent.
                let length = range.len();
                too_large(fabric, peer, &batch[range], max, &mut replacement);
                outcome.account(peer, length);
            }
        }
    }
    if !replacement.is_empty()
        && !publish(
            fabric,
            peer,
            subject,
            reply,
            headers,
            Bytes::from(replacement),
        )
        .await
    {
        // The answers that replaced lines too large: lost like a batch.
        lost(fabric, peer);
    }
}

async fn publish(
    fabric: &Fabric,
    peer: &Peer,
    subject: &str,
    reply: &str,
    headers: &HeaderMap,
    lines: Bytes,
) -> bool {
    wait_for_window(fabric, peer).await;
    // Counted as sent before the outcome is known: a message NATS would
    // not take is never credited, which at worst costs one wait.
    let length = lines.len() as u64;
    let sent = peer.window.sent.fetch_add(length, Ordering::Relaxed) + length;
    let mut headers = headers.clone();
    headers.insert(fabric::SENT, sent.to_string().as_str());
    let publish = fabric.client.publish_with_reply_and_headers(
        subject.to_owned(),
        reply.to_owned(),
        headers,
        lines,
    );
    match tokio::time::timeout(PUBLISH_WAIT, publish).await {
        Ok(Ok(())) => {
            Metrics::inc(&fabric.metrics.publishes);
            Metrics::add(&fabric.metrics.bytes_sent, length);
            true
        }
        _ => false,
    }
}

/// A line over NATS's `max_payload`: a request fails at once (-32050), an
/// answer is replaced by that error (appended to `replacement`), a
/// notification is dropped.
fn too_large(fabric: &Fabric, peer: &Peer, line: &[u8], max: usize, replacement: &mut Vec<u8>) {
    fabric.metrics.send_failed(SendFailure::TooLarge);
    let error = ErrorObject::new(
        ErrorCode::LimitExceeded,
        format!(
            "the message is {} bytes; NATS carries at most {max} between hubs",
            line.len()
        ),
    )
    .with_data(&serde_json::json!({ "limit": names::MAX_MESSAGE_BYTES, "max": max }));
    let trimmed = line.strip_suffix(b"\n").unwrap_or(line);
    match jsonrpc::decode(trimmed) {
        Ok(Message::Request { id, .. }) => {
            if let Ok(forwarded_id) = id.get().parse::<u64>() {
                peer.link.fail_request(forwarded_id, &error);
            }
        }
        Ok(Message::Response { id, .. }) => {
            replacement.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
            replacement.extend_from_slice(id.get().as_bytes());
            replacement.extend_from_slice(b",\"error\":");
            let _ = serde_json::to_writer(&mut *replacement, &error);
            replacement.extend_from_slice(b"}\n");
        }
        _ => {}
    }
}

/// The lines every other hub sends this one, handed to their links in order.
pub async fn read(fabric: Arc<Fabric>) {
    let Some(mut lines) = fabric
        .subscribe(
            fabric::inbound_subject(&fabric.name),
            "the other hubs' lines",
        )
        .await
    else {
        return;
    };
    loop {
        let message = tokio::select! {
            () = fabric.stop.cancelled() => return,
            message = lines.next() => message,
        };
        let Some(message) = message else { return };
        if let Some((peer, taken)) = take(&fabric, &message).await {
            credit(&fabric, &peer, taken).await;
        }
    }
}

/// One message of `switchboard.hub.<me>.*`: a credit from another hub for
/// this hub's writer, or lines of another hub handed to its link in order.
/// Returns the credit this hub owes that hub, if one is due now.
pub(crate) async fn take(
    fabric: &Fabric,
    message: &async_nats::Message,
) -> Option<(Arc<Peer>, u64)> {
    Metrics::inc(&fabric.metrics.nats_messages_received);
    let peer = sender(fabric, message)?;
    if let Some(taken) = header_u64(message, fabric::TAKEN) {
        // A credit: what this hub sent that one has taken.
        peer.window.taken.fetch_max(taken, Ordering::Relaxed);
        peer.window.credit.notify_one();
        return None;
    }
    // memchr, not `split` with a closure: a message holds up to
    // `max_payload` bytes of lines, and a byte-at-a-time split was a
    // cost per byte of every line.
    let payload = &message.payload[..];
    let mut start = 0;
    let mut drained_at = 0;
    for line_end in memchr::memchr_iter(b'\n', payload).chain([payload.len()]) {
        let line = &payload[start..line_end];
        start = line_end + 1;
        if line.is_empty() {
            continue;
        }
        let kind = LineKind::of(line);
        match peer.link.deliver(line) {
            Ok(()) => fabric.metrics.received(kind),
            Err(dropped) => fabric.metrics.ignored(Ignored::Line(dropped)),
        }
        // Flow control within a message too: a message may hold up to
        // `max_payload` of lines, and handing a local queue all of it
        // before pausing can take it past its watermark by that much,
        // a burst a busy machine may not drain within the pause's
        // bound (then the queue counts as stalled and sheds).
        if start - drained_at >= DRAIN_EVERY {
            drained_at = start;
            peer.link.let_destinations_drain().await;
        }
    }
    peer.link.let_destinations_drain().await;
    let sent = header_u64(message, fabric::SENT)?;
    let taken = credit_due(&peer.window, sent)?;
    Some((peer, taken))
}

/// The live hub that sent `message`: named by the subject, the instance
/// it claims, and this instance as the addressee; `None` (counted) else.
fn sender(fabric: &Fabric, message: &async_nats::Message) -> Option<Arc<Peer>> {
    let from = message.subject.rsplit('.').next().unwrap_or_default();
    let header = |name: &str| {
        message
            .headers
            .as_ref()
            .and_then(|headers| headers.get(name))
            .map(|value| value.as_str().to_owned())
    };
    let (Some(from_instance), Some(to_instance)) =
        (header(fabric::FROM_INSTANCE), header(fabric::TO_INSTANCE))
    else {
        fabric.metrics.ignored(Ignored::NoHeaders);
        return None;
    };
    if to_instance != fabric.instance {
        fabric.metrics.ignored(Ignored::StaleInstance);
        return None;
    }
    let Some(peer) = fabric.peers.read().get(from).cloned() else {
        fabric.metrics.ignored(Ignored::UnknownHub);
        return None;
    };
    if peer.instance != from_instance {
        fabric.metrics.ignored(Ignored::StaleInstance);
        return None;
    }
    Some(peer)
}

/// NATS's "no responders" for lines this hub sent: that hub is not
/// listening (gone, or cut from NATS), so nothing pending on its link will
/// be answered.
pub async fn watch_no_responders(fabric: Arc<Fabric>) {
    let Some(mut statuses) = fabric
        .subscribe(
            format!("{}.*", fabric.no_responders),
            "no-responder notices",
        )
        .await
    else {
        return;
    };
    loop {
        let status = tokio::select! {
            () = fabric.stop.cancelled() => return,
            status = statuses.next() => status,
        };
        let Some(status) = status else { return };
        if status.status != Some(async_nats::StatusCode::NO_RESPONDERS) {
            continue;
        }
        let hub = status.subject.rsplit('.').next().unwrap_or_default();
        let Some(peer) = fabric.peers.read().get(hub).cloned() else {
            continue;
        };
        fabric.metrics.send_failed(SendFailure::NoResponders);
        let failed = peer.link.fail_pending();
        Metrics::add(&fabric.metrics.requests_failed_unreachable, failed as u64);
        if failed > 0 {
            tracing::info!(
                hub,
                failed,
                "another hub does not listen; its pending requests failed"
            );
        }
    }
}

/// Waits until `peer` has taken enough of what was sent to it that one more
/// message fits in its window, for at most `Window::WAIT` (then publishes
/// anyway: a lost credit must not stop the link). Meanwhile the link's
/// queue fills and the hub's own flow control slows or sheds at the source.
async fn wait_for_window(fabric: &Fabric, peer: &Peer) {
    let window = &peer.window;
    if window.in_flight() < Window::SIZE {
        return;
    }
    Metrics::inc(&fabric.metrics.window_waits);
    let deadline = tokio::time::Instant::now() + Window::WAIT;
    loop {
        let credit = window.credit.notified();
        if window.in_flight() < Window::SIZE {
            return;
        }
        tokio::select! {
            () = credit => {}
            () = tokio::time::sleep_until(deadline) => {
                Metrics::inc(&fabric.metrics.window_timeouts);
                return;
            }
            () = fabric.stop.cancelled() => return,
        }
    }
}

/// The `u64` value of header `name` on `message`, if it has one.
fn header_u64(message: &async_nats::Message, name: &str) -> Option<u64> {
    message.headers.as_ref()?.get(name)?.as_str().parse().ok()
}

/// After `peer`'s lines up to its `Switchboard-Sent` of `sent` were handed
/// to the hub: the credit due, once another `Window::CREDIT_STEP` bytes were
/// taken since the last one.
fn credit_due(window: &Window, sent: u64) -> Option<u64> {
    let credited = window.credited.load(Ordering::Relaxed);
    // A smaller number: the sender numbers a new window (it opened a new
    // link to this hub), so this one starts again too.
    let since = if sent < credited {
        sent
    } else {
        sent - credited
    };
    if since < Window::CREDIT_STEP {
        if sent < credited {
            window.credited.store(0, Ordering::Relaxed);
        }
        return None;
    }
    window.credited.store(sent, Ordering::Relaxed);
    Some(sent)
}

/// Tells `peer` it took its lines up to `taken`. Fire and forget, bounded:
/// a lost credit is healed by the next (credits are cumulative).
async fn credit(fabric: &Fabric, peer: &Peer, taken: u64) {
    let mut headers = HeaderMap::new();
    headers.insert(fabric::FROM_INSTANCE, fabric.instance.as_str());
    headers.insert(fabric::TO_INSTANCE, peer.instance.as_str());
    headers.insert(fabric::TAKEN, taken.to_string().as_str());
    let subject = fabric::lines_subject(&peer.name, &fabric.name);
    let publish = fabric
        .client
        .publish_with_headers(subject, headers, Bytes::new());
    let _ = tokio::time::timeout(CREDIT_PUBLISH_WAIT, publish).await;
}
