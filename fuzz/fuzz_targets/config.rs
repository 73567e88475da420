//! Config files: arbitrary text through `Config::parse` (as `serve` and
//! `reload` read a file), then everything the hub and its add-ons make of
//! a config that parses: the policy (every principal's token authenticates
//! it and no other; `describe` and the grants), a hub state on it (limits,
//! catalog, admission), the modules' command lines, and the federation's
//! options as `serve` builds them, checked by the federation (`join.rs`).
//! Nothing may panic, and an error's text never holds a token the file
//! gave (it reaches logs and `switchboard reload`'s output).
//!
//! The config sits in a directory of its own with a token file `t` (mode
//! 0600), so `token_file = "t"` works. Inputs naming `/dev`, `/proc` or
//! `/sys` are skipped: reading a device or a pipe there can block, as it
//! would for a user who names one.
#![no_main]

use std::sync::LazyLock;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use switchboard_federation::fuzzing::check_options;
use switchboard_federation::FederationOptions;
use switchboard_hub::config::Config;
use switchboard_hub::HubState;
use switchboard_protocol::Principal;

const DIRECT: &str = "fuzz-direct-token-0123456789abcdef";

static DIR: LazyLock<tempfile::TempDir> = LazyLock::new(|| {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let token = dir.path().join("t");
    std::fs::write(&token, "token-file-token-0123456789abcdef\n").expect("the token file");
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).expect("chmod 600");
    dir
});

/// Every string value under `principals.*.token` of `text`, if it is TOML.
fn tokens_in(text: &str) -> Vec<String> {
    let Ok(table) = text.parse::<toml::Table>() else {
        return Vec::new();
    };
    let Some(principals) = table.get("principals").and_then(|p| p.as_table()) else {
        return Vec::new();
    };
    principals
        .values()
        .filter_map(|section| section.get("token")?.as_str().map(str::to_owned))
        .collect()
}

/// Whether `needle` is the text of anything in `text` but a token's value
/// (a key, another value): then an error naming that thing names it, not
/// the token.
fn appears_otherwise(text: &str, needle: &str) -> bool {
    let Ok(table) = text.parse::<toml::Table>() else {
        return true;
    };
    fn walk(value: &toml::Value, needle: &str, under_token: bool) -> bool {
        match value {
            toml::Value::String(s) => !under_token && s.contains(needle),
            toml::Value::Table(table) => table
                .iter()
                .any(|(key, value)| key.contains(needle) || walk(value, needle, key == "token")),
            toml::Value::Array(items) => items.iter().any(|v| walk(v, needle, false)),
            other => other.to_string().contains(needle),
        }
    }
    walk(&toml::Value::Table(table), needle, false)
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if ["/dev", "/proc", "/sys"].iter().any(|p| text.contains(p)) {
        return;
    }
    let path = DIR.path().join("config.toml");
    let config = match Config::parse(text, &path) {
        Ok(config) => config,
        Err(error) => {
            let message = format!("{error:#}");
            for token in tokens_in(text) {
                if token.len() >= 4 && !appears_otherwise(text, &token) {
                    assert!(
                        !message.contains(&token),
                        "a config error quotes a token: {message}"
                    );
                }
            }
            return;
        }
    };

    // The policy: each token names its principal; the direct token, direct.
    let policy = config.policy(DIRECT);
    let direct = policy.authenticate(Some(DIRECT)).expect("the direct token");
    assert_eq!(direct.principal.principal, Principal::Direct);
    for (name, token) in &config.principals {
        let found = policy
            .authenticate(Some(token))
            .unwrap_or_else(|| panic!("principal {name}'s token does not authenticate"));
        assert_eq!(
            found.principal.principal,
            Principal::reserved(name.as_str())
        );
    }
    assert!(policy
        .authenticate(Some("not a token of this config"))
        .is_none());
    let described = policy.describe().to_string();
    for (_, token) in &config.principals {
        if described.contains(token.as_str()) {
            assert!(appears_otherwise(text, token), "describe shows a token");
        }
    }
    let mut principals = vec![Principal::Direct, Principal::Unverified];
    principals.extend(
        config
            .principals
            .iter()
            .map(|(n, _)| Principal::reserved(n.as_str())),
    );
    principals.extend(
        config
            .modules
            .iter()
            .map(|m| Principal::reserved(m.name.as_str())),
    );
    principals.push(Principal::Remote {
        hub: "other".into(),
        principal: Box::new(Principal::Direct),
    });
    for caller in &principals {
        for owner in &principals {
            for action in [
                switchboard_hub::policy::Action::Discover,
                switchboard_hub::policy::Action::Notify,
                switchboard_hub::policy::Action::Request,
            ] {
                let _ = policy.allows(caller, owner, action);
            }
        }
    }
    for origin in &config.allowed_origins {
        assert!(policy.origin_allowed(origin));
    }

    // A hub on it.
    let hub = HubState::new(&config, Some(path), DIRECT.into(), None);
    assert_eq!(hub.bookkeeping(), switchboard_hub::Bookkeeping::default());
    drop(hub);

    // The modules as the supervisor shows and starts them.
    for module in &config.modules {
        let _ = module.program_name();
        let _ = module.command_line();
    }

    // The federation's options, as `serve` builds them from [federation].
    if let Some(section) = &config.federation {
        if let (Some(nats), Some(name)) = (&section.nats, &section.name) {
            let options = FederationOptions {
                nats: nats.clone(),
                name: name.clone(),
                credentials: section.credentials.clone(),
                tls_ca: section.tls_ca.clone(),
                service_ttl: section.service_ttl_ms.map_or(
                    switchboard_federation::DEFAULT_SERVICE_TTL,
                    Duration::from_millis,
                ),
            };
            if let Err(message) = check_options(&options) {
                // The URL's password never shows (`join.rs` redacts it).
                if let Some((_, rest)) = nats.split_once("://") {
                    if let Some((user, host)) = rest.rsplit_once('@') {
                        if let Some((_, password)) = user.split_once(':') {
                            if password.len() >= 4
                                && !host.contains(password)
                                && !name.contains(password)
                                && !format!("{:?}{:?}", options.tls_ca, options.credentials)
                                    .contains(password)
                            {
                                assert!(
                                    !message.contains(password),
                                    "a federation error shows the NATS password: {message}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
});
