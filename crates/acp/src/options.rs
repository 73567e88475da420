//! What `switchboard acp` is configured with.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use switchboard_client::Endpoint;

/// Everything the front needs to run.
#[derive(Debug, Clone)]
pub struct AcpOptions {
    /// The hub directory: where the session store lives
    /// (`<hub_dir>/acp/sessions.sqlite3`), on this machine even when the
    /// hub is not.
    pub hub_dir: PathBuf,
    /// How the front reaches the hub (its directory's `hub.json`, or a
    /// remote hub's URL with a named principal's token).
    pub endpoint: Endpoint,
    /// The default model (value `default` of the `model` config option).
    pub model: ModelOptions,
    /// More models sessions may switch to: the config file's
    /// `[acp.models.NAME]` entries, by name.
    pub models: BTreeMap<String, ModelEntry>,
    pub limits: FrontLimits,
    /// The `switchboard` binary: jobs and MCP servers run under its guard
    /// subcommand ([`crate::guard`]).
    pub guard_program: PathBuf,
}

impl AcpOptions {
    pub fn store_path(&self) -> PathBuf {
        self.hub_dir.join("acp").join("sessions.sqlite3")
    }
}

/// The OpenAI-compatible Chat Completions endpoint.
#[derive(Clone)]
pub struct ModelOptions {
    /// The API base, e.g. `https://api.openai.com/v1`; requests go to
    /// `{base_url}/chat/completions`.
    pub base_url: String,
    /// The `model` member of every request.
    pub model: String,
    /// Sent as `Authorization: Bearer …` when present.
    pub api_key: Option<String>,
    /// The longest silence tolerated while a response streams.
    pub read_timeout: Duration,
}

impl std::fmt::Debug for ModelOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key never reaches a log line.
        f.debug_struct("ModelOptions")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("read_timeout", &self.read_timeout)
            .finish()
    }
}

/// Every bound the front enforces.
#[derive(Debug, Clone)]
pub struct FrontLimits {
    /// Live sessions (including ones being loaded) on one connection.
    pub max_sessions: usize,
    /// Model calls one prompt may make before it stops with
    /// `max_turn_requests`.
    pub max_model_calls_per_prompt: u32,
    /// Jobs of one session that may run at once.
    pub max_running_jobs_per_session: usize,
    /// Bytes of output kept per job (the tail).
    pub job_output_bytes: usize,
    /// Job records (running or exited) kept per session; the oldest exited
    /// ones are forgotten beyond this.
    pub retained_jobs_per_session: usize,
    /// How long one hub tool call may take (clamped to the hub's maximum).
    pub tool_call_timeout: Duration,
    /// How long a session MCP server may take to start and answer
    /// `initialize` before it is given up and reported.
    pub mcp_start_timeout: Duration,
    /// How long a cancelled turn may take to wind down before it is dropped
    /// and its prompt answered `cancelled` regardless.
    pub cancel_grace: Duration,
}

impl Default for FrontLimits {
    fn default() -> Self {
        FrontLimits {
            max_sessions: 64,
            max_model_calls_per_prompt: 32,
            max_running_jobs_per_session: 10,
            job_output_bytes: 64 * 1024,
            retained_jobs_per_session: 64,
            tool_call_timeout: Duration::from_secs(600),
            mcp_start_timeout: Duration::from_secs(30),
            cancel_grace: Duration::from_secs(5),
        }
    }
}

/// One `[acp.models.NAME]` entry of the config file, as written
/// (`models.rs` reads and checks them).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelEntry {
    pub url: String,
    pub model: String,
    pub api_key_env: Option<String>,
}
