//! `switchboard`: the hub daemon and the commands that drive it.
//!
//! Each subcommand lives in its own module with its own `clap::Args`; this
//! file only lists them and runs the chosen one.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod acp;
mod call;
mod connect;
mod dashboard;
mod describe;
mod mcp;
mod modules;
mod notify;
mod output;
mod provide_mcp;
mod scrape;
mod serve;
mod service;
mod services;
mod status;
mod target;
mod token;
mod top;

#[derive(Parser)]
#[command(
    name = "switchboard",
    version,
    about = "A per-user hub for AI-agent tooling"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the hub in the foreground until SIGTERM or SIGINT (SIGHUP reloads the config).
    Serve(serve::ServeArgs),
    /// Make the running hub re-read its config file.
    Reload(connect::HubArgs),
    /// List the services in the catalog (--watch: follow every change live).
    Services(services::ServicesArgs),
    /// Serve the Agent Client Protocol on stdio (for editors such as Zed).
    Acp(acp::AcpArgs),
    /// Send a request to a service and print its result.
    Call(call::CallArgs),
    /// Send a notification to a service.
    Notify(notify::NotifyArgs),
    /// Show whether a hub runs, where, and its counters.
    Status(status::StatusArgs),
    /// Open the hub's live dashboard in the browser (a one-time login link; --print-url prints it).
    Dashboard(dashboard::DashboardArgs),
    /// Watch the hub live in the terminal: connections, services, rates (q quits).
    Top(top::TopArgs),
    /// Serve MCP on stdio: every hub tool provider's tools, as <namespace>__<tool>.
    Mcp(mcp::McpArgs),
    /// Run a stdio MCP server and publish its tools on the hub: provide-mcp --namespace NS -- COMMAND [ARGS...]
    ProvideMcp(provide_mcp::ProvideMcpArgs),
    /// The modules the hub supervises: list them, restart one, print its log.
    Modules(modules::ModulesArgs),
    /// Install the hub as a systemd user service (or remove it).
    Service(service::ServiceArgs),
    /// Make a token for a named principal: `token new NAME` writes it to a
    /// private file and prints the config lines.
    Token(token::TokenArgs),
}

fn main() -> ExitCode {
    // A job guard (`switchboard_acp::guard`) is one small single-threaded
    // process: no runtime, no logging, no argument parser of its own.
    let mut args = std::env::args_os();
    if args.nth(1).as_deref() == Some(switchboard_acp::guard::GUARD_SUBCOMMAND.as_ref()) {
        acp::guard(args.collect());
    }
    // Started as a hub's module (provide-mcp): take the launch credential
    // before any thread or child process exists.
    let _ = switchboard_client::launch::init();
    let cli = Cli::parse();
    // `serve` runs the gateway too, at `/mcp`.
    init_logging(matches!(cli.command, Command::Mcp(_) | Command::Serve(_)));
    // `mcp` and `provide-mcp` relay one peer's messages to the hub and
    // back, one after another: a single thread does that with no hand-off
    // between threads (each one a futex wake and a context switch, which
    // was most of a gateway call's cost), and leaves the cores to the hub.
    // Their blocking work (the fence ledger's SQLite) has a thread of its
    // own.
    let mut builder = match cli.command {
        Command::Mcp(_) | Command::ProvideMcp(_) => tokio::runtime::Builder::new_current_thread(),
        _ => tokio::runtime::Builder::new_multi_thread(),
    };
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("switchboard: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(async {
        match cli.command {
            Command::Serve(args) => serve::serve(args).await,
            Command::Reload(args) => serve::reload(args).await,
            Command::Services(args) => services::services(args).await,
            Command::Acp(args) => acp::acp(args).await,
            Command::Call(args) => call::call(args).await,
            Command::Notify(args) => notify::notify(args).await,
            Command::Status(args) => status::status(args).await,
            Command::Dashboard(args) => dashboard::dashboard(args).await,
            Command::Top(args) => top::top(args).await,
            Command::Mcp(args) => mcp::mcp(args).await,
            Command::ProvideMcp(args) => provide_mcp::provide_mcp(args).await,
            Command::Modules(args) => modules::modules(args).await,
            Command::Service(args) => service::service(args).await,
            Command::Token(args) => token::token(args).await,
        }
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("switchboard: {error:#}");
            let status = error.downcast_ref::<Exit>().map_or(1, |exit| exit.status);
            ExitCode::from(status)
        }
    }
}

/// A failure that ends the command with an exit status other than 1 (2:
/// it cannot run here at all, as `top` without a terminal).
#[derive(Debug)]
pub struct Exit {
    pub status: u8,
    pub message: String,
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Exit {}

/// Logs go to stderr (stdout is for command output, and for `mcp`/`acp` it
/// carries the protocol); `RUST_LOG` filters them (default: info). Colour
/// only on a terminal. The MCP gateway also leaves out rmcp's line for each
/// error answer (`GatewayLogFilter`): it logs its answers itself.
fn init_logging(mcp_gateway: bool) {
    use std::io::IsTerminal;
    use tracing_subscriber::filter::FilterExt;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;

    let mut filter = tracing_subscriber::EnvFilter::try_from_default_env()
        // rmcp logs whole MCP messages at info; payloads stay out of logs by default.
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,rmcp=warn"))
        // tungstenite logs every WebSocket message at trace, `initialize` and
        // its token included: capped at debug whatever RUST_LOG asks.
        .add_directive("tungstenite=debug".parse().expect("a valid directive"));
    // async-nats logs each connection event at info, once per retry while
    // NATS is away; the federation logs them itself, once per change.
    // Unless RUST_LOG names async_nats.
    if !std::env::var("RUST_LOG").is_ok_and(|value| value.contains("async_nats")) {
        let directive = switchboard_federation::NATS_CLIENT_LOG_DIRECTIVE;
        filter = filter.add_directive(directive.parse().expect("a valid directive"));
    }
    let gateway_filter = mcp_gateway.then_some(switchboard_mcp::GatewayLogFilter);
    let stderr = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    tracing_subscriber::registry()
        .with(stderr.with_filter(filter.and(gateway_filter)))
        .init();
}
