//! Serving a service: what a handler receives and how it answers.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::value::RawValue;
use switchboard_protocol::jsonrpc::ErrorObject;
use switchboard_protocol::{ErrorCode, Principal};
use tokio_util::sync::CancellationToken;

pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// The answer a handler gives: a raw JSON result or a JSON-RPC error.
pub type Reply = Result<Box<RawValue>, ErrorObject>;

/// A request routed to one of this client's services.
#[derive(Debug)]
pub struct Request {
    pub service_id: String,
    pub sender_client_id: String,
    /// Stamped by the hub: the authority for deciding what to allow.
    pub sender_principal: Principal,
    pub method: String,
    pub params: Option<Box<RawValue>>,
    /// Cancelled when the caller cancels, times out or leaves; the hub has
    /// already answered the caller then, so the handler's result is dropped.
    pub cancelled: CancellationToken,
}

impl Request {
    /// The params decoded as `T`; a mismatch answers `-32602`.
    pub fn params<T: DeserializeOwned>(&self) -> Result<T, ErrorObject> {
        let Some(raw) = self.params.as_deref() else {
            return serde_json::from_str("null").map_err(|_| {
                ErrorObject::new(
                    ErrorCode::InvalidParams,
                    format!("{} needs params, and none were sent", self.method),
                )
            });
        };
        serde_json::from_str(raw.get()).map_err(|error| {
            ErrorObject::new(
                ErrorCode::InvalidParams,
                format!(
                    "invalid params for {}: {}",
                    self.method,
                    without_type_names(&error.to_string())
                ),
            )
        })
    }
}

/// A notification routed to one of this client's services.
#[derive(Debug)]
pub struct Notification {
    pub service_id: String,
    pub sender_client_id: String,
    pub sender_principal: Principal,
    pub method: String,
    pub params: Option<Box<RawValue>>,
}

impl Notification {
    pub fn params<T: DeserializeOwned>(&self) -> Option<T> {
        let raw = self.params.as_deref().map_or("null", RawValue::get);
        serde_json::from_str(raw).ok()
    }
}

/// Serves one registered service: every method goes through one handler.
///
/// Requests are handled concurrently (each in its own task); notifications
/// are delivered one at a time, in the order the hub forwarded them.
pub trait Handler: Send + Sync + 'static {
    fn request(&self, request: Request) -> BoxFuture<Reply>;

    /// Whether a request for `method` is polled to its end when the hub
    /// cancels it (its caller cancelled or timed out) instead of being
    /// dropped, for work whose outcome must be recorded either way (a tool
    /// call behind an at-most-once fence). Its answer is not sent: the hub
    /// has answered the caller already. It sees the cancellation in
    /// [`Request::cancelled`]. Default: dropped.
    fn finishes_when_cancelled(&self, method: &str) -> bool {
        let _ = method;
        false
    }

    fn notification(&self, notification: Notification) -> BoxFuture<()> {
        let _ = notification;
        Box::pin(async {})
    }
}

/// Encodes a handler's result.
pub fn reply(value: &impl Serialize) -> Reply {
    serde_json::value::to_raw_value(value).map_err(|error| {
        ErrorObject::new(
            ErrorCode::InternalError,
            format!("cannot encode the result: {error}"),
        )
    })
}

/// A method this handler does not serve.
pub fn method_not_found(method: &str) -> ErrorObject {
    ErrorObject::new(
        ErrorCode::MethodNotFound,
        format!("unknown method {method:?}"),
    )
}

/// A handler from two closures: one for requests, one for notifications.
pub struct FnHandler<R, N> {
    on_request: R,
    on_notification: N,
}

/// A handler that serves requests with `on_request` and ignores notifications.
pub fn handler_fn<R, F>(on_request: R) -> FnHandler<R, fn(Notification) -> BoxFuture<()>>
where
    R: Fn(Request) -> F + Send + Sync + 'static,
    F: Future<Output = Reply> + Send + 'static,
{
    FnHandler {
        on_request,
        on_notification: |_| Box::pin(async {}),
    }
}

impl<R, N> FnHandler<R, N> {
    /// Also handles notifications, in order.
    pub fn with_notifications<N2, G>(self, on_notification: N2) -> FnHandler<R, N2>
    where
        N2: Fn(Notification) -> G + Send + Sync + 'static,
        G: Future<Output = ()> + Send + 'static,
    {
        FnHandler {
            on_request: self.on_request,
            on_notification,
        }
    }
}

impl<R, F, N, G> Handler for FnHandler<R, N>
where
    R: Fn(Request) -> F + Send + Sync + 'static,
    F: Future<Output = Reply> + Send + 'static,
    N: Fn(Notification) -> G + Send + Sync + 'static,
    G: Future<Output = ()> + Send + 'static,
{
    fn request(&self, request: Request) -> BoxFuture<Reply> {
        Box::pin((self.on_request)(request))
    }

    fn notification(&self, notification: Notification) -> BoxFuture<()> {
        Box::pin((self.on_notification)(notification))
    }
}

impl<H: Handler + ?Sized> Handler for Arc<H> {
    fn request(&self, request: Request) -> BoxFuture<Reply> {
        (**self).request(request)
    }

    fn finishes_when_cancelled(&self, method: &str) -> bool {
        (**self).finishes_when_cancelled(method)
    }

    fn notification(&self, notification: Notification) -> BoxFuture<()> {
        (**self).notification(notification)
    }
}

/// serde's message without the Rust type names it names (`expected struct
/// RefsParams`), which mean nothing to whoever sent the params.
fn without_type_names(message: &str) -> String {
    let mut text = message.to_owned();
    for (kind, plain) in [
        ("expected tuple struct ", "expected an array"),
        ("expected struct variant ", "expected an object"),
        ("expected struct ", "expected an object"),
        ("expected unit struct ", "expected null"),
        ("expected enum ", "expected one of the accepted values"),
    ] {
        while let Some(start) = text.find(kind) {
            let name_start = start + kind.len();
            let name_end = text[name_start..]
                .find(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | ':' | '<' | '>')))
                .map_or(text.len(), |end| name_start + end);
            text.replace_range(start..name_end, plain);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::without_type_names;

    #[test]
    fn serde_messages_lose_their_rust_type_names() {
        assert_eq!(
            without_type_names("invalid type: null, expected struct RefsParams at line 1 column 4"),
            "invalid type: null, expected an object at line 1 column 4"
        );
        assert_eq!(
            without_type_names("invalid type: string \"x\", expected enum Mode"),
            "invalid type: string \"x\", expected one of the accepted values"
        );
        assert_eq!(
            without_type_names("missing field `repo`"),
            "missing field `repo`"
        );
    }
}
