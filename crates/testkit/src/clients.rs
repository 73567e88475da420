//! SDK clients on a test hub, over each way the SDK can reach one.

use std::path::Path;

use switchboard_client::protocol::discovery::HubInfo;
use switchboard_client::{Client, ConnectOptions, Connector, Endpoint};

/// A client of the `direct` principal on the hub's Unix socket.
pub async fn connect_unix(info: &HubInfo, name: &str) -> Client {
    connect(
        Endpoint::Unix {
            path: info.socket.clone(),
            token: Some(info.token.clone()),
        },
        name,
    )
    .await
}

/// A client of the `direct` principal over the in-process connection
/// `connector` makes.
pub async fn connect_in_process(connector: Connector, info: &HubInfo, name: &str) -> Client {
    connect(
        Endpoint::InProcess {
            connect: connector,
            token: Some(info.token.clone()),
        },
        name,
    )
    .await
}

/// A client of the `direct` principal on the hub's WebSocket.
pub async fn connect_ws(info: &HubInfo, name: &str) -> Client {
    let url = info
        .ws
        .clone()
        .expect("the hub serves a WebSocket (TestHub and HubProcess do unless told not to)");
    connect(
        Endpoint::WebSocket {
            url,
            token: Some(info.token.clone()),
            ca_cert: None,
        },
        name,
    )
    .await
}

/// A client that finds the hub through `dir/hub.json`, as the tools do.
pub async fn connect_dir(dir: &Path, name: &str) -> Client {
    connect(Endpoint::Dir(Some(dir.to_owned())), name).await
}

async fn connect(endpoint: Endpoint, name: &str) -> Client {
    let options = ConnectOptions {
        endpoint,
        client_name: name.into(),
    };
    crate::within(&format!("{name} connecting"), Client::connect_with(options))
        .await
        .unwrap_or_else(|error| panic!("{name} cannot connect to the hub: {error}"))
}
