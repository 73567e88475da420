//! `switchboard` commands run as processes: to completion, or live with
//! their stdout read line by line. Every wait is bounded by [`WAIT`].

#![allow(dead_code)] // each test uses a different part of this module

use std::io::Write;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::mpsc;

use switchboard_testkit::{switchboard_binary, WAIT};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

/// A finished command.
#[derive(Debug)]
pub struct Run {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn code(&self) -> i32 {
        self.status.code().expect("exited, not killed")
    }

    /// Asserts success and returns stdout.
    pub fn ok(&self) -> &str {
        assert_eq!(self.code(), 0, "failed: {self:#?}");
        &self.stdout
    }
}

/// Runs `switchboard ARGS` to completion, blocking this thread.
pub fn run(args: &[&str]) -> Run {
    run_with_stdin(args, "")
}

/// Runs `switchboard ARGS` with `stdin` as its standard input, blocking
/// this thread.
pub fn run_with_stdin(args: &[&str], stdin: &str) -> Run {
    let mut child = std::process::Command::new(switchboard_binary())
        .args(args)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn switchboard");
    let pid = child.id();
    let mut input = child.stdin.take().expect("stdin");
    let input_text = stdin.to_owned();
    // Its own thread: a command that never reads its input must not block
    // the test on a full pipe.
    std::thread::spawn(move || {
        let _ = input.write_all(input_text.as_bytes());
    });
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait_with_output());
    });
    let Ok(output) = finished.recv_timeout(WAIT) else {
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        panic!("switchboard {args:?} did not finish within {WAIT:?}");
    };
    let output = output.expect("collect output");
    Run {
        status: output.status,
        stdout: String::from_utf8(output.stdout).expect("utf-8 stdout"),
        stderr: String::from_utf8(output.stderr).expect("utf-8 stderr"),
    }
}

/// [`run`] from an async test: on a blocking thread, so services the test
/// serves in process keep answering the command.
pub async fn switchboard(args: &[&str]) -> Run {
    switchboard_with_stdin(args, "").await
}

/// [`run_with_stdin`] from an async test.
pub async fn switchboard_with_stdin(args: &[&str], stdin: &str) -> Run {
    let args: Vec<String> = args.iter().map(|arg| arg.to_string()).collect();
    let stdin = stdin.to_owned();
    let finished = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run_with_stdin(&args, &stdin)
    })
    .await;
    finished.unwrap_or_else(|error| std::panic::resume_unwind(error.into_panic()))
}

/// A long-running command whose stdout is read line by line.
pub struct Live {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Live {
    pub fn start(args: &[&str]) -> Live {
        let mut child = Command::new(switchboard_binary())
            .args(args)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn switchboard");
        let stdout = child.stdout.take().expect("stdout");
        Live {
            child,
            lines: BufReader::new(stdout).lines(),
        }
    }

    /// The next line of stdout.
    pub async fn line(&mut self) -> String {
        tokio::time::timeout(WAIT, self.lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("no line within {WAIT:?}"))
            .expect("read stdout")
            .expect("stdout ended")
    }

    /// Stops the command with SIGTERM and returns how it exited.
    pub async fn terminate(mut self) -> ExitStatus {
        let pid = self.child.id().expect("still running") as libc::pid_t;
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("exits within WAIT after SIGTERM")
            .expect("wait")
    }

    /// Waits for the command to exit on its own.
    pub async fn exit(mut self) -> ExitStatus {
        tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("exits within WAIT")
            .expect("wait")
    }
}

/// A directory where no hub runs.
pub fn empty_dir() -> (tempfile::TempDir, String) {
    let temp = tempfile::tempdir().expect("temp dir");
    let dir = temp.path().join("hub");
    let text = dir.to_str().expect("utf-8").to_owned();
    (temp, text)
}

pub fn path_str(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}
