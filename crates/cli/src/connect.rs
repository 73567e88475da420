//! Where a command finds the hub (`--dir`, or `--url` for a hub on another
//! machine) and how it connects to it through the SDK.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context};
use switchboard_client::{Client, ConnectOptions, Endpoint, Error};
use switchboard_discovery as dir;

/// `--dir`, shared by every command that talks to a hub.
#[derive(clap::Args, Debug, Clone)]
pub struct DirArgs {
    /// Hub directory (default: $SWITCHBOARD_DIR, else $XDG_RUNTIME_DIR/switchboard,
    /// else /tmp/switchboard-<uid>).
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// Where the hub is, for every command that talks to one: this machine's
/// hub by its directory, or any hub by URL with a named principal's token.
#[derive(clap::Args, Debug, Clone)]
pub struct HubArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    /// A hub on another machine: the URL of its remote listener
    /// (wss://HOST:PORT/, see `serve --remote`); needs --token-file.
    #[arg(long, env = "SWITCHBOARD_URL", value_name = "URL")]
    pub url: Option<String>,
    /// Connect as the named principal whose token this file holds (`switchboard
    /// token new` writes one), instead of with the hub's own token.
    #[arg(long, env = "SWITCHBOARD_TOKEN_FILE", value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// With a wss:// --url: trust only the certificates in this PEM file (a
    /// private CA, or the hub's own self-signed certificate) instead of the
    /// system's roots.
    #[arg(long, env = "SWITCHBOARD_CA_CERT", value_name = "FILE")]
    pub ca_cert: Option<PathBuf>,
}

impl HubArgs {
    /// These flags, with those given at `other`'s level where these have
    /// none (`--dir` before or after a subcommand).
    pub fn or(self, other: &HubArgs) -> HubArgs {
        HubArgs {
            dir: DirArgs {
                dir: self.dir.dir.or_else(|| other.dir.dir.clone()),
            },
            url: self.url.or_else(|| other.url.clone()),
            token_file: self.token_file.or_else(|| other.token_file.clone()),
            ca_cert: self.ca_cert.or_else(|| other.ca_cert.clone()),
        }
    }

    /// The hub directory `--dir` (or the default rule) names, absolute.
    pub fn hub_dir(&self) -> PathBuf {
        hub_dir(&self.dir)
    }

    /// Fails for `--url` and `--token-file`: `what` works only for the hub's
    /// own user, on the hub's machine (it reads the hub directory, or the
    /// hub keeps it to its `direct` principal).
    pub fn local_only(&self, what: &str) -> anyhow::Result<()> {
        if let Some(url) = &self.url {
            bail!(
                "{what} works only on the hub's own machine, for the user who runs it; \
                 {url} is reached as a named principal (drop --url, or run it there)"
            );
        }
        if self.token_file.is_some() {
            bail!(
                "{what} is for the hub's own user (its own token); drop --token-file \
                 to use the token in the hub directory"
            );
        }
        Ok(())
    }

    /// How to reach the hub, and a name for it in messages.
    pub fn endpoint(&self) -> anyhow::Result<(Endpoint, String)> {
        let token = self.token_file.as_deref().map(read_token).transpose()?;
        match (&self.url, token) {
            (Some(url), Some(token)) => {
                if !(url.starts_with("wss://") || url.starts_with("ws://")) {
                    bail!("--url {url:?} is not a WebSocket URL: write wss://HOST:PORT/");
                }
                let endpoint = Endpoint::WebSocket {
                    url: url.clone(),
                    token: Some(token),
                    ca_cert: self.ca_cert.clone(),
                };
                Ok((endpoint, url.clone()))
            }
            (Some(url), None) => bail!(
                "--url {url} needs --token-file FILE: a named principal's token (the hub's \
                 own token never leaves its machine; `switchboard token new NAME` makes one)"
            ),
            (None, Some(token)) => {
                // A named principal on this machine's hub: its socket, this token.
                let dir = self.hub_dir();
                let info = dir::read_info(&dir)
                    .map_err(|error| anyhow!("no hub is running on {}: {error}", dir.display()))?;
                let endpoint = Endpoint::Unix {
                    path: info.socket,
                    token: Some(token),
                };
                Ok((endpoint, dir.display().to_string()))
            }
            (None, None) => {
                let dir = self.hub_dir();
                Ok((Endpoint::Dir(Some(dir.clone())), dir.display().to_string()))
            }
        }
    }
}

/// The hub directory `--dir` (or the default rule, as a client applies
/// it: `client_hub_dir`) names, absolute. `serve` applies the rule itself.
pub fn hub_dir(args: &DirArgs) -> PathBuf {
    dir::client_hub_dir(args.dir.as_deref())
}

/// A token file's token: its text without surrounding white space.
pub fn read_token(path: &Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the token file {}", path.display()))?;
    let token = text.trim();
    if token.is_empty() {
        bail!("the token file {} is empty", path.display());
    }
    Ok(token.to_owned())
}

/// Connects as `--url`/`--token-file`/`--dir` say (the `direct` token from
/// `hub.json` by default); `command` names the connection in the hub's logs.
pub async fn connect(args: &HubArgs, command: &str) -> anyhow::Result<Client> {
    let (endpoint, place) = args.endpoint()?;
    let remote = args.url.is_some();
    let options = ConnectOptions {
        endpoint,
        client_name: format!("switchboard {command}"),
    };
    Client::connect_with(options)
        .await
        .map_err(|error| match error {
            Error::Discovery(why) => anyhow!("no hub is running on {place}: {why}"),
            Error::Connect { .. } if !remote => anyhow!(
                "no hub is running on {place} (hub.json is left over, or the hub is stopping): {error}"
            ),
            Error::Rpc(refused) if refused.code == switchboard_client::protocol::ErrorCode::AuthRequired.code() => {
                anyhow!("the hub at {place} refused the token: {}", refused.message)
            }
            other => anyhow!("cannot talk to the hub at {place}: {other}"),
        })
}
