//! One message through the hub's dispatch, against a live in-process router
//! with an initialized owner and a registered service (`svc-fuzz` in the
//! input names it). The hub must not panic, must only ever send JSON-RPC
//! objects, and must leave no bookkeeping behind once both sides disconnect.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchboard_hub::fuzzing::{Harness, TOKEN};

fuzz_target!(|data: &[u8]| {
    let mut harness = Harness::new();
    // Half the inputs run on an initialized connection, so the fuzzer does
    // not have to discover the token to reach routing.
    if data.first().is_some_and(|b| b & 1 == 1) {
        let init = format!(
            r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"authToken":"{TOKEN}"}}}}"#
        );
        harness.dispatch(init.as_bytes());
        let _ = harness.drain_and_check();
    }
    harness.dispatch(data.get(1..).unwrap_or_default());
    let answers = harness.drain_and_check();
    assert!(
        answers.len() <= 2,
        "one message got {} answers: {answers:?}",
        answers.len()
    );
    harness.finish();
});
