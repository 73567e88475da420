//! The floor of workload 8's shape: a process that starts a child and
//! copies bytes between its own stdio and the child's, doing nothing else.
//! The gateway's path crosses three processes between the client and the
//! server (`switchboard mcp`, the hub, `provide-mcp`); a chain of three of
//! these relays crosses as many with no work in any, so what the chain adds
//! over a direct call is the least any three-process path can add on this
//! machine.
//!
//! Built as the gateway's relay processes are: a single-threaded runtime
//! (no hand-off between threads) polling its own stdio when it is a pipe
//! (no blocking pool).

use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::process::Stdio;

use tokio::net::unix::pipe;
use tokio::process::Command;

/// Runs `program args…` and relays until either side closes; returns the
/// child's exit status code (or 1).
pub async fn relay(program: &OsString, args: &[OsString]) -> io::Result<i32> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let (Some(mut to_child), Some(mut from_child)) = (child.stdin.take(), child.stdout.take())
    else {
        return Err(io::Error::other("the child has no stdio pipes"));
    };
    let mut stdin = own_stdin()?;
    let mut stdout = own_stdout()?;
    // Our stdin's end closes the child's (dropping `to_child`); the relay
    // ends when the child's stdout does.
    let down = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut stdin, &mut to_child).await;
    });
    // `copy` writes what each read brings at once: nothing is held back.
    let up = tokio::io::copy(&mut from_child, &mut stdout).await;
    down.abort();
    up?;
    Ok(child.wait().await?.code().unwrap_or(1))
}

fn own_stdin() -> io::Result<pipe::Receiver> {
    let file = File::from(io::stdin().as_fd().try_clone_to_owned()?);
    pipe::Receiver::from_file(file)
}

fn own_stdout() -> io::Result<pipe::Sender> {
    let file = File::from(io::stdout().as_fd().try_clone_to_owned()?);
    pipe::Sender::from_file(file)
}
