//! A newcomer's first hour and an operator's day: tokens made and checked,
//! the CLI on a hub behind `--remote`, `top` without a terminal, a reload
//! with nothing to reload, `--ws` beyond loopback, and every error a user
//! reads free of Rust type names.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::support::tls::LocalhostCertificate;
use crate::support::*;
use serde_json::{json, Value};
use switchboard_client::{handler_fn, reply, Client};
use switchboard_testkit::switchboard_binary;

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// `token new NAME --dir DIR`: the token file it wrote, and what it printed.
fn new_token(dir: &Path, name: &str) -> (std::path::PathBuf, String) {
    let run = run(&["token", "new", name, "--dir", path_str(dir)]);
    let printed = run.ok().to_owned();
    (dir.join(name), printed)
}

#[test]
fn token_new_writes_a_private_token_and_prints_the_config_lines() {
    let root = tempfile::tempdir().unwrap();
    let tokens = root.path().join("tokens");
    let (file, printed) = new_token(&tokens, "explorer");
    assert_eq!(mode(&file), 0o600);
    assert_eq!(mode(&tokens), 0o700);
    let token = std::fs::read_to_string(&file).unwrap();
    let token = token.trim_end();
    assert_eq!(token.len(), 43, "32 bytes in base64url: {token:?}");
    assert!(!printed.contains(token), "the token is never printed");
    assert!(printed.contains("[principals.explorer]"), "{printed}");
    assert!(
        printed.contains(&format!("token_file = \"{}\"", file.display())),
        "{printed}"
    );

    // The lines it printed make a config the hub takes.
    let config = root.path().join("switchboard.toml");
    let lines: String = printed
        .lines()
        .skip_while(|line| !line.starts_with("[principals."))
        .map(|line| format!("{line}\n"))
        .collect();
    write_private(&config, &lines);
    let hub = HubProcess::builder()
        .dir(root.path().join("hub"))
        .config(&config)
        .start();
    let mut explorer = switchboard_testkit::LineClient::connect(&hub.socket());
    let answer = explorer.request(
        "initialize",
        json!({"authToken": token, "clientInfo": {"name": "explorer"}}),
    );
    assert_eq!(
        answer["result"]["principal"],
        json!({"kind": "reserved", "module_id": "explorer"}),
        "{answer}"
    );

    // A second one does not overwrite the first, unless asked to.
    let again = run(&["token", "new", "explorer", "--dir", path_str(&tokens)]);
    assert_eq!(again.code(), 1);
    assert!(
        again.stderr.contains("exists already; --force"),
        "{again:?}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap().trim_end(), token);
    let forced = run(&[
        "token",
        "new",
        "explorer",
        "--force",
        "--dir",
        path_str(&tokens),
    ]);
    forced.ok();
    assert_ne!(std::fs::read_to_string(&file).unwrap().trim_end(), token);
    assert_eq!(mode(&file), 0o600);

    let bad = run(&["token", "new", "../x", "--dir", path_str(&tokens)]);
    assert_eq!(bad.code(), 1);
    assert!(bad.stderr.contains("cannot name a principal"), "{bad:?}");
}

#[test]
fn serve_refuses_a_short_token_and_a_token_file_others_can_open() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("hub");
    let config = root.path().join("switchboard.toml");

    write_private(&config, "[principals.explorer]\ntoken = \"12345\"\n");
    let run_serve = || {
        run(&[
            "serve",
            "--dir",
            path_str(&dir),
            "--config",
            path_str(&config),
        ])
    };
    let refused = run_serve();
    assert_eq!(refused.code(), 1);
    assert!(
        refused
            .stderr
            .contains("is 5 bytes; at least 16 are needed"),
        "{refused:?}"
    );
    assert!(
        refused.stderr.contains("switchboard token new explorer"),
        "{refused:?}"
    );
    assert!(
        !refused.stderr.contains("12345"),
        "never quoted: {refused:?}"
    );
    assert!(!dir.join("hub.json").exists());

    let token = root.path().join("explorer.token");
    std::fs::write(&token, "a-token-of-plenty-of-bytes\n").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    write_private(
        &config,
        &format!(
            "[principals.explorer]\ntoken_file = {:?}\n",
            path_str(&token)
        ),
    );
    let refused = run_serve();
    assert_eq!(refused.code(), 1);
    assert!(
        refused.stderr.contains(path_str(&token)) && refused.stderr.contains("chmod 600"),
        "{refused:?}"
    );
    assert!(!dir.join("hub.json").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_without_a_config_file_says_there_is_none() {
    let hub = HubProcess::start();
    let run = switchboard(&["reload", "--dir", hub.dir_arg()]).await;
    assert_eq!(run.code(), 1, "{run:?}");
    assert_eq!(run.stdout, "");
    assert!(run.stderr.contains("without --config"), "{run:?}");
}

#[test]
fn ws_beyond_loopback_needs_allow_non_loopback_and_localhost_is_loopback() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("hub");
    let refused = run(&["serve", "--dir", path_str(&dir), "--ws", "0.0.0.0:0"]);
    assert_eq!(refused.code(), 1);
    assert!(
        refused.stderr.contains("--allow-non-loopback"),
        "{refused:?}"
    );
    assert!(!dir.join("hub.json").exists());

    let hub = HubProcess::builder()
        .dir(root.path().join("local"))
        .ws_on("localhost:0")
        .start();
    let ws = hub.info["ws"].as_str().unwrap();
    assert!(ws.starts_with("ws://127.0.0.1:"), "{ws}");
    drop(hub);

    let hub = HubProcess::builder()
        .dir(root.path().join("open"))
        .ws_on("0.0.0.0:0")
        .arg("--allow-non-loopback")
        .start();
    assert!(hub.info["ws"]
        .as_str()
        .unwrap()
        .starts_with("ws://0.0.0.0:"));

    let nonsense = run(&["serve", "--dir", path_str(&dir), "--ws", "example"]);
    assert_eq!(nonsense.code(), 2);
    assert!(nonsense.stderr.contains("HOST:PORT"), "{nonsense:?}");
}

#[test]
fn top_without_a_terminal_says_what_to_run_instead() {
    let hub = HubProcess::start();
    let output = Command::new(switchboard_binary())
        .args(["top", "--dir", hub.dir_arg()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        output.stdout.is_empty(),
        "nothing drawn: {:?}",
        output.stdout
    );
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("needs a terminal"), "{stderr}");
    assert!(stderr.contains("switchboard status --watch"), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "no escape sequence: {stderr:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_watch_prints_again_until_interrupted() {
    let hub = HubProcess::start();
    let mut live = Live::start(&["status", "--watch", "--dir", hub.dir_arg()]);
    let mut blocks = 0;
    let mut running = 0;
    while blocks < 3 {
        let line = live.line().await;
        blocks += usize::from(line.starts_with("--- "));
        running += usize::from(line == "hub: running");
    }
    assert!(running >= 2, "each block reports the hub");
    assert!(
        live.terminate().await.success(),
        "SIGTERM ends the watch cleanly"
    );
}

/// A hub with a remote listener, a named principal `explorer` with a token
/// file, and the certificate the listener presents.
struct RemoteHub {
    hub: HubProcess,
    root: tempfile::TempDir,
    url: String,
    token_file: String,
    cert: String,
}

fn remote_hub() -> RemoteHub {
    let root = tempfile::tempdir().unwrap();
    let certificate = LocalhostCertificate::write(root.path());
    let (token_file, _) = new_token(&root.path().join("tokens"), "explorer");
    let config = root.path().join("switchboard.toml");
    write_private(
        &config,
        &format!(
            "[principals.explorer]\ntoken_file = {:?}\n",
            path_str(&token_file)
        ),
    );
    let hub = certificate
        .remote(
            HubProcess::builder()
                .dir(root.path().join("hub"))
                .config(&config),
        )
        .start();
    // The certificate names localhost.
    let remote = hub.info["remote"].as_str().unwrap();
    let port = remote.rsplit(':').next().unwrap().trim_end_matches('/');
    let url = format!("wss://localhost:{port}/");
    RemoteHub {
        hub,
        url,
        token_file: path_str(&token_file).to_owned(),
        cert: path_str(&certificate.cert).to_owned(),
        root,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_reaches_a_remote_hub_as_a_named_principal_and_never_with_the_master_token() {
    let remote = remote_hub();
    // A service of the principal's own, so it has something to see and call.
    let owner = Client::connect_with(switchboard_client::ConnectOptions {
        endpoint: switchboard_client::Endpoint::WebSocket {
            url: remote.url.clone(),
            token: Some(
                std::fs::read_to_string(&remote.token_file)
                    .unwrap()
                    .trim()
                    .to_owned(),
            ),
            ca_cert: Some(remote.cert.clone().into()),
        },
        client_name: "owner".into(),
    })
    .await
    .unwrap();
    let _service = owner
        .register(
            &json!({"protocol": "demo"}),
            handler_fn(|request| async move { reply(&request.params::<Value>()?) }),
        )
        .await
        .unwrap();

    let remote_args = |command: &[&str]| -> Vec<String> {
        let mut args: Vec<String> = command.iter().map(|s| s.to_string()).collect();
        args.extend(
            [
                "--url",
                &remote.url,
                "--token-file",
                &remote.token_file,
                "--ca-cert",
                &remote.cert,
            ]
            .map(String::from),
        );
        args
    };

    let args = remote_args(&["services", "--json"]);
    let listed = switchboard(&strs(&args)).await;
    let services: Value = serde_json::from_str(listed.ok()).unwrap();
    assert_eq!(services[0]["metadata"]["protocol"], "demo", "{services}");

    let args = remote_args(&["call", "protocol=demo", "echo", "{\"hi\":1}"]);
    let called = switchboard(&strs(&args)).await;
    assert_eq!(
        serde_json::from_str::<Value>(called.ok()).unwrap(),
        json!({"hi": 1})
    );

    let args = remote_args(&["status"]);
    let status = switchboard(&strs(&args)).await;
    let text = status.ok();
    assert!(text.contains("principal: explorer"), "{text}");
    assert!(text.contains("services you can see: 1"), "{text}");

    // The same through the environment.
    let env = std::process::Command::new(switchboard_binary())
        .args(["services"])
        .env("SWITCHBOARD_URL", &remote.url)
        .env("SWITCHBOARD_TOKEN_FILE", &remote.token_file)
        .env("SWITCHBOARD_CA_CERT", &remote.cert)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    assert!(env.status.success(), "{env:?}");
    assert!(String::from_utf8_lossy(&env.stdout).contains("demo"));

    // The hub's own token never authenticates over the network.
    let master = remote.root.path().join("master.token");
    write_private(&master, &remote.hub.token());
    let master = path_str(&master).to_owned();
    let refused = switchboard(&[
        "services",
        "--url",
        &remote.url,
        "--token-file",
        &master,
        "--ca-cert",
        &remote.cert,
    ])
    .await;
    assert_eq!(refused.code(), 1);
    assert!(refused.stderr.contains("refused the token"), "{refused:?}");

    // Without the CA, the self-signed certificate is not trusted.
    let untrusted = switchboard(&[
        "services",
        "--url",
        &remote.url,
        "--token-file",
        &remote.token_file,
    ])
    .await;
    assert_eq!(untrusted.code(), 1);
    assert!(untrusted.stderr.contains("certificate"), "{untrusted:?}");

    // The hub owner's commands say where they work instead.
    for command in [&["top"][..], &["dashboard"], &["modules"], &["reload"]] {
        let args = remote_args(command);
        let run = switchboard(&strs(&args)).await;
        assert_eq!(run.code(), 1, "{command:?}: {run:?}");
        assert!(
            run.stderr.contains("only on the hub's own machine"),
            "{command:?}: {run:?}"
        );
    }
    owner.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_the_remote_listener() {
    let remote = remote_hub();
    let run = switchboard(&["status", "--dir", remote.hub.dir_arg()]).await;
    let text = run.ok();
    let listed = remote.hub.info["remote"].as_str().unwrap();
    assert!(text.contains(&format!("remote: {listed}")), "{text}");
    assert!(text.contains("modules: 0"), "{text}");
    let run = switchboard(&["status", "--dir", remote.hub.dir_arg(), "--json"]).await;
    let report: Value = serde_json::from_str(run.ok()).unwrap();
    assert_eq!(report["remote"], listed);
}

/// Each of these fails; none of their messages may name a Rust type.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_message_a_user_reads_names_a_rust_type() {
    let hub = HubProcess::start();
    let owner = hub.client("owner").await;
    #[derive(serde::Deserialize)]
    #[allow(dead_code)]
    struct RefsParams {
        repo: String,
    }
    let _service = owner
        .register(
            &json!({"protocol": "strict"}),
            handler_fn(|request| async move {
                let _params: RefsParams = request.params()?;
                reply(&json!({}))
            }),
        )
        .await
        .unwrap();
    let dir = hub.dir_arg();
    let (_empty, nowhere) = empty_dir();
    let cases: Vec<Vec<&str>> = vec![
        vec!["call", "--dir", dir, "protocol=strict", "getRefs"],
        vec!["call", "--dir", dir, "protocol=strict", "getRefs", "[1]"],
        vec![
            "call",
            "--dir",
            dir,
            "protocol=strict",
            "getRefs",
            "{\"repo\":7}",
        ],
        vec![
            "call",
            "--dir",
            dir,
            "--timeout",
            "0",
            "protocol=strict",
            "x",
        ],
        vec![
            "call",
            "--dir",
            dir,
            "--timeout",
            "soon",
            "protocol=strict",
            "x",
        ],
        vec!["call", "--dir", dir, "protocol=nothing", "x"],
        vec!["call", "--dir", dir, "protocol=strict", "x", "{oops"],
        vec!["notify", "--dir", dir, "svc-0", "x"],
        vec!["services", "--dir", &nowhere],
        vec!["status", "--dir", &nowhere],
        vec!["reload", "--dir", dir],
        vec!["modules", "restart", "ghost", "--dir", dir],
        vec!["modules", "logs", "../x", "--dir", dir],
        vec!["services", "--dir", dir, "--url", "http://example/"],
        vec!["services", "--dir", dir, "--url", "wss://127.0.0.1:1/"],
        vec!["token", "new", "*"],
        vec!["serve", "--dir", dir],
        vec!["serve", "--dir", &nowhere, "--ws", "example:1"],
        vec![
            "serve",
            "--dir",
            &nowhere,
            "--config",
            "/nonexistent/switchboard.toml",
        ],
        vec!["serve", "--dir", &nowhere, "--remote", "127.0.0.1:0"],
        vec![
            "provide-mcp",
            "--namespace",
            "bad name",
            "--dir",
            dir,
            "--",
            "true",
        ],
    ];
    for args in cases {
        let run = switchboard(&args).await;
        assert_ne!(run.code(), 0, "{args:?} succeeded: {run:?}");
        for text in [&run.stderr, &run.stdout] {
            for needle in ["struct ", "enum ", "::"] {
                assert!(
                    !text.contains(needle),
                    "{args:?} printed {needle:?}: {text}"
                );
            }
        }
    }
    owner.close();
}
