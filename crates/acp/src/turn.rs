//! The agent loop of one prompt turn: stream the model, show its text,
//! thoughts and tool calls, run the tools, and go round until the model ends
//! the turn.
//!
//! Cancellation is cooperative: every wait of the turn (the model stream, a
//! permission request, a tool call) races the turn's cancellation token, and
//! on cancellation the turn records what it had (partial text, finished tool
//! results) before returning `cancelled`. Dropping the model stream closes
//! the HTTP connection; dropping a hub tool call sends `$/cancelRequest`.

use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol::v1::schema::{
    ContentBlock, Diff, StopReason, ToolCall, ToolCallContent, ToolCallLocation, ToolCallStatus,
    ToolCallUpdate, ToolCallUpdateFields,
};
use serde_json::{json, value::RawValue, Value};
use switchboard_tools::consumer::HubTools;

use crate::jobs::{EditorTerminals, JobExecutor};
use crate::model::{FinishReason, ModelClient, ModelError, ModelEvent};
use crate::modes::Gate;
use crate::options::FrontLimits;
use crate::output::SessionOutput;
use crate::permission::{self, Decision};
use crate::session::{Session, TurnTicket};
use crate::sessions::{Handle, Routes};
use crate::tools::files::{self, FileAccess, FilePlan, FileTool};
use crate::tools::{builtin, call as hub_call, ResolvedTool, ToolOutcome, ToolSet};

/// How long a first turn waits for the hub's initial tool list.
const HUB_READY_WAIT: Duration = Duration::from_secs(10);

/// Everything one turn works with.
pub struct TurnContext {
    pub session: Arc<Session>,
    pub ticket: TurnTicket,
    pub output: SessionOutput,
    pub model: ModelClient,
    pub hub: HubTools,
    pub jobs: Arc<JobExecutor>,
    /// The editor's terminals, when it advertises `terminal`.
    pub terminals: Option<EditorTerminals>,
    /// Where the file tools read and write.
    pub files: FileAccess,
    pub routes: Arc<Routes>,
    pub limits: Arc<FrontLimits>,
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnEnd {
    Stop(StopReason),
    /// The model failed; the prompt answers with this error.
    Failed(String),
}

impl TurnContext {
    /// Adds messages to the session's conversation and its stored log, if
    /// this turn is still the session's current one.
    fn commit(&self, messages: Vec<Value>) {
        if self.session.commit(self.ticket.generation, &messages) {
            self.output.record_messages(&messages);
        }
    }

    fn cancelled(&self) -> bool {
        self.ticket.cancel.is_cancelled()
    }

    fn system_message(&self) -> Value {
        let roots = &self.session.roots;
        let more = if roots.additional.is_empty() {
            String::new()
        } else {
            let dirs: Vec<String> = roots
                .additional
                .iter()
                .map(|d| d.display().to_string())
                .collect();
            format!(
                " The file tools also reach these directories: {}.",
                dirs.join(", ")
            )
        };
        json!({
            "role": "system",
            "content": format!(
                "You are a coding agent running inside Switchboard. The user's working \
                 directory is {}.{more} Use the tools when they help: read_file, write_file \
                 and edit_file for files in that directory; start commands with job_start and \
                 read them with job_output.",
                roots.cwd.display()
            ),
        })
    }
}

/// The user message for the model from a prompt's content blocks.
pub fn user_message(prompt: &[ContentBlock]) -> Value {
    let mut parts = Vec::new();
    for block in prompt {
        match block {
            ContentBlock::Text(text) => parts.push(text.text.clone()),
            ContentBlock::ResourceLink(link) => {
                parts.push(format!("[{}]({})", link.name, link.uri))
            }
            _ => {}
        }
    }
    json!({"role": "user", "content": parts.join("\n")})
}

/// One tool call as the model streamed it.
#[derive(Debug, Default, Clone)]
struct StreamedCall {
    id: String,
    name: String,
    arguments: String,
}

/// What one model call produced.
#[derive(Default)]
struct Step {
    text: String,
    refusal: String,
    calls: Vec<StreamedCall>,
    finish: Option<FinishReason>,
}

enum StepEnd {
    Complete,
    Cancelled,
    Failed(ModelError),
}

/// Runs the turn to its end.
pub async fn run(ctx: &TurnContext) -> TurnEnd {
    tokio::select! {
        biased;
        _ = ctx.ticket.cancel.cancelled() => return TurnEnd::Stop(StopReason::Cancelled),
        _ = ctx.hub.wait_ready(HUB_READY_WAIT) => {}
    }
    let mut model_calls = 0u32;
    loop {
        if ctx.cancelled() {
            return TurnEnd::Stop(StopReason::Cancelled);
        }
        if model_calls >= ctx.limits.max_model_calls_per_prompt {
            return TurnEnd::Stop(StopReason::MaxTurnRequests);
        }
        model_calls += 1;

        let tools = ToolSet::new(ctx.session.tool_table(ctx.hub.tools()));
        let mut messages = vec![ctx.system_message()];
        messages.extend(ctx.session.history());
        let mut step = Step::default();
        let end = stream_step(ctx, &messages, &tools, &mut step).await;

        match end {
            StepEnd::Complete => {}
            StepEnd::Cancelled => {
                commit_text(ctx, &step);
                return TurnEnd::Stop(StopReason::Cancelled);
            }
            StepEnd::Failed(error) => {
                commit_text(ctx, &step);
                tracing::warn!(session = %ctx.session.id, %error, "model call failed");
                return TurnEnd::Failed(format!("model call failed: {error}"));
            }
        }

        if !step.refusal.is_empty() || step.finish == Some(FinishReason::ContentFilter) {
            commit_text(ctx, &step);
            return TurnEnd::Stop(StopReason::Refusal);
        }
        if step.finish == Some(FinishReason::Length) {
            // Tool calls cut off by the length limit have partial arguments;
            // none of them runs.
            commit_text(ctx, &step);
            return TurnEnd::Stop(StopReason::MaxTokens);
        }
        if step.calls.is_empty() {
            commit_text(ctx, &step);
            return TurnEnd::Stop(StopReason::EndTurn);
        }
        if !run_tool_calls(ctx, &tools, step).await {
            return TurnEnd::Stop(StopReason::Cancelled);
        }
    }
}

/// Records the step's text (if any) as an assistant message.
fn commit_text(ctx: &TurnContext, step: &Step) {
    let text = if step.text.is_empty() {
        &step.refusal
    } else {
        &step.text
    };
    if !text.is_empty() {
        ctx.commit(vec![json!({"role": "assistant", "content": text})]);
    }
}

async fn stream_step(
    ctx: &TurnContext,
    messages: &[Value],
    tools: &ToolSet,
    step: &mut Step,
) -> StepEnd {
    let definitions = tools.definitions();
    let mut stream = tokio::select! {
        biased;
        _ = ctx.ticket.cancel.cancelled() => return StepEnd::Cancelled,
        stream = ctx.model.stream(messages, &definitions) => match stream {
            Ok(stream) => stream,
            Err(error) => return StepEnd::Failed(error),
        },
    };
    loop {
        let event = tokio::select! {
            biased;
            _ = ctx.ticket.cancel.cancelled() => return StepEnd::Cancelled,
            event = stream.next() => event,
        };
        match event {
            None => return StepEnd::Complete,
            Some(Err(error)) => return StepEnd::Failed(error),
            Some(Ok(event)) => match event {
                ModelEvent::Text(text) => {
                    step.text.push_str(&text);
                    ctx.output.message_chunk(text);
                }
                ModelEvent::Reasoning(text) => ctx.output.thought_chunk(text),
                ModelEvent::Refusal(text) => {
                    step.refusal.push_str(&text);
                    ctx.output.message_chunk(text);
                }
                ModelEvent::ToolCallDelta {
                    index,
                    id,
                    name,
                    arguments,
                } => {
                    // Bounded by what the model sends; indexes are small.
                    if index >= 1024 {
                        return StepEnd::Failed(ModelError::Stream(format!(
                            "tool call index {index} is out of range"
                        )));
                    }
                    if step.calls.len() <= index {
                        step.calls.resize_with(index + 1, StreamedCall::default);
                    }
                    let call = &mut step.calls[index];
                    if let Some(id) = id.filter(|id| !id.is_empty()) {
                        call.id = id;
                    }
                    if let Some(name) = name {
                        call.name.push_str(&name);
                    }
                    if let Some(arguments) = arguments {
                        call.arguments.push_str(&arguments);
                    }
                }
                ModelEvent::Finish(reason) => step.finish = Some(reason),
            },
        }
    }
}

/// Runs the step's tool calls in order and records the assistant message
/// with its tool results. Returns `false` if the turn was cancelled.
async fn run_tool_calls(ctx: &TurnContext, tools: &ToolSet, step: Step) -> bool {
    let mut calls: Vec<StreamedCall> = step
        .calls
        .into_iter()
        .filter(|call| !call.name.is_empty())
        .collect();
    for call in &mut calls {
        if call.id.is_empty() {
            // The model gave no id; the conversation needs one to pair the
            // result with the call.
            call.id = format!("call_{}", crate::ids::random_hex(8));
            tracing::warn!(tool = %call.name, "the model sent a tool call without an id; using {}", call.id);
        }
    }
    let assistant = json!({
        "role": "assistant",
        "content": if step.text.is_empty() { Value::Null } else { Value::String(step.text.clone()) },
        "tool_calls": calls.iter().map(|call| json!({
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": call.arguments},
        })).collect::<Vec<_>>(),
    });
    let mut messages = vec![assistant];
    let mut cancelled = false;
    for call in &calls {
        let text = if cancelled {
            "error: the turn was cancelled before this tool ran".to_owned()
        } else {
            match run_tool_call(ctx, tools, call).await {
                Some(outcome) => outcome.text_for_model,
                None => {
                    cancelled = true;
                    "error: the turn was cancelled while this tool ran".to_owned()
                }
            }
        };
        messages.push(json!({"role": "tool", "tool_call_id": call.id, "content": text}));
    }
    // Every tool call gets its result message, even when cancelled, so the
    // conversation stays one the model accepts.
    ctx.commit(messages);
    !cancelled
}

fn tool_title(tool: Option<&ResolvedTool>, call: &StreamedCall, arguments: &Value) -> String {
    match tool {
        Some(ResolvedTool::Builtin(builtin::Builtin::JobStart)) => arguments
            .get("command")
            .and_then(Value::as_str)
            .map(|command| format!("Run `{command}`"))
            .unwrap_or_else(|| call.name.clone()),
        Some(ResolvedTool::Builtin(builtin::Builtin::File(tool))) => {
            let verb = match tool {
                FileTool::Read => "Read",
                FileTool::Write => "Write",
                FileTool::Edit => "Edit",
            };
            match files::path_argument(arguments) {
                Some(path) => format!("{verb} {path}"),
                None => call.name.clone(),
            }
        }
        _ => call.name.clone(),
    }
}

fn failed_update(id: &str, message: &str) -> ToolCallUpdate {
    ToolCallUpdate::new(
        id.to_owned(),
        ToolCallUpdateFields::new()
            .status(ToolCallStatus::Failed)
            .content(vec![ToolCallContent::from(ContentBlock::from(
                message.to_owned(),
            ))]),
    )
}

/// What the editor is shown of a file tool's plan: where it acts, and for a
/// write or an edit the whole-file diff.
fn plan_fields(plan: &FilePlan) -> (Vec<ToolCallLocation>, Vec<ToolCallContent>) {
    let content = match plan {
        FilePlan::Read { .. } => Vec::new(),
        FilePlan::Write { path, old, new, .. } => vec![ToolCallContent::Diff(
            Diff::new(path.shown.clone(), new.clone()).old_text(old.clone()),
        )],
    };
    (vec![plan.location()], content)
}

/// Runs one tool call, showing it as `pending → in_progress → completed |
/// failed`. `None` if the turn was cancelled meanwhile.
async fn run_tool_call(
    ctx: &TurnContext,
    tools: &ToolSet,
    call: &StreamedCall,
) -> Option<ToolOutcome> {
    let call_key = crate::ids::call_key(&ctx.session.id);
    // The editor's id for the call: unique in the session even when a model
    // reuses its own ids from one turn to the next.
    let acp_id = format!("call_{}", call_key.rsplit(':').next().unwrap_or_default());
    let resolved = tools.resolve(&call.name);
    let arguments_text = if call.arguments.trim().is_empty() {
        "{}"
    } else {
        call.arguments.as_str()
    };
    let arguments: Result<Value, _> = serde_json::from_str(arguments_text);
    let shown_input = arguments
        .as_ref()
        .ok()
        .cloned()
        .unwrap_or_else(|| Value::String(call.arguments.clone()));
    let title = tool_title(resolved.as_ref(), call, &shown_input);
    let kind = resolved
        .as_ref()
        .map(ResolvedTool::kind)
        .unwrap_or_default();
    ctx.output.tool_call(
        ToolCall::new(acp_id.clone(), title.clone())
            .kind(kind)
            .status(ToolCallStatus::Pending)
            .raw_input(shown_input.clone()),
    );

    let Some(tool) = resolved else {
        let outcome = ToolOutcome::failure(format!("unknown tool {:?}", call.name));
        ctx.output.tool_call_update(failed_update(
            &acp_id,
            &format!("unknown tool {:?}", call.name),
        ));
        return Some(outcome);
    };
    let arguments = match arguments {
        Ok(arguments) => arguments,
        Err(error) => {
            let message = format!("the arguments are not valid JSON: {error}");
            ctx.output
                .tool_call_update(failed_update(&acp_id, &message));
            return Some(ToolOutcome::failure(message));
        }
    };

    // A file tool is planned before the gate: the editor is shown where it
    // acts and what a write would change before anyone is asked.
    let plan = match &tool {
        ResolvedTool::Builtin(builtin::Builtin::File(file_tool)) => {
            let planned = tokio::select! {
                biased;
                _ = ctx.ticket.cancel.cancelled() => None,
                planned = files::plan(&ctx.files, *file_tool, &arguments) => Some(planned),
            };
            match planned {
                None => {
                    ctx.output
                        .tool_call_update(failed_update(&acp_id, "Cancelled."));
                    return None;
                }
                Some(Err(message)) => {
                    ctx.output
                        .tool_call_update(failed_update(&acp_id, &message));
                    return Some(ToolOutcome::failure(message));
                }
                Some(Ok(plan)) => {
                    let (locations, content) = plan_fields(&plan);
                    ctx.output.tool_call_update(ToolCallUpdate::new(
                        acp_id.clone(),
                        ToolCallUpdateFields::new()
                            .locations(locations)
                            .content(content),
                    ));
                    Some(plan)
                }
            }
        }
        _ => None,
    };

    let gate = ctx
        .session
        .mode()
        .gate(tool.effect(&arguments, &ctx.session.roots));
    let asked = match gate {
        Gate::Allow => Decision::Allow,
        Gate::Refuse(reason) => Decision::Reject(reason),
        Gate::Ask => {
            let mut fields = ToolCallUpdateFields::new()
                .title(title.clone())
                .kind(kind)
                .status(ToolCallStatus::Pending)
                .raw_input(shown_input.clone());
            if let Some(plan) = &plan {
                let (locations, content) = plan_fields(plan);
                fields = fields.locations(locations).content(content);
            }
            permission::ask(
                ctx.output.connection(),
                &ctx.session,
                &ctx.routes,
                &ctx.ticket.cancel,
                &call.name,
                ToolCallUpdate::new(acp_id.clone(), fields),
            )
            .await
        }
    };
    match asked {
        Decision::Allow => {}
        Decision::Reject(reason) => {
            ctx.output
                .tool_call_update(failed_update(&acp_id, &format!("Not run: {reason}.")));
            return Some(ToolOutcome::failure(format!(
                "the tool did not run: {reason}"
            )));
        }
        Decision::Cancelled => {
            ctx.output
                .tool_call_update(failed_update(&acp_id, "Cancelled."));
            return None;
        }
    }

    ctx.output.tool_call_update(ToolCallUpdate::new(
        acp_id.clone(),
        ToolCallUpdateFields::new().status(ToolCallStatus::InProgress),
    ));
    let running = execute(
        ctx,
        &tool,
        plan.as_ref(),
        call,
        arguments_text,
        &arguments,
        call_key,
    );
    let outcome = tokio::select! {
        biased;
        _ = ctx.ticket.cancel.cancelled() => None,
        outcome = running => Some(outcome),
    };
    let Some(outcome) = outcome else {
        ctx.output
            .tool_call_update(failed_update(&acp_id, "Cancelled."));
        return None;
    };
    let status = if outcome.succeeded {
        ToolCallStatus::Completed
    } else {
        ToolCallStatus::Failed
    };
    let mut fields = ToolCallUpdateFields::new()
        .status(status)
        .content(outcome.content.clone());
    if let Some(raw) = &outcome.raw_output {
        fields = fields.raw_output(raw.clone());
    }
    ctx.output
        .tool_call_update(ToolCallUpdate::new(acp_id, fields));
    Some(outcome)
}

async fn execute(
    ctx: &TurnContext,
    tool: &ResolvedTool,
    plan: Option<&FilePlan>,
    call: &StreamedCall,
    arguments_text: &str,
    arguments: &Value,
    call_key: String,
) -> ToolOutcome {
    if let Some(plan) = plan {
        return match plan {
            FilePlan::Read { text, .. } => ToolOutcome::success(text.clone(), None),
            FilePlan::Write { .. } => match files::apply(&ctx.files, plan).await {
                Ok(done) => {
                    let mut outcome = ToolOutcome::success(done, None);
                    // The diff stays on the finished call.
                    outcome.content.extend(plan_fields(plan).1);
                    outcome
                }
                Err(message) => ToolOutcome::failure(message),
            },
        };
    }
    match tool {
        ResolvedTool::Builtin(builtin) => {
            builtin::run(
                *builtin,
                arguments,
                &ctx.session.id,
                ctx.session.cwd(),
                &ctx.jobs,
                ctx.terminals.as_ref(),
            )
            .await
        }
        ResolvedTool::Hub(tool) => {
            let raw = match RawValue::from_string(arguments_text.to_owned()) {
                Ok(raw) => raw,
                Err(error) => return ToolOutcome::failure(format!("invalid arguments: {error}")),
            };
            // The tool result is routed back by this call's key alone.
            let _route = ctx
                .routes
                .bind(Handle::ToolCall(call_key.clone()), &ctx.session.id);
            hub_call::call(tool, raw, &call.id, call_key, ctx.limits.tool_call_timeout).await
        }
    }
}
