//! Supervised modules, with real processes: a `switchboard serve` whose
//! config names modules (`switchboard-test-module`, `provide-mcp` around
//! `mcp-test-server`), driven through the hub and the `switchboard`
//! commands. What must hold: a module's connections are its `reserved`
//! principal and nobody else's; a module that dies is restarted with new
//! service ids, one that keeps dying is given up; reloads add, remove and
//! restart only what changed; stopping the hub stops every module and their
//! children; logs stay within their bound; bad configs name their line.

use std::os::unix::fs::PermissionsExt;

use serde_json::{json, Value};
use switchboard_client::protocol::modules::ModuleState;
use switchboard_client::protocol::Principal;
use switchboard_client::{Client, ConnectOptions, Endpoint, ErrorKind};
use switchboard_testkit::eventually;

use crate::support::mcp::test_server_bin;
use crate::support::modules::{
    alive, ask, kill9, module_section, module_service, modules, pid_in, rss_kib, test_module,
    toml_string, wait_gone, wait_module, ModuleHub,
};
use crate::support::{run, switchboard, LineClient, Live};

#[tokio::test]
async fn a_module_registers_services_under_its_reserved_principal() {
    let hub = ModuleHub::start(&module_section("alpha", &[]));
    let client = hub.client().await;
    let service = module_service(&client, "alpha", None).await;
    assert_eq!(service.principal, Principal::reserved("alpha"));

    let me = ask(&client, &service, "whoami", json!({})).await;
    assert_eq!(
        me["principal"],
        json!({"kind": "reserved", "module_id": "alpha"})
    );
    let status = wait_module(&client, "alpha", "ran", |m| m.state == ModuleState::Running).await;
    assert_eq!(status.pid, Some(pid_in(&me)));
    assert_eq!((status.restarts, status.services), (0, 1));

    // The commands and /metrics say the same.
    let listed = switchboard(&["modules", "--dir", hub.dir_arg()]).await;
    let row = listed
        .ok()
        .lines()
        .find(|line| line.starts_with("alpha "))
        .unwrap_or_else(|| panic!("no row for alpha: {listed:?}"))
        .to_owned();
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[1], "running", "{row}");
    assert_eq!(cells[2], me["pid"].to_string(), "{row}");
    assert_eq!(cells[3], "0", "{row}");
    let header = listed.stdout.lines().next().unwrap();
    for column in [
        "NAME",
        "STATE",
        "PID",
        "RESTARTS",
        "UPTIME",
        "SERVICES",
        "LAST EXIT",
    ] {
        assert!(header.contains(column), "{header}");
    }
    let status_text = switchboard(&["status", "--dir", hub.dir_arg()]).await;
    assert!(
        status_text.ok().contains("modules: 1 (1 running)")
            && status_text.stdout.contains("alpha: running, pid"),
        "{status_text:?}"
    );
    let metrics = hub.hub.metrics();
    assert_eq!(
        crate::support::metric_value(&metrics, "switchboard_module_services{module=\"alpha\"}"),
        1
    );
    assert_eq!(
        crate::support::metric_value(
            &metrics,
            "switchboard_module_state{module=\"alpha\",state=\"running\"}"
        ),
        1
    );

    // Its output is in its log, private to the user.
    hub.wait_logged("alpha", &format!("registered {}", service.service_id))
        .await;
    let mode = std::fs::metadata(hub.log_path("alpha"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let printed = switchboard(&["modules", "logs", "alpha", "--dir", hub.dir_arg()]).await;
    assert!(
        printed.ok().contains("launch credential: true"),
        "{printed:?}"
    );
    client.close();
}

#[tokio::test]
async fn a_killed_module_leaves_the_catalog_and_is_restarted_with_new_service_ids() {
    let hub = ModuleHub::start(&module_section("alpha", &[]));
    let client = hub.client().await;
    let first = module_service(&client, "alpha", None).await;
    let pid = pid_in(&ask(&client, &first, "whoami", json!({})).await);
    let mut catalog = client.catalog().await.unwrap();

    kill9(pid);

    // Its service leaves the catalog, then a new run registers a new one.
    loop {
        match tokio::time::timeout(crate::support::WAIT, catalog.next_event()).await {
            Ok(Some(switchboard_client::CatalogEvent::Removed { service_id, .. }))
                if service_id == first.service_id =>
            {
                break
            }
            Ok(Some(_)) => {}
            other => panic!("the killed module's service never left: {other:?}"),
        }
    }
    let second = module_service(&client, "alpha", Some(&first.service_id)).await;
    assert_ne!(second.service_id, first.service_id);
    assert_eq!(second.principal, Principal::reserved("alpha"));
    let me = ask(&client, &second, "whoami", json!({})).await;
    assert_ne!(me["pid"], json!(pid));
    assert!(client
        .request::<Value>(&first.service_id, "whoami", &json!({}))
        .await
        .is_err());

    let status = wait_module(&client, "alpha", "restarted", |m| {
        m.state == ModuleState::Running && m.restarts == 1
    })
    .await;
    assert_eq!(
        status.last_exit.as_deref(),
        Some("was killed by signal 9 (SIGKILL)")
    );
    let log = hub.module_log("alpha");
    assert!(
        log.contains(&format!("pid {pid} was killed by signal 9")),
        "{log}"
    );

    // `modules restart` starts it once more, under a new pid.
    let restarted = switchboard(&["modules", "restart", "alpha", "--dir", hub.dir_arg()]).await;
    assert!(
        restarted.ok().starts_with("alpha: running, pid"),
        "{restarted:?}"
    );
    let status = wait_module(&client, "alpha", "restarted again", |m| m.restarts == 2).await;
    assert_ne!(status.pid, Some(pid_in(&me)));
    // The stop was the hub's, on request: its last exit says so.
    assert!(
        status
            .last_exit
            .as_deref()
            .is_some_and(|exit| exit.starts_with("restarted on request (")),
        "{status:?}"
    );
    let unknown = switchboard(&["modules", "restart", "ghost", "--dir", hub.dir_arg()]).await;
    assert_eq!(unknown.code(), 1);
    assert!(
        unknown.stderr.contains("no module \"ghost\""),
        "{unknown:?}"
    );
    client.close();
}

#[tokio::test]
async fn modules_that_cannot_run_are_reported_and_given_up_without_holding_up_the_hub() {
    let root = tempfile::tempdir().unwrap();
    let not_executable = root.path().join("not-executable");
    std::fs::write(&not_executable, "#!/bin/sh\nexit 0\n").unwrap();
    let config = format!(
        "{}{}[modules.missing]\ncommand = \"/nonexistent/switchboard-module\"\n\n\
         [modules.noexec]\ncommand = {}\n\n\
         {}",
        module_section("crash", &["--exit-at-once", "3"]),
        module_section("once", &["--exit-at-once", "4"])
            .replace("args =", "restart = \"never\"\nargs ="),
        toml_string(&not_executable.to_string_lossy()),
        module_section("alpha", &[]),
    );
    // The hub is ready (hub.json written) while they fail.
    let hub = ModuleHub::start(&config);
    let client = hub.client().await;
    module_service(&client, "alpha", None).await;

    for (name, exit) in [
        ("crash", "exited with status 3"),
        ("missing", "cannot start /nonexistent/switchboard-module"),
        ("noexec", "Permission denied"),
    ] {
        let status = wait_module(&client, name, "was given up", |m| {
            m.state == ModuleState::GivenUp
        })
        .await;
        assert!(
            status
                .last_exit
                .as_deref()
                .is_some_and(|e| e.contains(exit)),
            "{name}: {status:?}"
        );
        assert_eq!(status.restarts, 4, "{name}: five starts, then given up");
        assert!(status.pid.is_none());
        let log = hub.module_log(name);
        assert!(
            log.contains("given up after 5 fast failures"),
            "{name}: {log}"
        );
    }
    let once = wait_module(&client, "once", "exited", |m| {
        m.state == ModuleState::Exited
    })
    .await;
    assert_eq!(once.last_exit.as_deref(), Some("exited with status 4"));
    assert_eq!(once.restarts, 0, "restart = \"never\"");

    let listed = switchboard(&["modules", "--dir", hub.dir_arg()]).await;
    let text = listed.ok();
    assert!(
        text.lines()
            .any(|l| l.starts_with("crash ") && l.contains("given-up") && l.contains("status 3")),
        "{text}"
    );
    let status_text = switchboard(&["status", "--dir", hub.dir_arg()]).await;
    assert!(
        status_text.ok().contains("crash: given-up"),
        "{status_text:?}"
    );
    let hub_log = hub.hub.log();
    assert!(
        hub_log.contains("a module keeps failing; given up"),
        "{hub_log}"
    );
    // The healthy module was never disturbed.
    let alpha = wait_module(&client, "alpha", "runs", |m| {
        m.state == ModuleState::Running
    })
    .await;
    assert_eq!(alpha.restarts, 0);
    client.close();
}

#[tokio::test]
async fn a_stolen_credential_is_refused_while_the_module_itself_reconnects() {
    let hub = ModuleHub::start(&module_section("alpha", &[]));
    let client = hub.client().await;
    let service = module_service(&client, "alpha", None).await;
    let stolen = ask(&client, &service, "leakCredential", json!({})).await["credential"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(stolen.starts_with("sb-launch-"), "{stolen}");

    // Another process (this test) on the Unix socket: -32007, and closed.
    let mut line = LineClient::connect(&hub.hub.socket());
    let answer = line.request("initialize", json!({"authToken": stolen}));
    assert_eq!(answer["error"]["code"], -32007, "{answer}");
    assert!(line.try_recv().is_none(), "the connection is closed");

    // Over the WebSocket, as authToken or as a bearer token: -32007.
    let url = hub.hub.info["ws"].as_str().unwrap().to_owned();
    let refused = Client::connect_with(ConnectOptions {
        endpoint: Endpoint::WebSocket {
            url: url.clone(),
            token: Some(stolen.clone()),
            ca_cert: None,
        },
        client_name: "thief".into(),
    })
    .await;
    assert!(
        matches!(&refused, Err(error) if error.kind() == Some(ErrorKind::AuthRequired)),
        "{:?}",
        refused.err()
    );

    // A child process of the module may use it.
    let child = ask(&client, &service, "childPresents", json!({})).await;
    assert_eq!(child["accepted"], true, "{child}");
    assert_eq!(
        child["principal"],
        json!({"kind": "reserved", "module_id": "alpha"})
    );

    // The module drops its connection and connects again with it.
    let _ = client
        .request::<Value>(&service.service_id, "dropConnection", &json!({}))
        .await;
    let again = module_service(&client, "alpha", Some(&service.service_id)).await;
    assert_eq!(again.principal, Principal::reserved("alpha"));
    let me = ask(&client, &again, "whoami", json!({})).await;
    assert_eq!(
        me["principal"],
        json!({"kind": "reserved", "module_id": "alpha"})
    );
    let log = hub.module_log("alpha");
    assert!(
        log.contains(&format!("reconnected {}", again.service_id)),
        "{log}"
    );

    // After a restart the old credential is dead, even for the module's
    // own (new) process.
    kill9(pid_in(&me));
    let third = module_service(&client, "alpha", Some(&again.service_id)).await;
    let old = ask(&client, &third, "present", json!({"credential": stolen})).await;
    assert_eq!(old, json!({"accepted": false, "code": -32007}));

    // Refusals are logged with why, the credential never.
    let hub_log = hub.hub.log();
    assert!(hub_log.contains("refused a launch credential"), "{hub_log}");
    assert!(hub_log.contains("over a WebSocket"), "{hub_log}");
    assert!(hub_log.contains("neither its process"), "{hub_log}");
    assert!(!hub_log.contains(&stolen), "the credential is in the log");
    assert!(!hub_log.contains(&stolen["sb-launch-".len()..]));
    client.close();
}

#[tokio::test]
async fn reload_adds_removes_and_restarts_only_what_changed() {
    let alpha = module_section("alpha", &[]);
    let beta = module_section("beta", &[]);
    let hub = ModuleHub::start(&alpha);
    let client = hub.client().await;
    let alpha_service = module_service(&client, "alpha", None).await;
    let alpha_pid = wait_module(&client, "alpha", "runs", |m| m.pid.is_some())
        .await
        .pid
        .unwrap();

    // Added.
    hub.rewrite_config(&format!("{alpha}{beta}"));
    let reloaded = switchboard(&["reload", "--dir", hub.dir_arg()]).await;
    assert!(
        reloaded.ok().contains("modules added: beta"),
        "{reloaded:?}"
    );
    module_service(&client, "beta", None).await;
    let beta_pid = wait_module(&client, "beta", "runs", |m| m.state == ModuleState::Running)
        .await
        .pid
        .unwrap();
    let alpha_now = wait_module(&client, "alpha", "runs", |_| true).await;
    assert_eq!((alpha_now.pid, alpha_now.restarts), (Some(alpha_pid), 0));

    // beta changed (its label), alpha removed: SIGHUP this time.
    hub.rewrite_config(&module_section("beta", &["--label", "beta-2"]));
    hub.hub.signal(libc::SIGHUP);
    wait_gone(alpha_pid, "the removed module").await;
    wait_gone(beta_pid, "the changed module's old run").await;
    module_service(&client, "beta-2", None).await;
    let catalog = client.catalog().await.unwrap();
    eventually("alpha's service leaving the catalog", || {
        catalog.get(&alpha_service.service_id).is_none()
    })
    .await;
    let listed = modules(&client).await;
    assert_eq!(listed.len(), 1, "{listed:#?}");
    assert_eq!(listed[0].name, "beta");
    assert!(!hub.hub.log().contains("reload failed"));
    client.close();
}

#[tokio::test(flavor = "multi_thread")]
async fn stopping_the_hub_stops_every_module_and_their_children() {
    let config = format!(
        "{}{}",
        module_section("alpha", &[]),
        // Ignores SIGTERM: only the SIGKILL after the grace period stops it.
        module_section("stubborn", &["--ignore-sigterm"]),
    );
    let mut hub = ModuleHub::start(&config);
    let client = hub.client().await;
    let mut pids = Vec::new();
    for name in ["alpha", "stubborn"] {
        let service = module_service(&client, name, None).await;
        let me = ask(&client, &service, "whoami", json!({})).await;
        pids.push(pid_in(&me));
        let child = ask(&client, &service, "forkChild", json!({})).await;
        pids.push(pid_in(&child));
    }
    assert!(pids.iter().all(|pid| alive(*pid)), "{pids:?}");
    client.close();

    hub.hub.signal(libc::SIGTERM);
    let status = tokio::task::block_in_place(|| hub.hub.wait_exit());
    assert!(status.success(), "{status:?}: {}", hub.hub.log());
    for pid in &pids {
        wait_gone(*pid, "a module or a module's child").await;
    }
    let log = hub.hub.log();
    assert!(log.contains("every module stopped"), "{log}");
    assert!(
        hub.module_log("stubborn").contains("sending SIGKILL"),
        "{}",
        hub.module_log("stubborn")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_module_dies_with_a_hub_killed_without_warning() {
    let mut hub = ModuleHub::start(&module_section("alpha", &[]));
    let client = hub.client().await;
    let service = module_service(&client, "alpha", None).await;
    let pid = pid_in(&ask(&client, &service, "whoami", json!({})).await);
    client.close();
    // SIGKILL: the hub stops nothing; the kernel's parent-death signal does.
    tokio::task::block_in_place(|| hub.hub.kill());
    wait_gone(pid, "the module of a killed hub").await;
}

#[tokio::test]
async fn a_flooding_module_stays_within_its_log_bound() {
    const BOUND: u64 = 64 * 1024;
    const FLOOD: u64 = 64 * 1024 * 1024;
    let config = module_section("flood", &["--flood-bytes", &FLOOD.to_string()])
        .replace("args =", &format!("log_max_bytes = {BOUND}\nargs ="));
    let hub = ModuleHub::start(&config);
    let client = hub.client().await;
    // The module floods before it registers and says so after: once that
    // line is in the log, all of the flood went through the hub.
    let service = module_service(&client, "flood", None).await;
    hub.wait_logged("flood", &format!("registered {}", service.service_id))
        .await;
    let current = std::fs::metadata(hub.log_path("flood")).unwrap().len();
    let rotated = std::fs::metadata(hub.dir().join("modules/flood.log.1"))
        .unwrap()
        .len();
    assert!(current <= BOUND, "flood.log is {current} bytes");
    assert_eq!(rotated, BOUND, "flood.log.1 holds one full log");
    let entries = std::fs::read_dir(hub.dir().join("modules"))
        .unwrap()
        .count();
    assert_eq!(entries, 2, "only flood.log and flood.log.1");
    // 64 MiB went through; the hub holds one 16 KiB buffer for it.
    let rss = rss_kib(hub.hub.pid());
    assert!(rss < 48 * 1024, "the hub's resident memory is {rss} KiB");
    client.close();
}

#[tokio::test]
async fn an_mcp_server_module_publishes_its_tools_under_the_module_principal() {
    let config = format!(
        "[modules.fs]\nmcp = [{}]\n",
        toml_string(&test_server_bin().to_string_lossy())
    );
    let hub = ModuleHub::start(&config);
    let client = hub.client().await;
    let catalog = client.catalog().await.unwrap();
    eventually("the fs tool provider in the catalog", || {
        catalog
            .services()
            .iter()
            .any(|s| s.metadata["namespace"] == "fs" && s.principal == Principal::reserved("fs"))
    })
    .await;
    let status = wait_module(&client, "fs", "runs", |m| m.services == 1).await;
    assert!(
        status
            .command
            .starts_with("switchboard provide-mcp --namespace fs -- "),
        "{status:?}"
    );
    client.close();
}

#[tokio::test]
async fn logs_follow_prints_what_a_module_writes_next() {
    let hub = ModuleHub::start(&module_section("alpha", &[]));
    let client = hub.client().await;
    module_service(&client, "alpha", None).await;
    let mut follow = Live::start(&["modules", "logs", "alpha", "-f", "--dir", hub.dir_arg()]);
    loop {
        if follow.line().await.starts_with("registered ") {
            break;
        }
    }
    let restarted = switchboard(&["modules", "restart", "alpha", "--dir", hub.dir_arg()]).await;
    restarted.ok();
    loop {
        if follow.line().await.starts_with("registered ") {
            break; // the new run's line
        }
    }
    follow.terminate().await;
    let missing = switchboard(&["modules", "logs", "ghost", "--dir", hub.dir_arg()]).await;
    assert_eq!(missing.code(), 1);
    assert!(
        missing.stderr.contains("no log for module \"ghost\""),
        "{missing:?}"
    );
    client.close();
}

#[test]
fn bad_module_configs_are_refused_with_their_line() {
    let root = tempfile::tempdir().unwrap();
    let module = test_module();
    let command = toml_string(&module.to_string_lossy());
    for (text, line, what) in [
        (
            format!("[modules.a]\ncommand = {command}\n\n[modules.a]\ncommand = {command}\n"),
            4,
            "duplicate key",
        ),
        (
            "[hub]\n\n[modules.a]\ncommand = \"\"\n".to_owned(),
            4,
            "command is empty",
        ),
        (
            format!("[modules.a]\ncommand = {command}\nrestrat = \"always\"\n"),
            3,
            "unknown field `restrat`",
        ),
        (
            format!("[modules.a]\ncommand = {command}\nrestart = \"sometimes\"\n"),
            3,
            "unknown variant `sometimes`",
        ),
        (
            format!("[principals.a]\ntoken = \"a-token-0123456789\"\n[modules.a]\ncommand = {command}\n"),
            0,
            "a module has this name too",
        ),
    ] {
        let path = root.path().join("bad.toml");
        std::fs::write(&path, &text).unwrap();
        let dir = root.path().join("hub");
        let run = run(&[
            "serve",
            "--dir",
            dir.to_str().unwrap(),
            "--no-ws",
            "--config",
            path.to_str().unwrap(),
        ]);
        assert_eq!(run.code(), 1, "{text}: {run:?}");
        assert!(run.stderr.contains(what), "{text}: {}", run.stderr);
        if line > 0 {
            assert!(
                run.stderr.contains(&format!("line {line}")),
                "{text}: {}",
                run.stderr
            );
        }
        assert_eq!(run.stderr.lines().count(), 1, "one line: {}", run.stderr);
        assert!(!dir.join("hub.json").exists());
    }
}

#[test]
fn service_install_writes_a_unit_that_systemd_verifies() {
    let root = tempfile::tempdir().unwrap();
    let config_home = root.path().join("config");
    let config = root.path().join("my config.toml");
    std::fs::write(&config, "").unwrap();
    let with_env = |args: &[&str]| {
        std::process::Command::new(switchboard_testkit::switchboard_binary())
            .args(args)
            .env("XDG_CONFIG_HOME", &config_home)
            .output()
            .expect("run switchboard service")
    };

    let printed = with_env(&[
        "service",
        "install",
        "--print",
        "--config",
        config.to_str().unwrap(),
    ]);
    assert!(printed.status.success(), "{printed:?}");
    let unit = String::from_utf8(printed.stdout).unwrap();
    let binary = switchboard_testkit::switchboard_binary();
    let binary = binary.canonicalize().unwrap();
    assert!(
        unit.contains(&format!(
            "ExecStart={} serve --config \"{}\"",
            binary.display(),
            config.display()
        )),
        "{unit}"
    );
    assert!(unit.contains("Restart=on-failure"), "{unit}");
    assert!(unit.contains("WantedBy=default.target"), "{unit}");
    assert!(!config_home.exists(), "--print writes nothing");

    // systemd reads it without a complaint.
    let file = root.path().join("switchboard.service");
    std::fs::write(&file, &unit).unwrap();
    let runtime = root.path().join("runtime");
    std::fs::create_dir(&runtime).unwrap();
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
    match std::process::Command::new("systemd-analyze")
        .args(["--user", "verify"])
        .arg(&file)
        .env("XDG_RUNTIME_DIR", &runtime)
        .output()
    {
        Ok(verified) => {
            let stderr = String::from_utf8_lossy(&verified.stderr);
            assert!(
                verified.status.success(),
                "systemd-analyze verify: {stderr}\n{unit}"
            );
            assert!(
                stderr.trim().is_empty(),
                "systemd-analyze verify: {stderr}\n{unit}"
            );
        }
        Err(error) => eprintln!(
            "systemd-analyze cannot run here ({error}): the unit's syntax is not verified"
        ),
    }

    // install writes the same unit where systemd looks; uninstall removes it.
    let installed = with_env(&["service", "install", "--config", config.to_str().unwrap()]);
    assert!(installed.status.success(), "{installed:?}");
    let path = config_home.join("systemd/user/switchboard.service");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), unit);
    let stdout = String::from_utf8(installed.stdout).unwrap();
    assert!(
        stdout.starts_with(&format!("# {}\n", path.display())),
        "{stdout}"
    );
    assert!(String::from_utf8_lossy(&installed.stderr).contains("systemctl --user enable --now"));
    let removed = with_env(&["service", "uninstall"]);
    assert!(removed.status.success(), "{removed:?}");
    assert!(!path.exists());
    let again = with_env(&["service", "uninstall"]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("no unit to remove"));
}
