//! What `/proc` says about a process: resident memory and CPU time.

use std::io;

/// `VmRSS` of `pid`, in bytes.
pub fn rss_bytes(pid: u32) -> io::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    parse_vm_rss(&status).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("/proc/{pid}/status has no VmRSS line"),
        )
    })
}

fn parse_vm_rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line
        .trim_start_matches("VmRSS:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// User plus system CPU time of `pid` (all its threads), in seconds, from
/// `utime` and `stime` of `/proc/<pid>/stat` (clock ticks).
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_vm_rss_in_bytes() {
        let status = "Name:\tx\nVmPeak:\t  100 kB\nVmRSS:\t    2048 kB\nThreads:\t3\n";
        assert_eq!(parse_vm_rss(status), Some(2048 * 1024));
    }

    #[test]
    fn cpu_ticks_survive_a_command_name_with_spaces_and_parentheses() {
        let stat = "42 (a b) c)) S 1 42 42 0 -1 4194304 100 0 0 0 7 5 0 0 20 0 3 0 1 1 1";
        assert_eq!(parse_cpu_ticks(stat), Some(12));
    }

    #[test]
    fn own_process_is_readable() {
        assert!(rss_bytes(std::process::id()).unwrap() > 0);
        assert!(own_cpu_seconds().unwrap() >= 0.0);
    }
}
