//! What handing work from one process to another costs on this machine,
//! for the report's header. Every latency figure that crosses processes
//! (the MCP gateway's most of all: eight hand-offs a call) is bounded below
//! by it, and it varies between machines far more than our code does: in a
//! VM whose idle vCPUs halt at once, waking one costs the hypervisor tens
//! of microseconds (`docs/performance.md` §16). So the report says how the
//! machine idles and what a hand-off took in the same run.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

/// Round trips timed, after [`WARM_UP`] untimed ones.
const ROUND_TRIPS: usize = 20_000;
const WARM_UP: usize = 1_000;

/// How the machine's idle CPUs wait, read from `sysfs` (the directory
/// `/sys` normally): the cpuidle driver and governor, and with the
/// `haltpoll` driver (a guest's) how long an idle vCPU polls before it
/// halts. `None` when the kernel says nothing of it.
pub fn idle_policy(sysfs: &Path) -> Option<String> {
    let read = |path: &str| {
        std::fs::read_to_string(sysfs.join(path))
            .ok()
            .map(|text| text.trim().to_owned())
            .filter(|text| !text.is_empty())
    };
    let driver = read("devices/system/cpu/cpuidle/current_driver")?;
    let governor = read("devices/system/cpu/cpuidle/current_governor")
        .or_else(|| read("devices/system/cpu/cpuidle/current_governor_ro"))
        .unwrap_or_else(|| "unknown".into());
    let mut policy = format!("cpuidle driver {driver}, governor {governor}");
    if driver == "haltpoll" {
        if let Some(poll_ns) = read("module/haltpoll/parameters/guest_halt_poll_ns") {
            policy.push_str(&match poll_ns.as_str() {
                "0" => ", guest halt polling off (an idle vCPU halts at once)".to_owned(),
                ns => format!(", guest halt polling up to {ns} ns"),
            });
        }
    }
    Some(policy)
}

/// One-byte round trips through `cat` over pipes: p5 and p50 in
/// microseconds. Each is two hand-offs (to `cat` and back) and almost no
/// work, so it is what a hand-off costs here, the low percentile when the
/// two processes shared a CPU and the median as it mostly goes. `None`
/// when `cat` cannot be run.
pub fn pipe_round_trip() -> Option<(f64, f64)> {
    let mut cat = Command::new("cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let timed = round_trips(&mut cat);
    // Closing its stdin ends `cat`; it is reaped either way.
    drop(cat.stdin.take());
    let _ = cat.kill();
    let _ = cat.wait();
    let mut took = timed?;
    took.sort_unstable();
    let at = |percent: usize| took[took.len() * percent / 100] as f64 / 1_000.0;
    Some((at(5), at(50)))
}

/// Nanoseconds each timed round trip took.
fn round_trips(cat: &mut std::process::Child) -> Option<Vec<u64>> {
    let stdin = cat.stdin.as_mut()?;
    let stdout = cat.stdout.as_mut()?;
    let mut byte = [0u8; 1];
    let mut took = Vec::with_capacity(ROUND_TRIPS);
    for n in 0..WARM_UP + ROUND_TRIPS {
        let start = Instant::now();
        stdin.write_all(b"x").ok()?;
        stdout.read_exact(&mut byte).ok()?;
        if n >= WARM_UP {
            took.push(u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX));
        }
    }
    Some(took)
}

/// The report's line: the round trip's figures, with how the CPUs idle.
pub fn describe() -> String {
    let trip = match pipe_round_trip() {
        Some((p5, p50)) => format!(
            "a round trip through `cat` over pipes (two hand-offs) p50 {p50:.1} µs, p5 {p5:.1} µs"
        ),
        None => "not measured (`cat` could not be run)".into(),
    };
    match idle_policy(Path::new("/sys")) {
        Some(policy) => format!("{trip}; {policy}"),
        None => trip,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Files of a made-up `/sys`: (path under it, contents).
    type Files<'a> = &'a [(&'a str, &'a str)];

    fn sysfs(files: Files<'_>) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let path = root.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        root
    }

    #[test]
    fn the_idle_policy_names_driver_governor_and_a_guests_poll_window() {
        let cases: [(Files<'_>, Option<&str>); 4] = [
            (
                &[
                    ("devices/system/cpu/cpuidle/current_driver", "haltpoll\n"),
                    ("devices/system/cpu/cpuidle/current_governor", "haltpoll\n"),
                    ("module/haltpoll/parameters/guest_halt_poll_ns", "0\n"),
                ],
                Some("cpuidle driver haltpoll, governor haltpoll, guest halt polling off (an idle vCPU halts at once)"),
            ),
            (
                // Read-only governor file, values without a newline.
                &[
                    ("devices/system/cpu/cpuidle/current_driver", "haltpoll"),
                    ("devices/system/cpu/cpuidle/current_governor_ro", "haltpoll"),
                    ("module/haltpoll/parameters/guest_halt_poll_ns", "200000"),
                ],
                Some("cpuidle driver haltpoll, governor haltpoll, guest halt polling up to 200000 ns"),
            ),
            (
                &[
                    ("devices/system/cpu/cpuidle/current_driver", "intel_idle"),
                    ("devices/system/cpu/cpuidle/current_governor", "menu"),
                ],
                Some("cpuidle driver intel_idle, governor menu"),
            ),
            (&[], None),
        ];
        for (files, expected) in cases {
            let root = sysfs(files);
            assert_eq!(idle_policy(root.path()).as_deref(), expected, "{files:?}");
        }
    }

    #[test]
    fn a_round_trip_through_cat_is_timed() {
        let (p5, p50) = pipe_round_trip().expect("cat runs");
        assert!(p5 > 0.0 && p5 <= p50, "p5 {p5} µs, p50 {p50} µs");
    }
}
