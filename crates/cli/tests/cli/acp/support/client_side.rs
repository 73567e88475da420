//! What a real editor does for the agent when it advertises `fs` and
//! `terminal`: open buffers (reads see unsaved text, writes land in the
//! buffer, not on disk) and terminals (real processes whose output and
//! exit the agent asks for). Every request the agent made is recorded.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::schema::{
    CreateTerminalRequest, CreateTerminalResponse, KillTerminalRequest, KillTerminalResponse,
    ReadTextFileRequest, ReadTextFileResponse, ReleaseTerminalRequest, ReleaseTerminalResponse,
    TerminalExitStatus, TerminalOutputRequest, TerminalOutputResponse, WaitForTerminalExitRequest,
    WaitForTerminalExitResponse, WriteTextFileRequest, WriteTextFileResponse,
};
use agent_client_protocol::Error;
use tokio::io::AsyncReadExt;
use tokio::sync::watch;

/// What the editor advertises in `initialize`.
#[derive(Debug, Clone, Copy, Default)]
pub struct EditorCaps {
    pub fs: bool,
    pub terminal: bool,
}

struct Terminal {
    session: String,
    pid: Option<u32>,
    output: Arc<Mutex<Vec<u8>>>,
    /// `Some` once the command exited.
    exit: watch::Sender<Option<TerminalExitStatus>>,
}

#[derive(Default)]
pub struct ClientSide {
    /// Open buffers: what the editor shows, saved or not.
    buffers: Mutex<HashMap<PathBuf, String>>,
    terminals: Mutex<HashMap<String, Arc<Terminal>>>,
    /// `(method, sessionId, path or terminal id)` of every request.
    calls: Mutex<Vec<(String, String, String)>>,
    /// When set, every `fs/read_text_file` fails with this error.
    failing_reads: Mutex<Option<Error>>,
}

fn not_found(what: String) -> Error {
    Error::new(agent_client_protocol::ErrorCode::INVALID_PARAMS, what)
}

/// A file the editor has neither open nor on disk: ACP's resource-not-found,
/// as the official TypeScript SDK's `RequestError.resourceNotFound` sends it.
fn no_such_file(path: &std::path::Path) -> Error {
    Error::new(
        agent_client_protocol::ErrorCode::RESOURCE_NOT_FOUND,
        format!("Resource not found: {}", path.display()),
    )
}

impl ClientSide {
    fn record(&self, method: &str, session: &str, subject: &str) {
        self.calls
            .lock()
            .unwrap()
            .push((method.into(), session.into(), subject.into()));
    }

    /// The requests the agent made, by method.
    pub fn calls(&self, method: &str) -> Vec<(String, String)> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|(m, _, _)| m == method)
            .map(|(_, session, subject)| (session.clone(), subject.clone()))
            .collect()
    }

    /// Opens `path` in a buffer holding `text` (unsaved: the disk keeps
    /// what it had).
    pub fn open_buffer(&self, path: PathBuf, text: &str) {
        self.buffers.lock().unwrap().insert(path, text.to_owned());
    }

    /// Makes every later `fs/read_text_file` fail with `error` (`None`:
    /// read again).
    pub fn fail_reads(&self, error: Option<Error>) {
        *self.failing_reads.lock().unwrap() = error;
    }

    pub fn buffer(&self, path: &std::path::Path) -> Option<String> {
        self.buffers.lock().unwrap().get(path).cloned()
    }

    pub fn read_text_file(
        &self,
        request: ReadTextFileRequest,
    ) -> Result<ReadTextFileResponse, Error> {
        self.record(
            "fs/read_text_file",
            &request.session_id.0,
            &request.path.display().to_string(),
        );
        if let Some(error) = self.failing_reads.lock().unwrap().clone() {
            return Err(error);
        }
        if let Some(text) = self.buffer(&request.path) {
            return Ok(ReadTextFileResponse::new(text));
        }
        std::fs::read_to_string(&request.path)
            .map(ReadTextFileResponse::new)
            .map_err(|error| match error.kind() {
                std::io::ErrorKind::NotFound => no_such_file(&request.path),
                _ => not_found(format!("{}: {error}", request.path.display())),
            })
    }

    pub fn write_text_file(
        &self,
        request: WriteTextFileRequest,
    ) -> Result<WriteTextFileResponse, Error> {
        self.record(
            "fs/write_text_file",
            &request.session_id.0,
            &request.path.display().to_string(),
        );
        self.open_buffer(request.path, &request.content);
        Ok(WriteTextFileResponse::new())
    }

    pub fn create_terminal(
        &self,
        request: CreateTerminalRequest,
    ) -> Result<CreateTerminalResponse, Error> {
        let id = format!("term-{}", self.terminals.lock().unwrap().len() + 1);
        self.record("terminal/create", &request.session_id.0, &id);
        let mut command = tokio::process::Command::new(&request.command);
        command
            .args(&request.args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        if let Some(cwd) = &request.cwd {
            command.current_dir(cwd);
        }
        let mut child = command
            .spawn()
            .map_err(|error| Error::internal_error().data(error.to_string()))?;
        let output = Arc::new(Mutex::new(Vec::new()));
        let terminal = Arc::new(Terminal {
            session: request.session_id.0.to_string(),
            pid: child.id(),
            output: output.clone(),
            exit: watch::Sender::new(None),
        });
        let mut stdout = child.stdout.take().expect("stdout");
        let waiter = terminal.clone();
        tokio::spawn(async move {
            let mut buffer = [0u8; 4096];
            while let Ok(read) = stdout.read(&mut buffer).await {
                if read == 0 {
                    break;
                }
                output.lock().unwrap().extend_from_slice(&buffer[..read]);
            }
            let status = child.wait().await.expect("wait for the terminal's command");
            use std::os::unix::process::ExitStatusExt;
            let exit = TerminalExitStatus::new()
                .exit_code(status.code().map(|code| code as u32))
                .signal(status.signal().map(|signal| signal.to_string()));
            waiter.exit.send_replace(Some(exit));
        });
        self.terminals.lock().unwrap().insert(id.clone(), terminal);
        Ok(CreateTerminalResponse::new(id))
    }

    fn terminal(&self, session: &str, id: &str) -> Result<Arc<Terminal>, Error> {
        let terminal = self
            .terminals
            .lock()
            .unwrap()
            .get(id)
            .cloned()
            .ok_or_else(|| not_found(format!("terminal {id}")))?;
        // A terminal belongs to the session that created it.
        if terminal.session != session {
            return Err(not_found(format!("terminal {id} of session {session}")));
        }
        Ok(terminal)
    }

    pub fn terminal_output(
        &self,
        request: TerminalOutputRequest,
    ) -> Result<TerminalOutputResponse, Error> {
        self.record(
            "terminal/output",
            &request.session_id.0,
            &request.terminal_id.0,
        );
        let terminal = self.terminal(&request.session_id.0, &request.terminal_id.0)?;
        let output = String::from_utf8_lossy(&terminal.output.lock().unwrap()).into_owned();
        let exit = terminal.exit.borrow().clone();
        Ok(TerminalOutputResponse::new(output, false).exit_status(exit))
    }

    pub async fn wait_for_exit(
        &self,
        request: WaitForTerminalExitRequest,
    ) -> Result<WaitForTerminalExitResponse, Error> {
        self.record(
            "terminal/wait_for_exit",
            &request.session_id.0,
            &request.terminal_id.0,
        );
        let terminal = self.terminal(&request.session_id.0, &request.terminal_id.0)?;
        let mut exit = terminal.exit.subscribe();
        let status = exit
            .wait_for(Option::is_some)
            .await
            .map_err(|_| Error::internal_error())?
            .clone()
            .unwrap_or_default();
        Ok(WaitForTerminalExitResponse::new(status))
    }

    /// Waits (bounded) until terminal `id`'s command has exited.
    pub async fn wait_terminal_exit(&self, id: &str) {
        let terminal = self.terminals.lock().unwrap().get(id).cloned();
        let terminal = terminal.unwrap_or_else(|| panic!("no terminal {id}"));
        let mut exit = terminal.exit.subscribe();
        tokio::time::timeout(super::WAIT, exit.wait_for(Option::is_some))
            .await
            .expect("the terminal's command did not exit")
            .expect("terminal alive");
    }

    pub fn kill_terminal(
        &self,
        request: KillTerminalRequest,
    ) -> Result<KillTerminalResponse, Error> {
        self.record(
            "terminal/kill",
            &request.session_id.0,
            &request.terminal_id.0,
        );
        let terminal = self.terminal(&request.session_id.0, &request.terminal_id.0)?;
        if let Some(pid) = terminal.pid {
            // SAFETY: kill(2) on a child this editor started.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
        Ok(KillTerminalResponse::new())
    }

    pub fn release_terminal(
        &self,
        request: ReleaseTerminalRequest,
    ) -> Result<ReleaseTerminalResponse, Error> {
        self.record(
            "terminal/release",
            &request.session_id.0,
            &request.terminal_id.0,
        );
        let terminal = self.terminal(&request.session_id.0, &request.terminal_id.0)?;
        if terminal.exit.borrow().is_none() {
            if let Some(pid) = terminal.pid {
                // SAFETY: kill(2) on a child this editor started.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            }
        }
        Ok(ReleaseTerminalResponse::new())
    }
}
