//! The built-in tools: the job tools `job_start`, `job_output`, `job_kill`,
//! and the file tools (`files.rs`).
//!
//! The job tools act for the calling session only; the ownership check
//! itself lives in [`JobExecutor`], which is handed the caller's session
//! id. With the editor's `terminal` capability, `job_start` runs the
//! command in one of its terminals and embeds it in the tool call.

use std::path::Path;

use agent_client_protocol::v1::schema::{Terminal, ToolCallContent, ToolKind};
use serde::Deserialize;
use serde_json::{json, Value};

use super::files::{self, FileTool};
use super::paths;
use super::ToolOutcome;
use crate::jobs::{EditorTerminals, JobExecutor};
use crate::model::ToolDefinition;
use crate::modes::Effect;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    JobStart,
    JobOutput,
    JobKill,
    File(FileTool),
}

impl Builtin {
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "job_start" => Builtin::JobStart,
            "job_output" => Builtin::JobOutput,
            "job_kill" => Builtin::JobKill,
            "read_file" => Builtin::File(FileTool::Read),
            "write_file" => Builtin::File(FileTool::Write),
            "edit_file" => Builtin::File(FileTool::Edit),
            _ => return None,
        })
    }

    /// What a call would do, for the mode's gate. `job_start` runs
    /// arbitrary commands; reading and killing only touch jobs this session
    /// already started; writes and edits are confined to the session's
    /// directories.
    pub fn effect(self, arguments: &Value, roots: &paths::Roots) -> Effect {
        match self {
            Builtin::JobStart => Effect::Command {
                inside_cwd: arguments
                    .get("cwd")
                    .and_then(Value::as_str)
                    .is_none_or(|dir| paths::inside(roots, dir)),
            },
            Builtin::JobOutput | Builtin::JobKill | Builtin::File(FileTool::Read) => Effect::Read,
            Builtin::File(FileTool::Write | FileTool::Edit) => Effect::EditInCwd,
        }
    }

    pub fn kind(self) -> ToolKind {
        match self {
            Builtin::JobStart | Builtin::JobKill => ToolKind::Execute,
            Builtin::JobOutput | Builtin::File(FileTool::Read) => ToolKind::Read,
            Builtin::File(FileTool::Write | FileTool::Edit) => ToolKind::Edit,
        }
    }
}

pub fn definitions() -> Vec<ToolDefinition> {
    let job_id = json!({
        "type": "object",
        "properties": {"jobId": {"type": "string", "description": "The id job_start returned."}},
        "required": ["jobId"],
        "additionalProperties": false
    });
    vec![
        ToolDefinition {
            name: "job_start".into(),
            description: "Start a shell command in the background. Returns {jobId}; read its \
                          output with job_output and stop it with job_kill."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "Run with /bin/sh -c."},
                    "cwd": {"type": "string", "description": "Working directory; relative paths are resolved against the session's directory."}
                },
                "required": ["command"],
                "additionalProperties": false
            }),
        },
        ToolDefinition {
            name: "job_output".into(),
            description: "The output so far of a background job (the most recent part if it is \
                          long), whether it exited, and its exit code."
                .into(),
            parameters: job_id.clone(),
        },
        ToolDefinition {
            name: "job_kill".into(),
            description: "Kill a background job and everything it started.".into(),
            parameters: job_id,
        },
    ]
    .into_iter()
    .chain(files::definitions())
    .collect()
}

#[derive(Deserialize)]
struct StartArgs {
    command: String,
    #[serde(default)]
    cwd: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct JobArgs {
    job_id: String,
}

/// Runs a built-in job tool for session `session_id` whose directory is
/// `cwd`; `terminals` when the editor runs commands. (File tools are
/// planned and applied by the turn, `files.rs`.)
pub async fn run(
    tool: Builtin,
    arguments: &Value,
    session_id: &str,
    session_cwd: &Path,
    jobs: &JobExecutor,
    terminals: Option<&EditorTerminals>,
) -> ToolOutcome {
    match tool {
        Builtin::File(_) => ToolOutcome::failure("a file tool is run by its plan"),
        Builtin::JobStart => {
            let args: StartArgs = match serde_json::from_value(arguments.clone()) {
                Ok(args) => args,
                Err(error) => return ToolOutcome::failure(format!("invalid arguments: {error}")),
            };
            let cwd = match &args.cwd {
                Some(dir) => session_cwd.join(dir),
                None => session_cwd.to_path_buf(),
            };
            let started = match terminals {
                Some(terminals) => jobs
                    .start_in_terminal(terminals, session_id, &args.command, &cwd)
                    .await
                    .map(|(job, terminal)| (job, Some(terminal))),
                None => jobs
                    .start(session_id, &args.command, &cwd)
                    .map(|job| (job, None)),
            };
            match started {
                Ok((job_id, terminal)) => {
                    let result = json!({ "jobId": job_id });
                    let mut outcome = ToolOutcome::success(result.to_string(), Some(result));
                    if let Some(terminal) = terminal {
                        // The editor shows the command's live output here.
                        outcome
                            .content
                            .push(ToolCallContent::Terminal(Terminal::new(terminal)));
                    }
                    outcome
                }
                Err(error) => ToolOutcome::failure(error.to_string()),
            }
        }
        Builtin::JobOutput | Builtin::JobKill => {
            let args: JobArgs = match serde_json::from_value(arguments.clone()) {
                Ok(args) => args,
                Err(error) => return ToolOutcome::failure(format!("invalid arguments: {error}")),
            };
            let report = if tool == Builtin::JobOutput {
                jobs.output(session_id, &args.job_id).await
            } else {
                jobs.kill(session_id, &args.job_id).await
            };
            match report.map(|report| serde_json::to_value(report).unwrap_or(Value::Null)) {
                Ok(result) => ToolOutcome::success(result.to_string(), Some(result)),
                Err(error) => ToolOutcome::failure(error.to_string()),
            }
        }
    }
}
