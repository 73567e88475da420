//! How every run's report ends (the soaks, the connections run): each
//! failure on a line of its own, then `RESULT: PASS` or `RESULT: FAIL`,
//! the line a reader, `.ci/run`'s log and `bench/` look for.

use std::fmt;

pub(crate) fn write(f: &mut fmt::Formatter<'_>, failures: &[String]) -> fmt::Result {
    for failure in failures {
        writeln!(f, "FAILURE: {failure}")?;
    }
    let verdict = if failures.is_empty() { "PASS" } else { "FAIL" };
    writeln!(f, "RESULT: {verdict}")
}
