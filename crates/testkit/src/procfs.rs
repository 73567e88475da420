//! What the kernel says about a process (Linux `/proc`): resident memory,
//! CPU time and open file descriptors; and this process's descriptor limit.
//! Used by the soak here and by the benchmark harness (`crates/bench`).

use std::io;

/// Resident set size of `pid`, in KiB (`VmRSS` of `/proc/PID/status`).
pub fn rss_kib(pid: u32) -> io::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    parse_vm_rss_kib(&status).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("/proc/{pid}/status has no VmRSS line"),
        )
    })
}

fn parse_vm_rss_kib(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

/// The direct children of `pid`, of every one of its threads
/// (`/proc/PID/task/*/children`); empty if `pid` is gone.
pub fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|text| {
            text.split_whitespace()
                .filter_map(|child| child.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// Every descendant of `pid` (a server started through `npx` or a shell is
/// more than one process).
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    let mut parents = vec![pid];
    while let Some(parent) = parents.pop() {
        for child in children(parent) {
            found.push(child);
            parents.push(child);
        }
    }
    found
}

/// Open file descriptors of `pid` (entries of `/proc/PID/fd`).
pub fn open_fds(pid: u32) -> io::Result<u64> {
    Ok(std::fs::read_dir(format!("/proc/{pid}/fd"))?.count() as u64)
}

/// User plus system CPU time of `pid` (all its threads), in seconds, from
/// `utime` and `stime` of `/proc/PID/stat` (clock ticks).
pub fn cpu_seconds(pid: u32) -> io::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let ticks = parse_cpu_ticks(&stat).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("/proc/{pid}/stat is not in the expected format"),
        )
    })?;
    Ok(ticks as f64 / clock_ticks_per_second())
}

/// CPU time of this process, in seconds.
pub fn own_cpu_seconds() -> io::Result<f64> {
    cpu_seconds(std::process::id())
}

fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    // The command name (field 2) may hold spaces and parentheses: the fields
    // that follow start after its last ')'. utime and stime are fields 14
    // and 15, so 11 and 12 after field 3 (the state).
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as f64
    } else {
        100.0
    }
}

/// Raises this process's soft `RLIMIT_NOFILE` to its hard limit; returns the
/// new soft limit. Children started afterwards inherit it.
pub fn raise_nofile_limit() -> io::Result<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the local, initialized struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if limit.rlim_cur < limit.rlim_max {
        limit.rlim_cur = limit.rlim_max;
        // SAFETY: setrlimit reads the local, initialized struct it is given.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(limit.rlim_cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descendants_include_a_grandchild() {
        let mut shell = std::process::Command::new("sh")
            .args(["-c", "sh -c 'sleep 5 & wait' & wait"])
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let found = loop {
            let found = descendants(shell.id());
            if found.len() >= 2 || std::time::Instant::now() >= deadline {
                break found;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        let _ = shell.kill();
        let _ = shell.wait();
        assert_eq!(found.len(), 2, "the inner shell and its sleep: {found:?}");
        assert!(children(shell.id()).is_empty(), "a reaped process has none");
    }

    #[test]
    fn reads_vm_rss_in_kib() {
        let status = "Name:\tx\nVmPeak:\t  100 kB\nVmRSS:\t    2048 kB\nThreads:\t3\n";
        assert_eq!(parse_vm_rss_kib(status), Some(2048));
    }

    #[test]
    fn cpu_ticks_survive_a_command_name_with_spaces_and_parentheses() {
        let stat = "42 (a b) c)) S 1 42 42 0 -1 4194304 100 0 0 0 7 5 0 0 20 0 3 0 1 1 1";
        assert_eq!(parse_cpu_ticks(stat), Some(12));
    }

    #[test]
    fn this_process_has_memory_cpu_time_and_descriptors() {
        let pid = std::process::id();
        assert!(rss_kib(pid).unwrap() > 0);
        assert!(own_cpu_seconds().unwrap() >= 0.0);
        assert!(open_fds(pid).unwrap() >= 3);
    }

    #[test]
    fn the_raised_limit_is_the_hard_limit() {
        let raised = raise_nofile_limit().unwrap();
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes into the local, initialized struct it is given.
        assert_eq!(
            unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) },
            0
        );
        assert_eq!(raised, limit.rlim_cur);
        assert_eq!(limit.rlim_cur, limit.rlim_max);
    }
}
