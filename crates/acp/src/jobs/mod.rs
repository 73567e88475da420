//! Background jobs: shell commands a session starts, reads and kills.
//!
//! The executor is the only place that knows who owns a job: each job records
//! its owning session at spawn and keeps it after it exits, and every read or
//! kill names the calling session, which is checked here. A caller cannot get
//! around the check by knowing an id.
//!
//! Each job runs `/bin/sh -c <command>` as the leader of its own process
//! group, so killing the group also reaches whatever the command started.

mod tail;

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

use tail::TailBuffer;

/// How long a kill waits for the job to be reaped.
const KILL_WAIT: Duration = Duration::from_secs(5);
/// How long, after the leader exits, its output pipes may stay open (held by
/// a background child) before the exit is reported anyway.
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

struct Job {
    id: String,
    /// The session that started the job; never changes.
    owner: String,
    /// Also the process group id.
    pid: Option<Pid>,
    /// Start order within the executor, for forgetting the oldest first.
    started: u64,
    output: Mutex<TailBuffer>,
    exit: Mutex<Option<ExitStatus>>,
    /// `true` once the exit is recorded.
    exited: watch::Sender<bool>,
}

impl Job {
    fn has_exited(&self) -> bool {
        *self.exited.borrow()
    }

    fn report(&self) -> JobOutput {
        use std::os::unix::process::ExitStatusExt;
        let output = self.output.lock();
        let exit = *self.exit.lock();
        JobOutput {
            output: output.text(),
            exited: exit.is_some(),
            exit_code: exit.and_then(|status| status.code()),
            signal: exit.and_then(|status| status.signal()),
            truncated: output.truncated(),
        }
    }

    /// Sends SIGKILL to the job's process group. After the leader has been
    /// reaped the group may live on in background children, so the signal
    /// still goes out; the group id cannot be reused while any member lives.
    fn kill(&self) {
        if let Some(pid) = self.pid {
            match rustix::process::kill_process_group(pid, Signal::KILL) {
                Ok(()) => {}
                Err(rustix::io::Errno::SRCH) => {}
                Err(error) => tracing::warn!(job = %self.id, %error, "cannot kill a job"),
            }
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
}

impl JobExecutor {
    pub fn new(limits: JobLimits) -> Self {
        JobExecutor {
            table: Mutex::new(JobTable::default()),
            limits,
        }
    }

    /// Starts `command` for session `owner`; returns the job id.
    pub fn start(&self, owner: &str, command: &str, cwd: &Path) -> Result<String, JobError> {
        let mut table = self.table.lock();
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
        forget_oldest_exited(&mut table, owner, self.limits.retained_per_session);

        let mut child = tokio::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(command)
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(|error| JobError::Spawn {
                cwd: cwd.display().to_string(),
                error,
            })?;
        let id = crate::ids::job_id();
        let started = table.next_start;
        table.next_start += 1;
        let job = Arc::new(Job {
            id: id.clone(),
            owner: owner.to_owned(),
            pid: child.id().and_then(|pid| Pid::from_raw(pid as i32)),
            started,
            output: Mutex::new(TailBuffer::new(self.limits.output_bytes)),
            exit: Mutex::new(None),
            exited: watch::Sender::new(false),
        });
        table.jobs.insert(id.clone(), job.clone());
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
        tokio::spawn(async move {
            let status = child.wait().await;
            for pump in pumps.into_iter().flatten() {
                let _ = tokio::time::timeout(PIPE_DRAIN_WAIT, pump).await;
            }
            match status {
                Ok(status) => *job.exit.lock() = Some(status),
                Err(error) => {
                    tracing::error!(job = %job.id, %error, "cannot wait for a job");
                    use std::os::unix::process::ExitStatusExt;
                    *job.exit.lock() = Some(ExitStatus::from_raw(0x7f00));
                }
            }
            job.exited.send_replace(true);
            tracing::debug!(job = %job.id, "job exited");
        });
        tracing::info!(job = %id, session = owner, "job started");
        Ok(id)
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

    pub fn output(&self, caller: &str, id: &str) -> Result<JobOutput, JobError> {
        Ok(self.owned(caller, id)?.report())
    }

    /// Kills the job's process group and waits (bounded) for it to be reaped.
    pub async fn kill(&self, caller: &str, id: &str) -> Result<JobOutput, JobError> {
        let job = self.owned(caller, id)?;
        job.kill();
        if !job.wait_exit(KILL_WAIT).await {
            tracing::warn!(job = id, "job not reaped within {KILL_WAIT:?} of SIGKILL");
        }
        Ok(job.report())
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
        kill_and_reap(jobs).await;
    }

    /// Refuses new jobs, then kills and forgets every job. Idempotent.
    pub async fn kill_all(&self) {
        let jobs: Vec<Arc<Job>> = {
            let mut table = self.table.lock();
            table.shut_down = true;
            table.jobs.drain().map(|(_, job)| job).collect()
        };
        kill_and_reap(jobs).await;
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
/// oldest first. Running jobs are never forgotten.
fn forget_oldest_exited(table: &mut JobTable, owner: &str, retained: usize) {
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
    for (_, id) in exited.into_iter().take(excess) {
        table.jobs.remove(&id);
    }
}

async fn kill_and_reap(jobs: Vec<Arc<Job>>) {
    for job in &jobs {
        job.kill();
    }
    for job in &jobs {
        if !job.wait_exit(KILL_WAIT).await {
            tracing::warn!(job = %job.id, "job not reaped within {KILL_WAIT:?} of SIGKILL");
        }
    }
    if !jobs.is_empty() {
        tracing::info!(count = jobs.len(), "jobs killed");
    }
}

async fn pump(mut pipe: impl tokio::io::AsyncRead + Unpin, job: Arc<Job>) {
    let mut buffer = [0u8; 8192];
    loop {
        match pipe.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => job.output.lock().push(&buffer[..read]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn executor(max_running: usize, output_bytes: usize, retained: usize) -> JobExecutor {
        JobExecutor::new(JobLimits {
            max_running_per_session: max_running,
            output_bytes,
            retained_per_session: retained,
        })
    }

    async fn wait_exited(jobs: &JobExecutor, owner: &str, id: &str) -> JobOutput {
        let job = jobs.owned(owner, id).unwrap();
        assert!(job.wait_exit(Duration::from_secs(10)).await);
        job.report()
    }

    #[tokio::test]
    async fn output_exit_code_and_owner_check() {
        let jobs = executor(2, 1024, 8);
        let id = jobs
            .start("a", "echo hello; exit 3", Path::new("/"))
            .unwrap();
        let report = wait_exited(&jobs, "a", &id).await;
        assert_eq!(report.output, "hello\n");
        assert_eq!(report.exit_code, Some(3));
        assert!(report.exited && !report.truncated);
        let error = jobs.output("b", &id).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("job {id} belongs to another session")
        );
        assert!(matches!(
            jobs.kill("b", &id).await,
            Err(JobError::OtherSession(_))
        ));
        assert!(matches!(
            jobs.output("a", "job_x"),
            Err(JobError::Unknown(_))
        ));
    }

    #[tokio::test]
    async fn running_jobs_are_bounded_per_session_and_output_is_a_tail() {
        let jobs = executor(2, 10, 8);
        let first = jobs.start("a", "exec sleep 60", Path::new("/")).unwrap();
        let _second = jobs.start("a", "exec sleep 60", Path::new("/")).unwrap();
        let error = jobs.start("a", "true", Path::new("/")).unwrap_err();
        assert_eq!(
            error.to_string(),
            "this session already has 2 running jobs; at most 2 may run at once"
        );
        // Another session is not affected by a's count.
        let other = jobs
            .start("b", "printf 0123456789abcdef", Path::new("/"))
            .unwrap();
        let report = wait_exited(&jobs, "b", &other).await;
        assert_eq!(
            (report.output.as_str(), report.truncated),
            ("6789abcdef", true)
        );
        // Killing one frees a slot.
        let killed = jobs.kill("a", &first).await.unwrap();
        assert!(killed.exited);
        assert_eq!(killed.signal, Some(9));
        jobs.start("a", "true", Path::new("/")).unwrap();
        jobs.kill_all().await;
        assert!(matches!(
            jobs.start("a", "true", Path::new("/")),
            Err(JobError::ShutDown)
        ));
    }

    /// Waits (at most `bound`) for process `pid`, not our child, to
    /// terminate: a pidfd becomes readable exactly then.
    async fn terminates_within(pid: i32, bound: Duration) -> bool {
        let pid = Pid::from_raw(pid).unwrap();
        let Ok(fd) = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::NONBLOCK) else {
            return true; // already gone
        };
        // SAFETY: `fd` is a pidfd owned here and handed to the AsyncFd, which
        // owns it from now on; nothing else closes or registers it.
        let fd = unsafe { tokio::io::unix::AsyncFd::register(fd) }.expect("register the pidfd");
        tokio::time::timeout(bound, fd.readable()).await.is_ok()
    }

    #[tokio::test]
    async fn killing_a_job_reaches_what_it_started() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("child-pid");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let jobs = executor(2, 1024, 8);
        // The background `sleep` keeps the job's output pipe open, so the
        // job's output only ends once it is dead too.
        let command = format!("sleep 600 & echo $! > '{}'; wait", fifo.display());
        let id = jobs.start("a", &command, Path::new("/")).unwrap();
        let read = tokio::task::spawn_blocking(move || std::fs::read_to_string(fifo));
        let child: i32 = tokio::time::timeout(Duration::from_secs(10), read)
            .await
            .expect("the job wrote its child's pid")
            .unwrap()
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let child_alive = tokio::spawn(terminates_within(child, Duration::from_secs(10)));
        let report = jobs.kill("a", &id).await.unwrap();
        assert!(report.exited);
        assert!(
            child_alive.await.unwrap(),
            "the job's child survived job_kill"
        );
    }

    #[tokio::test]
    async fn the_oldest_exited_records_are_forgotten_beyond_the_bound() {
        let jobs = executor(2, 64, 3);
        let mut ids = Vec::new();
        for n in 0..3 {
            let id = jobs
                .start("a", &format!("echo {n}"), Path::new("/"))
                .unwrap();
            wait_exited(&jobs, "a", &id).await;
            ids.push(id);
        }
        let fourth = jobs.start("a", "exec sleep 60", Path::new("/")).unwrap();
        assert_eq!(
            jobs.jobs_of("a"),
            vec![ids[1].clone(), ids[2].clone(), fourth]
        );
        assert!(matches!(
            jobs.output("a", &ids[0]),
            Err(JobError::Unknown(_))
        ));
        jobs.kill_session("a").await;
        assert!(jobs.jobs_of("a").is_empty());
    }
}
