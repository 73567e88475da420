//! `switchboard mcp`: an MCP server on stdio in front of the hub's tool
//! providers (logic in `switchboard-mcp`).

use switchboard_discovery as dir;

use crate::serve::DirArgs;

#[derive(clap::Args, Debug)]
pub struct McpArgs {
    #[command(flatten)]
    dir: DirArgs,
}

pub async fn mcp(args: McpArgs) -> anyhow::Result<()> {
    let options = switchboard_mcp::GatewayOptions {
        hub_dir: dir::hub_dir(args.dir.dir.as_deref()),
    };
    switchboard_mcp::run_gateway(options).await?;
    Ok(())
}
