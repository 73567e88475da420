//! What the kernel says about a process: resident memory and open file
//! descriptors (Linux `/proc`), and the descriptor limit of this process.

use std::io;

/// Resident set size of `pid`, in KiB (`VmRSS` of `/proc/PID/status`).
pub fn rss_kib(pid: u32) -> io::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no VmRSS line"))
}

/// Open file descriptors of `pid` (entries of `/proc/PID/fd`).
pub fn open_fds(pid: u32) -> io::Result<u64> {
    Ok(std::fs::read_dir(format!("/proc/{pid}/fd"))?.count() as u64)
}

/// Raises this process's soft `RLIMIT_NOFILE` to its hard limit; returns the
/// new soft limit.
pub fn raise_nofile_limit() -> io::Result<u64> {
    // SAFETY: getrlimit/setrlimit with a pointer to a local, initialized struct.
    unsafe {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return Err(io::Error::last_os_error());
        }
        if limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(limit.rlim_cur)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_memory_and_descriptors() {
        let pid = std::process::id();
        assert!(rss_kib(pid).unwrap() > 0);
        assert!(open_fds(pid).unwrap() >= 3);
    }
}
