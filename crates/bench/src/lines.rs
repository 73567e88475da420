//! Newline-delimited reading for the lean clients, and the few scans the hot
//! path needs (a message's id, the floor's routing prefix). Nothing here
//! builds a JSON value.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt};

/// A read buffer that hands out complete lines and keeps the tail.
pub struct LineBuf {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl std::fmt::Debug for LineBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LineBuf")
            .field("buffered", &(self.end - self.start))
            .field("capacity", &self.buf.len())
            .finish()
    }
}

impl LineBuf {
    pub fn new(capacity: usize) -> Self {
        LineBuf {
            buf: vec![0; capacity.max(64)],
            start: 0,
            end: 0,
        }
    }

    /// Reads once; `Ok(0)` is EOF. Makes room first: drops consumed bytes,
    /// and doubles the buffer when one line fills it.
    pub async fn fill<R: AsyncRead + Unpin>(&mut self, reader: &mut R) -> io::Result<usize> {
        if self.start > 0 && (self.start == self.end || self.end == self.buf.len()) {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buf.len() {
            let doubled = self.buf.len() * 2;
            self.buf.resize(doubled, 0);
        }
        let n = reader.read(&mut self.buf[self.end..]).await?;
        self.end += n;
        Ok(n)
    }

    /// Calls `each` on every complete line (without its `\n`) and consumes
    /// them; returns how many there were.
    pub fn drain_lines(&mut self, mut each: impl FnMut(&[u8])) -> usize {
        let mut count = 0;
        while let Some(at) = memchr::memchr(b'\n', &self.buf[self.start..self.end]) {
            each(&self.buf[self.start..self.start + at]);
            self.start += at + 1;
            count += 1;
        }
        count
    }

    /// Counts complete lines and consumes them, without looking inside.
    pub fn count_lines(&mut self) -> usize {
        let window = &self.buf[self.start..self.end];
        let count = memchr::memchr_iter(b'\n', window).count();
        if let Some(last) = memchr::memrchr(b'\n', window) {
            self.start += last + 1;
        }
        count
    }

    /// The first complete line, if any, without consuming it.
    pub fn first_line(&self) -> Option<&[u8]> {
        let window = &self.buf[self.start..self.end];
        memchr::memchr(b'\n', window).map(|at| &window[..at])
    }

    /// Takes the next complete line, if one is buffered.
    pub fn take_line(&mut self) -> Option<Vec<u8>> {
        let at = memchr::memchr(b'\n', &self.buf[self.start..self.end])?;
        let line = self.buf[self.start..self.start + at].to_vec();
        self.start += at + 1;
        Some(line)
    }
}

/// What follows a message's id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    Result,
    Error,
    /// A request (`,"method":…`).
    Method,
    Other,
}

/// The integer id of a JSON-RPC message that starts as the hub writes it
/// (`{"jsonrpc":"2.0","id":N,…`, the id among the first members), and what
/// follows it. `None` when there is no integer id up front.
pub fn message_id(json: &[u8]) -> Option<(u64, After)> {
    const KEY: &[u8] = b"\"id\":";
    // The id must be the first member, or follow `"jsonrpc":"2.0"` first:
    // an `"id"` further in belongs to something else (params, say).
    let members = json
        .strip_prefix(b"{\"jsonrpc\":\"2.0\",")
        .or_else(|| json.strip_prefix(b"{"))?;
    if !members.starts_with(KEY) {
        return None;
    }
    let json = members;
    let at = KEY.len();
    let digits = json[at..].iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || digits > 19 {
        return None;
    }
    let id = json[at..at + digits]
        .iter()
        .fold(0u64, |id, &b| id * 10 + u64::from(b - b'0'));
    let rest = &json[at + digits..];
    let after = if rest.starts_with(b",\"result\":") {
        After::Result
    } else if rest.starts_with(b",\"error\":") {
        After::Error
    } else if rest.starts_with(b",\"method\":") {
        After::Method
    } else {
        After::Other
    };
    Some((id, after))
}

/// Splits a floor line `<name> <rest>` at its first space.
pub fn split_route(line: &[u8]) -> Option<(&[u8], &[u8])> {
    let at = memchr::memchr(b' ', line)?;
    Some((&line[..at], &line[at + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_split_across_reads_are_joined_and_long_lines_grow_the_buffer() {
        let data = b"one\ntwo-is-longer-than-the-buffer\nthr".to_vec();
        let mut reader: &[u8] = &data;
        let mut buf = LineBuf::new(8);
        let mut lines = Vec::new();
        while buf.fill(&mut reader).await.unwrap() > 0 {
            buf.drain_lines(|line| lines.push(String::from_utf8(line.to_vec()).unwrap()));
        }
        assert_eq!(lines, ["one", "two-is-longer-than-the-buffer"]);
        assert_eq!(buf.first_line(), None);
    }

    #[tokio::test]
    async fn count_lines_keeps_the_partial_tail() {
        let mut reader: &[u8] = b"a\nb\nc";
        let mut buf = LineBuf::new(64);
        buf.fill(&mut reader).await.unwrap();
        assert_eq!(buf.count_lines(), 2);
        let mut more: &[u8] = b"\n";
        buf.fill(&mut more).await.unwrap();
        assert_eq!(buf.take_line().as_deref(), Some(&b"c"[..]));
    }

    #[test]
    fn message_ids_are_read_as_the_hub_writes_them() {
        assert_eq!(
            message_id(br#"{"jsonrpc":"2.0","id":42,"result":{}}"#),
            Some((42, After::Result))
        );
        assert_eq!(
            message_id(br#"{"jsonrpc":"2.0","id":7,"error":{"code":-32600}}"#),
            Some((7, After::Error))
        );
        assert_eq!(
            message_id(br#"{"jsonrpc":"2.0","id":9,"method":"clientService/handleRequest"}"#),
            Some((9, After::Method))
        );
        assert_eq!(
            message_id(br#"{"jsonrpc":"2.0","method":"x","params":{"id":1}}"#),
            None
        );
        assert_eq!(
            message_id(br#"{"jsonrpc":"2.0","id":"a","result":1}"#),
            None
        );
    }

    #[test]
    fn floor_lines_split_at_the_first_space() {
        assert_eq!(
            split_route(b"svc-1 {\"a\": 1}"),
            Some((&b"svc-1"[..], &b"{\"a\": 1}"[..]))
        );
        assert_eq!(split_route(b"nospace"), None);
    }
}
