//! Which call a line too long to keep answers, from the line's two ends.
//!
//! The tap does not keep a line longer than its bound whole (rmcp would
//! drop it too), so before this the call it answered waited for its
//! timeout or a cancel. A JSON-RPC answer's `id` is a member of the top
//! level, written before the long `result` (or `error`) or after it, so the
//! tap keeps the first and last [`KEPT_BYTES`] of such a line and reads the
//! top-level members at each end, as far as they are whole.
//!
//! A line is taken for an answer only when the member too long to read at
//! its head is `result` or `error`, and no `method` is among the members
//! read at either end: a request or notification of the server's is never
//! mistaken for an answer to a call of ours with the same id. Anything
//! else (no `id` at either end, a line that is no object) has no call to
//! end, and is dropped as before.

use rmcp::model::RequestId;

/// How much of each end of a long line is kept.
pub(crate) const KEPT_BYTES: usize = 4096;

/// The two ends of a line being dropped for its length.
pub(crate) struct LongLine {
    head: Vec<u8>,
    tail: Vec<u8>,
}

impl LongLine {
    /// Starts with what was read of the line so far.
    pub(crate) fn new(start: &[u8]) -> LongLine {
        let mut long = LongLine {
            head: start[..start.len().min(KEPT_BYTES)].to_vec(),
            tail: Vec::with_capacity(KEPT_BYTES),
        };
        long.more(start);
        long
    }

    /// The line goes on with `part`: only its last bytes are kept.
    pub(crate) fn more(&mut self, part: &[u8]) {
        if part.len() >= KEPT_BYTES {
            self.tail.clear();
            self.tail
                .extend_from_slice(&part[part.len() - KEPT_BYTES..]);
            return;
        }
        let over = (self.tail.len() + part.len()).saturating_sub(KEPT_BYTES);
        self.tail.drain(..over);
        self.tail.extend_from_slice(part);
    }

    /// The id of the answer this line is, if it is one and the id is at
    /// either end.
    pub(crate) fn answered_id(&self) -> Option<RequestId> {
        answered_id(&self.head, &self.tail)
    }
}

/// The top-level members read at one end of a line.
#[derive(Default)]
struct Ends {
    id: Option<RequestId>,
    method: bool,
}

fn answered_id(head: &[u8], tail: &[u8]) -> Option<RequestId> {
    let mut read = Ends::default();
    let long_member = read_head(head, &mut read)?;
    if long_member != "result" && long_member != "error" {
        return None;
    }
    read_tail(tail, &mut read);
    if read.method {
        return None;
    }
    read.id
}

/// Reads the members at the head, in order, until one whose value does
/// not end within `head`: that member's name. `None`: no object, or the
/// whole object fits (it was not too long for being an answer).
fn read_head(head: &[u8], read: &mut Ends) -> Option<String> {
    let mut at = skip_space(head, 0);
    if head.get(at) != Some(&b'{') {
        return None;
    }
    at += 1;
    loop {
        at = skip_space(head, at);
        let key_end = string_end(head, at)?;
        let key: String = serde_json::from_slice(&head[at..key_end]).ok()?;
        at = skip_space(head, key_end);
        if head.get(at) != Some(&b':') {
            return None;
        }
        at = skip_space(head, at + 1);
        let Some(value_end) = value_end(head, at) else {
            return Some(key);
        };
        note(read, &key, &head[at..value_end]);
        at = skip_space(head, value_end);
        match head.get(at) {
            Some(b',') => at += 1,
            _ => return None,
        }
    }
}

/// Reads the members at the tail, from the last back, as long as their
/// values are strings, numbers, `true`, `false` or `null`.
fn read_tail(tail: &[u8], read: &mut Ends) {
    let mut end = skip_space_back(tail, tail.len());
    if end == 0 || tail[end - 1] != b'}' {
        return;
    }
    end -= 1;
    loop {
        end = skip_space_back(tail, end);
        let Some(value_start) = scalar_start(tail, end) else {
            return;
        };
        let value = &tail[value_start..end];
        let colon = skip_space_back(tail, value_start);
        if colon == 0 || tail[colon - 1] != b':' {
            return;
        }
        let key_end = skip_space_back(tail, colon - 1);
        let Some(key_start) = string_start(tail, key_end) else {
            return;
        };
        let Ok(key) = serde_json::from_slice::<String>(&tail[key_start..key_end]) else {
            return;
        };
        note(read, &key, value);
        end = skip_space_back(tail, key_start);
        if end == 0 || tail[end - 1] != b',' {
            return;
        }
        end -= 1;
    }
}

fn note(read: &mut Ends, key: &str, value: &[u8]) {
    match key {
        "id" => read.id = serde_json::from_slice(value).ok(),
        "method" => read.method = true,
        _ => {}
    }
}

fn is_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\r' | b'\n')
}

fn skip_space(text: &[u8], mut at: usize) -> usize {
    while text.get(at).is_some_and(|&b| is_space(b)) {
        at += 1;
    }
    at
}

fn skip_space_back(text: &[u8], mut end: usize) -> usize {
    while end > 0 && is_space(text[end - 1]) {
        end -= 1;
    }
    end
}

/// Where the string starting at `at` ends (past its closing quote).
fn string_end(text: &[u8], at: usize) -> Option<usize> {
    if text.get(at) != Some(&b'"') {
        return None;
    }
    let mut i = at + 1;
    while i < text.len() {
        match text[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// Where the string ending at `end` (just past its closing quote) starts:
/// the first quote back that no odd run of backslashes escapes.
fn string_start(text: &[u8], end: usize) -> Option<usize> {
    if end < 2 || text[end - 1] != b'"' {
        return None;
    }
    let mut i = end - 1;
    while i > 0 {
        i -= 1;
        if text[i] == b'"' {
            let backslashes = text[..i].iter().rev().take_while(|&&b| b == b'\\').count();
            if backslashes % 2 == 0 {
                return Some(i);
            }
        }
    }
    None
}

/// Where the value starting at `at` ends, if it ends within `text`.
fn value_end(text: &[u8], at: usize) -> Option<usize> {
    match text.get(at)? {
        b'"' => string_end(text, at),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = at;
            while i < text.len() {
                match text[i] {
                    b'"' => {
                        i = string_end(text, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            None
        }
        _ => {
            let len = text[at..]
                .iter()
                .position(|&b| matches!(b, b',' | b'}' | b']') || is_space(b))?;
            Some(at + len)
        }
    }
}

/// Where the string, number or literal ending at `end` starts; `None` for
/// an object or array (not read backwards).
fn scalar_start(text: &[u8], end: usize) -> Option<usize> {
    match text.get(end.checked_sub(1)?)? {
        b'"' => string_start(text, end),
        b'}' | b']' => None,
        _ => {
            let len = text[..end]
                .iter()
                .rev()
                .position(|&b| matches!(b, b':' | b',' | b'{' | b'[') || is_space(b))?;
            Some(end - len)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ends of `line` as the tap keeps them.
    fn ends(line: &str) -> Option<RequestId> {
        let mut long = LongLine::new(&line.as_bytes()[..KEPT_BYTES]);
        for chunk in line.as_bytes()[KEPT_BYTES..].chunks(1000) {
            long.more(chunk);
        }
        long.answered_id()
    }

    fn filler() -> String {
        format!(
            r#"{{"content":[{{"type":"text","text":"{}"}}]}}"#,
            "a".repeat(3 * KEPT_BYTES)
        )
    }

    #[test]
    fn the_id_before_the_result_is_read_at_the_head() {
        let line = format!(r#"{{"jsonrpc":"2.0","id":7,"result":{}}}"#, filler());
        assert_eq!(ends(&line), Some(RequestId::Number(7)));
        let line = format!(
            r#"{{ "id" : "c-\"1", "jsonrpc":"2.0", "error":{}}}"#,
            filler()
        );
        assert_eq!(ends(&line), Some(RequestId::String("c-\"1".into())));
    }

    #[test]
    fn the_id_after_the_result_is_read_at_the_tail() {
        // The order the TypeScript SDK writes an answer in.
        let line = format!(r#"{{"result":{},"jsonrpc":"2.0","id":12}}"#, filler());
        assert_eq!(ends(&line), Some(RequestId::Number(12)));
        let line = format!("{{\"result\":{}, \"id\" : \"a\\\\\" }}\r\n", filler());
        assert_eq!(ends(&line), Some(RequestId::String("a\\".into())));
    }

    #[test]
    fn a_request_or_an_id_inside_the_result_is_not_an_answer() {
        // The server's own request: its id is in the server's numbering.
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage","params":{}}}"#,
            filler()
        );
        assert_eq!(ends(&line), None);
        let line = format!(r#"{{"params":{},"method":"x","id":3}}"#, filler());
        assert_eq!(ends(&line), None);
        let line = format!(r#"{{"result":{},"method":"x","id":3}}"#, filler());
        assert_eq!(ends(&line), None);
        // `id`s nested in the result are not the answer's.
        let nested = format!(
            r#"{{"jsonrpc":"2.0","result":{{"id":1,"text":"{}","items":[{{"id":2}}]}}}}"#,
            "a".repeat(3 * KEPT_BYTES)
        );
        assert_eq!(ends(&nested), None);
        assert_eq!(ends(&"x".repeat(3 * KEPT_BYTES)), None);
    }

    #[test]
    fn only_the_last_bytes_are_kept_at_the_tail() {
        let mut long = LongLine::new(b"{\"result\":");
        long.more(&[b'a'; 10 * KEPT_BYTES]);
        long.more(b"x,\"id\":5}");
        assert_eq!(long.tail.len(), KEPT_BYTES);
        assert!(long.tail.ends_with(b"\"id\":5}"));
        assert_eq!(long.head, b"{\"result\":");
    }
}
