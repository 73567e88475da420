//! Starting a module's process and signalling it.
//!
//! Each run is started:
//! - in a process group of its own (its pid is the group's id), so a stop
//!   signals the module and every child it started, in one `killpg`;
//! - with `PR_SET_PDEATHSIG = SIGKILL` (Linux), so it dies if the hub is
//!   killed without a chance to stop it;
//! - with stdin from `/dev/null` and stdout and stderr into one pipe that
//!   `log.rs` copies into the module's log;
//! - with `SWITCHBOARD_DIR` set to the hub directory and the read end of a
//!   second pipe inherited, named by `$SWITCHBOARD_LAUNCH_FD`. The hub
//!   writes the launch credential into that pipe only after the process
//!   started and its credential is in the launch table (`hand_over`), so
//!   the module cannot present it before the hub knows its pid.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::process::Stdio;

use switchboard_protocol::modules::LAUNCH_FD_ENV;
use tokio::process::{Child, Command};

use switchboard_hub::supervise::{ModuleSpec, Program};

/// A started run: the process, the pipe its output comes from, and the
/// pipe its credential goes into.
pub struct Started {
    pub child: Child,
    pub pid: u32,
    pub output: File,
    pub credential: File,
}

/// Starts `spec`'s process. `hub_dir` becomes its `SWITCHBOARD_DIR`.
pub fn start(spec: &ModuleSpec, hub_dir: &Path) -> io::Result<Started> {
    let program = match &spec.program {
        Program::Command(path) => path.clone(),
        Program::Switchboard => std::env::current_exe()?,
    };
    let (output_read, output_write) = pipe()?;
    let (credential_read, credential_write) = pipe()?;
    let launch_fd = credential_read.as_raw_fd();

    let mut command = Command::new(program);
    command
        .args(&spec.args)
        .env("SWITCHBOARD_DIR", hub_dir)
        .env(LAUNCH_FD_ENV, launch_fd.to_string())
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::from(output_write.try_clone()?))
        .stderr(Stdio::from(output_write))
        .process_group(0)
        // If the hub's own task ends without stopping it (a dropped `Hub`),
        // the run does not outlive it.
        .kill_on_drop(true);
    let hub_pid = std::process::id() as libc::pid_t;
    // SAFETY: runs in the child between fork and exec, and calls only
    // async-signal-safe functions (prctl, getppid, fcntl); the error values
    // are built from errno without allocating.
    unsafe {
        command.pre_exec(move || {
            #[cfg(target_os = "linux")]
            {
                if libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGKILL as libc::c_ulong,
                    0,
                    0,
                    0,
                ) != 0
                {
                    return Err(io::Error::last_os_error());
                }
                // The hub died between fork and prctl: no signal will come.
                if libc::getppid() != hub_pid {
                    return Err(io::Error::from_raw_os_error(libc::ESRCH));
                }
            }
            #[cfg(not(target_os = "linux"))]
            let _ = hub_pid;
            // The one descriptor the module inherits beyond 0, 1 and 2.
            let flags = libc::fcntl(launch_fd, libc::F_GETFD);
            if flags < 0 || libc::fcntl(launch_fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = command.spawn()?;
    // The command holds the child's ends of the pipes; dropping it closes
    // them here, so the output pipe ends when the run (and what it left
    // behind) closes it, and the credential pipe is the child's alone.
    drop(command);
    drop(credential_read);
    let pid = child
        .id()
        .ok_or_else(|| io::Error::other("the process ended before its pid was read"))?;
    Ok(Started {
        child,
        pid,
        output: File::from(output_read),
        credential: File::from(credential_write),
    })
}

/// Writes the credential into the run's pipe and closes it: the module
/// reads it to the end, once.
pub fn hand_over(mut pipe: File, secret: &str) -> io::Result<()> {
    // Far below the pipe's capacity: the write never waits on the reader.
    pipe.write_all(secret.as_bytes())
}

/// Sends `signal` to the process group `group` (a run's pid). A group
/// that is gone already is not an error.
pub fn signal_group(group: u32, signal: libc::c_int) {
    let Ok(group) = libc::pid_t::try_from(group) else {
        return;
    };
    if group <= 1 {
        return; // never signal init's group, or every process we may
    }
    // SAFETY: killpg(2) takes plain integers; no memory is involved.
    unsafe {
        libc::killpg(group, signal);
    }
}

/// A pipe whose both ends close on exec (the child gets its end through
/// `Stdio` or `pre_exec`).
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two descriptors into the array it is given.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}
