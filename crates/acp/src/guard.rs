//! The job guard: what makes every process a session starts (jobs, MCP
//! servers) die with the front, even when the front is killed with SIGKILL.
//!
//! The front never runs a job's command itself. It runs its own binary as
//! `switchboard __acp-guard --lifeline FD -- PROGRAM ARGS…` (one guard per
//! job or server), and the guard, a single-threaded process:
//!
//! 1. makes itself a child subreaper (`PR_SET_CHILD_SUBREAPER`): every
//!    process below it whose parent dies is re-parented to it, `setsid`
//!    and double-forked daemons included, so it can always find and kill
//!    them all;
//! 2. starts PROGRAM with the guard's stdin, stdout and stderr (the pipes
//!    the front reads) and `PR_SET_PDEATHSIG(SIGKILL)` (the guard has one
//!    thread, so that really means "when the guard dies");
//! 3. waits, with a `signalfd` and `poll`, for one of:
//!    - every process below it has exited: it exits with PROGRAM's status;
//!    - SIGTERM (the front's `job_kill`, session close, teardown): it kills
//!      every descendant and dies of SIGKILL itself, which is what the
//!      front reports for a killed job;
//!    - end of file on the lifeline: the read end of a pipe whose only
//!      write end the front holds (`CLOEXEC`, so no other process inherits
//!      it). It ends exactly when the front's process ends, however it
//!      ended. The guard kills every descendant and exits.
//!      `PR_SET_PDEATHSIG(SIGHUP)` on the guard is a second trigger; since
//!      it fires when the front's *spawning thread* exits, the guard only
//!      acts on it once the lifeline says the front is gone.
//!
//! What this relies on: Linux (`prctl`, `signalfd`, `/proc`), nothing
//! privileged. A process that leaves the guard's subtree by being
//! re-parented elsewhere cannot exist (the guard is the nearest subreaper);
//! the one way out is SIGKILL of the guard itself, which only its owner
//! (the front) would send.

use std::ffi::OsString;
use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::prctl;
use nix::sys::signal::{kill, SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

/// The hidden subcommand of `switchboard` that runs a guard.
pub const GUARD_SUBCOMMAND: &str = "__acp-guard";

/// How the front starts guarded processes: its own binary, and the read end
/// of the lifeline pipe.
#[derive(Clone)]
pub struct Launcher {
    program: PathBuf,
    lifeline: Arc<Lifeline>,
}

/// The lifeline pipe. The front keeps the write end for its whole life and
/// never writes to it.
struct Lifeline {
    read: OwnedFd,
    _write: OwnedFd,
}

impl std::fmt::Debug for Launcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Launcher")
            .field("program", &self.program)
            .finish_non_exhaustive()
    }
}

impl Launcher {
    /// A launcher running guards as `program __acp-guard`: the `switchboard`
    /// binary itself.
    pub fn new(program: PathBuf) -> std::io::Result<Launcher> {
        // Both ends close on exec: no process the front starts holds the
        // write end, and the read end is handed to guards only (below).
        let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
        Ok(Launcher {
            program,
            lifeline: Arc::new(Lifeline {
                read,
                _write: write,
            }),
        })
    }

    /// A command that runs `program args…` under a guard, in a process
    /// group of its own. Set its stdio, environment and directory as for
    /// `program` itself: the guard passes them on.
    pub fn command(&self, program: impl AsRef<Path>, args: &[OsString]) -> tokio::process::Command {
        let lifeline: RawFd = std::os::fd::AsRawFd::as_raw_fd(&self.lifeline.read);
        let mut command = tokio::process::Command::new(&self.program);
        command
            .arg(GUARD_SUBCOMMAND)
            .arg("--lifeline")
            .arg(lifeline.to_string())
            .arg("--")
            .arg(program.as_ref())
            .args(args)
            .process_group(0)
            .kill_on_drop(false);
        // SAFETY: between fork and exec only async-signal-safe calls are
        // allowed; `fcntl(F_SETFD)` on an fd this process owns is one. It
        // keeps the lifeline's read end open across exec in this child only.
        unsafe {
            command.pre_exec(move || {
                let fd = BorrowedFd::borrow_raw(lifeline);
                rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::empty())?;
                Ok(())
            });
        }
        command
    }
}

/// Asks the guard `pid` to kill everything it runs (SIGTERM). `false` if it
/// is already gone.
pub fn stop(pid: u32) -> bool {
    match i32::try_from(pid) {
        Ok(pid) => kill(Pid::from_raw(pid), Signal::SIGTERM).is_ok(),
        Err(_) => false,
    }
}

/// Runs a guard: `lifeline` is the inherited read end, `command` the
/// program and its arguments. Never returns.
pub fn run(lifeline: RawFd, command: &[OsString]) -> ! {
    match guard(lifeline, command) {
        Ok(end) => end.exit(),
        Err(message) => {
            eprintln!("switchboard {GUARD_SUBCOMMAND}: {message}");
            std::process::exit(127)
        }
    }
}

/// How the guard ends.
enum End {
    /// Everything exited; pass on the program's status.
    Status(WaitStatus),
    /// Killed on request or because the front is gone.
    Killed,
}

impl End {
    fn exit(self) -> ! {
        let signal = match self {
            End::Killed => Signal::SIGKILL,
            End::Status(WaitStatus::Exited(_, code)) => std::process::exit(code),
            End::Status(WaitStatus::Signaled(_, signal, _)) => signal,
            End::Status(_) => std::process::exit(1),
        };
        // Die of the same signal, so the front reads the job's own ending.
        let _ = SigSet::all().thread_unblock();
        let _ = unsafe { nix::sys::signal::signal(signal, nix::sys::signal::SigHandler::SigDfl) };
        let _ = kill(Pid::this(), signal);
        std::process::exit(128 + signal as i32)
    }
}

fn guard(lifeline: RawFd, command: &[OsString]) -> Result<End, String> {
    let Some((program, args)) = command.split_first() else {
        return Err("no command to run".into());
    };
    // SAFETY: the front passed this fd number for the inherited read end,
    // which nothing else in this fresh process owns.
    let lifeline = unsafe { OwnedFd::from_raw_fd(lifeline) };
    rustix::io::fcntl_setfd(&lifeline, rustix::io::FdFlags::CLOEXEC)
        .map_err(|error| format!("the lifeline fd is not open: {error}"))?;
    prctl::set_child_subreaper(true).map_err(|e| format!("PR_SET_CHILD_SUBREAPER: {e}"))?;
    prctl::set_pdeathsig(Signal::SIGHUP).map_err(|e| format!("PR_SET_PDEATHSIG: {e}"))?;
    let mut signals = SigSet::empty();
    for signal in [
        Signal::SIGCHLD,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGINT,
    ] {
        signals.add(signal);
    }
    signals
        .thread_block()
        .map_err(|e| format!("cannot block signals: {e}"))?;
    // Non-blocking: the loop below drains every pending signal and then
    // must go back to `poll`, where the lifeline is watched too. A blocking
    // read after the last pending signal would wait for another signal and
    // miss the front's end (a job that had one orphan reaped, then lost its
    // front, kept running).
    let signal_fd = SignalFd::with_flags(&signals, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
        .map_err(|e| format!("signalfd: {e}"))?;
    if front_gone(lifeline.as_fd()) {
        return Ok(End::Killed);
    }

    let mut child = std::process::Command::new(program);
    child.args(args);
    // SAFETY: only async-signal-safe calls between fork and exec: the
    // signal mask and prctl.
    unsafe {
        child.pre_exec(|| {
            SigSet::all()
                .thread_unblock()
                .map_err(std::io::Error::from)?;
            prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)?;
            Ok(())
        });
    }
    let child = child
        .spawn()
        .map_err(|error| format!("cannot start {}: {error}", program.to_string_lossy()))?;
    let child = Pid::from_raw(child.id() as i32);
    // The front reads the pipes until every holder is gone; the guard
    // holds none of them from now on.
    release_stdio();

    let mut status = None;
    loop {
        let mut fds = [
            PollFd::new(signal_fd.as_fd(), PollFlags::POLLIN),
            PollFd::new(lifeline.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(error) => {
                kill_descendants(child, &mut status);
                return Err(format!("poll: {error}"));
            }
        }
        let lifeline_event = fds[1].revents().is_some_and(|r| !r.is_empty());
        if lifeline_event && front_gone(lifeline.as_fd()) {
            kill_descendants(child, &mut status);
            return Ok(End::Killed);
        }
        while let Ok(Some(info)) = signal_fd.read_signal() {
            match Signal::try_from(info.ssi_signo as i32) {
                Ok(Signal::SIGCHLD) => {
                    if reap(child, &mut status) {
                        return Ok(End::Status(status.unwrap_or(WaitStatus::StillAlive)));
                    }
                }
                Ok(Signal::SIGHUP) if !front_gone(lifeline.as_fd()) => {
                    // The front's spawning thread exited, not the front.
                }
                _ => {
                    kill_descendants(child, &mut status);
                    return Ok(End::Killed);
                }
            }
        }
    }
}

/// Whether the front has gone: its lifeline reads end of file.
fn front_gone(lifeline: BorrowedFd<'_>) -> bool {
    let mut fds = [PollFd::new(lifeline, PollFlags::POLLIN)];
    if !matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0) {
        return false;
    }
    let mut byte = [0u8; 1];
    matches!(rustix::io::read(lifeline, &mut byte), Ok(0) | Err(_))
}

/// Points the guard's own stdin, stdout and stderr at /dev/null.
fn release_stdio() {
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        for fd in 0..=2 {
            let _ = redirect(&null, fd);
        }
    }
}

fn redirect(from: &std::fs::File, to: RawFd) -> std::io::Result<()> {
    // SAFETY: `to` is one of this process's standard descriptors, which
    // nothing in the guard uses after this point.
    let mut target = unsafe { OwnedFd::from_raw_fd(to) };
    let result = rustix::io::dup2(from, &mut target);
    // The standard descriptor stays open: it is not ours to close.
    std::mem::forget(target);
    result.map_err(std::io::Error::from)
}

/// Reaps every exited child. `true` once none is left.
fn reap(child: Pid, status: &mut Option<WaitStatus>) -> bool {
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => return false,
            Ok(exited) => {
                if exited.pid() == Some(child) {
                    *status = Some(exited);
                }
            }
            Err(Errno::EINTR) => {}
            Err(_) => return true, // ECHILD: nothing left
        }
    }
}

/// SIGKILLs every process below the guard and reaps them all. Processes
/// forked meanwhile are re-parented to the guard when their parent dies,
/// so each reaped child is followed by a fresh scan.
fn kill_descendants(child: Pid, status: &mut Option<WaitStatus>) {
    let me = Pid::this();
    loop {
        for pid in descendants(me) {
            let _ = kill(pid, Signal::SIGKILL);
        }
        match waitpid(None, None) {
            Ok(exited) => {
                if exited.pid() == Some(child) {
                    *status = Some(exited);
                }
            }
            Err(Errno::EINTR) => {}
            Err(_) => return, // ECHILD: nothing left
        }
    }
}

/// Every process whose chain of parents reaches `root`, from `/proc`.
fn descendants(root: Pid) -> Vec<Pid> {
    let mut parents: Vec<(i32, i32)> = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
                continue;
            };
            if let Some(ppid) = parent_of(pid) {
                parents.push((pid, ppid));
            }
        }
    }
    let mut found = vec![root.as_raw()];
    let mut index = 0;
    while index < found.len() {
        let parent = found[index];
        found.extend(
            parents
                .iter()
                .filter(|(_, ppid)| *ppid == parent)
                .map(|(pid, _)| *pid),
        );
        index += 1;
    }
    found.into_iter().skip(1).map(Pid::from_raw).collect()
}

/// The parent of `pid`, from `/proc/<pid>/stat` (the field after the state,
/// which follows the parenthesised command name).
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descendants_are_found_through_every_generation() {
        let me = std::process::id() as i32;
        assert_eq!(parent_of(me), Some(nix::unistd::getppid().as_raw()));
        // sh → sleep: both are below this process.
        let mut child = std::process::Command::new("/bin/sh")
            .args(["-c", "sleep 30 & echo $!; wait"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
            &mut line,
        )
        .unwrap();
        let grandchild: i32 = line.trim().parse().unwrap();
        let found = descendants(Pid::from_raw(me));
        assert!(found.contains(&Pid::from_raw(child.id() as i32)));
        assert!(found.contains(&Pid::from_raw(grandchild)));
        let _ = kill(Pid::from_raw(grandchild), Signal::SIGKILL);
        child.wait().unwrap();
    }
}
