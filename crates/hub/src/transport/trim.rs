//! Gives freed memory back to the system after idle WebSocket connections
//! dropped their readers (`ws.rs`). A dropped reader frees its buffer,
//! whatever a large frame grew it to, but glibc keeps freed chunks below its mmap threshold in its heap, so
//! the process's resident size would not drop: `malloc_trim(0)` hands the
//! whole free pages inside them back (`madvise`).
//!
//! Trailing and coalesced: the first release schedules one trim
//! [`TRIM_DELAY`] later, and releases meanwhile join it, so a thousand
//! connections going idle together cost one trim. The trim runs on a
//! blocking thread (it walks the allocator's arenas and may take
//! milliseconds), never on a worker that routes messages. A fixed, lower
//! mmap threshold would release the buffers at once too, but it cost the
//! 16 KiB notification row more than half its throughput (every batch over
//! the threshold became an mmap and munmap).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How long releases are gathered before one trim: connections that went
/// idle together (the readers' idle timers run 1 to 2 s) release within a
/// few milliseconds of each other, so a short window already coalesces
/// them, and the memory leaves soon after the connections went idle.
const TRIM_DELAY: Duration = Duration::from_millis(250);

/// A trim is scheduled and has not started yet.
static SCHEDULED: AtomicBool = AtomicBool::new(false);

/// Asks for a trim soon (a reader gave back a grown buffer).
pub(crate) fn soon() {
    if SCHEDULED.swap(true, Ordering::AcqRel) {
        return; // one is coming; it will cover this release too
    }
    tokio::spawn(async {
        tokio::time::sleep(TRIM_DELAY).await;
        // Cleared before the trim starts: a release from now on needs a
        // trim of its own.
        SCHEDULED.store(false, Ordering::Release);
        // A trim that cannot run (the runtime is shutting down) is
        // nothing lost: the memory is free either way, only not returned.
        let _ = tokio::task::spawn_blocking(trim).await;
    });
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: malloc_trim only walks and releases the allocator's own free
    // memory; it takes the allocator's locks itself.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}
