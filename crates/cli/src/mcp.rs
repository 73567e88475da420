//! `switchboard mcp`: an MCP server on stdio in front of the hub's tool
//! providers (logic in `switchboard-mcp`).

use crate::connect::HubArgs;

#[derive(clap::Args, Debug)]
pub struct McpArgs {
    #[command(flatten)]
    hub: HubArgs,
}

pub async fn mcp(args: McpArgs) -> anyhow::Result<()> {
    let (endpoint, _) = args.hub.endpoint()?;
    let options = switchboard_mcp::GatewayOptions { endpoint };
    switchboard_mcp::run_gateway(options).await?;
    Ok(())
}
