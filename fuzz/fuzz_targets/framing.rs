//! A byte stream through the Unix socket's line framing, cut into reads of
//! fuzzer-chosen sizes, then dispatched. Checks as `dispatch`, and that
//! framing never loses the boundary between messages (every answer is one
//! JSON object on its own line).
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchboard_hub::fuzzing::Harness;

fuzz_target!(|data: &[u8]| {
    let Some((&count, rest)) = data.split_first() else {
        return;
    };
    let count = usize::from(count % 8).min(rest.len());
    let (cuts, stream) = rest.split_at(count);
    let cuts: Vec<usize> = cuts.iter().map(|&c| usize::from(c).max(1)).collect();
    let mut harness = Harness::new();
    harness.stream(stream, &cuts);
    let _ = harness.drain_and_check();
    harness.finish();
});
