//! `switchboard service install|uninstall`: the hub as a systemd user
//! service, started with the user's session and restarted on failure.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

use crate::output::emit;

/// The unit's file name.
const UNIT_NAME: &str = "switchboard.service";

#[derive(clap::Args, Debug)]
#[command(after_help = "\
install writes $XDG_CONFIG_HOME/systemd/user/switchboard.service (default
~/.config/systemd/user) and prints it; it does not run systemctl. Then:
  systemctl --user daemon-reload
  systemctl --user enable --now switchboard.service
The unit runs this very binary (its absolute path) with `serve`, restarts it
on failure, reloads it with `switchboard reload`, and carries the PATH of the
shell that installed it, so modules' commands are found as from that shell.
On macOS, use a launchd agent instead (see the README).")]
pub struct ServiceArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(clap::Subcommand, Debug)]
enum Action {
    /// Write the systemd user unit and print it.
    Install {
        /// Only print the unit; write nothing.
        #[arg(long)]
        print: bool,
        /// The config file `serve` reads (made absolute).
        #[arg(long)]
        config: Option<PathBuf>,
        /// The hub directory (made absolute); default: the directory rule
        /// under systemd ($XDG_RUNTIME_DIR/switchboard).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Remove the unit written by install.
    Uninstall,
}

pub async fn service(args: ServiceArgs) -> anyhow::Result<()> {
    match args.action {
        Action::Install { print, config, dir } => {
            let unit = unit_text(&UnitOptions {
                binary: std::env::current_exe()
                    .context("cannot find the switchboard binary's own path")?,
                config: config.map(absolute).transpose()?,
                dir: dir.map(absolute).transpose()?,
                path: std::env::var_os("PATH").map(|p| p.to_string_lossy().into_owned()),
            })?;
            if print {
                emit(&unit)?;
                return Ok(());
            }
            let path = unit_path()?;
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)
                    .with_context(|| format!("cannot create {}", parent.display()))?;
            }
            std::fs::write(&path, &unit)
                .with_context(|| format!("cannot write {}", path.display()))?;
            emit(&format!("# {}\n{unit}", path.display()))?;
            eprintln!(
                "wrote {}; to start the hub now and with every session:\n  \
                 systemctl --user daemon-reload\n  \
                 systemctl --user enable --now {UNIT_NAME}",
                path.display()
            );
            Ok(())
        }
        Action::Uninstall => {
            let path = unit_path()?;
            match std::fs::remove_file(&path) {
                Ok(()) => {
                    emit(&format!("removed {}\n", path.display()))?;
                    eprintln!(
                        "if it was enabled, also run:\n  \
                         systemctl --user disable --now {UNIT_NAME}\n  \
                         systemctl --user daemon-reload"
                    );
                    Ok(())
                }
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                    bail!("no unit to remove: {} does not exist", path.display())
                }
                Err(error) => {
                    Err(error).with_context(|| format!("cannot remove {}", path.display()))
                }
            }
        }
    }
}

/// `$XDG_CONFIG_HOME/systemd/user/switchboard.service`, `$XDG_CONFIG_HOME`
/// defaulting to `~/.config`.
fn unit_path() -> anyhow::Result<PathBuf> {
    let set = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let config_home = match (set("XDG_CONFIG_HOME"), set("HOME")) {
        (Some(dir), _) => PathBuf::from(dir),
        (None, Some(home)) => Path::new(&home).join(".config"),
        (None, None) => {
            bail!("neither XDG_CONFIG_HOME nor HOME is set: where is the user's config?")
        }
    };
    Ok(config_home.join("systemd/user").join(UNIT_NAME))
}

fn absolute(path: PathBuf) -> anyhow::Result<PathBuf> {
    std::path::absolute(&path).with_context(|| format!("cannot make {} absolute", path.display()))
}

/// What the unit is made of.
pub struct UnitOptions {
    pub binary: PathBuf,
    pub config: Option<PathBuf>,
    pub dir: Option<PathBuf>,
    pub path: Option<String>,
}

/// The unit file's text.
pub fn unit_text(options: &UnitOptions) -> anyhow::Result<String> {
    let binary = exec_word(&options.binary.to_string_lossy())?;
    let mut dir_args = String::new();
    if let Some(dir) = &options.dir {
        dir_args = format!(" --dir {}", exec_word(&dir.to_string_lossy())?);
    }
    let mut serve_args = dir_args.clone();
    if let Some(config) = &options.config {
        serve_args.push_str(&format!(
            " --config {}",
            exec_word(&config.to_string_lossy())?
        ));
    }
    let environment = match &options.path {
        Some(path) => format!("Environment={}\n", env_assignment("PATH", path)?),
        None => String::new(),
    };
    Ok(format!(
        "# Written by `switchboard service install`; `switchboard service uninstall` removes it.
[Unit]
Description=Switchboard: the per-user hub for AI-agent tooling

[Service]
Type=exec
ExecStart={binary} serve{serve_args}
ExecReload={binary} reload{dir_args}
{environment}Restart=on-failure
RestartSec=2
# SIGTERM to the hub alone: it stops its modules itself (SIGTERM, then
# SIGKILL after 5 s), then its connections; systemd kills what is left.
KillMode=mixed
TimeoutStopSec=30

[Install]
WantedBy=default.target
"
    ))
}

/// One word of an `Exec*=` line: `%` and `$` escaped (systemd expands
/// both), double-quoted when it holds anything but plain path characters.
fn exec_word(word: &str) -> anyhow::Result<String> {
    let escaped = escape_common(word)?.replace('$', "$$");
    Ok(quote_if_needed(&escaped))
}

/// `NAME=VALUE` for `Environment=`, quoted as one assignment.
fn env_assignment(name: &str, value: &str) -> anyhow::Result<String> {
    let escaped = escape_common(&format!("{name}={value}"))?;
    Ok(quote_if_needed(&escaped))
}

fn escape_common(text: &str) -> anyhow::Result<String> {
    if text.chars().any(|c| c == '\n' || c == '\r' || c == '\0') {
        bail!("{text:?} has a line break or NUL, which a unit file cannot hold");
    }
    Ok(text.replace('%', "%%"))
}

fn quote_if_needed(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/_.:=@+,-%$".contains(&b));
    if plain {
        text.to_owned()
    } else {
        format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unit_runs_this_binary_and_quotes_what_needs_it() {
        let unit = unit_text(&UnitOptions {
            binary: "/opt/sb/bin/switchboard".into(),
            config: Some("/home/u/my config/100%.toml".into()),
            dir: None,
            path: Some("/usr/bin:/home/u/.cargo/bin".into()),
        })
        .unwrap();
        assert!(
            unit.contains(
                "ExecStart=/opt/sb/bin/switchboard serve --config \"/home/u/my config/100%%.toml\"\n"
            ),
            "{unit}"
        );
        assert!(
            unit.contains("ExecReload=/opt/sb/bin/switchboard reload\n"),
            "{unit}"
        );
        assert!(
            unit.contains("Environment=PATH=/usr/bin:/home/u/.cargo/bin\n"),
            "{unit}"
        );
        assert!(unit.contains("Restart=on-failure\n"), "{unit}");
        assert!(unit.contains("WantedBy=default.target\n"), "{unit}");
    }

    #[test]
    fn dollars_quotes_and_line_breaks() {
        assert_eq!(exec_word("/a/$HOME").unwrap(), "/a/$$HOME");
        assert_eq!(exec_word("/a \"b\"").unwrap(), "\"/a \\\"b\\\"\"");
        assert!(exec_word("/a\nb").is_err());
        assert_eq!(
            env_assignment("PATH", "/a b:/c").unwrap(),
            "\"PATH=/a b:/c\""
        );
    }
}
