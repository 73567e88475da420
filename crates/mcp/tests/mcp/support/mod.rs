//! Shared setup: a real hub in process (`switchboard_testkit::TestHub`)
//! with two named principals, version-2 providers written with the SDK
//! ([`provider`]), the gateway in process, and MCP clients on it
//! ([`client`]).

#![allow(dead_code)]

pub mod client;
pub mod provider;

use std::sync::Arc;

pub use client::*;
pub use provider::*;
use serde_json::json;
use switchboard_client::Endpoint;
use switchboard_mcp::{Gateway, GatewayOptions};
pub use switchboard_testkit::{eventually, within, TestHub, WAIT};
use switchboard_tools::consumer::Surface;

/// The token of the named principal `ev` (a provider's, as a module's).
pub const EV_TOKEN: &str = "ev-token-for-the-gateway-tests";
/// The token of the named principal `intruder`.
pub const INTRUDER_TOKEN: &str = "intruder-token-for-the-gateway-tests";

/// The config: `ev` and `intruder` may reach every service (the
/// callback-service rule of hub-protocol.md section 13 would grant `ev`
/// its callers' callback services; until it lands, a grant does).
fn config(limits: &str) -> String {
    format!(
        r#"{limits}
[principals.ev]
token = "{EV_TOKEN}"

[principals.intruder]
token = "{INTRUDER_TOKEN}"

[[grants]]
from = "ev"
to = "*"
allow = ["discover", "request", "notify"]

[[grants]]
from = "intruder"
to = "*"
allow = ["discover", "request", "notify"]
"#
    )
}

pub async fn hub() -> TestHub {
    TestHub::builder().config(&config("")).start().await
}

/// A hub whose requests last at most `ms` milliseconds.
pub async fn hub_with_ceiling(ms: u64) -> TestHub {
    let limits = format!("[limits]\nmaxRequestTimeoutMs = {ms}\ndefaultRequestTimeoutMs = {ms}\n");
    TestHub::builder().config(&config(&limits)).start().await
}

/// Where the `direct` principal reaches `hub` (as `switchboard mcp` does).
pub fn direct(hub: &TestHub) -> Endpoint {
    Endpoint::Dir(Some(hub.dir().to_path_buf()))
}

/// Where a named principal with `token` reaches `hub`.
pub fn as_principal(hub: &TestHub, token: &str) -> Endpoint {
    Endpoint::Unix {
        path: hub.info().socket.clone(),
        token: Some(token.to_owned()),
    }
}

pub async fn gateway(hub: &TestHub) -> Arc<Gateway> {
    gateway_with(hub, None).await
}

/// A gateway whose sessions see `profile`.
pub async fn gateway_with(
    hub: &TestHub,
    profile: Option<switchboard_mcp::Profile>,
) -> Arc<Gateway> {
    Gateway::start(GatewayOptions {
        endpoint: direct(hub),
        profile,
    })
    .await
}

/// Waits (bounded) until the gateway's surface satisfies `check`.
pub async fn wait_for_surface(gateway: &Gateway, what: &str, check: impl Fn(&Surface) -> bool) {
    eventually(what, || check(&gateway.tools().surface())).await
}

/// Waits until `namespace`'s prompts and resources are listed.
pub async fn wait_for_provider(gateway: &Gateway, namespace: &str) {
    let what = format!("{namespace}'s lists");
    eventually(&what, || {
        let tools = gateway.tools().tools();
        tools.get(&format!("{namespace}__echo")).is_some()
            && gateway
                .tools()
                .surface()
                .providers()
                .iter()
                .any(|provider| provider.namespace == namespace)
    })
    .await
}

/// A resource entry.
pub fn resource(uri: &str) -> serde_json::Value {
    json!({"uri": uri, "name": uri, "mimeType": "text/plain"})
}

pub fn prompt(name: &str) -> serde_json::Value {
    json!({"name": name, "description": format!("the prompt {name}"),
           "arguments": [{"name": "topic", "required": false}]})
}

pub fn template(uri_template: &str) -> serde_json::Value {
    json!({"uriTemplate": uri_template, "name": uri_template})
}
