//! The job executor against real processes: output and exit codes, the
//! owner check, its bounds, and kills that reach what a job started.

use super::*;

fn executor(max_running: usize, output_bytes: usize, retained: usize) -> JobExecutor {
    JobExecutor::new(
        JobLimits {
            max_running_per_session: max_running,
            output_bytes,
            retained_per_session: retained,
        },
        None,
    )
}

async fn wait_exited(jobs: &JobExecutor, owner: &str, id: &str) -> JobOutput {
    let job = jobs.owned(owner, id).unwrap();
    assert!(job.wait_exit(Duration::from_secs(10)).await);
    job.report().await.unwrap()
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
    let error = jobs.output("b", &id).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("job {id} belongs to another session")
    );
    assert!(matches!(
        jobs.kill("b", &id).await,
        Err(JobError::OtherSession(_))
    ));
    assert!(matches!(
        jobs.output("a", "job_x").await,
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
        jobs.output("a", &ids[0]).await,
        Err(JobError::Unknown(_))
    ));
    jobs.kill_session("a").await;
    assert!(jobs.jobs_of("a").is_empty());
}
