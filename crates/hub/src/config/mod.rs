//! The TOML config file: principals, grants, origins and limits.
//!
//! ```toml
//! [hub]
//! allowed_origins = ["http://localhost:5173"]   # WebSocket Origin allow-list
//! allow_unverified = false                      # serve connections without a token
//! log_payloads = false                          # payloads in debug logs
//!
//! [limits]                                      # names as in the spec's table
//! maxConnections = 1024
//!
//! [dashboard]                                   # the page under /ui/ (docs/dashboard.md)
//! enabled = true
//! login_code_seconds = 60                       # how long a login code lasts (1 to 600)
//!
//! [principals.explorer]
//! token_file = "tokens/explorer"                # relative to this file; or token = "…"
//!
//! [[grants]]
//! from = "explorer"                             # principal name, "direct",
//! to = "git"                                    # "unverified", "*", or of another
//! allow = ["discover", "request", "notify"]     # hub: "HUB/NAME", "HUB/*"
//!
//! [modules.git]                                 # a module the hub starts and supervises
//! command = "git-sidecar"                       # see `config/modules.rs`
//!
//! [federation]                                  # hubs over NATS (docs/federation.md)
//! nats = "nats://127.0.0.1:4222"
//! name = "laptop"
//! credentials = "laptop.creds"                  # relative to this file
//! tls_ca = "ca.pem"
//! serviceTtlMs = 15000
//!
//! [acp.models.fast]                             # read by `switchboard acp --config`,
//! url = "http://127.0.0.1:11434/v1"             # which checks it; the hub does not
//! model = "qwen2.5-coder:7b"
//! ```
//!
//! Unknown keys are errors, so a typo never silently weakens the policy.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use switchboard_protocol::limits::{Limits, LimitsError};

pub mod modules;

use crate::policy::{Action, Grant, Policy, Selector};
use modules::{ModuleSection, ModuleSpec};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {error}")]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("config file {path} is not valid: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("config file {path}: principal {name:?}: {problem}")]
    Principal {
        path: PathBuf,
        name: String,
        problem: String,
    },
    #[error("config file {path}: grant #{index}: {problem}")]
    Grant {
        path: PathBuf,
        index: usize,
        problem: String,
    },
    #[error("config file {path}: limits: {error}")]
    Limits { path: PathBuf, error: LimitsError },
    #[error("config file {path}, line {line}: module {name:?}: {problem}")]
    Module {
        path: PathBuf,
        name: String,
        line: usize,
        problem: String,
    },
    #[error("config file {path}: [federation]: {problem}")]
    Federation { path: PathBuf, problem: String },
    #[error("the hub was started without --config, so there is no config file to read again (start it with --config FILE to use one)")]
    NoConfigFile,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    hub: HubSection,
    #[serde(default)]
    limits: Option<toml::Table>,
    #[serde(default)]
    dashboard: DashboardSection,
    #[serde(default)]
    principals: BTreeMap<String, PrincipalSection>,
    #[serde(default)]
    grants: Vec<GrantSection>,
    #[serde(default)]
    modules: BTreeMap<String, toml::Spanned<ModuleSection>>,
    federation: Option<FederationSection>,
    /// `switchboard acp`'s section (`crates/acp`, `models.rs`), so one file
    /// can serve both; that command reads and checks it, the hub does not.
    #[serde(default)]
    #[allow(dead_code)]
    acp: Option<toml::Table>,
    /// `[profiles.NAME]`, the MCP gateway's (`switchboard mcp --profile`,
    /// `crates/tools` `consumer/profile.rs`), which reads and checks them;
    /// the hub only checks that a principal's `profile` names one.
    #[serde(default)]
    profiles: Option<toml::Table>,
}

/// `[federation]`, read here so that a typo is an error like anywhere else
/// in the file; the federation crate acts on it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FederationSection {
    /// The NATS server's URL (`nats://`, `tls://`).
    pub nats: Option<String>,
    /// This hub's name in the fabric (`[a-z0-9-]`, 1-64 characters).
    pub name: Option<String>,
    /// A NATS credentials file (JWT and NKey seed); made absolute.
    pub credentials: Option<PathBuf>,
    /// A PEM file of CA certificates to trust for the NATS server's TLS; made absolute.
    pub tls_ca: Option<PathBuf>,
    /// How soon the other hubs forget this hub's services after it
    /// vanishes without a word (`federation.serviceTtlMs`).
    #[serde(rename = "serviceTtlMs")]
    pub service_ttl_ms: Option<u64>,
}

/// The shortest token a principal may have.
pub const MIN_TOKEN_BYTES: usize = 16;

/// A token file's token: its text without surrounding white space. The file
/// must be its owner's alone (a token others can read is theirs too).
fn read_token_file(file: &Path) -> Result<String, String> {
    use std::os::unix::fs::PermissionsExt;
    let metadata = std::fs::metadata(file)
        .map_err(|error| format!("cannot read token_file {}: {error}", file.display()))?;
    let mode = metadata.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(format!(
            "token_file {} is open to other users (mode {mode:03o}): they could read or change it; make it the owner's \
             alone: chmod 600 {}",
            file.display(),
            file.display()
        ));
    }
    let text = std::fs::read_to_string(file)
        .map_err(|error| format!("cannot read token_file {}: {error}", file.display()))?;
    Ok(text.trim().to_owned())
}

/// Whether `name` is a hub name: 1-64 characters `[a-z0-9-]`.
pub fn is_hub_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct HubSection {
    #[serde(default)]
    allowed_origins: Vec<String>,
    #[serde(default)]
    allow_unverified: bool,
    #[serde(default)]
    log_payloads: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DashboardSection {
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default = "default_login_code_seconds")]
    login_code_seconds: u64,
}

impl Default for DashboardSection {
    fn default() -> Self {
        DashboardSection {
            enabled: true,
            login_code_seconds: default_login_code_seconds(),
        }
    }
}

fn yes() -> bool {
    true
}

fn default_login_code_seconds() -> u64 {
    DashboardConfig::default().login_code.as_secs()
}

/// The `[dashboard]` section: whether `/ui/` is served, and how long a
/// one-time login code lasts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DashboardConfig {
    pub enabled: bool,
    pub login_code: std::time::Duration,
}

impl Default for DashboardConfig {
    fn default() -> Self {
        DashboardConfig {
            enabled: true,
            login_code: std::time::Duration::from_secs(60),
        }
    }
}

/// The longest a login code may be configured to last.
const MAX_LOGIN_CODE_SECONDS: u64 = 600;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PrincipalSection {
    token: Option<String>,
    token_file: Option<PathBuf>,
    /// The `[profiles.NAME]` this principal's MCP sessions over HTTP are
    /// held to (the gateway's `/mcp`); it cannot choose another.
    profile: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GrantSection {
    from: String,
    to: String,
    allow: Vec<String>,
}

/// A config file, read and checked; tokens resolved.
#[derive(Debug, Clone, Default)]
pub struct Config {
    pub limits: Limits,
    pub allowed_origins: Vec<String>,
    pub allow_unverified: bool,
    pub log_payloads: bool,
    /// Read at start only (a reload that changes it logs that a restart applies it).
    pub dashboard: DashboardConfig,
    /// `(name, token)`.
    pub principals: Vec<(String, String)>,
    /// `(principal, profile)`: principals bound to a `[profiles.NAME]`.
    pub principal_profiles: Vec<(String, String)>,
    pub grants: Vec<Grant>,
    /// `[modules.NAME]`, by name.
    pub modules: Vec<ModuleSpec>,
    /// `[federation]`, if the file has one (paths made absolute).
    pub federation: Option<FederationSection>,
}

impl Config {
    /// Reads and checks a config file. Relative `token_file` paths are
    /// resolved against the file's directory.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            error: source,
        })?;
        Self::parse(&text, path)
    }

    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let file: File = toml::from_str(text).map_err(|error| ConfigError::Parse {
            path: path.to_owned(),
            message: describe_toml_error(text, &error),
        })?;
        let base = path.parent().unwrap_or(Path::new("."));

        let home = std::env::var_os("HOME").map(PathBuf::from);
        let modules =
            modules::resolve(text, file.modules, base, home.as_deref()).map_err(|error| {
                ConfigError::Module {
                    path: path.to_owned(),
                    name: error.name,
                    line: error.line,
                    problem: error.problem,
                }
            })?;
        let limits = parse_limits(file.limits, path)?;
        limits.validate().map_err(|source| ConfigError::Limits {
            path: path.to_owned(),
            error: source,
        })?;

        let seconds = file.dashboard.login_code_seconds;
        if !(1..=MAX_LOGIN_CODE_SECONDS).contains(&seconds) {
            return Err(ConfigError::Parse {
                path: path.to_owned(),
                message: format!(
                    "[dashboard] login_code_seconds is {seconds}; it must be from 1 to {MAX_LOGIN_CODE_SECONDS}"
                ),
            });
        }
        let dashboard = DashboardConfig {
            enabled: file.dashboard.enabled,
            login_code: std::time::Duration::from_secs(seconds),
        };

        let mut principals = Vec::with_capacity(file.principals.len());
        let mut principal_profiles = Vec::new();
        for (name, section) in file.principals {
            let problem = |problem: &str| ConfigError::Principal {
                path: path.to_owned(),
                name: name.clone(),
                problem: problem.to_owned(),
            };
            if name.is_empty() || name == "*" || name.bytes().any(|b| !(0x21..=0x7e).contains(&b)) {
                return Err(problem(
                    "a principal name is printable ASCII without spaces, and not \"*\"",
                ));
            }
            if local_principal(&name).is_some() {
                return Err(problem(
                    "this is one of the hub's own principals (direct: the token in hub.json; unverified: connections without a token), which grants name without a section; choose another name",
                ));
            }
            let (token, from) = match (section.token, section.token_file) {
                (Some(token), None) => (token, "the token".to_owned()),
                (None, Some(file)) => {
                    let file = base.join(file);
                    (
                        read_token_file(&file).map_err(|why| problem(&why))?,
                        format!("the token in {}", file.display()),
                    )
                }
                _ => return Err(problem("give exactly one of token or token_file")),
            };
            if token.len() < MIN_TOKEN_BYTES {
                return Err(problem(&format!(
                    "{from} is {} bytes; at least {MIN_TOKEN_BYTES} are needed, so that it cannot be guessed \
                     (`switchboard token new {name}` makes one of 32 random bytes)",
                    token.len()
                )));
            }
            if switchboard_protocol::modules::is_launch_credential(&token) {
                return Err(problem(
                    "the token starts like a module's launch credential; choose another",
                ));
            }
            if modules.iter().any(|module| module.name == name) {
                return Err(problem(
                    "a module has this name too; a module's principal is its name, so name them differently",
                ));
            }
            if principals.iter().any(|(_, other)| *other == token) {
                return Err(problem("the token is the same as another principal's"));
            }
            if let Some(profile) = section.profile {
                let known = file
                    .profiles
                    .as_ref()
                    .is_some_and(|p| p.contains_key(&profile));
                if !known {
                    return Err(problem(&format!(
                        "profile = {profile:?} names no [profiles.{profile}] in this file"
                    )));
                }
                principal_profiles.push((name.clone(), profile));
            }
            principals.push((name, token));
        }

        let mut grants = Vec::with_capacity(file.grants.len());
        for (index, grant) in file.grants.into_iter().enumerate() {
            let problem = |problem: String| ConfigError::Grant {
                path: path.to_owned(),
                index: index + 1,
                problem,
            };
            let selector = |name: &str| -> Result<Selector, ConfigError> {
                if name == "*" {
                    Ok(Selector::Any)
                } else if let Some(principal) = local_principal(name) {
                    Ok(Selector::Local(principal))
                } else if principals.iter().any(|(known, _)| known == name)
                    || modules.iter().any(|module| module.name == name)
                {
                    Ok(Selector::named(name))
                } else if let Some(selector) = Selector::on_hub(name) {
                    // A principal of another hub: its name is that hub's to
                    // check, only the form is checked here.
                    match name.split_once('/') {
                        Some((hub, principal)) if is_hub_name(hub) && !principal.is_empty() && !principal.contains('/') => Ok(selector),
                        _ => Err(problem(format!(
                            "{name:?}: a principal of another hub is HUB/NAME or HUB/*, HUB being 1-64 characters a-z, 0-9 or -"
                        ))),
                    }
                } else {
                    Err(problem(format!(
                        "{name:?} is not a principal or module of this file (nor \"direct\", \"unverified\", \"*\", or HUB/NAME of another hub)"
                    )))
                }
            };
            let from = selector(&grant.from)?;
            let to = selector(&grant.to)?;
            let mut actions = Vec::with_capacity(grant.allow.len());
            for name in &grant.allow {
                actions.push(Action::parse(name).ok_or_else(|| {
                    problem(format!(
                        "unknown action {name:?}; use discover, notify or request"
                    ))
                })?);
            }
            grants.push(Grant::new(from, to, &actions));
        }

        let federation = file
            .federation
            .map(|section| check_federation(section, base, path))
            .transpose()?;

        Ok(Config {
            limits,
            allowed_origins: file.hub.allowed_origins,
            allow_unverified: file.hub.allow_unverified,
            log_payloads: file.hub.log_payloads,
            dashboard,
            principals,
            principal_profiles,
            grants,
            modules,
            federation,
        })
    }

    /// The authorization policy of this config around the hub's own token.
    pub fn policy(&self, direct_token: &str) -> Policy {
        Policy::new(
            direct_token,
            self.principals.clone(),
            self.grants.clone(),
            self.allow_unverified,
            self.allowed_origins.clone(),
        )
        .with_profiles(self.principal_profiles.iter().cloned().collect())
    }
}

/// The principals every hub has without a `[principals.NAME]` section:
/// `direct` (the token in `hub.json`) and `unverified` (connections without
/// a token, where `allow_unverified` serves them). Grants name them like any
/// other principal, and no section may take their names.
fn local_principal(name: &str) -> Option<switchboard_protocol::Principal> {
    use switchboard_protocol::Principal;
    match name {
        "direct" => Some(Principal::Direct),
        "unverified" => Some(Principal::Unverified),
        _ => None,
    }
}

/// Checks `[federation]`'s values and makes its paths absolute.
fn check_federation(
    mut section: FederationSection,
    base: &Path,
    path: &Path,
) -> Result<FederationSection, ConfigError> {
    let problem = |problem: String| ConfigError::Federation {
        path: path.to_owned(),
        problem,
    };
    if let Some(name) = &section.name {
        if !is_hub_name(name) {
            return Err(problem(format!(
                "name {name:?} is not a hub name: 1-64 characters a-z, 0-9 or -"
            )));
        }
    }
    if section.service_ttl_ms == Some(0) {
        return Err(problem("serviceTtlMs must be at least 1".into()));
    }
    section.credentials = section.credentials.map(|file| base.join(file));
    section.tls_ca = section.tls_ca.map(|file| base.join(file));
    Ok(section)
}

/// Where the file is wrong and why, without quoting it: toml's own message
/// shows the offending line and serde's shows the offending value, and
/// either may be a token (this text reaches logs and `switchboard reload`).
fn describe_toml_error(text: &str, error: &toml::de::Error) -> String {
    let what = redact_quoted(error.message().trim());
    let Some(before) = error.span().and_then(|span| text.get(..span.start)) else {
        return what;
    };
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    format!("line {line}, column {column}: {what}")
}

/// `message` with each double-quoted part replaced by `"…"`.
fn redact_quoted(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut quoted = false;
    for c in message.chars() {
        if c == '"' {
            out.push_str(if quoted { "\"" } else { "\"…" });
            quoted = !quoted;
        } else if !quoted {
            out.push(c);
        }
    }
    out
}

/// The `[limits]` table: every key must be a limit's name from the spec.
fn parse_limits(table: Option<toml::Table>, path: &Path) -> Result<Limits, ConfigError> {
    let Some(table) = table else {
        return Ok(Limits::default());
    };
    let known = Limits::default().entries().map(|(name, _)| name);
    if let Some(unknown) = table.keys().find(|key| !known.contains(&key.as_str())) {
        return Err(ConfigError::Parse {
            path: path.to_owned(),
            message: format!(
                "unknown limit {unknown:?}; the limits are {}",
                known.join(", ")
            ),
        });
    }
    toml::Value::Table(table)
        .try_into()
        .map_err(|error: toml::de::Error| ConfigError::Parse {
            path: path.to_owned(),
            message: format!("[limits]: {error}"),
        })
}

#[cfg(test)]
mod tests;
