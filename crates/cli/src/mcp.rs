//! `switchboard mcp`: an MCP server on stdio in front of the hub's tool
//! providers (logic in `switchboard-mcp`).

use std::path::PathBuf;

use switchboard_mcp::Profile;

use crate::connect::HubArgs;

#[derive(clap::Args, Debug)]
pub struct McpArgs {
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

pub async fn mcp(args: McpArgs) -> anyhow::Result<()> {
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
