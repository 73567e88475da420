//! The hub directory as the hub owns it: created, locked, `hub.json`
//! written. Where it is and how `hub.json` is read are
//! `switchboard-discovery`'s, shared with every client.
//!
//! The hub creates the directory 0700 and refuses one owned by another user. A live hub holds an
//! exclusive `flock` on `<dir>/hub.lock` for its whole life; the kernel drops
//! it when the process dies, however it dies, so a stale socket or `hub.json`
//! left by a crash is recognised as stale by taking the lock.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use switchboard_discovery::{current_uid, read_info};
pub use switchboard_protocol::discovery::{HubInfo, INFO_FILE, SOCKET_FILE};
pub const LOCK_FILE: &str = "hub.lock";

#[derive(Debug, thiserror::Error)]
pub enum DirError {
    #[error("cannot create hub directory {path}: {error}")]
    Create { path: PathBuf, error: io::Error },
    #[error("hub directory {path} is owned by uid {owner}, not by this user (uid {uid}); refusing to use it")]
    NotOwned { path: PathBuf, owner: u32, uid: u32 },
    #[error("another hub is already running on {path}{}", pid.map(|p| format!(" (pid {p})")).unwrap_or_default())]
    AlreadyRunning { path: PathBuf, pid: Option<u32> },
    #[error("{what} {path}: {error}")]
    Io {
        what: &'static str,
        path: PathBuf,
        error: io::Error,
    },
}

/// A hub directory this process owns: created, locked, and cleaned on drop.
#[derive(Debug)]
pub struct HubDir {
    path: PathBuf,
    // Held open for the process's life: closing it drops the flock.
    _lock: File,
    wrote_info: bool,
}

impl HubDir {
    /// Creates (0700) and locks the directory, and removes a stale socket.
    pub fn acquire(path: PathBuf) -> Result<Self, DirError> {
        create_private_dir(&path)?;
        let lock_path = path.join(LOCK_FILE);
        let lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&lock_path)
            .map_err(|source| DirError::Io {
                what: "cannot open lock file",
                path: lock_path.clone(),
                error: source,
            })?;
        // SAFETY: flock on an fd we own; no memory is involved.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let error = io::Error::last_os_error();
            if error.raw_os_error() == Some(libc::EWOULDBLOCK) {
                let pid = read_info(&path).ok().map(|info| info.pid);
                return Err(DirError::AlreadyRunning { path, pid });
            }
            return Err(DirError::Io {
                what: "cannot lock",
                path: lock_path,
                error,
            });
        }
        // We hold the lock, so any socket here belongs to a hub that is gone.
        let socket = path.join(SOCKET_FILE);
        match fs::remove_file(&socket) {
            Ok(()) => tracing::info!(socket = %socket.display(), "removed a stale socket"),
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(DirError::Io {
                    what: "cannot remove stale socket",
                    path: socket,
                    error: source,
                })
            }
        }
        Ok(HubDir {
            path,
            _lock: lock,
            wrote_info: false,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn socket_path(&self) -> PathBuf {
        self.path.join(SOCKET_FILE)
    }

    /// Writes `hub.json` atomically (0600 temp file, fsync, rename).
    pub fn write_info(&mut self, info: &HubInfo) -> Result<(), DirError> {
        let path = self.path.join(INFO_FILE);
        let json = serde_json::to_vec(info).expect("HubInfo serializes");
        write_private(&path, &json).map_err(|error| DirError::Io {
            what: "cannot write",
            path: path.clone(),
            error,
        })?;
        self.wrote_info = true;
        Ok(())
    }

    /// Removes `hub.json` and the socket; the lock goes when `self` drops.
    pub fn clean_up(&mut self) {
        if self.wrote_info {
            let _ = fs::remove_file(self.path.join(INFO_FILE));
            self.wrote_info = false;
        }
        let _ = fs::remove_file(self.socket_path());
    }
}

impl Drop for HubDir {
    fn drop(&mut self) {
        self.clean_up();
    }
}

/// Writes `bytes` to `path` readable by its owner alone, whatever the
/// umask, atomically: into a 0600 temporary file beside it, synced, then
/// renamed over it, so a reader never sees half a file and a crash never
/// loses the old one. For the private files under the hub directory
/// (`hub.json`, a module's OAuth credentials).
pub fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(format!(".{}.tmp", std::process::id()));
    let temporary = PathBuf::from(temporary);
    let written = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&temporary)?;
        // The mode above is filtered by the umask (and an old file keeps
        // its own): set it exactly.
        file.set_permissions(fs::Permissions::from_mode(0o600))?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&temporary, path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&temporary);
    }
    written
}

fn create_private_dir(path: &Path) -> Result<(), DirError> {
    match fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
    {
        Ok(()) => {}
        Err(source) => {
            return Err(DirError::Create {
                path: path.to_owned(),
                error: source,
            })
        }
    }
    let meta = fs::metadata(path).map_err(|source| DirError::Create {
        path: path.to_owned(),
        error: source,
    })?;
    let uid = current_uid();
    if meta.uid() != uid {
        return Err(DirError::NotOwned {
            path: path.to_owned(),
            owner: meta.uid(),
            uid,
        });
    }
    // `recursive` creation and the umask may leave other bits; the hub
    // directory holds the token, so it is private whatever made it.
    if meta.mode() & 0o777 != 0o700 {
        fs::set_permissions(path, fs::Permissions::from_mode(0o700)).map_err(|source| {
            DirError::Io {
                what: "cannot chmod 0700",
                path: path.to_owned(),
                error: source,
            }
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_acquire_is_refused_and_stale_socket_removed() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("hub");
        let mut first = HubDir::acquire(dir.clone()).unwrap();
        let mode = fs::metadata(&dir).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700);
        first
            .write_info(&HubInfo {
                version: 1,
                pid: 42,
                socket: first.socket_path(),
                ws: None,
                remote: None,
                mcp_url: None,
                token: "t".into(),
                federation: None,
            })
            .unwrap();
        let mode = fs::metadata(dir.join(INFO_FILE)).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o600);
        match HubDir::acquire(dir.clone()) {
            Err(DirError::AlreadyRunning { pid, .. }) => assert_eq!(pid, Some(42)),
            other => panic!("expected AlreadyRunning, got {other:?}"),
        }
        drop(first);
        assert!(!dir.join(INFO_FILE).exists());
        fs::write(dir.join(SOCKET_FILE), b"stale").unwrap();
        // A flock belongs to the open file, and a process another test of
        // this binary forks holds a copy of every descriptor until its
        // exec closes them (CLOEXEC): for that moment the lock outlives
        // `first`. Bounded retries ride that window out.
        let mut second = HubDir::acquire(dir.clone());
        for _ in 0..200 {
            if !matches!(second, Err(DirError::AlreadyRunning { .. })) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
            second = HubDir::acquire(dir.clone());
        }
        let _second = second.unwrap();
        assert!(!dir.join(SOCKET_FILE).exists());
    }

    #[test]
    fn a_private_file_replaces_a_loose_one_whole_and_leaves_no_temporary() {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("credentials.json");
        fs::write(&path, b"old").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        write_private(&path, b"new").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"new");
        assert_eq!(fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
        let names: Vec<_> = fs::read_dir(root.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("credentials.json")]);
        // A directory that is not there: an error, nothing left behind.
        let missing = root.path().join("absent/credentials.json");
        assert!(write_private(&missing, b"x").is_err());
    }
}
