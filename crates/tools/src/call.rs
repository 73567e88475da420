//! One `tools/call`, from the raw request to the answer: decode, check the
//! tokens, the fence, the tool, the pin and the arguments, run, record.
//!
//! Order matters and is documented in `docs/tool-calls.md`: a call whose
//! key is already settled is answered from the ledger before the tool, pin
//! or arguments are looked at, so a retry after a provider upgrade still gets
//! the original answer instead of a spurious `tool_schema_changed`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use serde_json::value::RawValue;
use serde_json::Value;
use switchboard_client::{Reply, Request};
use switchboard_protocol::tool_call::ToolCallRequest;
use switchboard_protocol::{ErrorCode, ErrorObject};
use tokio_util::sync::CancellationToken;

use crate::errors;
use crate::ledger::{Begin, FenceKey, Fingerprint, Outcome, TaskOwner};
use crate::pin::{canonical_json, check_pin, sha256_hex};
use crate::progress::Progress;
use crate::provider::Shared;
use crate::tool::{ToolCall, ToolError, ToolResult};
use crate::toolset::RegisteredTool;

/// What the pipeline knows about a call once it is decoded.
struct Admitted {
    request: ToolCallRequest,
    arguments: Value,
    tool_call_id: String,
    tool_call_id_is_fallback: bool,
}

impl Shared {
    pub(crate) async fn handle_call(self: Arc<Self>, request: Request) -> Reply {
        let call: ToolCallRequest = match request.params.as_deref() {
            Some(raw) => serde_json::from_str(raw.get())
                .map_err(|error| errors::malformed_call(&error.to_string()))?,
            None => return Err(errors::malformed_call("params are missing")),
        };
        call.validate().map_err(|error| error.to_error_object())?;
        let arguments: Value = serde_json::from_str(call.arguments.get())
            .map_err(|error| errors::malformed_call(&error.to_string()))?;
        let (tool_call_id, tool_call_id_is_fallback) = match &call.tool_call_id {
            Some(id) => (id.clone(), false),
            None => (self.fallback_tool_call_id(&call.name), true),
        };
        let admitted = Admitted {
            request: call,
            arguments,
            tool_call_id,
            tool_call_id_is_fallback,
        };
        match admitted.request.call_key.clone() {
            None => self.run_unkeyed(&request, admitted).await,
            Some(call_key) => self.run_keyed(&request, admitted, call_key).await,
        }
    }

    /// Records that a call came without `tool_call_id` and makes one up.
    fn fallback_tool_call_id(&self, tool: &str) -> String {
        let mut random = [0u8; 12];
        let _ = getrandom::fill(&mut random);
        let id = format!("fallback-{}", hex::encode(random));
        let total = self
            .counters
            .fallback_tool_call_ids
            .fetch_add(1, Ordering::Relaxed)
            + 1;
        tracing::info!(
            namespace = %self.namespace,
            tool,
            fallback = %id,
            total,
            "tools/call without tool_call_id: using a fallback id"
        );
        id
    }

    /// The tool, if the name is known, the pin current and the arguments valid.
    fn admit(&self, call: &Admitted) -> Result<Arc<RegisteredTool>, ErrorObject> {
        let tools = self.tools.read().clone();
        let name = &call.request.name;
        let Some(tool) = tools.get(name) else {
            return Err(errors::unknown_tool(name));
        };
        if let Some(pin) = &call.request.schema_pin {
            if let Err(mismatch) = check_pin(pin, name, &tool.pin) {
                return Err(errors::pin_mismatch(name, pin, &tool.pin, &mismatch));
            }
        }
        let violations = tool.check_arguments(&call.arguments);
        if !violations.is_empty() {
            return Err(errors::invalid_arguments(name, &violations));
        }
        Ok(tool.clone())
    }

    async fn run_unkeyed(&self, request: &Request, call: Admitted) -> Reply {
        let tool = self.admit(&call)?;
        let asks_task = call.request.task.is_some();
        match self.run(tool, request, call).await {
            Ok(result) => {
                if asks_task {
                    self.remember_task(request, None, &result).await;
                }
                Ok(result.into_raw())
            }
            Err(ToolError::Failed(error) | ToolError::NotRun(error)) => Err(error),
            Err(ToolError::OutcomeUnknown(why)) => {
                self.log_outcome_unknown(request, None, &why);
                Err(errors::outcome_unknown(None))
            }
        }
    }

    async fn run_keyed(&self, request: &Request, call: Admitted, call_key: String) -> Reply {
        let key = FenceKey {
            principal: serde_json::to_string(&request.sender_principal).unwrap_or_default(),
            call_key: call_key.clone(),
        };
        let fingerprint = Fingerprint {
            tool: call.request.name.clone(),
            arguments_digest: sha256_hex(canonical_json(&call.arguments).as_bytes()),
        };
        let begin = self
            .ledger
            .begin(key, fingerprint)
            .await
            .map_err(|error| errors::ledger_unavailable(&error.to_string()))?;
        let mut reservation = match begin {
            Begin::Fresh(reservation) => reservation,
            Begin::Replay(outcome) => {
                self.counters.replays.fetch_add(1, Ordering::Relaxed);
                return answer_from(outcome, &call_key);
            }
            Begin::Wait(waiter) => {
                self.counters
                    .duplicates_waited
                    .fetch_add(1, Ordering::Relaxed);
                return self
                    .wait_for_first(waiter, &request.cancelled, &call_key)
                    .await;
            }
            Begin::Unknown => return Err(errors::outcome_unknown(Some(&call_key))),
            Begin::Reused { stored_tool } => {
                return Err(errors::call_key_reused(
                    &call_key,
                    &stored_tool,
                    &call.request.name,
                ))
            }
        };
        let tool = match self.admit(&call) {
            Ok(tool) => tool,
            Err(error) => {
                reservation.not_run(error.clone()).await;
                return Err(error);
            }
        };
        let origin = call
            .request
            .origin
            .as_ref()
            .and_then(|origin| serde_json::to_string(origin).ok());
        if let Err(error) = reservation.start(&call.tool_call_id, origin).await {
            let error = errors::ledger_unavailable(&error.to_string());
            reservation.not_run(error.clone()).await;
            return Err(error);
        }
        let asks_task = call.request.task.is_some();
        match self.run(tool, request, call).await {
            Ok(result) => {
                // Before the settlement: a replayed task is always one whose
                // creator is on record.
                if asks_task {
                    self.remember_task(request, Some(&call_key), &result).await;
                }
                let raw = result.into_raw();
                reservation.record(Outcome::Result(raw.clone())).await;
                Ok(raw)
            }
            Err(ToolError::Failed(error)) => {
                reservation.record(Outcome::Error(error.clone())).await;
                Err(error)
            }
            Err(ToolError::NotRun(error)) => {
                reservation.not_run(error.clone()).await;
                Err(error)
            }
            Err(ToolError::OutcomeUnknown(why)) => {
                self.log_outcome_unknown(request, Some(&call_key), &why);
                reservation.record(Outcome::Unknown).await;
                Err(errors::outcome_unknown(Some(&call_key)))
            }
        }
    }

    /// Records who created the task a call with `task` answered with
    /// (`{task: {taskId}}`), so `tasks/*` of that id are this principal's
    /// alone, across restarts. A result that is not a task records nothing.
    async fn remember_task(&self, request: &Request, call_key: Option<&str>, result: &ToolResult) {
        let answer = result.to_value();
        let Some(task_id) = answer["task"]["taskId"].as_str() else {
            return;
        };
        let owner = TaskOwner {
            principal: serde_json::to_string(&request.sender_principal).unwrap_or_default(),
            call_key: call_key.map(str::to_owned),
        };
        if let Err(error) = self.ledger.record_task(task_id, owner).await {
            // The task exists; only its later tasks/* will be refused.
            tracing::error!(namespace = %self.namespace, %error, "cannot record who created a task");
        }
    }

    /// A call whose outcome is unknown is a fault worth a warning, unless
    /// the caller cancelled it: then it is the expected end of a call that
    /// was stopped midway (`docs/tool-calls.md`, cancellation).
    fn log_outcome_unknown(&self, request: &Request, call_key: Option<&str>, why: &str) {
        if request.cancelled.is_cancelled() {
            tracing::info!(namespace = %self.namespace, call_key, why, "a cancelled call's outcome is unknown");
        } else {
            tracing::warn!(namespace = %self.namespace, call_key, why, "a call's outcome is unknown");
        }
    }

    async fn wait_for_first(
        &self,
        waiter: crate::ledger::Waiter,
        cancelled: &CancellationToken,
        call_key: &str,
    ) -> Reply {
        let bound = self.duplicate_wait;
        tokio::select! {
            outcome = waiter.outcome() => match outcome {
                Some(outcome) => answer_from(outcome, call_key),
                None => Err(errors::ledger_unavailable("the ledger stopped while the call ran")),
            },
            () = tokio::time::sleep(bound) => Err(errors::call_in_progress(call_key, bound.as_millis())),
            // The hub has answered the caller already; this answer is dropped.
            () = cancelled.cancelled() => Err(ErrorObject::new(ErrorCode::RequestCancelled, "cancelled")),
        }
    }

    /// Runs the tool. After the caller cancels, the tool gets `cancel_grace`
    /// to finish (its answer is still recorded); then it is dropped and its
    /// outcome is unknown.
    async fn run(
        &self,
        tool: Arc<RegisteredTool>,
        request: &Request,
        call: Admitted,
    ) -> Result<ToolResult, ToolError> {
        self.counters.calls_run.fetch_add(1, Ordering::Relaxed);
        // A version-2 caller takes progress on its callback service; a
        // version-1 caller on the progress sink of its client.
        let progress = match (&call.request.progress_token, &call.request.client) {
            (Some(token), Some(client)) => {
                Progress::to_sink(self.client.clone(), client.service.clone(), token.clone())
            }
            (Some(token), None) => match self.sinks.sink_of(&request.sender_client_id) {
                Some(sink) => Progress::to_sink(self.client.clone(), sink, token.clone()),
                None => Progress::none(),
            },
            (None, _) => Progress::none(),
        };
        let task = call
            .request
            .task
            .as_ref()
            .and_then(|task| serde_json::from_str::<Value>(task.get()).ok());
        let tool_call = ToolCall {
            tool: call.request.name,
            arguments: call.arguments,
            tool_call_id: call.tool_call_id,
            tool_call_id_is_fallback: call.tool_call_id_is_fallback,
            call_key: call.request.call_key,
            origin: call.request.origin,
            sender_principal: request.sender_principal.clone(),
            sender_client_id: request.sender_client_id.clone(),
            progress,
            client: call.request.client,
            task,
            cancelled: request.cancelled.clone(),
        };
        let grace = self.cancel_grace;
        let cancelled = request.cancelled.clone();
        tokio::select! {
            biased;
            outcome = tool.handler.call(tool_call) => outcome,
            () = after_grace(cancelled, grace) => Err(ToolError::OutcomeUnknown(format!(
                "cancelled, and the tool did not stop within {grace:?}"
            ))),
        }
    }
}

async fn after_grace(cancelled: CancellationToken, grace: Duration) {
    cancelled.cancelled().await;
    tokio::time::sleep(grace).await;
}

fn answer_from(outcome: Outcome, call_key: &str) -> Result<Box<RawValue>, ErrorObject> {
    match outcome {
        Outcome::Result(raw) => Ok(raw),
        Outcome::Error(error) => Err(error),
        Outcome::Unknown => Err(errors::outcome_unknown(Some(call_key))),
    }
}
