//! `switchboard dashboard`: a one-time login link to the hub's page.
//!
//! The hub mints the code (`hub/dashboardLogin`, asked with the `direct`
//! token over the Unix socket); the link works once, within a minute, and
//! the browser trades it for a session cookie. The hub token itself never
//! leaves this process.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use anyhow::{bail, Context};
use serde_json::json;
use switchboard_client::protocol::hub::{method, DashboardLoginResult};
use switchboard_discovery as dir;

use crate::connect;
use crate::output::emit;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Opens http://127.0.0.1:PORT/ui/login?code=CODE in the browser (xdg-open), or
prints it when there is no display or --print-url is given. The link works
once, within a minute ([dashboard] login_code_seconds). Over SSH, forward the
hub's port first (ssh -L PORT:127.0.0.1:PORT) and open the printed link on
your side.")]
pub struct DashboardArgs {
    #[command(flatten)]
    hub: connect::HubArgs,
    /// Print the login link instead of opening a browser.
    #[arg(long)]
    print_url: bool,
}

pub async fn dashboard(args: DashboardArgs) -> anyhow::Result<()> {
    // A login code is the hub's own user's (`direct`), for a page the hub
    // serves on its loopback port.
    args.hub.local_only("switchboard dashboard")?;
    let hub_dir = args.hub.hub_dir();
    let info = dir::read_info(&hub_dir)
        .map_err(|error| anyhow::anyhow!("no hub is running on {}: {error}", hub_dir.display()))?;
    let Some(ws) = info.ws.as_deref() else {
        bail!("the hub serves no HTTP port (it was started with --no-ws), so no dashboard");
    };
    let base = http_base(ws)?;
    let client = connect::connect(&args.hub, "dashboard").await?;
    let answer = client
        .call_hub(method::DASHBOARD_LOGIN, &json!({}))
        .await
        .context("the hub refused a login code")?;
    client.close();
    let login: DashboardLoginResult =
        serde_json::from_str(answer.get()).context("the hub's answer to hub/dashboardLogin")?;
    let url = format!("{base}{}", login.path);
    let lifetime = login.expires_in_seconds;
    if args.print_url {
        emit(&format!("{url}\n"))?;
        return Ok(());
    }
    let display = ["DISPLAY", "WAYLAND_DISPLAY"]
        .iter()
        .any(|name| std::env::var_os(name).is_some_and(|v| !v.is_empty()));
    if display && open::that_detached(&url).is_ok() {
        emit(&format!(
            "opened the dashboard in your browser (the link works once, within {lifetime} s)\n"
        ))?;
    } else {
        emit(&format!(
            "open this link within {lifetime} s (it works once):\n{url}\n"
        ))?;
    }
    Ok(())
}

/// `http://HOST:PORT` of the hub's `ws://HOST:PORT/` URL; an unspecified
/// bind address (`0.0.0.0`, `::`) is reached on loopback.
fn http_base(ws: &str) -> anyhow::Result<String> {
    let address = ws
        .strip_prefix("ws://")
        .map(|rest| rest.trim_end_matches('/'))
        .with_context(|| format!("hub.json names an unexpected WebSocket URL {ws:?}"))?;
    let mut address: SocketAddr = address
        .parse()
        .with_context(|| format!("hub.json names an unexpected WebSocket URL {ws:?}"))?;
    if address.ip().is_unspecified() {
        address.set_ip(IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
    Ok(format!("http://{address}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_is_on_the_websocket_port() {
        assert_eq!(
            http_base("ws://127.0.0.1:4321/").unwrap(),
            "http://127.0.0.1:4321"
        );
        assert_eq!(
            http_base("ws://0.0.0.0:80/").unwrap(),
            "http://127.0.0.1:80"
        );
        assert_eq!(http_base("ws://[::1]:9/").unwrap(), "http://[::1]:9");
        assert!(http_base("wss://x/").is_err());
    }
}
