//! What the MCP targets share: a real hub in process on its Unix socket
//! (and, when asked, its HTTP port with an add-on), with a version-2 tool
//! provider written with the SDK registered on it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::json;
use switchboard_client::{
    reply, Client, ConnectOptions, Connector, Endpoint, Reply, RequestOptions,
};
use switchboard_hub::endpoint::EndpointDoor;
use switchboard_hub::{AddOns, Hub, HubOptions};
use switchboard_protocol::{ErrorCode, ErrorObject};
use switchboard_tools::{
    tool_fn, BoxFuture, Provider, SurfaceHandler, SurfaceRequest, ToolCall, ToolError, ToolResult,
    ToolSpec,
};

/// The provider's namespace: its tools are `fz__echo` and so on.
pub const NAMESPACE: &str = "fz";

/// The runtime an MCP target runs its hub, clients and servers on: two
/// workers, as a small machine gives the hub.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}

/// The runtime of a target whose every part is in this process, connected
/// in memory (no socket, no child): one thread on tokio's paused clock, so
/// a wait ends the moment every task waits, however long it is, and a run
/// is the same each time.
pub fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a runtime")
}

/// A hub, and the provider registered on it.
pub struct FuzzHub {
    pub hub: Hub,
    pub provider: Provider,
    /// Where clients find it (`hub.json`).
    pub endpoint: Endpoint,
}

/// Starts a hub under `root` with `config` (TOML; request bounds of 2 s are
/// added, so a callback nobody answers ends its call soon), its HTTP port
/// on loopback when `ws`, and `add_ons`; then registers the provider.
pub async fn start(root: &Path, config: &str, ws: bool, add_ons: AddOns) -> FuzzHub {
    let (hub, dir) = start_hub(root, config, ws, add_ons).await;
    with_provider(root, hub, Endpoint::Dir(Some(dir))).await
}

/// [`start`] with no port and no add-on but an endpoint door: the provider
/// and whoever uses the returned endpoint connect in process, so that a
/// target on [`paused_runtime`] drives no socket.
pub async fn start_in_process(root: &Path, config: &str) -> FuzzHub {
    let door = Arc::new(Mutex::new(None::<EndpointDoor>));
    let held = door.clone();
    let add_ons = AddOns {
        endpoint: Some(Box::new(move |attached, _| {
            *held.lock() = Some(attached);
            switchboard_hub::endpoint::Endpoint {
                routes: axum::Router::new(),
                remote_paths: Vec::new(),
                mcp_path: None,
                keep_alive_paths: Vec::new(),
            }
        })),
        ..AddOns::default()
    };
    let (hub, _) = start_hub(root, config, false, add_ons).await;
    let door = door.lock().clone().expect("the hub attached its endpoint");
    let endpoint = Endpoint::InProcess {
        connect: Connector::new(move || Ok(door.connect()?)),
        token: Some(hub.info().token.clone()),
    };
    with_provider(root, hub, endpoint).await
}

async fn start_hub(root: &Path, config: &str, ws: bool, add_ons: AddOns) -> (Hub, PathBuf) {
    let config_path = root.join("switchboard.toml");
    std::fs::write(
        &config_path,
        format!("[limits]\nmaxRequestTimeoutMs = 2000\ndefaultRequestTimeoutMs = 2000\n{config}"),
    )
    .expect("the config");
    let dir = root.join("hub");
    let options = HubOptions {
        dir: dir.clone(),
        ws: ws.then(|| "127.0.0.1:0".parse().expect("an address")),
        config: Some(config_path),
        federated: None,
        remote: None,
    };
    let hub = Hub::start_with(options, add_ons)
        .await
        .expect("the hub starts");
    (hub, dir)
}

async fn with_provider(root: &Path, hub: Hub, endpoint: Endpoint) -> FuzzHub {
    let client = Client::connect_with(ConnectOptions {
        endpoint: endpoint.clone(),
        client_name: "fuzz provider".into(),
    })
    .await
    .expect("the provider connects");
    let provider = provider(&client, root.join("ledger.sqlite")).await;
    FuzzHub {
        hub,
        provider,
        endpoint,
    }
}

/// The provider: `fz__echo` (its `text` back), `fz__progress` (three
/// reports), `fz__sample` (asks the caller's client to sample its `text`),
/// `fz__slow` (50 ms, or until cancelled); resources, a template, a prompt,
/// completion and logging.
async fn provider(client: &Client, ledger: PathBuf) -> Provider {
    let text = json!({"type": "object", "properties": {"text": {"type": "string"}}});
    let echo = tool_fn(|call: ToolCall| async move {
        Ok(ToolResult::text(
            call.arguments["text"].as_str().unwrap_or_default(),
        ))
    });
    let progress = tool_fn(|call: ToolCall| async move {
        for step in 1..=3 {
            call.progress
                .report(f64::from(step), Some(3.0), Some(format!("step {step}")))
                .await;
        }
        Ok(ToolResult::text("done"))
    });
    let asker = client.clone();
    let sample = tool_fn(move |call: ToolCall| {
        let hub = asker.clone();
        async move { sample(&hub, call).await }
    });
    let slow = tool_fn(|call: ToolCall| async move {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(50)) => Ok(ToolResult::text("slept")),
            () = call.cancelled.cancelled() => Err(ToolError::OutcomeUnknown("cancelled".into())),
        }
    });
    Provider::builder(NAMESPACE)
        .ledger_path(ledger)
        .tool(ToolSpec::new("echo", text.clone()), echo)
        .tool(ToolSpec::new("progress", json!({"type": "object"})), progress)
        .tool(ToolSpec::new("sample", text), sample)
        .tool(ToolSpec::new("slow", json!({"type": "object"})), slow)
        .surface(Arc::new(Surface))
        .capabilities(json!({"tools": {}, "resources": {"subscribe": true}, "prompts": {}, "completions": {}, "logging": {}}))
        .register(client)
        .await
        .expect("the provider registers")
}

/// `fz__sample`: asks the caller's client to sample `text`, as a hosted
/// server's `sampling/createMessage` reaches it, and answers what it said.
async fn sample(hub: &Client, call: ToolCall) -> Result<ToolResult, ToolError> {
    let Some(client) = &call.client else {
        return Ok(ToolResult::error_text("the caller takes no requests"));
    };
    let text = call.arguments["text"].as_str().unwrap_or_default();
    let params = json!({
        "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
        "maxTokens": 16,
        "_meta": {"switchboard/call": call.tool_call_id},
    });
    let raw = serde_json::value::to_raw_value(&params).expect("params encode");
    let options = RequestOptions {
        timeout: Some(Duration::from_secs(2)),
    };
    let answer = tokio::select! {
        answer = hub.request_raw(&client.service, "sampling/createMessage", Some(&raw), options) => answer,
        () = call.cancelled.cancelled() => return Err(ToolError::OutcomeUnknown("cancelled".into())),
    };
    Ok(match answer {
        Ok(raw) => ToolResult::text(raw.get()),
        Err(error) => ToolResult::error_text(error.to_string()),
    })
}

/// Resources, prompts and completion, each a fixed answer.
struct Surface;

impl SurfaceHandler for Surface {
    fn request(&self, request: SurfaceRequest) -> BoxFuture<Reply> {
        Box::pin(async move {
            let answer = match request.method.as_str() {
                "resources/list" => json!({"resources": [
                    {"uri": "fz://a", "name": "a", "mimeType": "text/plain"}]}),
                "resources/templates/list" => json!({"resourceTemplates": [
                    {"uriTemplate": "fz://t/{x}", "name": "t"}]}),
                "resources/read" => {
                    let uri = request.params["uri"].as_str().unwrap_or_default();
                    json!({"contents": [{"uri": uri, "text": "contents"}]})
                }
                "resources/subscribe" | "resources/unsubscribe" | "logging/setLevel" => json!({}),
                "prompts/list" => json!({"prompts": [
                    {"name": "p", "arguments": [{"name": "topic"}]}]}),
                "prompts/get" => json!({"messages": [
                    {"role": "user", "content": {"type": "text", "text": "a prompt"}}]}),
                "completion/complete" => json!({"completion": {"values": ["x"]}}),
                other => {
                    return Err(ErrorObject::new(
                        ErrorCode::MethodNotFound,
                        format!("{other} is not served"),
                    ))
                }
            };
            reply(&answer)
        })
    }
}
