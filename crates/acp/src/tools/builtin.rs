//! The built-in job tools: `job_start`, `job_output`, `job_kill`.
//!
//! They act for the calling session only; the ownership check itself lives
//! in [`JobExecutor`], which is handed the caller's session id.

use std::path::Path;

use agent_client_protocol::v1::schema::ToolKind;
use serde::Deserialize;
use serde_json::{json, Value};

use super::ToolOutcome;
use crate::jobs::JobExecutor;
use crate::model::ToolDefinition;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    JobStart,
    JobOutput,
    JobKill,
}

impl Builtin {
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "job_start" => Builtin::JobStart,
            "job_output" => Builtin::JobOutput,
            "job_kill" => Builtin::JobKill,
            _ => return None,
        })
    }

    /// `job_start` runs arbitrary commands, so it asks first. Reading and
    /// killing only touch jobs this session already started.
    pub fn read_only(self) -> bool {
        !matches!(self, Builtin::JobStart)
    }

    pub fn kind(self) -> ToolKind {
        match self {
            Builtin::JobStart | Builtin::JobKill => ToolKind::Execute,
            Builtin::JobOutput => ToolKind::Read,
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

/// Runs a built-in tool for session `session_id` whose directory is `cwd`.
pub async fn run(
    tool: Builtin,
    arguments: &Value,
    session_id: &str,
    session_cwd: &Path,
    jobs: &JobExecutor,
) -> ToolOutcome {
    match tool {
        Builtin::JobStart => {
            let args: StartArgs = match serde_json::from_value(arguments.clone()) {
                Ok(args) => args,
                Err(error) => return ToolOutcome::failure(format!("invalid arguments: {error}")),
            };
            let cwd = match &args.cwd {
                Some(dir) => session_cwd.join(dir),
                None => session_cwd.to_path_buf(),
            };
            match jobs.start(session_id, &args.command, &cwd) {
                Ok(job_id) => {
                    let result = json!({ "jobId": job_id });
                    ToolOutcome::success(result.to_string(), Some(result))
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
