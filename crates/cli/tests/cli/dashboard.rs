//! The dashboard as its users meet it: `switchboard dashboard --print-url`
//! opened in a real headless chromium (login, live catalog, the chart
//! moving, metadata shown as text, a reused link refused, another origin
//! reading nothing), and `switchboard top` in a real pseudo-terminal (tmux).
//!
//! Two ignored tests make the README's screenshot and measure the page with
//! 10,000 services (`docs/dashboard.md` says how to run them).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;
use switchboard_client::{handler_fn, reply, Client};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::support::browser::{Browser, REBOUND_HOST};
use crate::support::*;

/// A label no browser may interpret.
const XSS_LABEL: &str = "<img src=x onerror=\"window.__xss=1\">";

/// The one-time login link, as `switchboard dashboard --print-url` prints it.
fn login_url(hub: &HubProcess) -> String {
    let run = run(&["dashboard", "--dir", hub.dir_arg(), "--print-url"]);
    let url = run.ok().trim().to_owned();
    assert!(
        url.starts_with("http://127.0.0.1:") && url.contains("/ui/login?code="),
        "{url}"
    );
    url
}

/// A service that answers `echo` and swallows notifications.
async fn register(client: &Client, metadata: serde_json::Value) -> String {
    let handler =
        handler_fn(|_| async { reply(&json!({"ok": true})) }).with_notifications(|_| async {});
    let handle = client
        .register(&metadata, handler)
        .await
        .expect("register a service");
    // The service lives as long as its client's connection.
    handle.id()
}

/// `document.querySelector('#services').innerText` holds `text`.
fn services_show(text: &str) -> String {
    format!(
        "document.querySelector('#services').innerText.includes({})",
        serde_json::to_string(text).unwrap()
    )
}

#[tokio::test]
async fn the_page_in_a_real_browser() {
    let hub = HubProcess::start();
    let url = login_url(&hub);
    let mut browser = Browser::launch().await;

    // The one-time link logs in and lands on the page, which goes live.
    browser.navigate(&url).await;
    assert_eq!(browser.eval("location.pathname").await, "/ui/");
    // The code is a credential while it lasts: the hub never logs it.
    let code = url.rsplit("code=").next().unwrap();
    assert!(!hub.log().contains(code), "{}", hub.log());
    browser
        .wait_for(
            "the stream",
            "document.querySelector('#status').dataset.state === 'live'",
        )
        .await;
    // The session is HttpOnly, nothing is kept in the browser's storage, and
    // the hub token appears nowhere in the page.
    assert_eq!(browser.eval("document.cookie").await, "");
    assert_eq!(
        browser
            .eval("localStorage.length + sessionStorage.length")
            .await,
        0
    );
    let html = browser.eval("document.documentElement.outerHTML").await;
    assert!(!html.as_str().unwrap().contains(&hub.token()));

    // A client registers a service (with a label that is markup): it shows,
    // as text, within a second or so.
    let owner = hub.client("dashboard-owner").await;
    let service = register(&owner, json!({"label": XSS_LABEL, "protocol": "demo/1"})).await;
    browser
        .wait_for("the new service", &services_show(&service))
        .await;
    assert_eq!(browser.eval(&services_show(XSS_LABEL)).await, true);
    assert_eq!(browser.eval("typeof window.__xss").await, "undefined");
    assert_eq!(
        browser
            .eval("document.querySelectorAll('#services img').length")
            .await,
        0
    );
    browser
        .wait_for(
            "the connection table",
            "document.querySelector('#connections').innerText.includes('unix')",
        )
        .await;

    // The notification-rate chart moves while a client sends.
    let chart = "document.querySelector('#chart-notifications canvas').toDataURL()";
    let before = browser.eval(chart).await;
    let sender = hub.client("dashboard-sender").await;
    let sending = {
        let service = service.clone();
        tokio::spawn(async move {
            loop {
                for _ in 0..50 {
                    let _ = sender.notify(&service, "tick", &json!({})).await;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    browser
        .wait_for(
            "the notification rate above zero",
            "Number(document.querySelector('#chart-notifications').dataset.last) > 0",
        )
        .await;
    sending.abort();
    assert_ne!(browser.eval(chart).await, before, "the chart was redrawn");

    // The client leaves: its service vanishes.
    owner.close();
    browser
        .wait_for(
            "the service to vanish",
            &format!("!{}", services_show(&service)),
        )
        .await;

    // A flood of catalog changes (800 registrations and their removals from
    // four clients at once) does not freeze the page: it keeps answering and
    // ends showing exactly the catalog, still live.
    flood_the_catalog(&hub).await;
    let late = hub.client("dashboard-late").await;
    let after = register(&late, json!({"label": "after-the-flood"})).await;
    browser
        .wait_for(
            "the page to settle on the catalog after the flood",
            &format!(
                "{} && document.querySelector('#services-count').textContent === '1' \
                 && document.querySelector('#status').dataset.state === 'live'",
                services_show(&after)
            ),
        )
        .await;

    // The same link again is refused, even with a session.
    browser.navigate(&url).await;
    let refused = browser.eval("document.body.innerText").await;
    assert!(
        refused.as_str().unwrap().contains("does not work"),
        "{refused}"
    );

    // A page of another origin (another port of 127.0.0.1: same site, so
    // the browser even sends the cookie) reads nothing: the hub refuses its
    // Origin and sends no CORS headers.
    let hub_origin = url.split("/ui/").next().unwrap().to_owned();
    let other = serve_probe_page(&hub_origin).await;
    browser.navigate(&other).await;
    browser
        .wait_for("the probe", "document.title.startsWith('done')")
        .await;
    let outcome = browser.eval("document.title").await;
    assert_eq!(outcome, "done: fetch blocked; stream blocked");
    assert!(
        hub.log()
            .contains("refused a request from a web origin that is not allowed"),
        "{}",
        hub.log()
    );

    // DNS rebinding: a name that resolves to 127.0.0.1 (`rebound.test`, see
    // the browser's flags) is another origin on the hub's own port. Even
    // given the session cookie, it gets the refusal and nothing else.
    let cookies = browser
        .call(
            "Network.getCookies",
            json!({"urls": [format!("{hub_origin}/ui/")]}),
        )
        .await;
    let session = cookies["cookies"]
        .as_array()
        .and_then(|list| list.iter().find(|c| c["name"] == "switchboard_session"))
        .unwrap_or_else(|| panic!("the session cookie: {cookies}"))
        .clone();
    let port = hub_origin.rsplit(':').next().unwrap();
    let rebound = format!("http://{}:{port}", REBOUND_HOST);
    let set = browser
        .call(
            "Network.setCookie",
            json!({"name": "switchboard_session", "value": session["value"],
                   "url": format!("{rebound}/ui/"), "path": "/ui", "httpOnly": true}),
        )
        .await;
    assert_eq!(set["success"], true, "{set}");
    browser.navigate(&format!("{rebound}/ui/")).await;
    let body = browser.eval("document.body.innerText.trim()").await;
    assert_eq!(body, "Host is not a loopback name");
    assert_eq!(
        browser
            .eval("document.querySelector('#services') === null")
            .await,
        true
    );
    assert!(
        hub.log()
            .contains("refused a request for a non-loopback Host"),
        "{}",
        hub.log()
    );
    // Through all of it the hub never logged its token.
    assert!(!hub.log().contains(&hub.token()), "{}", hub.log());
}

/// 800 services registered and removed again, by four clients at once.
async fn flood_the_catalog(hub: &HubProcess) {
    let mut clients = Vec::new();
    for i in 0..4 {
        clients.push(hub.client(&format!("dashboard-flood-{i}")).await);
    }
    let handles = futures::future::join_all(clients.iter().flat_map(|client| {
        (0..200).map(move |n| {
            let handler = handler_fn(|_| async { reply(&json!({})) });
            async move {
                client
                    .register(&json!({"label": format!("flood {n}")}), handler)
                    .await
                    .expect("register during the flood")
            }
        })
    }))
    .await;
    for removed in futures::future::join_all(handles.into_iter().map(|h| h.unregister())).await {
        removed.expect("unregister during the flood");
    }
    for client in clients {
        client.close();
    }
}

/// Serves one page on another loopback port that tries to read the
/// dashboard with the browser's cookie; its title says what it could read.
async fn serve_probe_page(hub_origin: &str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let page = format!(
        r#"<!doctype html><title>probing</title><script>
(async () => {{
  let fetchOutcome, streamOutcome;
  try {{
    const response = await fetch("{hub_origin}/ui/", {{credentials: "include"}});
    fetchOutcome = "fetch read " + (await response.text()).length;
  }} catch (error) {{ fetchOutcome = "fetch blocked"; }}
  streamOutcome = await new Promise((done) => {{
    const source = new EventSource("{hub_origin}/ui/stream", {{withCredentials: true}});
    source.addEventListener("snapshot", () => {{ source.close(); done("stream read"); }});
    source.onerror = () => {{ source.close(); done("stream blocked"); }};
  }});
  document.title = "done: " + fetchOutcome + "; " + streamOutcome;
}})();
</script>"#
    );
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let mut head = [0u8; 4096];
            let _ = socket.read(&mut head).await;
            let response = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                page.len()
            );
            let _ = socket.write_all(response.as_bytes()).await;
        }
    });
    format!("http://{address}/")
}

/// A private tmux server (its own socket), killed when dropped.
struct Tmux {
    socket: PathBuf,
}

impl Tmux {
    fn run(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux runs (apt-get install tmux)")
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-t", "top"]).stdout).into_owned()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

#[tokio::test]
async fn top_shows_services_and_connections_in_a_terminal() {
    let hub = HubProcess::start();
    let client = hub.client("top-test-owner").await;
    register(
        &client,
        json!({"label": "visible-in-top", "protocol": "demo/1"}),
    )
    .await;
    register(
        &client,
        json!({"label": "another-in-top", "protocol": "demo/1"}),
    )
    .await;
    let temp = tempfile::tempdir().unwrap();
    let tmux = Tmux {
        socket: temp.path().join("tmux.sock"),
    };
    let command = format!(
        "{} top --dir {}",
        switchboard_testkit::switchboard_binary().display(),
        hub.dir_arg()
    );
    let started = tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "top",
        "-x",
        "200",
        "-y",
        "50",
        &command,
    ]);
    assert!(started.status.success(), "{started:?}");
    let deadline = Instant::now() + WAIT;
    let screen = loop {
        let screen = tmux.screen();
        // Two connections: the owner and `top` itself.
        if screen.contains("visible-in-top") && screen.contains("connections 2") {
            break screen;
        }
        assert!(
            Instant::now() < deadline,
            "top never showed them:\n{screen}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(screen.contains("Services (2)"), "{screen}");
    assert!(screen.contains("demo/1"), "{screen}");
    // The service table is sorted by label, A to Z; Tab moves to it and `r`
    // reverses it.
    let order = |screen: &str| {
        let first = screen.find("another-in-top").expect("the other service");
        let second = screen.find("visible-in-top").expect("the service");
        first < second
    };
    assert!(order(&screen), "{screen}");
    assert!(screen.contains("LABEL▲"), "{screen}");
    tmux.run(&["send-keys", "-t", "top", "Tab"]);
    tmux.run(&["send-keys", "-t", "top", "r"]);
    let deadline = Instant::now() + WAIT;
    loop {
        let screen = tmux.screen();
        if screen.contains("LABEL▼") && !order(&screen) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "`r` did not reverse the service table:\n{screen}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // `q` quits, and the terminal is given back.
    tmux.run(&["send-keys", "-t", "top", "q"]);
    let deadline = Instant::now() + WAIT;
    while tmux.run(&["has-session", "-t", "top"]).status.success() {
        assert!(
            Instant::now() < deadline,
            "top did not quit:\n{}",
            tmux.screen()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Writes `docs/img/dashboard.png` from a hub with realistic traffic:
/// `cargo test -p switchboard-cli --test cli -- --ignored dashboard::screenshot`.
#[tokio::test]
#[ignore = "makes docs/img/dashboard.png (about 40 s)"]
async fn screenshot() {
    let hub = HubProcess::start();
    let providers = [
        ("git", "git/1", "Git objects: /src/switchboard"),
        ("mcp-fs", "tool-provider/1", "MCP filesystem tools"),
        ("mcp-search", "tool-provider/1", "MCP web search"),
        ("ref-watcher", "git-ref-watcher/1", "ref watcher (editor)"),
        ("acp-agent", "acp/1", "ACP agent: zed"),
        ("build", "jobs/1", "build jobs"),
    ];
    let mut clients = Vec::new();
    let mut ids = Vec::new();
    for (name, protocol, label) in providers {
        let client = hub.client(name).await;
        ids.push(
            register(
                &client,
                json!({"label": label, "protocol": protocol, "namespace": name}),
            )
            .await,
        );
        clients.push(client);
    }
    let traffic = hub.client("agent-host").await;
    let load = tokio::spawn(async move {
        let mut round = 0u64;
        loop {
            round += 1;
            let burst = 20 + (round % 40) * 3;
            for _ in 0..burst {
                let _ = traffic
                    .notify(&ids[3], "refs/changed", &json!({"ref": "main"}))
                    .await;
            }
            for id in ids.iter().take(3) {
                let _: Result<serde_json::Value, _> = traffic.request(id, "echo", &json!({})).await;
            }
            // Now and then a notification to a service that left: a drop.
            if round.is_multiple_of(7) {
                let _ = traffic.notify("svc-gone", "refs/changed", &json!({})).await;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    });
    let url = login_url(&hub);
    let mut browser = Browser::launch().await;
    browser.navigate(&url).await;
    tokio::time::sleep(Duration::from_secs(35)).await;
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/img/dashboard.png");
    browser.screenshot(&path, 1440, 1180).await;
    load.abort();
    drop(clients);
}

/// The page with 10,000 services: how long the first snapshot takes to
/// show, a search, and a change reaching the table. Prints the figures
/// (`docs/dashboard.md` has them):
/// `cargo test -p switchboard-cli --test cli -- --ignored --nocapture dashboard::ten_thousand_services`.
#[tokio::test]
#[ignore = "a measurement, not a check (about a minute)"]
async fn ten_thousand_services() {
    let hub = HubProcess::start();
    let mut owners = Vec::new();
    for owner in 0..40 {
        let client = hub.client(&format!("owner-{owner}")).await;
        for i in 0..250 {
            let n = owner * 250 + i;
            register(
                &client,
                json!({"label": format!("service {n}"), "protocol": "bench/1", "n": n}),
            )
            .await;
        }
        owners.push(client);
    }
    let url = login_url(&hub);
    let mut browser = Browser::launch().await;
    let started = Instant::now();
    browser.navigate(&url).await;
    browser
        .wait_for(
            "10,000 services",
            "document.querySelector('#services-count').textContent === '10,000'",
        )
        .await;
    let shown = started.elapsed();
    let timing = browser
        .eval("JSON.stringify(performance.getEntriesByType('navigation')[0].toJSON())")
        .await;
    let search_ms = browser
        .eval(
            "(() => { const input = document.querySelector('#services-search'); const t = performance.now(); \
             input.value = 'service 9876'; input.dispatchEvent(new Event('input')); return performance.now() - t; })()",
        )
        .await;
    let scroll_ms = browser
        .eval(
            "(() => { const v = document.querySelector('#services .viewport'); \
             document.querySelector('#services-search').value = ''; \
             document.querySelector('#services-search').dispatchEvent(new Event('input')); \
             const t = performance.now(); for (let i = 0; i < 100; i++) { v.scrollTop = i * 2600; v.dispatchEvent(new Event('scroll')); } \
             return (performance.now() - t) / 100; })()",
        )
        .await;
    let change = Instant::now();
    let late = register(&owners[0], json!({"label": "the 10,001st"})).await;
    browser
        .wait_for(
            "the new service",
            "document.querySelector('#services-count').textContent === '10,001'",
        )
        .await;
    let change_shown = change.elapsed();
    let heap = browser
        .eval("performance.memory ? performance.memory.usedJSHeapSize : null")
        .await;
    println!("10,000 services: login to table shown {shown:?}; navigation timing {timing}");
    println!("search over 10,000: {search_ms} ms; one scroll step: {scroll_ms} ms");
    println!("a registration reached the table in {change_shown:?} ({late}); JS heap {heap} bytes");
}
