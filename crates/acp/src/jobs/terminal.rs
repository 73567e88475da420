//! Jobs in the editor's terminals (`terminal/*`, when the editor advertises
//! the `terminal` capability): the editor runs the command where the user
//! sees it; every request names the job's session.
//!
//! Each request waits at most [`crate::editor::EDITOR_WAIT`]; only the watch for the
//! command's exit (`terminal/wait_for_exit`) has no bound of its own, as a
//! job may run for hours: it ends when the job is killed and released, or
//! when the connection closes.

use std::path::Path;

use agent_client_protocol::v1::schema::{
    CreateTerminalRequest, KillTerminalRequest, ReleaseTerminalRequest, TerminalExitStatus,
    TerminalOutputRequest, WaitForTerminalExitRequest,
};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::{Client, JsonRpcRequest};

use super::{JobError, JobExit};

/// The terminals of one session's editor.
#[derive(Clone)]
pub struct EditorTerminals {
    cx: ConnectionTo<Client>,
    session_id: String,
}

impl EditorTerminals {
    pub fn new(cx: ConnectionTo<Client>, session_id: &str) -> Self {
        EditorTerminals {
            cx,
            session_id: session_id.to_owned(),
        }
    }

    /// `terminal/create` running `/bin/sh -c command` in `cwd`, keeping at
    /// most `output_bytes` of output.
    pub(super) async fn create(
        &self,
        command: &str,
        cwd: &Path,
        output_bytes: usize,
    ) -> Result<TerminalJob, JobError> {
        let request = CreateTerminalRequest::new(self.session_id.clone(), "/bin/sh")
            .args(vec!["-c".to_owned(), command.to_owned()])
            .cwd(cwd.to_path_buf())
            .output_byte_limit(output_bytes as u64);
        let created = ask(&self.cx, request).await?;
        Ok(TerminalJob {
            terminals: self.clone(),
            terminal_id: created.terminal_id.0.to_string(),
        })
    }
}

/// One job's terminal.
#[derive(Clone)]
pub(super) struct TerminalJob {
    terminals: EditorTerminals,
    terminal_id: String,
}

impl TerminalJob {
    pub(super) fn id(&self) -> &str {
        &self.terminal_id
    }

    fn session(&self) -> String {
        self.terminals.session_id.clone()
    }

    /// `terminal/output`: the output so far, whether it was truncated, and
    /// the exit if the command has exited.
    pub(super) async fn output(&self) -> Result<(String, bool, Option<JobExit>), JobError> {
        let request = TerminalOutputRequest::new(self.session(), self.terminal_id.clone());
        let answer = ask(&self.terminals.cx, request).await?;
        Ok((
            answer.output,
            answer.truncated,
            answer.exit_status.as_ref().map(exit_of),
        ))
    }

    /// `terminal/wait_for_exit`; an exit with neither code nor signal if the
    /// request fails (the terminal was released, the editor went away).
    pub(super) async fn wait_for_exit(&self) -> JobExit {
        let request = WaitForTerminalExitRequest::new(self.session(), self.terminal_id.clone());
        match self.terminals.cx.send_request(request).block_task().await {
            Ok(answer) => exit_of(&answer.exit_status),
            Err(error) => {
                tracing::debug!(terminal = %self.terminal_id, %error, "terminal/wait_for_exit failed");
                JobExit::default()
            }
        }
    }

    /// `terminal/kill`: the command stops, the terminal stays.
    pub(super) async fn kill(&self) {
        let request = KillTerminalRequest::new(self.session(), self.terminal_id.clone());
        if let Err(error) = ask(&self.terminals.cx, request).await {
            tracing::warn!(terminal = %self.terminal_id, %error, "cannot kill a terminal");
        }
    }

    /// `terminal/release`: the editor frees the terminal (killing the
    /// command if it still runs); tool calls that embed it keep showing it.
    pub(super) async fn release(&self) {
        let request = ReleaseTerminalRequest::new(self.session(), self.terminal_id.clone());
        if let Err(error) = ask(&self.terminals.cx, request).await {
            tracing::debug!(terminal = %self.terminal_id, %error, "cannot release a terminal");
        }
    }
}

/// One request to the editor, bounded ([`crate::editor::ask`]).
async fn ask<R: JsonRpcRequest>(
    cx: &ConnectionTo<Client>,
    request: R,
) -> Result<R::Response, JobError>
where
    R::Response: Send,
{
    crate::editor::ask(cx, request)
        .await
        .map_err(|error| JobError::Terminal(error.to_string()))
}

/// An exit status as the editor reports it; a signal by name (`SIGKILL`,
/// `KILL`) or number.
fn exit_of(status: &TerminalExitStatus) -> JobExit {
    let signal = status.signal.as_deref().and_then(|name| {
        name.parse::<i32>().ok().or_else(|| {
            let name = name.to_ascii_uppercase();
            let name = if name.starts_with("SIG") {
                name
            } else {
                format!("SIG{name}")
            };
            name.parse::<nix::sys::signal::Signal>()
                .ok()
                .map(|signal| signal as i32)
        })
    });
    JobExit {
        code: status.exit_code.and_then(|code| i32::try_from(code).ok()),
        signal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_are_read_by_name_or_number() {
        for (name, number) in [("SIGKILL", 9), ("KILL", 9), ("term", 15), ("9", 9)] {
            let status = TerminalExitStatus::new().signal(name.to_owned());
            assert_eq!(exit_of(&status).signal, Some(number), "{name}");
        }
        let status = TerminalExitStatus::new().exit_code(3);
        assert_eq!(
            exit_of(&status),
            JobExit {
                code: Some(3),
                signal: None
            }
        );
    }
}
