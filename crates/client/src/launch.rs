//! A supervised module's launch credential.
//!
//! A hub that starts a module (`[modules.NAME]` in its config) hands the
//! run a credential through an inherited pipe named by
//! `$SWITCHBOARD_LAUNCH_FD`, and sets `$SWITCHBOARD_DIR` to its directory.
//! The SDK reads the pipe once, closes it, removes the variable (so the
//! module's own children do not look for a descriptor they do not have)
//! and keeps the credential in memory for the life of the process: every
//! [`Client`](crate::Client) that reaches that hub through its directory
//! presents it instead of the `hub.json` token, reconnects included.
//!
//! Call [`init`] first thing in `main`, before any thread starts and
//! before the module starts children of its own: the variable is removed
//! from the environment there, and a child started earlier would inherit
//! the descriptor. [`Client::connect`](crate::Client::connect) calls it too.

use std::fmt;
use std::fs::File;
use std::io::Read;
use std::mem::ManuallyDrop;
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use switchboard_protocol::modules::{
    is_launch_credential, LAUNCH_FD_ENV, MAX_LAUNCH_CREDENTIAL_BYTES,
};

/// The credential of this process's run, and the hub it belongs to.
pub struct LaunchCredential {
    hub_dir: PathBuf,
    secret: String,
}

impl LaunchCredential {
    /// The directory of the hub that started this process.
    pub fn hub_dir(&self) -> &Path {
        &self.hub_dir
    }

    /// The credential itself, as presented in `initialize`'s `authToken`.
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// Whether a client of the hub in `dir` should present it.
    pub(crate) fn is_for(&self, dir: &Path) -> bool {
        dir == self.hub_dir
            || matches!(
                (dir.canonicalize(), self.hub_dir.canonicalize()),
                (Ok(a), Ok(b)) if a == b
            )
    }
}

impl fmt::Debug for LaunchCredential {
    // Never the secret: a Debug print may reach a log.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LaunchCredential")
            .field("hub_dir", &self.hub_dir)
            .finish_non_exhaustive()
    }
}

static CREDENTIAL: OnceLock<Option<LaunchCredential>> = OnceLock::new();

/// Reads the launch credential the first time it is called (later calls
/// return what the first one found). `None` when this process was not
/// started by a hub as a module.
pub fn init() -> Option<&'static LaunchCredential> {
    CREDENTIAL.get_or_init(read_inherited).as_ref()
}

fn read_inherited() -> Option<LaunchCredential> {
    let fd_text = std::env::var(LAUNCH_FD_ENV).ok()?;
    std::env::remove_var(LAUNCH_FD_ENV);
    let Some(fd) = fd_text.parse::<RawFd>().ok().filter(|fd| *fd > 2) else {
        tracing::warn!(value = %fd_text, "{LAUNCH_FD_ENV} is not a descriptor number; ignored");
        return None;
    };
    let hub_dir = std::env::var_os("SWITCHBOARD_DIR").filter(|d| !d.is_empty())?;
    // SAFETY: the descriptor is only looked at through a File that is never
    // dropped, so it is not closed unless it proves to be the hub's pipe.
    let probe = ManuallyDrop::new(unsafe { File::from_raw_fd(fd) });
    let is_pipe = probe
        .metadata()
        .is_ok_and(|meta| meta.file_type().is_fifo());
    if !is_pipe {
        tracing::warn!(
            fd,
            "{LAUNCH_FD_ENV} names a descriptor that is not a pipe; ignored"
        );
        return None;
    }
    // The hub's pipe: ours to read to the end and close.
    let pipe = ManuallyDrop::into_inner(probe);
    let mut secret = String::new();
    let read = pipe
        .take(MAX_LAUNCH_CREDENTIAL_BYTES as u64 + 1)
        .read_to_string(&mut secret);
    if read.is_err()
        || secret.len() > MAX_LAUNCH_CREDENTIAL_BYTES
        || !is_launch_credential(&secret)
        || !secret.bytes().all(|b| b.is_ascii_graphic())
    {
        tracing::warn!("the launch credential pipe did not hold a launch credential; ignored");
        return None;
    }
    Some(LaunchCredential {
        hub_dir: PathBuf::from(hub_dir),
        secret,
    })
}
