//! `switchboard token new NAME`: a token for a named principal, in a file
//! only its owner can read, and the config lines that name it.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use base64::Engine;

use crate::output::emit;

/// Random bytes in a token: 256 bits, far past guessing (the hub refuses
/// tokens under 16 bytes).
const TOKEN_BYTES: usize = 32;

#[derive(clap::Args, Debug)]
pub struct TokenArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(clap::Subcommand, Debug)]
enum Action {
    /// Write a new random token for principal NAME to DIR/NAME (mode 0600)
    /// and print the config lines that give it to NAME.
    New {
        /// The principal's name, as in `[principals.NAME]`.
        name: String,
        /// Where the token file goes (default: $XDG_CONFIG_HOME/switchboard/tokens,
        /// else ~/.config/switchboard/tokens).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// Replace an existing token file (the old token stops working at the
        /// hub's next reload).
        #[arg(long)]
        force: bool,
    },
}

pub async fn token(args: TokenArgs) -> anyhow::Result<()> {
    match args.action {
        Action::New { name, dir, force } => new(&name, dir, force),
    }
}

fn new(name: &str, dir: Option<PathBuf>, force: bool) -> anyhow::Result<()> {
    check_name(name)?;
    let dir = match dir {
        Some(dir) => std::path::absolute(&dir).unwrap_or(dir),
        None => default_dir()?,
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .with_context(|| format!("cannot create {}", dir.display()))?;
    let path = dir.join(name);
    let token = new_token()?;
    write_private(&path, &token, force)?;
    emit(&format!(
        "wrote a new token for {name} to {} (mode 0600)\n\
         \n\
         Give it to {name} in the hub's config, then `switchboard reload`:\n\
         \n\
         [principals.{name}]\n\
         token_file = {}\n",
        path.display(),
        toml_string(&path.display().to_string()),
    ))?;
    Ok(())
}

/// A principal name as the config takes it: printable ASCII without spaces,
/// not `*`; here also a plain file name.
fn check_name(name: &str) -> anyhow::Result<()> {
    let printable = !name.is_empty() && name.bytes().all(|b| (0x21..=0x7e).contains(&b));
    if !printable || name == "*" || name.contains('/') || name.starts_with('.') {
        bail!(
            "{name:?} cannot name a principal here: use letters, digits and - _ (no spaces, \
             no /, not starting with a dot)"
        );
    }
    if name == "direct" || name == "unverified" {
        bail!("{name:?} is a principal the hub defines itself; choose another name");
    }
    Ok(())
}

/// `$XDG_CONFIG_HOME/switchboard/tokens`, else `~/.config/switchboard/tokens`.
fn default_dir() -> anyhow::Result<PathBuf> {
    let set = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty());
    let config = match (set("XDG_CONFIG_HOME"), set("HOME")) {
        (Some(config), _) => PathBuf::from(config),
        (None, Some(home)) => Path::new(&home).join(".config"),
        (None, None) => bail!("neither XDG_CONFIG_HOME nor HOME is set: give --dir DIR"),
    };
    Ok(config.join("switchboard").join("tokens"))
}

/// 32 random bytes, base64url without padding (43 characters).
fn new_token() -> anyhow::Result<String> {
    let mut bytes = [0u8; TOKEN_BYTES];
    getrandom::fill(&mut bytes)
        .map_err(|error| anyhow::anyhow!("the system's random generator failed: {error}"))?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

/// Creates `path` readable and writable by its owner alone (never more,
/// whatever the umask), refusing to replace a file unless `force`.
fn write_private(path: &Path, token: &str, force: bool) -> anyhow::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).mode(0o600);
    if force {
        options.create(true).truncate(true);
    } else {
        options.create_new(true);
    }
    let mut file = options.open(path).map_err(|error| {
        if error.kind() == std::io::ErrorKind::AlreadyExists {
            anyhow::anyhow!(
                "{} exists already; --force replaces it (its old token then stops working)",
                path.display()
            )
        } else {
            anyhow::anyhow!("cannot write {}: {error}", path.display())
        }
    })?;
    // An existing file keeps its mode on truncation: make it private too.
    use std::os::unix::fs::PermissionsExt;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("cannot make {} private", path.display()))?;
    file.write_all(format!("{token}\n").as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// A TOML basic string of `text`.
fn toml_string(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_32_random_bytes_in_base64url() {
        let a = new_token().unwrap();
        let b = new_token().unwrap();
        assert_eq!(a.len(), 43);
        assert_ne!(a, b);
        assert!(a
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'));
    }

    #[test]
    fn names_that_cannot_be_a_file_or_a_principal_are_refused() {
        for name in ["", "*", "a b", "../x", ".hidden", "direct", "unverified"] {
            assert!(check_name(name).is_err(), "{name:?}");
        }
        for name in ["explorer", "git-2", "a_b"] {
            assert!(check_name(name).is_ok(), "{name:?}");
        }
    }
}
