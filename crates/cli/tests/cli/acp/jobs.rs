//! Background jobs: private to their session, bounded, and dead when their
//! session closes.

use agent_client_protocol::v1::schema::{StopReason, ToolCallStatus};
use serde_json::json;

use crate::acp::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_belongs_to_the_session_that_started_it() {
    let h = Harness::start().await;
    let editor = h.editor().await;
    let a = editor.new_session(&h.workdir).await;
    let b = editor.new_session(&h.workdir).await;
    let pipe = PidPipe::create(h.path("pid"));
    h.model.script(
        "A starts",
        vec![
            use_tool("s1", "job_start", json!({"command": pipe.job_command()})),
            say("ok"),
        ],
    );
    let prompt = editor.prompt(&a, "A starts");
    editor.next_permission().await.answer("allow_once");
    assert_eq!(
        settle(prompt).await.unwrap().stop_reason,
        StopReason::EndTurn
    );
    let started = &tool_calls(&editor.updates(&a))[0];
    assert_eq!(started.title, format!("Run `{}`", pipe.job_command()));
    let job_id = started.raw_output.as_ref().expect("job_start output")["jobId"]
        .as_str()
        .expect("a job id")
        .to_owned();
    let pid = pipe.read_pid().await;

    // B knows the id, and still cannot read or kill the job.
    h.model.script(
        "B snoops",
        vec![
            use_tool("b1", "job_output", json!({"jobId": job_id})),
            use_tool("b2", "job_kill", json!({"jobId": job_id})),
            say("denied"),
        ],
    );
    assert_eq!(
        editor
            .prompt_and_wait(&b, "B snoops")
            .await
            .unwrap()
            .stop_reason,
        StopReason::EndTurn
    );
    let refusal = format!("job {job_id} belongs to another session");
    let calls = tool_calls(&editor.updates(&b));
    assert_eq!(calls.len(), 2);
    for call in &calls {
        assert_eq!(call.statuses.last(), Some(&ToolCallStatus::Failed));
        assert_eq!(call.text, refusal);
    }
    let told = &h.model.requests_for("B snoops")[1];
    let last = told["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["role"], "tool");
    assert_eq!(last["content"], format!("error: {refusal}"));
    assert!(!process_gone(pid), "B's kill reached A's job");

    // A can read it.
    h.model.script(
        "A reads",
        vec![
            use_tool("a2", "job_output", json!({"jobId": job_id})),
            say("read"),
        ],
    );
    editor.prompt_and_wait(&a, "A reads").await.unwrap();
    let read = &tool_calls(&editor.updates(&a))[1];
    assert_eq!(read.statuses.last(), Some(&ToolCallStatus::Completed));
    assert_eq!(read.raw_output.as_ref().unwrap()["exited"], false);

    // Closing A kills it, and sends B nothing.
    let updates_of_b = editor.updates(&b).len();
    editor.close_session(&a).await.expect("session/close");
    assert!(process_gone(pid), "A's job survived session/close");
    assert_eq!(editor.updates(&b).len(), updates_of_b);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_jobs_are_bounded_per_session_and_output_is_a_bounded_tail() {
    let h = Harness::start().await;
    let editor = h
        .editor_with(&["--max-jobs", "2", "--job-output-bytes", "16"])
        .await;
    let a = editor.new_session(&h.workdir).await;
    let b = editor.new_session(&h.workdir).await;
    h.model.script(
        "three jobs",
        vec![
            use_tool("j1", "job_start", json!({"command": "exec sleep 600"})),
            use_tool(
                "j2",
                "job_start",
                json!({"command": "printf 0123456789abcdefghij; exec sleep 600"}),
            ),
            use_tool("j3", "job_start", json!({"command": "exec sleep 600"})),
            say("two ran"),
        ],
    );
    let prompt = editor.prompt(&a, "three jobs");
    editor.next_permission().await.answer("allow_always");
    assert_eq!(
        settle(prompt).await.unwrap().stop_reason,
        StopReason::EndTurn
    );
    let calls = tool_calls(&editor.updates(&a));
    assert_eq!(calls[0].statuses.last(), Some(&ToolCallStatus::Completed));
    assert_eq!(calls[1].statuses.last(), Some(&ToolCallStatus::Completed));
    assert_eq!(calls[2].statuses.last(), Some(&ToolCallStatus::Failed));
    assert_eq!(
        calls[2].text,
        "this session already has 2 running jobs; at most 2 may run at once"
    );

    // The bound is per session: B may still start jobs.
    h.model.script(
        "B job",
        vec![
            use_tool("jb", "job_start", json!({"command": "exec sleep 600"})),
            say("ok"),
        ],
    );
    let prompt = editor.prompt(&b, "B job");
    editor.next_permission().await.answer("allow_once");
    settle(prompt).await.unwrap();
    assert_eq!(
        tool_calls(&editor.updates(&b))[0].statuses.last(),
        Some(&ToolCallStatus::Completed)
    );

    // Killing the printing job reports its output's last 16 bytes.
    let printing = calls[1].raw_output.as_ref().unwrap()["jobId"]
        .as_str()
        .unwrap()
        .to_owned();
    h.model.script(
        "kill it",
        vec![
            use_tool("k", "job_kill", json!({"jobId": printing})),
            say("killed"),
        ],
    );
    editor.prompt_and_wait(&a, "kill it").await.unwrap();
    let killed = tool_calls(&editor.updates(&a)).pop().unwrap();
    let report = killed.raw_output.expect("job_kill output");
    assert_eq!(report["output"], "456789abcdefghij");
    assert_eq!(report["truncated"], true);
    assert_eq!(report["exited"], true);
    assert_eq!(report["signal"], 9);
}

/// The session id of process `pid` (field 6 of `/proc/<pid>/stat`).
fn session_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(3)?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_process_of_any_job_survives_a_sigkill_of_the_front() {
    let h = Harness::start().await;
    let mut editor = h.editor().await;
    let a = editor.new_session(&h.workdir).await;
    let b = editor.new_session(&h.workdir).await;
    // In each session: a job whose shell starts a grandchild that calls
    // setsid and is orphaned at once (its parent subshell exits), then the
    // job's leader sleeps.
    let mut pids = Vec::new();
    for (session, name) in [(&a, "a"), (&b, "b")] {
        let leader = PidPipe::create(h.path(&format!("leader-{name}")));
        let detached = PidPipe::create(h.path(&format!("detached-{name}")));
        let command = format!(
            "( setsid sh -c 'echo $$ > \"{}\"; exec sleep 600' & ) ; echo $$ > '{}'; exec sleep 600",
            detached.path.display(),
            leader.path.display()
        );
        let prompt = format!("start {name}");
        h.model.script(
            &prompt,
            vec![
                use_tool("s", "job_start", json!({"command": command})),
                say("started"),
            ],
        );
        let answer = editor.prompt(session, &prompt);
        editor.next_permission().await.answer("allow_once");
        assert_eq!(
            settle(answer).await.unwrap().stop_reason,
            StopReason::EndTurn
        );
        let detached_pid = detached.read_pid().await;
        pids.push(leader.read_pid().await);
        pids.push(detached_pid);
        assert_eq!(
            session_of(detached_pid),
            Some(detached_pid),
            "the grandchild leads a session of its own"
        );
    }
    for pid in &pids {
        assert!(!process_gone(*pid), "job process {pid} is not running");
    }

    editor.kill().await;
    switchboard_testkit::eventually(
        "every job process is gone after kill -9 of the front",
        || pids.iter().all(|pid| process_gone(*pid)),
    )
    .await;
}

/// A guard run by hand (as the front runs it) whose job first has an
/// orphan re-parented to the guard and reaped by it, then loses its front:
/// the guard still kills the job. It once read its signal descriptor
/// blocking, so after that first SIGCHLD it waited for another signal and
/// never saw the lifeline end (CI caught it as a job outliving a killed
/// front). The job writes its pid only once the orphan is reaped, so the
/// order is certain.
#[tokio::test]
async fn a_guard_that_reaped_an_orphan_still_sees_its_front_go() {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::process::{CommandExt, ExitStatusExt};

    let dir = tempfile::tempdir().unwrap();
    let pipe = PidPipe::create(dir.path().join("pid"));
    let orphan = dir.path().join("orphan");
    // `kill -0` succeeds on a zombie, so the loop ends only once the guard
    // has reaped the orphan.
    let command = format!(
        "( sleep 0.1 & echo $! > '{orphan}' ) ; \
         while kill -0 \"$(cat '{orphan}')\" 2>/dev/null; do sleep 0.02; done; \
         echo $$ > '{pid}'; exec sleep 600",
        orphan = orphan.display(),
        pid = pipe.path.display()
    );

    let mut ends = [0; 2];
    // SAFETY: `ends` has room for the two descriptors pipe2 writes.
    assert_eq!(
        unsafe { libc::pipe2(ends.as_mut_ptr(), libc::O_CLOEXEC) },
        0
    );
    // SAFETY: pipe2 just opened both; each is owned here once.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(ends[0]), OwnedFd::from_raw_fd(ends[1])) };
    let lifeline = read.as_raw_fd();
    let mut guard = std::process::Command::new(switchboard_testkit::switchboard_binary());
    guard
        .args(["__acp-guard", "--lifeline", &lifeline.to_string(), "--"])
        .args(["sh", "-c", &command]);
    // SAFETY: only fcntl between fork and exec, on a descriptor this process
    // owns: the lifeline's read end stays open in the guard alone.
    unsafe {
        guard.pre_exec(move || {
            if libc::fcntl(lifeline, libc::F_SETFD, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut guard = tokio::process::Command::from(guard).spawn().unwrap();
    drop(read);
    let job = pipe.read_pid().await;
    assert!(!process_gone(job));

    drop(write); // the front is gone
    let status = tokio::time::timeout(WAIT, guard.wait())
        .await
        .expect("the guard ends once its front is gone")
        .unwrap();
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
    assert!(process_gone(job), "the job {job} outlived its guard");
}
