//! `switchboard acp`: an ACP agent on stdio for editors such as Zed, whose
//! tools are the hub's tool providers. Stdout carries only ACP messages.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use switchboard_acp::{AcpOptions, FrontLimits, ModelOptions};

use crate::connect::HubArgs;

/// The environment variable the model API key is read from (never a flag, so
/// it stays out of process listings and editor settings).
const API_KEY_VAR: &str = "SWITCHBOARD_MODEL_API_KEY";

#[derive(clap::Args, Debug)]
pub struct AcpArgs {
    #[command(flatten)]
    hub: HubArgs,
    /// Base URL of an OpenAI-compatible API; requests go to
    /// URL/chat/completions (e.g. https://api.openai.com/v1,
    /// http://127.0.0.1:11434/v1 for Ollama).
    #[arg(long, value_name = "URL")]
    model_url: String,
    /// The model name sent with every request (e.g. gpt-4.1, deepseek-chat).
    /// This is the default model of every session (the value "default" of
    /// its model config option).
    #[arg(long, value_name = "NAME")]
    model: String,
    /// A TOML config file whose [acp.models.NAME] entries (url, model,
    /// api_key_env) are more models a session may switch to; the hub's
    /// own config file may hold them (the hub ignores [acp]).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Sessions that may be live at once on one connection.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    max_sessions: u32,
    /// Model calls one prompt may make before it stops with max_turn_requests.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..))]
    max_model_calls: u32,
    /// Background jobs one session may run at once.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    max_jobs: u32,
    /// Bytes of output kept per job (the most recent ones).
    #[arg(long, default_value_t = 64 * 1024, value_parser = clap::value_parser!(u32).range(1..))]
    job_output_bytes: u32,
    /// How long one hub tool call may take.
    #[arg(long, default_value = "10m", value_parser = humantime::parse_duration)]
    tool_timeout: Duration,
    /// How long a session's MCP server may take to start and answer
    /// initialize before it is given up (and reported in the session).
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    mcp_start_timeout: Duration,
    /// The longest silence tolerated while the model streams.
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    model_read_timeout: Duration,
}

pub async fn acp(args: AcpArgs) -> anyhow::Result<()> {
    if !(args.model_url.starts_with("http://") || args.model_url.starts_with("https://")) {
        bail!(
            "--model-url must be an http:// or https:// URL, got {:?}",
            args.model_url
        );
    }
    if args.model.trim().is_empty() {
        bail!("--model must not be empty");
    }
    let api_key = std::env::var(API_KEY_VAR)
        .ok()
        .filter(|key| !key.is_empty());
    let guard_program =
        std::env::current_exe().context("cannot find the switchboard binary for job guards")?;
    let models = match &args.config {
        Some(path) => switchboard_acp::models::read_config(path)?,
        None => Default::default(),
    };
    let defaults = FrontLimits::default();
    let (endpoint, _) = args.hub.endpoint()?;
    let options = AcpOptions {
        hub_dir: args.hub.hub_dir(),
        endpoint,
        models,
        model: ModelOptions {
            base_url: args.model_url,
            model: args.model,
            api_key,
            read_timeout: args.model_read_timeout,
        },
        limits: FrontLimits {
            max_sessions: args.max_sessions as usize,
            max_model_calls_per_prompt: args.max_model_calls,
            max_running_jobs_per_session: args.max_jobs as usize,
            job_output_bytes: args.job_output_bytes as usize,
            tool_call_timeout: args.tool_timeout,
            mcp_start_timeout: args.mcp_start_timeout,
            ..defaults
        },
        guard_program,
    };
    switchboard_acp::run_stdio(options)
        .await
        .context("the ACP front stopped")
}

/// `switchboard __acp-guard --lifeline FD -- PROGRAM ARGS...`: runs one job
/// or MCP server of `switchboard acp` under a guard. Never returns.
pub fn guard(args: Vec<std::ffi::OsString>) -> ! {
    let usage = || -> ! {
        eprintln!(
            "usage: switchboard {} --lifeline FD -- PROGRAM [ARGS...] (started by switchboard acp)",
            switchboard_acp::guard::GUARD_SUBCOMMAND
        );
        std::process::exit(2)
    };
    let [flag, fd, separator, command @ ..] = args.as_slice() else {
        usage()
    };
    let Some(fd) = fd.to_str().and_then(|fd| fd.parse().ok()) else {
        usage()
    };
    if flag != "--lifeline" || separator != "--" || command.is_empty() {
        usage()
    }
    switchboard_acp::guard::run(fd, command)
}
