//! Background jobs: shell commands a session starts, reads and kills.
//!
//! The executor is the only place that knows who owns a job: each job records
//! its owning session at spawn and keeps it after it exits, and every read or
//! kill names the calling session, which is checked here. A caller cannot get
//! around the check by knowing an id.
//!
//! A job runs in one of two places:
//! - locally: `/bin/sh -c <command>` under a guard (`crate::guard`), in a
//!   process group of its own. The guard is what makes every process of
//!   the job die with it (`job_kill`, session close) and with the front,
//!   even one that called `setsid`, even when the front is SIGKILLed. The
//!   job has exited once every one of its processes has; its exit code is
//!   the shell's;
//! - in one of the editor's terminals (`terminal.rs`), when the editor
//!   advertises the `terminal` capability: the editor runs the command and
//!   shows it; output, exit and kill go through `terminal/*`.

mod tail;
mod terminal;

use std::collections::HashMap;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rustix::process::{Pid, Signal};
use serde::Serialize;
use tokio::io::AsyncReadExt;
use tokio::sync::watch;

use crate::guard::Launcher;
use tail::TailBuffer;
pub use terminal::EditorTerminals;

/// How long a kill waits for the job to be reaped.
const KILL_WAIT: Duration = Duration::from_secs(5);
/// How long, after the job exits, its output pipes may stay open before the
/// exit is reported anyway.
const PIPE_DRAIN_WAIT: Duration = Duration::from_secs(2);

#[derive(Debug, Clone)]
pub struct JobLimits {
    pub max_running_per_session: usize,
    pub output_bytes: usize,
    pub retained_per_session: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum JobError {
    #[error("job {0} belongs to another session")]
    OtherSession(String),
    #[error("no job {0}")]
    Unknown(String),
    #[error("this session already has {max} running jobs; at most {max} may run at once")]
    TooManyRunning { max: usize },
    #[error("cannot start the job in {cwd}: {error}")]
    Spawn { cwd: String, error: std::io::Error },
    #[error("{0}")]
    Terminal(String),
    #[error("the agent is shutting down; no new jobs start")]
    ShutDown,
}

/// What `job_output` (and `job_kill`) report.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct JobOutput {
    pub output: String,
    pub exited: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended the job, if one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// Whether older output was dropped to stay within the bound.
    pub truncated: bool,
}

/// How a job ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JobExit {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

impl From<ExitStatus> for JobExit {
    fn from(status: ExitStatus) -> Self {
        use std::os::unix::process::ExitStatusExt;
        JobExit {
            code: status.code(),
            signal: status.signal(),
        }
    }
}

/// Where a job runs.
enum Runner {
    /// A local process: the guard (or, for a bare executor, the shell),
    /// which leads the job's process group.
    Local {
        pid: Option<Pid>,
        guarded: bool,
        output: Mutex<TailBuffer>,
    },
    /// One of the editor's terminals.
    Terminal(terminal::TerminalJob),
}

struct Job {
    id: String,
    /// The session that started the job; never changes.
    owner: String,
    /// Start order within the executor, for forgetting the oldest first.
    started: u64,
    runner: Runner,
    exit: Mutex<Option<JobExit>>,
    /// `true` once the exit is recorded.
    exited: watch::Sender<bool>,
}

impl Job {
    fn has_exited(&self) -> bool {
        *self.exited.borrow()
    }

    fn record_exit(&self, exit: JobExit) {
        self.exit.lock().get_or_insert(exit);
        self.exited.send_replace(true);
    }

    async fn report(&self) -> Result<JobOutput, JobError> {
        match &self.runner {
            Runner::Local { output, .. } => {
                let output = output.lock();
                let exit = *self.exit.lock();
                Ok(JobOutput {
                    output: output.text(),
                    exited: exit.is_some(),
                    exit_code: exit.and_then(|exit| exit.code),
                    signal: exit.and_then(|exit| exit.signal),
                    truncated: output.truncated(),
                })
            }
            Runner::Terminal(terminal) => {
                let (output, truncated, status) = terminal.output().await?;
                let exit = status.or(*self.exit.lock());
                if let Some(exit) = status {
                    self.record_exit(exit);
                }
                Ok(JobOutput {
                    output,
                    exited: exit.is_some(),
                    exit_code: exit.and_then(|exit| exit.code),
                    signal: exit.and_then(|exit| exit.signal),
                    truncated,
                })
            }
        }
    }

    /// Kills the job: a guard is asked to kill everything it runs (and the
    /// group is SIGKILLed if it does not exit in time); a bare job's group
    /// is SIGKILLed; a terminal's command is killed by the editor.
    async fn kill(&self) {
        match &self.runner {
            Runner::Local { pid, guarded, .. } => {
                let Some(pid) = *pid else { return };
                if *guarded && !self.has_exited() {
                    crate::guard::stop(pid.as_raw_nonzero().get() as u32);
                    if self.wait_exit(KILL_WAIT).await {
                        return;
                    }
                    tracing::warn!(job = %self.id, "the job's guard did not stop in {KILL_WAIT:?}; killing its group");
                }
                // After the leader has been reaped the group may live on in
                // background children, so the signal still goes out; the
                // group id cannot be reused while any member lives.
                match rustix::process::kill_process_group(pid, Signal::KILL) {
                    Ok(()) | Err(rustix::io::Errno::SRCH) => {}
                    Err(error) => tracing::warn!(job = %self.id, %error, "cannot kill a job"),
                }
            }
            Runner::Terminal(terminal) => terminal.kill().await,
        }
    }

    /// Kills the job and frees what it holds in the editor.
    async fn dispose(&self) {
        self.kill().await;
        if !self.wait_exit(KILL_WAIT).await {
            tracing::warn!(job = %self.id, "job not reaped within {KILL_WAIT:?} of its kill");
        }
        if let Runner::Terminal(terminal) = &self.runner {
            terminal.release().await;
        }
    }

    async fn wait_exit(&self, bound: Duration) -> bool {
        let mut exited = self.exited.subscribe();
        let waited = tokio::time::timeout(bound, exited.wait_for(|done| *done)).await;
        waited.is_ok()
    }
}

#[derive(Default)]
struct JobTable {
    jobs: HashMap<String, Arc<Job>>,
    next_start: u64,
    shut_down: bool,
}

/// Runs and tracks every job of every session on one connection.
pub struct JobExecutor {
    table: Mutex<JobTable>,
    limits: JobLimits,
    /// How local jobs start; `None`: bare, as the leader of a process
    /// group with nothing watching for the front's death (unit tests only).
    launcher: Option<Launcher>,
}

impl JobExecutor {
    pub fn new(limits: JobLimits, launcher: Option<Launcher>) -> Self {
        JobExecutor {
            table: Mutex::new(JobTable::default()),
            limits,
            launcher,
        }
    }

    /// Checks that session `owner` may start one more job, and makes room
    /// for its record.
    fn admit(&self, table: &mut JobTable, owner: &str) -> Result<(), JobError> {
        if table.shut_down {
            return Err(JobError::ShutDown);
        }
        let running = table
            .jobs
            .values()
            .filter(|job| job.owner == owner && !job.has_exited())
            .count();
        if running >= self.limits.max_running_per_session {
            return Err(JobError::TooManyRunning {
                max: self.limits.max_running_per_session,
            });
        }
        for forgotten in forget_oldest_exited(table, owner, self.limits.retained_per_session) {
            if let Runner::Terminal(terminal) = &forgotten.runner {
                let terminal = terminal.clone();
                tokio::spawn(async move { terminal.release().await });
            }
        }
        Ok(())
    }

    fn insert(&self, table: &mut JobTable, owner: &str, runner: Runner) -> Arc<Job> {
        let id = crate::ids::job_id();
        let started = table.next_start;
        table.next_start += 1;
        let job = Arc::new(Job {
            id: id.clone(),
            owner: owner.to_owned(),
            started,
            runner,
            exit: Mutex::new(None),
            exited: watch::Sender::new(false),
        });
        table.jobs.insert(id, job.clone());
        job
    }

    /// Starts `command` locally for session `owner`; returns the job id.
    pub fn start(&self, owner: &str, command: &str, cwd: &Path) -> Result<String, JobError> {
        let mut table = self.table.lock();
        self.admit(&mut table, owner)?;
        let shell_args = [std::ffi::OsString::from("-c"), command.into()];
        let mut process = match &self.launcher {
            Some(launcher) => launcher.command("/bin/sh", &shell_args),
            None => {
                let mut process = tokio::process::Command::new("/bin/sh");
                process.args(&shell_args).process_group(0);
                process
            }
        };
        let mut child = process
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|error| JobError::Spawn {
                cwd: cwd.display().to_string(),
                error,
            })?;
        let runner = Runner::Local {
            pid: child.id().and_then(|pid| Pid::from_raw(pid as i32)),
            guarded: self.launcher.is_some(),
            output: Mutex::new(TailBuffer::new(self.limits.output_bytes)),
        };
        let job = self.insert(&mut table, owner, runner);
        drop(table);

        let pumps = [
            child
                .stdout
                .take()
                .map(|pipe| tokio::spawn(pump(pipe, job.clone()))),
            child
                .stderr
                .take()
                .map(|pipe| tokio::spawn(pump(pipe, job.clone()))),
        ];
        let watched = job.clone();
        tokio::spawn(async move {
            let status = child.wait().await;
            for pump in pumps.into_iter().flatten() {
                let _ = tokio::time::timeout(PIPE_DRAIN_WAIT, pump).await;
            }
            match status {
                Ok(status) => watched.record_exit(status.into()),
                Err(error) => {
                    tracing::error!(job = %watched.id, %error, "cannot wait for a job");
                    watched.record_exit(JobExit::default());
                }
            }
            tracing::debug!(job = %watched.id, "job exited");
        });
        tracing::info!(job = %job.id, session = owner, "job started");
        Ok(job.id.clone())
    }

    /// Starts `command` in one of the editor's terminals for session
    /// `owner`; returns the job id and the terminal id.
    pub async fn start_in_terminal(
        &self,
        terminals: &EditorTerminals,
        owner: &str,
        command: &str,
        cwd: &Path,
    ) -> Result<(String, String), JobError> {
        {
            let mut table = self.table.lock();
            self.admit(&mut table, owner)?;
        }
        let terminal = terminals
            .create(command, cwd, self.limits.output_bytes)
            .await?;
        let terminal_id = terminal.id().to_owned();
        let job = {
            let mut table = self.table.lock();
            (!table.shut_down)
                .then(|| self.insert(&mut table, owner, Runner::Terminal(terminal.clone())))
        };
        let Some(job) = job else {
            terminal.kill().await;
            terminal.release().await;
            return Err(JobError::ShutDown);
        };
        // Follows the command to its exit; a job killed and released (or a
        // connection gone) ends the wait with an error, recorded as an exit.
        let watched = job.clone();
        tokio::spawn(async move {
            let exit = terminal.wait_for_exit().await;
            watched.record_exit(exit);
        });
        tracing::info!(job = %job.id, session = owner, terminal = %terminal_id, "job started in the editor's terminal");
        Ok((job.id.clone(), terminal_id))
    }

    /// The job `id` of session `caller`.
    fn owned(&self, caller: &str, id: &str) -> Result<Arc<Job>, JobError> {
        let table = self.table.lock();
        let job = table
            .jobs
            .get(id)
            .ok_or_else(|| JobError::Unknown(id.to_owned()))?;
        if job.owner != caller {
            return Err(JobError::OtherSession(id.to_owned()));
        }
        Ok(job.clone())
    }

    pub async fn output(&self, caller: &str, id: &str) -> Result<JobOutput, JobError> {
        self.owned(caller, id)?.report().await
    }

    /// Kills the job and waits (bounded) for it to be reaped.
    pub async fn kill(&self, caller: &str, id: &str) -> Result<JobOutput, JobError> {
        let job = self.owned(caller, id)?;
        job.kill().await;
        if !job.wait_exit(KILL_WAIT).await {
            tracing::warn!(job = id, "job not reaped within {KILL_WAIT:?} of its kill");
        }
        job.report().await
    }

    /// Kills and forgets every job of session `owner`.
    pub async fn kill_session(&self, owner: &str) {
        let jobs: Vec<Arc<Job>> = {
            let mut table = self.table.lock();
            let ids: Vec<String> = table
                .jobs
                .values()
                .filter(|job| job.owner == owner)
                .map(|job| job.id.clone())
                .collect();
            ids.iter().filter_map(|id| table.jobs.remove(id)).collect()
        };
        dispose_all(jobs).await;
    }

    /// Refuses new jobs, then kills and forgets every job. Idempotent.
    pub async fn kill_all(&self) {
        let jobs: Vec<Arc<Job>> = {
            let mut table = self.table.lock();
            table.shut_down = true;
            table.jobs.drain().map(|(_, job)| job).collect()
        };
        dispose_all(jobs).await;
    }

    /// Ids of the jobs session `owner` has (running or exited).
    pub fn jobs_of(&self, owner: &str) -> Vec<String> {
        let table = self.table.lock();
        let mut jobs: Vec<&Arc<Job>> = table.jobs.values().filter(|j| j.owner == owner).collect();
        jobs.sort_by_key(|job| job.started);
        jobs.iter().map(|job| job.id.clone()).collect()
    }
}

/// Keeps session `owner` under `retained` job records, dropping exited ones,
/// oldest first, and returning them. Running jobs are never forgotten.
fn forget_oldest_exited(table: &mut JobTable, owner: &str, retained: usize) -> Vec<Arc<Job>> {
    let mut exited: Vec<(u64, String)> = table
        .jobs
        .values()
        .filter(|job| job.owner == owner && job.has_exited())
        .map(|job| (job.started, job.id.clone()))
        .collect();
    let total = table.jobs.values().filter(|job| job.owner == owner).count();
    // Room for the job about to start.
    let excess = (total + 1).saturating_sub(retained);
    exited.sort();
    exited
        .into_iter()
        .take(excess)
        .filter_map(|(_, id)| table.jobs.remove(&id))
        .collect()
}

async fn dispose_all(jobs: Vec<Arc<Job>>) {
    futures_util::future::join_all(jobs.iter().map(|job| job.dispose())).await;
    if !jobs.is_empty() {
        tracing::info!(count = jobs.len(), "jobs killed");
    }
}

async fn pump(mut pipe: impl tokio::io::AsyncRead + Unpin, job: Arc<Job>) {
    let Runner::Local { output, .. } = &job.runner else {
        return;
    };
    let mut buffer = [0u8; 8192];
    loop {
        match pipe.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => output.lock().push(&buffer[..read]),
        }
    }
}

#[cfg(test)]
mod tests;
