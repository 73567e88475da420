//! Writing command output to stdout.
//!
//! Rust ignores SIGPIPE, so `println!` panics when the reader went away
//! (`switchboard services --watch | head -3`). Commands write through
//! [`emit`] instead and stop quietly when stdout is closed.

use std::io::{ErrorKind, Write};

/// Whether stdout still has a reader after writing `text`.
pub enum Emitted {
    Written,
    ReaderGone,
}

/// Writes `text` to stdout and flushes it, so each line is visible as soon
/// as it is printed even when stdout is a pipe.
pub fn emit(text: &str) -> anyhow::Result<Emitted> {
    let mut stdout = std::io::stdout().lock();
    let written = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush());
    match written {
        Ok(()) => Ok(Emitted::Written),
        Err(error) if error.kind() == ErrorKind::BrokenPipe => Ok(Emitted::ReaderGone),
        Err(error) => Err(anyhow::anyhow!("cannot write to stdout: {error}")),
    }
}
