//! A module's stdout and stderr, in a bounded, rotating file:
//! `<hub dir>/modules/NAME.log`, moved to `NAME.log.1` (replacing it) when
//! the next write would take it past `log_max_bytes`. The two files hold at
//! most twice the bound, and the hub holds one fixed buffer per module run
//! however fast the module writes: a module that writes faster than the
//! disk takes it waits on its pipe.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

/// One read from the pipe at most.
const PUMP_CHUNK: usize = 16 * 1024;

/// The log of one module. Shared by the run's pump thread and the
/// supervisor (its start and exit notes); each write takes the lock once.
pub struct ModuleLog {
    path: PathBuf,
    max_bytes: u64,
    file: Mutex<Option<Open>>,
    /// The last line the run wrote (at most [`LAST_LINE_BYTES`]): where
    /// `switchboard` itself says why it ended.
    last_line: Mutex<String>,
}

/// The most of a module's last line kept for its status.
const LAST_LINE_BYTES: usize = 512;

struct Open {
    file: File,
    size: u64,
}

impl ModuleLog {
    pub fn new(path: PathBuf, max_bytes: u64) -> Arc<Self> {
        Arc::new(ModuleLog {
            path,
            max_bytes,
            file: Mutex::new(None),
            last_line: Mutex::new(String::new()),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The rotated file beside the log.
    pub fn rotated_path(&self) -> PathBuf {
        let mut name = self.path.as_os_str().to_owned();
        name.push(".1");
        PathBuf::from(name)
    }

    /// A line from the hub itself (`[switchboard] started pid 42`).
    pub fn note(&self, text: &str) {
        self.write(format!("[switchboard] {text}\n").as_bytes());
    }

    /// Appends `bytes`, rotating as often as needed to stay within the
    /// bound. A write that fails is dropped after one warning per failure
    /// streak: a full disk must not stop the module or the hub.
    pub fn write(&self, mut bytes: &[u8]) {
        let mut guard = self.file.lock();
        while !bytes.is_empty() {
            let open = match guard.as_mut() {
                Some(open) => open,
                None => match self.open() {
                    Ok(open) => guard.insert(open),
                    Err(error) => {
                        tracing::warn!(log = %self.path.display(), %error, "cannot write a module's log");
                        return;
                    }
                },
            };
            if open.size >= self.max_bytes {
                *guard = None;
                if let Err(error) = std::fs::rename(&self.path, self.rotated_path()) {
                    tracing::warn!(log = %self.path.display(), %error, "cannot rotate a module's log");
                    let _ = std::fs::remove_file(&self.path);
                }
                continue;
            }
            let room = usize::try_from(self.max_bytes - open.size).unwrap_or(usize::MAX);
            let (now, later) = bytes.split_at(room.min(bytes.len()));
            if let Err(error) = open.file.write_all(now) {
                tracing::warn!(log = %self.path.display(), %error, "cannot write a module's log");
                *guard = None;
                return;
            }
            open.size += now.len() as u64;
            bytes = later;
        }
    }

    fn open(&self) -> io::Result<Open> {
        // Private like the hub directory: a module may log what it handles.
        if let Some(parent) = self.path.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)?;
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&self.path)?;
        let size = file.metadata()?.len();
        Ok(Open { file, size })
    }

    /// The last complete line the run wrote, if any.
    pub fn last_line(&self) -> Option<String> {
        let line = self.last_line.lock();
        (!line.is_empty()).then(|| line.clone())
    }

    /// Copies everything the run writes to `pipe` into the log, on a thread
    /// of its own (a blocking read and a file write per chunk; nothing
    /// async waits on it). Ends when every writer of the pipe has closed
    /// it: the run and whatever it left behind; `done` is dropped then.
    pub fn pump(
        self: &Arc<Self>,
        name: &str,
        mut pipe: File,
        done: tokio::sync::oneshot::Sender<()>,
    ) -> io::Result<()> {
        let log = self.clone();
        log.last_line.lock().clear();
        std::thread::Builder::new()
            .name(format!("module-log-{name}"))
            .spawn(move || {
                let _done = done;
                let mut buf = [0u8; PUMP_CHUNK];
                let mut line = Vec::new();
                loop {
                    match pipe.read(&mut buf) {
                        Ok(0) => return,
                        Ok(n) => {
                            log.write(&buf[..n]);
                            log.track_lines(&buf[..n], &mut line);
                        }
                        Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                        Err(_) => return,
                    }
                }
            })
            .map(drop)
    }

    /// Follows `bytes` line by line (`line` is the one not yet ended),
    /// keeping the last non-empty one.
    fn track_lines(&self, bytes: &[u8], line: &mut Vec<u8>) {
        for &byte in bytes {
            if byte == b'\n' {
                let text = String::from_utf8_lossy(line);
                let text = text.trim();
                if !text.is_empty() {
                    let mut end = text.len().min(LAST_LINE_BYTES);
                    while !text.is_char_boundary(end) {
                        end -= 1;
                    }
                    *self.last_line.lock() = text[..end].to_owned();
                }
                line.clear();
            } else if line.len() < LAST_LINE_BYTES * 2 {
                line.push(byte);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotates_at_the_bound_and_keeps_one_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let log = ModuleLog::new(dir.path().join("modules/m.log"), 10);
        log.write(b"0123456");
        log.write(b"789abcdefghij");
        log.write(b"klmnopqrstuvwxyz");
        let current = std::fs::read_to_string(log.path()).unwrap();
        let rotated = std::fs::read_to_string(log.rotated_path()).unwrap();
        assert_eq!(rotated, "klmnopqrst");
        assert_eq!(current, "uvwxyz");
        assert!(current.len() <= 10 && rotated.len() <= 10);
    }

    #[test]
    fn a_new_log_object_continues_an_existing_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.log");
        std::fs::write(&path, b"12345678").unwrap();
        let log = ModuleLog::new(path.clone(), 10);
        log.write(b"abcd");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "cd");
        assert_eq!(
            std::fs::read_to_string(log.rotated_path()).unwrap(),
            "12345678ab"
        );
    }
}
