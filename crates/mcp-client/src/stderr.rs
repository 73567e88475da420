//! A stdio server's captured stderr: logged line by line, its last bytes
//! kept for the report of a failed start.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::io::AsyncBufReadExt;
use tokio::process::ChildStderr;
use tokio::task::JoinHandle;

/// How much of a server's stderr is kept for a start failure's report.
const TAIL_BYTES: usize = 1024;
/// How long a failed start waits for the server's last words.
const LAST_WORDS_WAIT: Duration = Duration::from_secs(1);

/// The reader of one server's stderr; it runs until the stream ends.
pub(crate) struct StderrTail {
    tail: Arc<Mutex<String>>,
    reader: JoinHandle<()>,
}

impl StderrTail {
    pub(crate) fn follow(stderr: ChildStderr, label: String) -> Self {
        let tail = Arc::new(Mutex::new(String::new()));
        let reader = tokio::spawn(read(stderr, label, tail.clone()));
        StderrTail { tail, reader }
    }

    /// What the server said, once its stderr ended (bounded by a second),
    /// lines joined by ` | `; empty if nothing.
    pub(crate) async fn last_words(self) -> String {
        let _ = tokio::time::timeout(LAST_WORDS_WAIT, self.reader).await;
        let said = self.tail.lock().trim().to_owned();
        said
    }
}

async fn read(stderr: ChildStderr, label: String, tail: Arc<Mutex<String>>) {
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::debug!(target: "switchboard_mcp_client::stderr", server = %label, "{line}");
        let mut tail = tail.lock();
        if !tail.is_empty() {
            tail.push_str(" | ");
        }
        tail.push_str(&line);
        if tail.len() > TAIL_BYTES {
            let mut cut = tail.len() - TAIL_BYTES;
            while !tail.is_char_boundary(cut) {
                cut += 1;
            }
            tail.drain(..cut);
        }
    }
}
