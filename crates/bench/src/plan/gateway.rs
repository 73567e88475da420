//! Workload 8: the MCP gateway. The hub (Unix) column is a `tools/call`
//! through `switchboard mcp` → hub → `provide-mcp` → the server; the hub
//! (WS) column the same call through the hub's own `/mcp` over Streamable
//! HTTP (its HTTP port) → hub → `provide-mcp` → the server; the floor
//! column is the same client calling the same server directly over stdio,
//! so hub − floor is what the gateway adds. Beside them, in the floor
//! column, the same call through three processes that only copy bytes
//! (`switchboard-floor -- …`): the least any path through three processes
//! adds on this machine. Memory: five clients sharing
//! three servers hosted on the hub (hub column) against five clients each
//! starting their own three (floor column).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;

use super::Plan;
use crate::measure::{Measurement, Take, Taken};
use crate::report::{Format, Report, Row, TargetCheck};
use crate::systems::System;
use crate::workloads::gateway::{
    call_latencies, total_rss_kib, warm_up, HostedServers, HttpMcp, ServerCommand, StdioMcp,
};
use switchboard_testkit::procfs;

pub(super) const GATEWAY: &str =
    "8. MCP gateway (hub (Unix) column: client → switchboard mcp → hub → provide-mcp → server; hub (WS) column: client → the hub's /mcp over HTTP → provide-mcp → server; floor column: client → server over stdio)";
pub(super) const P50: &str = "tools/call p50 µs";
pub(super) const P99: &str = "tools/call p99 µs";
/// The shape's floor: the same client → three processes that only copy
/// bytes (`switchboard-floor -- …`, chained) → the same server, in the
/// floor column.
pub(super) const CHAIN_P50: &str =
    "tools/call p50 µs through three byte relays (the shape's floor)";
pub(super) const CHAIN_P99: &str =
    "tools/call p99 µs through three byte relays (the shape's floor)";
/// The same call made to the reference server's `echo` (server-everything,
/// Node): through the gateway (hub column) and directly (floor column).
pub(super) const NODE_P50: &str = "tools/call p50 µs with server-everything (Node)";
pub(super) const NODE_P99: &str = "tools/call p99 µs with server-everything (Node)";
pub(super) const MEMORY: &str = "5 clients × 3 servers: total RSS MiB (hub: shared through the gateway; floor: each client its own)";

/// The gateway's added p50 the issue allows.
const ADDED_P50_TARGET_US: f64 = 150.0;
/// The processes between client and server on the gateway's path.
const RELAYS: usize = 3;
const CLIENTS: usize = 5;
const SERVERS: usize = 3;

/// What the latency's calls carry: 100 bytes for the test server's `echo`.
fn echo_arguments() -> serde_json::Value {
    serde_json::json!({"text": "x".repeat(100)})
}

/// The server the latency is measured with: the workspace's small Rust MCP
/// server (its own time is tiny, so the difference is the path's).
fn test_server(plan: &Plan) -> ServerCommand {
    ServerCommand {
        program: plan.bins.mcp_test_server.clone(),
        args: Vec::new(),
        label: "mcp-test-server".into(),
    }
}

/// The server the memory is measured with: the reference MCP server
/// (server-everything, Node) when it is installed, as real servers are
/// mostly Node or Python; else the test server.
fn memory_server(plan: &Plan) -> (ServerCommand, &'static str) {
    match &plan.bins.everything {
        Some(path) => (
            ServerCommand {
                program: PathBuf::from("node"),
                args: vec![path.into()],
                label: "server-everything".into(),
            },
            "echo",
        ),
        None => (test_server(plan), "echo"),
    }
}

pub(super) async fn gateway(plan: &Plan, report: &mut Report) {
    let duration = plan.durations().sequential;
    let rows = vec![
        Row::new(GATEWAY, P50, Format::Decimal(1), true),
        Row::new(GATEWAY, P99, Format::Decimal(1), true),
    ];
    let through = Take::new(
        System::HubUnix,
        format!("{GATEWAY} call through the gateway"),
        0..2,
        move |_run| async move {
            let arguments = echo_arguments();
            through_gateway(
                plan,
                &test_server(plan),
                &arguments,
                Duration::ZERO,
                duration,
            )
            .await
        },
    );
    let over_http = Take::new(
        System::HubWs,
        format!("{GATEWAY} call through /mcp"),
        0..2,
        move |_run| async move {
            let server = test_server(plan);
            let hosted =
                HostedServers::start(&plan.bins.hub, std::slice::from_ref(&server)).await?;
            let info = &hosted.hub.info;
            let url = info
                .mcp_url
                .as_deref()
                .context("hub.json names no mcp_url")?;
            let mut client = HttpMcp::start(url, &info.token).await?;
            client.wait_for_tool("s0__echo").await?;
            let latency =
                call_latencies(&mut client, "s0__echo", &echo_arguments(), duration).await?;
            Ok(latency_taken(&latency))
        },
    );
    let direct = Take::new(
        System::Floor,
        format!("{GATEWAY} call over stdio"),
        0..2,
        move |_run| async move {
            let arguments = echo_arguments();
            let server = test_server(plan);
            over_stdio(
                &server,
                "sb-bench-direct-mcp.log",
                &arguments,
                Duration::ZERO,
                duration,
            )
            .await
        },
    );
    Measurement {
        rows,
        takes: vec![through, over_http, direct],
    }
    .record(plan.runs, report)
    .await;

    let rows = vec![
        Row::new(GATEWAY, CHAIN_P50, Format::Decimal(1), true),
        Row::new(GATEWAY, CHAIN_P99, Format::Decimal(1), true),
    ];
    let chained = Take::new(
        System::Floor,
        format!("{GATEWAY} call through three byte relays"),
        0..2,
        move |_run| async move {
            let server = test_server(plan);
            let mut args: Vec<std::ffi::OsString> = Vec::new();
            for _ in 0..RELAYS - 1 {
                args.extend(["--".into(), plan.bins.floor.clone().into()]);
            }
            args.push("--".into());
            args.push(server.program.clone().into());
            args.extend(server.args.iter().cloned());
            let log = std::env::temp_dir().join("sb-bench-relayed-mcp.log");
            let mut client = StdioMcp::start(&plan.bins.floor, &args, &[], &log).await?;
            let latency = call_latencies(&mut client, "echo", &echo_arguments(), duration).await?;
            Ok(latency_taken(&latency))
        },
    );
    Measurement {
        rows,
        takes: vec![chained],
    }
    .record(plan.runs, report)
    .await;

    if plan.bins.everything.is_some() {
        reference_server_latency(plan, report).await;
    }

    let (server, _) = memory_server(plan);
    let reference_rows = if plan.bins.everything.is_some() {
        " (and, in rows of its own, server-everything after 3 s of warm-up calls on each path)"
    } else {
        ""
    };
    report.notes.push(format!(
        "{GATEWAY}: latency with mcp-test-server{reference_rows}, memory with {}; the target is judged on mcp-test-server's rows",
        server.label
    ));
    let rows = vec![Row::new(GATEWAY, MEMORY, Format::Decimal(1), true)];
    let shared = Take::new(
        System::HubUnix,
        format!("{GATEWAY} memory shared"),
        0..1,
        move |_run| async move { Ok(mib_taken(shared_rss(plan).await?)) },
    );
    let own = Take::new(
        System::Floor,
        format!("{GATEWAY} memory own"),
        0..1,
        move |_run| async move { Ok(mib_taken(own_rss(plan).await?)) },
    );
    Measurement {
        rows,
        takes: vec![shared, own],
    }
    .record(plan.runs, report)
    .await;
}

/// How long the reference server is called before its calls are timed:
/// through the gateway, V8's stalls (1–8 ms, several a second) had died
/// down after about 3 s of calls.
const NODE_WARM_UP: Duration = Duration::from_secs(3);

/// The call of the latency rows made to the reference server instead of
/// the test server: what the gateway adds depends on the server on its
/// other end (`docs/performance.md` §15), and most servers are Node's.
async fn reference_server_latency(plan: &Plan, report: &mut Report) {
    let duration = plan.durations().sequential;
    // server-everything's `echo` takes a `message`.
    let arguments = || serde_json::json!({"message": "x".repeat(100)});
    let rows = vec![
        Row::new(GATEWAY, NODE_P50, Format::Decimal(1), true),
        Row::new(GATEWAY, NODE_P99, Format::Decimal(1), true),
    ];
    let through = Take::new(
        System::HubUnix,
        format!("{GATEWAY} call to server-everything through the gateway"),
        0..2,
        move |_run| async move {
            let (server, _) = memory_server(plan);
            through_gateway(plan, &server, &arguments(), NODE_WARM_UP, duration).await
        },
    );
    let direct = Take::new(
        System::Floor,
        format!("{GATEWAY} call to server-everything over stdio"),
        0..2,
        move |_run| async move {
            let (server, _) = memory_server(plan);
            let log = "sb-bench-direct-everything.log";
            over_stdio(&server, log, &arguments(), NODE_WARM_UP, duration).await
        },
    );
    Measurement {
        rows,
        takes: vec![through, direct],
    }
    .record(plan.runs, report)
    .await;
}

/// `echo` of `server`, hosted on a hub of its own, called through
/// `switchboard mcp`: `warm` of unmeasured calls, then `duration` timed.
async fn through_gateway(
    plan: &Plan,
    server: &ServerCommand,
    arguments: &serde_json::Value,
    warm: Duration,
    duration: Duration,
) -> anyhow::Result<Taken> {
    let hosted = HostedServers::start(&plan.bins.hub, std::slice::from_ref(server)).await?;
    let tools = ["s0__echo".to_owned()];
    let mut gateway = hosted.gateway(&plan.bins.hub, "latency", &tools).await?;
    timed_calls(&mut gateway, "s0__echo", arguments, warm, duration).await
}

/// `echo` of `server` called over its own stdio (its stderr to `log` in
/// the temp dir): `warm` of unmeasured calls, then `duration` timed.
async fn over_stdio(
    server: &ServerCommand,
    log: &str,
    arguments: &serde_json::Value,
    warm: Duration,
    duration: Duration,
) -> anyhow::Result<Taken> {
    let log = std::env::temp_dir().join(log);
    let mut client = StdioMcp::start(&server.program, &server.args, &[], &log).await?;
    timed_calls(&mut client, "echo", arguments, warm, duration).await
}

/// `tool` called on `client`: `warm` of unmeasured calls, then `duration`
/// timed; the take's p50 and p99.
async fn timed_calls(
    client: &mut StdioMcp,
    tool: &str,
    arguments: &serde_json::Value,
    warm: Duration,
    duration: Duration,
) -> anyhow::Result<Taken> {
    warm_up(client, tool, arguments, warm).await?;
    let latency = call_latencies(client, tool, arguments, duration).await?;
    Ok(latency_taken(&latency))
}

fn latency_taken(latency: &hdrhistogram::Histogram<u64>) -> Taken {
    let p50 = latency.value_at_quantile(0.5) as f64 / 1e3;
    let p99 = latency.value_at_quantile(0.99) as f64 / 1e3;
    let detail = format!("{} calls, p50 {p50:.1} µs, p99 {p99:.1} µs", latency.len());
    Taken::new(vec![p50, p99], detail)
}

fn mib_taken(kib: u64) -> Taken {
    let mib = kib as f64 / 1024.0;
    Taken::new(vec![mib], format!("{mib:.1} MiB"))
}

/// Settles before memory is read: servers allocate lazily on first use.
const SETTLE: Duration = Duration::from_millis(500);

/// Three servers hosted on a hub, five `switchboard mcp` clients of it,
/// each having called every server once: the RSS of all those processes.
async fn shared_rss(plan: &Plan) -> anyhow::Result<u64> {
    let (server, tool) = memory_server(plan);
    let servers = vec![server; SERVERS];
    let hosted = HostedServers::start(&plan.bins.hub, &servers).await?;
    let tools: Vec<String> = (0..SERVERS).map(|n| format!("s{n}__{tool}")).collect();
    let mut gateways = Vec::new();
    for client in 0..CLIENTS {
        let mut gateway = hosted
            .gateway(&plan.bins.hub, &format!("memory-{client}"), &tools)
            .await?;
        for tool in &tools {
            call_once(&mut gateway, tool).await?;
        }
        gateways.push(gateway);
    }
    tokio::time::sleep(SETTLE).await;
    let mut pids = hosted.pids();
    pids.extend(gateways.iter().filter_map(StdioMcp::pid));
    Ok(total_rss_kib(&pids))
}

/// Five clients each starting the three servers themselves, each server
/// called once: the RSS of the fifteen servers (and their children).
async fn own_rss(plan: &Plan) -> anyhow::Result<u64> {
    let (server, tool) = memory_server(plan);
    let dir = tempfile::Builder::new().prefix("sb-bench-own").tempdir()?;
    let mut clients = Vec::new();
    for n in 0..CLIENTS * SERVERS {
        let log = dir.path().join(format!("server-{n}.log"));
        let mut client = StdioMcp::start(&server.program, &server.args, &[], &log).await?;
        call_once(&mut client, tool).await?;
        clients.push(client);
    }
    tokio::time::sleep(SETTLE).await;
    let mut pids = Vec::new();
    for pid in clients.iter().filter_map(StdioMcp::pid) {
        pids.push(pid);
        pids.extend(procfs::descendants(pid));
    }
    Ok(total_rss_kib(&pids))
}

async fn call_once(client: &mut StdioMcp, tool: &str) -> anyhow::Result<()> {
    let params = serde_json::json!({"name": tool, "arguments": {"message": "m", "text": "t"}});
    client
        .request("tools/call", &params)
        .await
        .with_context(|| format!("calling {tool}"))?;
    Ok(())
}

/// The gateway's targets: at most 150 µs added at p50; sharing three servers
/// among five clients uses less memory than each starting its own.
pub(super) fn targets(report: &Report) -> Vec<TargetCheck> {
    let mut checks = Vec::new();
    if let (Some(p50), Some(p99)) = (report.row(GATEWAY, P50), report.row(GATEWAY, P99)) {
        let added = |row: &Row| Some(row.median(System::HubUnix)? - row.median(System::Floor)?);
        let (added_p50, added_p99) = (added(p50), added(p99));
        let chain_added_p50 = report
            .row(GATEWAY, CHAIN_P50)
            .and_then(|chain| chain.median(System::Floor))
            .zip(p50.median(System::Floor))
            .map(|(chained, direct)| chained - direct);
        let node_added_p50 = report.row(GATEWAY, NODE_P50).and_then(added);
        checks.push(TargetCheck {
            target: format!(
                "MCP gateway: a tools/call adds at most {ADDED_P50_TARGET_US:.0} µs at p50 over calling the server directly"
            ),
            met: added_p50.map(|a| a <= ADDED_P50_TARGET_US),
            detail: format!(
                "added p50 {} µs, p99 {} µs; three relays that do nothing but copy add p50 {} µs; to server-everything (Node) the gateway adds p50 {} µs",
                Format::Decimal(1).show_or_dash(added_p50),
                Format::Decimal(1).show_or_dash(added_p99),
                Format::Decimal(1).show_or_dash(chain_added_p50),
                Format::Decimal(1).show_or_dash(node_added_p50)
            ),
        });
        let over_http = |row: &Row| Some(row.median(System::HubWs)? - row.median(System::Floor)?);
        let (http_p50, http_p99) = (over_http(p50), over_http(p99));
        checks.push(TargetCheck {
            target: format!(
                "MCP gateway over HTTP (/mcp in the hub): a tools/call adds at most {ADDED_P50_TARGET_US:.0} µs at p50"
            ),
            met: http_p50.map(|a| a <= ADDED_P50_TARGET_US),
            detail: format!(
                "added p50 {} µs, p99 {} µs",
                Format::Decimal(1).show_or_dash(http_p50),
                Format::Decimal(1).show_or_dash(http_p99)
            ),
        });
    }
    if let Some(memory) = report.row(GATEWAY, MEMORY) {
        let ratio = memory.ratio_of(System::HubUnix, System::Floor);
        checks.push(TargetCheck {
            target: format!(
                "MCP gateway: {CLIENTS} clients sharing {SERVERS} servers use less memory than each starting its own"
            ),
            met: ratio.map(|r| r < 1.0),
            detail: format!(
                "{} vs {} MiB = {}×",
                Format::Decimal(1).show_or_dash(memory.median(System::HubUnix)),
                Format::Decimal(1).show_or_dash(memory.median(System::Floor)),
                Format::Decimal(2).show_or_dash(ratio)
            ),
        });
    }
    checks
}

/// `node` and server-everything's entry point, if installed where `.ci/run`
/// and `bench/run.sh` put it.
pub fn find_everything(root: &std::path::Path) -> Option<PathBuf> {
    let entry = root.join(
        "crates/cli/tests/cli/mcp/js/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    );
    let node_found = std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join("node").is_file()));
    (entry.is_file() && node_found).then_some(entry)
}
