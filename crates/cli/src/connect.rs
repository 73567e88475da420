//! Connecting an operator command to the running hub through the SDK.

use std::path::PathBuf;

use anyhow::anyhow;
use switchboard_client::{Client, ConnectOptions, Endpoint, Error};
use switchboard_discovery as dir;

use crate::serve::DirArgs;

/// The hub directory `--dir` (or the default rule) names, absolute.
pub fn hub_dir(args: &DirArgs) -> PathBuf {
    dir::hub_dir(args.dir.as_deref())
}

/// Connects with the `direct` token from `hub.json`; `command` names the
/// connection in the hub's logs.
pub async fn connect(args: &DirArgs, command: &str) -> anyhow::Result<Client> {
    let dir = hub_dir(args);
    let options = ConnectOptions {
        endpoint: Endpoint::Dir(Some(dir.clone())),
        client_name: format!("switchboard {command}"),
    };
    Client::connect_with(options)
        .await
        .map_err(|error| match error {
            Error::Discovery(why) => anyhow!("no hub is running on {}: {why}", dir.display()),
            Error::Connect { .. } => anyhow!(
                "no hub is running on {} (hub.json is left over, or the hub is stopping): {error}",
                dir.display()
            ),
            other => anyhow!("cannot talk to the hub on {}: {other}", dir.display()),
        })
}
