//! `switchboard mcp`: an MCP server on stdio in front of the hub's tool
//! providers; `mcp login NAME` and `mcp logout NAME`: a remote module's
//! OAuth login (logic in `switchboard-mcp`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use switchboard_client::protocol::modules::OAuthLogin;
use switchboard_client::Client;
use switchboard_hub::config::Config;
use switchboard_mcp::oauth::{credentials_path, LoginOptions, PreRegisteredClient};
use switchboard_mcp::Profile;

use crate::connect::{self, HubArgs};
use crate::output::emit;

#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct McpArgs {
    #[command(subcommand)]
    action: Option<Action>,
    #[command(flatten)]
    hub: HubArgs,
    /// Serve only the tools and prompts of [profiles.NAME] in the config
    /// file (--config), under the names it gives them.
    #[arg(long, value_name = "NAME", requires = "config")]
    profile: Option<String>,
    /// The TOML config file that holds the profile (the hub's own may: the
    /// hub leaves [profiles] to this command).
    #[arg(long, env = "SWITCHBOARD_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// List two tools, search_tools and call_tool, instead of every tool
    /// (as a profile's tool_search = true does): for hosts whose model
    /// should not carry every tool's definition.
    #[arg(long)]
    tool_search: bool,
}

#[derive(clap::Subcommand, Debug)]
enum Action {
    /// Sign in to the remote MCP server of [modules.NAME] (mcp_url, with
    /// oauth = true) in your browser; the tokens are kept in
    /// <dir>/oauth/NAME.json (0600) and refreshed by the module, which is
    /// restarted if the hub runs.
    Login(LoginArgs),
    /// Forget the OAuth login of module NAME (deletes its tokens).
    Logout {
        name: String,
        #[command(flatten)]
        hub: HubArgs,
    },
}

#[derive(clap::Args, Debug)]
struct LoginArgs {
    /// The module, as in [modules.NAME].
    name: String,
    #[command(flatten)]
    hub: HubArgs,
    /// The hub's config file, where [modules.NAME] is (by default the
    /// running hub is asked).
    #[arg(long, env = "SWITCHBOARD_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// The port on 127.0.0.1 the browser comes back to (the redirect URI
    /// is http://127.0.0.1:PORT/callback); by default the module's
    /// oauth_redirect_port, or else any free one.
    #[arg(long)]
    port: Option<u16>,
    /// Print the authorization URL only, even where a browser could open.
    #[arg(long)]
    no_browser: bool,
    /// How long to wait for the sign-in to finish.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "5m")]
    wait: Duration,
}

pub async fn mcp(args: McpArgs) -> anyhow::Result<()> {
    match args.action {
        Some(Action::Login(login_args)) => return login(login_args, &args.hub).await,
        Some(Action::Logout { name, hub }) => return logout(&name, &hub.or(&args.hub)),
        None => {}
    }
    let (endpoint, _) = args.hub.endpoint()?;
    // Checked before anything is served: a host shows this line as the
    // server's failure to start.
    let profile = match (&args.profile, &args.config) {
        (Some(name), Some(config)) => Some(Profile::load(config, name)?),
        _ => None,
    };
    let profile = match (profile, args.tool_search) {
        (Some(profile), true) => Some(profile.with_tool_search()),
        (None, true) => Some(Profile::everything().with_tool_search()),
        (profile, false) => profile,
    };
    let options = switchboard_mcp::GatewayOptions { endpoint, profile };
    switchboard_mcp::run_gateway(options).await?;
    Ok(())
}

async fn login(args: LoginArgs, outer: &HubArgs) -> anyhow::Result<()> {
    let hub = args.hub.clone().or(outer);
    hub.local_only("switchboard mcp login")?;
    let module = match &args.config {
        Some(config) => oauth_login_in_config(config, &args.name)?,
        // The running hub knows its modules.
        None => {
            let Ok(client) = connect::connect(&hub, "mcp login").await else {
                bail!(
                    "no hub runs here to ask about [modules.{}]: start it, or give its config file (--config FILE or SWITCHBOARD_CONFIG)",
                    args.name
                );
            };
            let module = oauth_login_of_module(&client, &args.name).await;
            client.close();
            module?
        }
    };
    let options = LoginOptions {
        name: args.name.clone(),
        url: url::Url::parse(&module.url)
            .with_context(|| format!("[modules.{}] mcp_url", args.name))?,
        credentials: credentials_path(&hub.hub_dir(), &args.name),
        port: args.port.or(module.redirect_port).unwrap_or(0),
        client: module.client_id.map(|id| PreRegisteredClient {
            id,
            secret_file: module.client_secret_file.map(PathBuf::from),
        }),
        scopes: module.scopes,
        wait: args.wait,
    };
    let browser = !args.no_browser
        && ["DISPLAY", "WAYLAND_DISPLAY"]
            .iter()
            .any(|name| std::env::var_os(name).is_some_and(|v| !v.is_empty()));
    let name = args.name.clone();
    switchboard_mcp::oauth::login(options, |authorization| {
        let opened = browser && open::that_detached(authorization).is_ok();
        let _ = emit(&format!(
            "{}\n{authorization}\n",
            if opened {
                format!("Sign in to {name} in the browser that opened (or open this link):")
            } else {
                format!("Open this link to sign in to {name}:")
            }
        ));
    })
    .await
    .with_context(|| format!("the login to {}", args.name))?;
    emit(&format!("Logged in to {}.\n", args.name))?;
    // The module picks the login up when it starts: now, if the hub runs
    // (connected again: signing in may have taken minutes).
    match connect::connect(&hub, "mcp login").await {
        Ok(client) => {
            let outcome = crate::modules::restart_and_watch(&client, &args.name).await;
            client.close();
            let line = match outcome {
                Ok(line) => line,
                Err(error) => format!("the hub did not restart {}: {error:#}", args.name),
            };
            emit(&format!("{line}\n"))?;
        }
        Err(_) => {
            emit("No hub runs now: the module uses the login when the hub starts it.\n")?;
        }
    }
    Ok(())
}

fn not_behind_oauth(name: &str) -> String {
    format!(
        "[modules.{name}] is not a remote server behind OAuth: give it mcp_url and oauth = true"
    )
}

/// The login of [modules.NAME] in the config file, which must be a remote
/// module with `oauth = true`.
fn oauth_login_in_config(config: &Path, name: &str) -> anyhow::Result<OAuthLogin> {
    let config = Config::load(config)?;
    let Some(module) = config.modules.iter().find(|module| module.name == name) else {
        let names: Vec<&str> = config.modules.iter().map(|m| m.name.as_str()).collect();
        bail!(
            "no [modules.{name}] in the config (its modules: {})",
            if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            }
        );
    };
    module.oauth.clone().with_context(|| not_behind_oauth(name))
}

/// The login of module NAME of the running hub (`hub/modules`).
async fn oauth_login_of_module(client: &Client, name: &str) -> anyhow::Result<OAuthLogin> {
    let modules = crate::modules::fetch(client).await?;
    let module = crate::modules::find(&modules, name)?;
    module.oauth.with_context(|| not_behind_oauth(name))
}

fn logout(name: &str, hub: &HubArgs) -> anyhow::Result<()> {
    hub.local_only("switchboard mcp logout")?;
    let path = credentials_path(&hub.hub_dir(), name);
    let line = match std::fs::remove_file(&path) {
        Ok(()) => format!("Logged out of {name} (removed {}).", path.display()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            format!("{name} had no login.")
        }
        Err(error) => {
            return Err(error).with_context(|| format!("cannot remove {}", path.display()))
        }
    };
    emit(&format!("{line}\n"))?;
    Ok(())
}
