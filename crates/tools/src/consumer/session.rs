//! One front session on the consumer ([`ConsumerSession`]): an MCP client
//! of the gateway (several may share one consumer; the stdio gateway has
//! one). What a provider sends back during the session's calls goes to its
//! [`CallSink`]; its subscriptions and log level are its own; a task its
//! call created is visible to it alone. The methods that go to one
//! provider are in `requests.rs`.

use std::sync::Arc;
use std::time::Duration;

use serde_json::value::RawValue;
use serde_json::{json, Value};
use switchboard_protocol::tool_call::v2;

use super::backend::ProviderIdentity;
use super::call::{call_timeout, hub_ceiling, CallError};
use super::callback::{CallGuard, CallSink, CallStart, LogLevel};
use super::hub::HubTools;
use super::tasks::created_task;
use super::tool::{ExposedTool, Invocation};

/// Why a request of the other methods has no answer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SurfaceError {
    /// No provider lists the URI or has a template that matches it.
    #[error("no provider serves the resource {0:?}")]
    UnknownResource(String),
    #[error("unknown prompt {0:?}")]
    UnknownPrompt(String),
    /// Not a task of this session (never created, another session's, expired).
    #[error("unknown task {0:?}")]
    UnknownTask(String),
    #[error("{0}")]
    InvalidParams(String),
    #[error(transparent)]
    Call(#[from] CallError),
}

/// What every request of a session carries besides its params.
#[derive(Clone)]
pub struct RequestContext {
    /// A label for the call's id (the MCP request id).
    pub label: String,
    /// What the MCP client declared (`ClientCapabilities`), for `client`.
    pub capabilities: Value,
    /// The session's own progress token, if the request carried one.
    pub progress_token: Option<Value>,
    /// How long the caller will wait; `None`: the hub's ceiling.
    pub timeout: Option<Duration>,
    /// Where this request's callbacks go; `None`: the session's sink.
    pub sink: Option<Arc<dyn CallSink>>,
}

impl RequestContext {
    pub fn new(label: impl Into<String>, capabilities: Value) -> Self {
        RequestContext {
            label: label.into(),
            capabilities,
            progress_token: None,
            timeout: None,
            sink: None,
        }
    }
}

/// A front session on the consumer. Dropping it forgets its calls' sink,
/// its level and its tasks, and unsubscribes what only it subscribed to.
pub struct ConsumerSession {
    pub(super) hub: HubTools,
    pub(super) id: u64,
}

impl HubTools {
    /// Opens a session whose callbacks of no call (log messages, resource
    /// updates) go to `sink`, as do its calls' unless a call has its own.
    pub fn open_session(&self, sink: Arc<dyn CallSink>) -> ConsumerSession {
        let id = self.callbacks().open_session(sink);
        ConsumerSession {
            hub: self.clone(),
            id,
        }
    }
}

impl ConsumerSession {
    pub fn hub(&self) -> &HubTools {
        &self.hub
    }

    /// Registers a request of this session to `provider` with the callback
    /// registry: in flight until the guard drops, bounded by the call's
    /// timeout within the hub's ceiling.
    pub(super) fn begin(
        &self,
        provider: &ProviderIdentity,
        context: &RequestContext,
    ) -> Result<CallGuard, CallError> {
        let client = self.hub.client().ok_or(CallError::NotConnected)?;
        let bound = call_timeout(context.timeout, hub_ceiling(&client));
        Ok(self.hub.callbacks().begin(
            self.id,
            CallStart {
                label: context.label.clone(),
                provider: provider.clone(),
                progress_token: context.progress_token.clone(),
                bound,
                sink: context.sink.clone(),
            },
        ))
    }

    /// Calls `tool`. A version-2 provider gets the call registered for its
    /// callbacks (`tool_call_id` and the progress token are the call's id;
    /// `client` names the callback service) and `task` passed on; a task it
    /// creates is remembered for this session. A version-1 provider gets
    /// the call as before: `tool_call_id` = the label, the session's token.
    pub async fn call_tool(
        &self,
        tool: &ExposedTool,
        arguments: Box<RawValue>,
        call_key: Option<String>,
        task: Option<Box<RawValue>>,
        context: &RequestContext,
    ) -> Result<Box<RawValue>, CallError> {
        let raw_token = || {
            context
                .progress_token
                .as_ref()
                .and_then(|token| serde_json::value::to_raw_value(token).ok())
        };
        let Some(provider) = tool.backend.provider().filter(|p| p.version >= 2).cloned() else {
            let invocation = Invocation {
                arguments,
                tool_call_id: Some(context.label.clone()),
                progress_token: raw_token(),
                call_key,
                timeout: context.timeout,
                client: None,
                task: None,
            };
            return tool.call(invocation).await;
        };
        let guard = self.begin(&provider, context)?;
        let asked_for_task = task.is_some();
        let invocation = Invocation {
            arguments,
            tool_call_id: Some(guard.id().to_owned()),
            progress_token: guard.progress_token(context.progress_token.is_some()),
            call_key,
            timeout: context.timeout,
            client: self.hub.callbacks().client_ref(&context.capabilities),
            task,
        };
        let answer = tool.call(invocation).await;
        // The guard (the call's route for its reports) lives until here.
        self.hub.callbacks().settle().await;
        let answer = answer?;
        if asked_for_task {
            let created = serde_json::from_str::<Value>(answer.get())
                .ok()
                .as_ref()
                .and_then(created_task);
            if let Some((task_id, lifetime)) = created {
                self.hub.callbacks().extend(guard.id(), lifetime);
                self.hub
                    .tasks()
                    .insert(task_id, self.id, provider, lifetime, guard);
            }
        }
        Ok(answer)
    }

    /// `resources/subscribe` of `uri` for this session: the provider that
    /// serves it is asked once, whatever the number of sessions.
    pub async fn subscribe(&self, uri: &str, capabilities: &Value) -> Result<(), SurfaceError> {
        let surface = self.hub.surface();
        let provider = surface
            .route_uri(uri)
            .ok_or_else(|| SurfaceError::UnknownResource(uri.to_owned()))?
            .clone();
        let identity = provider.backend.identity();
        if !self.hub.callbacks().subscribe(self.id, uri, identity) {
            return Ok(());
        }
        let params = json!({"uri": uri, "client": self.hub.callbacks().client_ref(capabilities)});
        let answer = self
            .hub
            .send(&provider.backend, v2::RESOURCES_SUBSCRIBE, &params)
            .await;
        if let Err(error) = answer {
            self.hub.callbacks().unsubscribe(self.id, uri);
            return Err(error.into());
        }
        Ok(())
    }

    /// `resources/unsubscribe` of `uri` for this session; the provider is
    /// told when no session is subscribed any more.
    pub async fn unsubscribe(&self, uri: &str, capabilities: &Value) -> Result<(), SurfaceError> {
        let Some(provider) = self.hub.callbacks().unsubscribe(self.id, uri) else {
            return Ok(());
        };
        let params = json!({"uri": uri, "client": self.hub.callbacks().client_ref(capabilities)});
        self.hub
            .send_to(&provider, v2::RESOURCES_UNSUBSCRIBE, &params)
            .await?;
        Ok(())
    }

    /// `logging/setLevel` for this session: every version-2 provider that
    /// declared logging is told the most verbose level any session asked
    /// for (with `client`); this session gets log messages of no call at or
    /// above `level`.
    pub async fn set_level(&self, level: LogLevel, capabilities: &Value) {
        self.hub.callbacks().set_level(self.id, level);
        self.hub.sync_levels(capabilities).await;
    }

    /// `notifications/roots/list_changed` with `client` to every version-2
    /// provider (section 9.3's last paragraph).
    pub async fn roots_list_changed(&self, capabilities: &Value) {
        let Some(client) = self.hub.client() else {
            return;
        };
        let params = json!({"client": self.hub.callbacks().client_ref(capabilities)});
        for provider in self.hub.surface().providers() {
            if let Err(error) = client
                .notify(
                    provider.backend.identity().service_id.as_str(),
                    v2::ROOTS_LIST_CHANGED,
                    &params,
                )
                .await
            {
                tracing::debug!(%error, namespace = %provider.namespace, "cannot tell a provider that the roots changed");
            }
        }
    }
}

impl Drop for ConsumerSession {
    fn drop(&mut self) {
        let left = self.hub.callbacks().close_session(self.id);
        self.hub.tasks().forget_session(self.id);
        if left.is_empty() {
            return;
        }
        let hub = self.hub.clone();
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            for (uri, provider) in left {
                let params =
                    json!({"uri": uri, "client": hub.callbacks().client_ref(&Value::Null)});
                if let Err(error) = hub
                    .send_to(&provider, v2::RESOURCES_UNSUBSCRIBE, &params)
                    .await
                {
                    tracing::debug!(%error, %uri, "cannot unsubscribe a closed session's resource");
                }
            }
        });
    }
}
