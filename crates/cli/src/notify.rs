//! `switchboard notify`: one notification to a service.

use anyhow::Context;

use crate::connect;
use crate::target::{self, Params};

#[derive(clap::Args, Debug)]
#[command(after_help = "\
SERVICE is a service id (svc-…) or a metadata selector key=value[,key=value…]
that must match exactly one service.

Notifications are never acknowledged: exit status 0 means the hub received
the notification, not that the service handled it. Nothing is printed.")]
pub struct NotifyArgs {
    #[command(flatten)]
    hub: connect::HubArgs,
    /// The service: an id, or a selector such as protocol=git-ref-watcher.
    #[arg(value_name = "SERVICE")]
    service: String,
    /// The notification's method.
    #[arg(value_name = "METHOD")]
    method: String,
    /// The params as JSON (`-`: read them from stdin); omitted: no params.
    #[arg(value_name = "PARAMS_JSON", value_parser = target::parse_params)]
    params: Option<Params>,
}

pub async fn notify(args: NotifyArgs) -> anyhow::Result<()> {
    let params = args.params.map(Params::load).transpose()?;
    let client = connect::connect(&args.hub, "notify").await?;
    let service = target::resolve(&client, &args.service).await?;
    client
        .notify_raw(&service.service_id, &args.method, params.as_deref())
        .await
        .context("cannot send the notification")?;
    // The hub reads a connection in order, so its answer to `ping` means it
    // has read (and routed or dropped) the notification: nothing is lost
    // when this process exits right after.
    client
        .call_hub("ping", &serde_json::Value::Null)
        .await
        .context("the hub did not confirm it read the notification")?;
    client.close();
    Ok(())
}
