//! Server processes the harness starts, and CPU placement. (The descriptor
//! limit is raised by `switchboard_testkit::procfs`.)
//!
//! Every child is recorded in one list so that a signal to the harness (or
//! the harness dying: `PR_SET_PDEATHSIG`) stops them all; each is stopped
//! by its own PID, SIGTERM first, SIGKILL if it does not exit in time.

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use parking_lot::Mutex;

/// PIDs of the children alive now.
static CHILDREN: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// Pins the calling thread to `cpu`; threads it starts afterwards inherit it,
/// so call it before building the async runtime.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    set_affinity(cpu)
}

fn set_affinity(cpu: usize) -> io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET writes inside it
    // (cpu is checked against CPU_SETSIZE by the caller's `usize` bound below).
    unsafe {
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "CPU out of range",
            ));
        }
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// CPUs this process may run on.
pub fn allowed_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// A child process the harness started; stopped when dropped.
pub struct ServerProcess {
    name: String,
    child: Child,
    log: PathBuf,
    stopped: bool,
}

impl ServerProcess {
    /// Starts `program args…` with its output in `log`, on `cpu` if given.
    pub fn spawn(
        name: &str,
        program: &Path,
        args: &[&OsStr],
        cpu: Option<usize>,
        log: &Path,
    ) -> anyhow::Result<Self> {
        let out = File::create(log).with_context(|| format!("cannot create {}", log.display()))?;
        let err = out.try_clone()?;
        let mut command = Command::new(program);
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        // SAFETY: the closure runs between fork and exec and makes only
        // async-signal-safe system calls (prctl, sched_setaffinity).
        unsafe {
            command.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
                if let Some(cpu) = cpu {
                    set_affinity(cpu)?;
                }
                Ok(())
            });
        }
        let child = command
            .spawn()
            .with_context(|| format!("cannot start {name} ({})", program.display()))?;
        CHILDREN.lock().push(child.id());
        Ok(ServerProcess {
            name: name.to_owned(),
            child,
            log: log.to_owned(),
            stopped: false,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Fails if the process has exited (with the end of its log).
    pub fn check_alive(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!(
                "{} exited early ({status}); its log ends with:\n{}",
                self.name,
                self.log_tail()
            );
        }
        Ok(())
    }

    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// SIGTERM, then SIGKILL after `grace`; waits for the exit.
    pub fn stop(&mut self, grace: Duration) -> io::Result<ExitStatus> {
        self.stopped = true;
        let pid = self.child.id();
        if let Some(status) = self.child.try_wait()? {
            forget(pid);
            return Ok(status);
        }
        signal(pid, libc::SIGTERM);
        let deadline = Instant::now() + grace;
        loop {
            if let Some(status) = self.child.try_wait()? {
                forget(pid);
                return Ok(status);
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let status = self.child.wait();
                forget(pid);
                return status;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if !self.stopped {
            let _ = self.stop(Duration::from_secs(5));
        }
    }
}

fn forget(pid: u32) {
    CHILDREN.lock().retain(|&p| p != pid);
}

fn signal(pid: u32, signal: libc::c_int) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        // SAFETY: kill with a PID this process started and has not reaped.
        unsafe {
            libc::kill(pid, signal);
        }
    }
}

/// Kills every child still alive, by PID (on a signal to the harness).
pub fn kill_children() {
    for pid in CHILDREN.lock().drain(..) {
        signal(pid, libc::SIGKILL);
    }
}

/// Polls `ready` every 10 ms until it says yes, the process dies, or
/// `timeout` passes.
pub async fn wait_until(
    process: &mut ServerProcess,
    timeout: Duration,
    what: &str,
    mut ready: impl FnMut() -> bool,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        if ready() {
            return Ok(());
        }
        process.check_alive()?;
        if Instant::now() >= deadline {
            bail!(
                "{} was not {what} within {timeout:?}; its log ends with:\n{}",
                process.name,
                process.log_tail()
            );
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
