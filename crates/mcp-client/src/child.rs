//! A stdio server's transport: the child process, rmcp's line framing over
//! its stdout and the queue in front of its stdin (`input.rs`), and the
//! [`WireTap`] in between. A server on two streams
//! ([`Streams`](crate::upstream::Streams)) is served the same way, with no
//! child.
//!
//! Stopping it is MCP's stdio shutdown, as rmcp's own child transport does
//! it: stdin closed, then SIGTERM after [`EXIT_WAIT`], then SIGKILL after
//! another; a transport dropped without being closed kills the child.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::RoleClient;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::process::{Child, ChildStderr, ChildStdout, Command};

use crate::input::{ChildInput, InputWriter};
use crate::tap::{TappedWire, WireTap};

/// How long a child may take to exit after each step of its shutdown.
const EXIT_WAIT: Duration = Duration::from_secs(3);

/// `R`: what the server's output is read from (its stdout).
pub(crate) struct ChildTransport<R: AsyncRead + Send + Unpin + 'static = ChildStdout> {
    /// `None` once it has exited or been killed, and for a server on
    /// streams.
    child: Option<Child>,
    wire: TappedWire<R, InputWriter>,
    input: ChildInput,
}

impl ChildTransport {
    /// Spawns `command` with piped stdin and stdout and `stderr` as given;
    /// the child's stderr is returned when it is piped.
    pub(crate) fn spawn(
        mut command: Command,
        stderr: std::process::Stdio,
        tap: Arc<WireTap>,
    ) -> std::io::Result<(ChildTransport, Option<ChildStderr>)> {
        command
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true);
        // `kill_on_drop` needs us alive to drop the child; a server that
        // does not exit when its stdin closes (server-everything) would
        // outlive a `provide-mcp` killed with SIGKILL. The kernel's
        // parent-death signal covers that (Linux).
        #[cfg(target_os = "linux")]
        {
            let parent = std::process::id() as libc::pid_t;
            // SAFETY: runs in the child between fork and exec and calls only
            // async-signal-safe functions (prctl, getppid); the errors are
            // built from errno without allocating.
            unsafe {
                command.pre_exec(move || {
                    if libc::prctl(
                        libc::PR_SET_PDEATHSIG,
                        libc::SIGKILL as libc::c_ulong,
                        0,
                        0,
                        0,
                    ) != 0
                    {
                        return Err(std::io::Error::last_os_error());
                    }
                    // We died between fork and prctl: no signal will come.
                    if libc::getppid() != parent {
                        return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                    }
                    Ok(())
                });
            }
        }
        let mut child = command.spawn()?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(std::io::Error::other("the child's stdio is not piped"));
        };
        let stderr = child.stderr.take();
        let mut transport = ChildTransport::over(stdout, stdin, tap);
        transport.child = Some(child);
        Ok((transport, stderr))
    }
}

impl<R: AsyncRead + Send + Unpin + 'static> ChildTransport<R> {
    /// A server that writes `output` and reads `input`, with no process.
    pub(crate) fn over<W>(output: R, input: W, tap: Arc<WireTap>) -> Self
    where
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let input = ChildInput::start(input);
        ChildTransport {
            child: None,
            wire: TappedWire::new(output, input.writer(), tap),
            input,
        }
    }

    /// The queue in front of the child's stdin, for calls written around
    /// rmcp.
    pub(crate) fn input(&self) -> ChildInput {
        self.input.clone()
    }

    pub(crate) fn id(&self) -> Option<u32> {
        self.child.as_ref().and_then(Child::id)
    }

    async fn shut_down(&mut self) -> std::io::Result<()> {
        self.wire.close().await?;
        let Some(child) = self.child.as_mut() else {
            return Ok(());
        };
        if exited_within(child).await {
            self.child = None;
            return Ok(());
        }
        if let Some(pid) = child.id().and_then(|pid| i32::try_from(pid).ok()) {
            // SAFETY: kill(2) with a pid this transport spawned and has not
            // reaped (`Child::id` is `None` once it has been).
            unsafe { libc::kill(pid, libc::SIGTERM) };
            if exited_within(child).await {
                self.child = None;
                return Ok(());
            }
        }
        let killed = child.kill().await;
        self.child = None;
        killed
    }
}

async fn exited_within(child: &mut Child) -> bool {
    matches!(
        tokio::time::timeout(EXIT_WAIT, child.wait()).await,
        Ok(Ok(_))
    )
}

impl<R: AsyncRead + Send + Unpin + 'static> Transport<RoleClient> for ChildTransport<R> {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.wire.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.wire.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.shut_down()
    }
}
