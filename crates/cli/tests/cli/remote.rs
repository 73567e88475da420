//! `switchboard serve --remote` (hub-protocol.md section 12): the flags,
//! and `hub.json` naming the listener. What a remote client may do is
//! tested in-process in `crates/hub/tests/hub/ahp.rs`.

use crate::support::tls::LocalhostCertificate;
use crate::support::*;
use serde_json::Value;

#[test]
fn remote_without_both_certificate_files_refuses_to_start_with_a_clear_error() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("hub");
    let dir = dir.to_str().unwrap();
    let cert = root.path().join("cert.pem");
    let cert = cert.to_str().unwrap();
    for (args, says) in [
        (
            vec!["--remote", "127.0.0.1:0"],
            "--remote needs both --tls-cert FILE and --tls-key FILE",
        ),
        (
            vec!["--remote", "127.0.0.1:0", "--tls-cert", cert],
            "--remote needs both --tls-cert FILE and --tls-key FILE",
        ),
        (
            vec!["--tls-cert", cert, "--tls-key", cert],
            "add --remote ADDR",
        ),
    ] {
        let mut command = vec!["serve", "--dir", dir];
        command.extend(&args);
        let outcome = run(&command);
        assert!(!outcome.status.success(), "{args:?} started");
        assert!(
            outcome.stderr.contains(says),
            "{args:?}: {}",
            outcome.stderr
        );
        assert!(!root.path().join("hub/hub.json").exists(), "{args:?}");
    }
    // Files that are not a certificate and a key: named in the error.
    std::fs::write(root.path().join("cert.pem"), "not a certificate\n").unwrap();
    let outcome = run(&[
        "serve",
        "--dir",
        dir,
        "--remote",
        "127.0.0.1:0",
        "--tls-cert",
        cert,
        "--tls-key",
        cert,
    ]);
    assert!(!outcome.status.success());
    assert!(outcome.stderr.contains("cert.pem"), "{}", outcome.stderr);
}

#[test]
fn hub_json_names_the_remote_listener_when_it_is_on() {
    let root = tempfile::tempdir().unwrap();
    let certificate = LocalhostCertificate::write(root.path());
    let hub = certificate
        .remote(HubProcess::builder().dir(root.path().join("hub")))
        .start();
    let info: Value =
        serde_json::from_str(&std::fs::read_to_string(hub.dir().join("hub.json")).unwrap())
            .unwrap();
    let remote = info["remote"]
        .as_str()
        .expect("hub.json names the remote listener");
    assert!(
        remote.starts_with("wss://127.0.0.1:") && remote.ends_with('/'),
        "{remote}"
    );
    assert!(info["ws"].as_str().unwrap().starts_with("ws://127.0.0.1:"));
    // Without --remote the member is absent.
    let plain = HubProcess::start();
    let info: Value =
        serde_json::from_str(&std::fs::read_to_string(plain.dir().join("hub.json")).unwrap())
            .unwrap();
    assert!(info.get("remote").is_none(), "{info}");
}
