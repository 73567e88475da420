//! A JSON validator that walks a message once and reports where its members
//! are.
//!
//! The hub must validate every message (a malformed line is answered with
//! `-32700`, never forwarded), and routing needs the positions of a few
//! members: the envelope's `method`, `id` and `params`, and inside `params`
//! the `serviceId`, `method` and payload of a `clientService/*` call. This
//! module does both in one pass. The payload is validated and skipped, never
//! decoded: nothing here builds a value or allocates (except for nesting
//! deeper than 128 levels, `Nesting::INLINE`).
//!
//! What it accepts is RFC 8259 exactly as serde_json's validating reader
//! accepts it (`serde_json::from_str::<IgnoredAny>`): the fuzz target
//! `json_validator` and the tests below compare the two on every input.
//! In particular, like serde_json, `\u` escapes are checked for four hex
//! digits but not for surrogate pairing (such a string is valid JSON without
//! Unicode text: [`string_text`] says so), and nesting depth is not a
//! syntax error (the message size bounds it; [`depth`] measures it).
//!
//! Why not serde_json here: for a 200 B notification, serde_json's string
//! scanning (8 bytes at a time, in general-purpose registers) was half of the
//! hub's instructions per message (`docs/performance.md` §2). Here string
//! text is scanned sixteen bytes per step with SSE2 (part of every x86-64
//! CPU; other targets take a byte loop).

use std::borrow::Cow;
use std::fmt;

/// Where a text stops being JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyntaxError {
    /// Byte offset of the first byte that does not fit (the text's length
    /// when it ends too early).
    pub at: usize,
    pub expected: &'static str,
}

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "expected {} at byte {}", self.expected, self.at)
    }
}

impl std::error::Error for SyntaxError {}

/// Whether `text` is exactly one JSON value, with optional whitespace
/// around it.
pub fn validate(text: &str) -> Result<(), SyntaxError> {
    depth(text).map(|_| ())
}

/// Validates `text` like [`validate`] and returns how deeply it nests: 0 for
/// a scalar, 1 for `[]` or `{"a":1}`, 2 for `[[]]`, and so on (the levels
/// serde_json counts against its recursion limit).
pub fn depth(text: &str) -> Result<usize, SyntaxError> {
    let mut cursor = Cursor::new(text);
    cursor.skip_space();
    cursor.value()?;
    cursor.end()?;
    Ok(cursor.deepest())
}

/// Whether `byte` is JSON whitespace: space, tab, CR or LF. (Unlike
/// `u8::is_ascii_whitespace`, not form feed.)
#[inline]
pub fn is_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\r')
}

/// `bytes` without the JSON whitespace around it (see [`is_space`]); a form
/// feed, or any other byte, stays and makes the text invalid.
#[inline]
pub fn trim_space(mut bytes: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = bytes {
        if !is_space(*first) {
            break;
        }
        bytes = rest;
    }
    while let [rest @ .., last] = bytes {
        if !is_space(*last) {
            break;
        }
        bytes = rest;
    }
    bytes
}

/// Why a JSON value has no string text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TextError {
    #[error("is not a string")]
    NotAString,
    /// Valid JSON (the grammar allows `\ud800` alone) that is no Unicode
    /// text: serde_json, and so every Rust receiver, refuses to decode it.
    #[error("is not valid Unicode text (it has an unpaired surrogate escape)")]
    LoneSurrogate,
}

/// The text of `value`, the text of a valid JSON value, when it is a string
/// with Unicode text: borrowed when it has no escapes.
pub fn string_text(value: &str) -> Result<Cow<'_, str>, TextError> {
    if !value.starts_with('"') {
        return Err(TextError::NotAString);
    }
    if !value.contains('\\') {
        // A JSON string without escapes is its text between the quotes.
        return Ok(Cow::Borrowed(&value[1..value.len() - 1]));
    }
    unescape(value).map(Cow::Owned)
}

/// The text of a valid JSON string with escapes (off the hot path: most
/// strings the hub reads have none).
#[cold]
#[inline(never)]
fn unescape(value: &str) -> Result<String, TextError> {
    // On a valid string serde_json fails for one reason only: an escape of
    // half a surrogate pair.
    serde_json::from_str::<String>(value).map_err(|_| TextError::LoneSurrogate)
}

/// A JSON string as it appears in the text, quotes included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonStr<'a> {
    pub raw: &'a str,
    /// Whether it contains a backslash escape (so its text differs from
    /// the bytes between its quotes).
    pub escaped: bool,
}

impl<'a> JsonStr<'a> {
    /// The bytes between the quotes: the string's text when not `escaped`.
    pub fn inner(&self) -> &'a str {
        &self.raw[1..self.raw.len() - 1]
    }

    /// The string's text: borrowed unless escaped; `None` when an escape is
    /// half a surrogate pair (a key like that names no member).
    #[inline]
    pub fn text(&self) -> Option<Cow<'a, str>> {
        if self.escaped {
            unescape(self.raw).ok().map(Cow::Owned)
        } else {
            Some(Cow::Borrowed(self.inner()))
        }
    }

    /// Whether the string's text is `name`.
    #[inline]
    pub fn is(&self, name: &str) -> bool {
        if self.escaped {
            unescape(self.raw).is_ok_and(|text| text == name)
        } else {
            self.inner() == name
        }
    }
}

/// One member of an object: its key and the exact text of its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member<'a> {
    pub key: JsonStr<'a>,
    pub value: &'a str,
    /// Whether the value is a string with escapes.
    pub value_escaped: bool,
}

impl<'a> Member<'a> {
    /// The value's text when it is a JSON string, borrowed unless escaped.
    #[inline]
    pub fn value_str(&self) -> Result<Cow<'a, str>, TextError> {
        if !self.value.starts_with('"') {
            Err(TextError::NotAString)
        } else if self.value_escaped {
            unescape(self.value).map(Cow::Owned)
        } else {
            Ok(Cow::Borrowed(&self.value[1..self.value.len() - 1]))
        }
    }
}

/// The first [`MemberIndex::CAPACITY`] members of an object, recorded while
/// it was validated.
#[derive(Debug, Clone, Copy)]
pub struct MemberIndex<'a> {
    /// The text of the object indexed.
    object: Option<&'a str>,
    members: [Option<Member<'a>>; MemberIndex::CAPACITY],
    len: usize,
    /// More members than the capacity: the index is not the whole object.
    overflowed: bool,
}

impl Default for MemberIndex<'_> {
    fn default() -> Self {
        MemberIndex {
            object: None,
            members: [None; MemberIndex::CAPACITY],
            len: 0,
            overflowed: false,
        }
    }
}

impl<'a> MemberIndex<'a> {
    /// Enough for every `clientService/*` call (at most four members).
    pub const CAPACITY: usize = 8;

    fn push(&mut self, member: Member<'a>) {
        match self.members.get_mut(self.len) {
            Some(slot) => {
                *slot = Some(member);
                self.len += 1;
            }
            None => self.overflowed = true,
        }
    }

    /// Every member of `object` in order; `None` when this index is not of
    /// `object` (the very same text) or `object` had more than
    /// [`Self::CAPACITY`] members (walk it with [`crate::scan::members`]).
    pub fn members_of(&self, object: &str) -> Option<impl Iterator<Item = Member<'a>> + '_> {
        let same = self
            .object
            .is_some_and(|indexed| std::ptr::eq(indexed, object));
        (same && !self.overflowed).then(|| self.members[..self.len].iter().flatten().copied())
    }
}

/// A position in a text being validated.
pub(crate) struct Cursor<'a> {
    text: &'a str,
    at: usize,
    /// Objects open around the cursor whose members are being walked (the
    /// envelope, `params`; set by their walkers, see [`Cursor::enter`]);
    /// `container` counts its own levels on top.
    level: usize,
    /// The deepest level any container reached so far.
    deepest: usize,
    /// Whether whitespace skipped so far held a line feed.
    line_feed: bool,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        Cursor {
            text,
            at: 0,
            level: 0,
            deepest: 0,
            line_feed: false,
        }
    }

    pub(crate) fn at(&self) -> usize {
        self.at
    }

    /// How deeply the text walked so far nests (see [`depth`]).
    pub(crate) fn deepest(&self) -> usize {
        self.deepest
    }

    /// Nesting reached `level`: note it if it is the deepest yet.
    #[inline]
    fn reached(&mut self, level: usize) {
        if level > self.deepest {
            self.deepest = level;
        }
    }

    /// The text from `start` to the cursor.
    pub(crate) fn since(&self, start: usize) -> &'a str {
        self.between(start, self.at)
    }

    /// `text[start..end]` for two positions the cursor has held, without
    /// the char-boundary tests of `str` indexing (~190 instructions of the
    /// walk of a 300-byte notification: 17 slices).
    #[inline(always)]
    fn between(&self, start: usize, end: usize) -> &'a str {
        assert!(start <= end && end <= self.text.len());
        debug_assert!(self.text.is_char_boundary(start) && self.text.is_char_boundary(end));
        // SAFETY: in bounds (asserted), and both are char boundaries: the
        // cursor only ever stands at 0 or just past an ASCII byte (a quote,
        // a bracket, a comma, a colon, whitespace, a digit, a sign, a letter
        // of a literal), and a position just past an ASCII byte is a
        // boundary.
        unsafe { self.text.get_unchecked(start..end) }
    }

    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    pub(crate) fn peek(&self) -> Option<u8> {
        self.bytes().get(self.at).copied()
    }

    fn error(&self, expected: &'static str) -> SyntaxError {
        SyntaxError {
            at: self.at,
            expected,
        }
    }

    /// Past any whitespace at the cursor. Most messages have none between
    /// tokens: that case is one test, inlined; the loop is out of line.
    #[inline(always)]
    pub(crate) fn skip_space(&mut self) {
        if self.peek().is_some_and(is_space) {
            self.skip_space_run();
        }
    }

    #[inline(never)]
    fn skip_space_run(&mut self) {
        while let Some(&byte) = self.bytes().get(self.at) {
            if !is_space(byte) {
                return;
            }
            if byte == b'\n' {
                self.line_feed = true;
            }
            self.at += 1;
        }
    }

    /// Whether whitespace the walk skipped held a line feed: the only
    /// place valid JSON holds a raw one (a string may not).
    pub(crate) fn saw_line_feed(&self) -> bool {
        self.line_feed
    }

    /// Only whitespace is left.
    pub(crate) fn end(&mut self) -> Result<(), SyntaxError> {
        self.skip_space();
        match self.peek() {
            None => Ok(()),
            Some(_) => Err(self.error("the end of the text")),
        }
    }

    pub(crate) fn eat(&mut self, byte: u8, expected: &'static str) -> Result<(), SyntaxError> {
        if self.peek() == Some(byte) {
            self.at += 1;
            Ok(())
        } else {
            Err(self.error(expected))
        }
    }

    /// One value at the cursor (no leading whitespace). Returns whether it
    /// is a string with escapes.
    #[inline]
    pub(crate) fn value(&mut self) -> Result<bool, SyntaxError> {
        match self.peek() {
            Some(b'"') => Ok(self.string()?.escaped),
            Some(b'{' | b'[') => self.container().map(|()| false),
            _ => self.scalar().map(|()| false),
        }
    }

    /// A number or a literal.
    fn scalar(&mut self) -> Result<(), SyntaxError> {
        match self.peek() {
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b't') => self.literal("true"),
            Some(b'f') => self.literal("false"),
            Some(b'n') => self.literal("null"),
            _ => Err(self.error("a JSON value")),
        }
    }

    /// An object or array, nested to any depth, without recursion.
    fn container(&mut self) -> Result<(), SyntaxError> {
        let mut nesting = Nesting::default();
        // The deepest level reached, counted from this container's own (1).
        let mut deepest = 0;
        loop {
            // A value starts here.
            match self.peek() {
                Some(b'"') => {
                    self.string()?;
                }
                Some(open @ (b'{' | b'[')) => {
                    self.at += 1;
                    self.skip_space();
                    let close = if open == b'{' { b'}' } else { b']' };
                    if self.peek() == Some(close) {
                        self.at += 1;
                        deepest = deepest.max(nesting.depth + 1);
                    } else {
                        nesting.push(open == b'[');
                        deepest = deepest.max(nesting.depth);
                        if open == b'{' {
                            self.key_and_colon()?;
                        }
                        continue;
                    }
                }
                _ => self.scalar()?,
            }
            // A value ended: close containers until one takes another item.
            loop {
                let Some(in_array) = nesting.top() else {
                    self.reached(self.level + deepest);
                    return Ok(());
                };
                self.skip_space();
                match (self.peek(), in_array) {
                    (Some(b','), _) => {
                        self.at += 1;
                        self.skip_space();
                        if !in_array {
                            self.key_and_colon()?;
                        }
                        break;
                    }
                    (Some(b']'), true) | (Some(b'}'), false) => {
                        self.at += 1;
                        nesting.pop();
                    }
                    (_, true) => return Err(self.error("',' or ']'")),
                    (_, false) => return Err(self.error("',' or '}'")),
                }
            }
        }
    }

    /// A key, the colon after it and the whitespace before the value.
    #[inline(always)]
    fn key_and_colon(&mut self) -> Result<JsonStr<'a>, SyntaxError> {
        if self.peek() != Some(b'"') {
            return Err(self.error("a string key"));
        }
        let key = self.string()?;
        self.skip_space();
        self.eat(b':', "':'")?;
        self.skip_space();
        Ok(key)
    }

    /// The members of an object whose `{` the cursor has just passed; `each`
    /// gets every key with the cursor on its value, and must consume the
    /// value. Ends past the `}`.
    pub(crate) fn members(
        &mut self,
        mut each: impl FnMut(&mut Self, JsonStr<'a>) -> Result<(), SyntaxError>,
    ) -> Result<(), SyntaxError> {
        self.skip_space();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Ok(());
        }
        loop {
            let key = self.key_and_colon()?;
            each(self, key)?;
            self.skip_space();
            match self.peek() {
                Some(b',') => {
                    self.at += 1;
                    self.skip_space();
                }
                Some(b'}') => {
                    self.at += 1;
                    return Ok(());
                }
                _ => return Err(self.error("',' or '}'")),
            }
        }
    }

    /// The cursor enters an object whose members the caller walks with
    /// [`Cursor::members`] (values inside count one level deeper).
    pub(crate) fn enter(&mut self) {
        self.level += 1;
        self.reached(self.level);
    }

    /// The cursor left the object it last [`Cursor::enter`]ed.
    pub(crate) fn leave(&mut self) {
        self.level -= 1;
    }

    /// The members of the object at the cursor, recorded in `index`.
    pub(crate) fn object_into(&mut self, index: &mut MemberIndex<'a>) -> Result<(), SyntaxError> {
        let start = self.at;
        self.eat(b'{', "'{'")?;
        self.enter();
        self.members(|cursor, key| {
            let start = cursor.at;
            let value_escaped = cursor.value()?;
            index.push(Member {
                key,
                value: cursor.since(start),
                value_escaped,
            });
            Ok(())
        })?;
        self.leave();
        index.object = Some(self.since(start));
        Ok(())
    }

    /// The string at the cursor (on its opening quote).
    #[inline(always)]
    pub(crate) fn string(&mut self) -> Result<JsonStr<'a>, SyntaxError> {
        let bytes = self.bytes();
        let start = self.at;
        let end = plain_end(bytes, start + 1);
        // Most strings end at their first special byte (no escapes): that
        // case is this much code, small enough to inline in every caller.
        if bytes.get(end) == Some(&b'"') {
            self.at = end + 1;
            return Ok(JsonStr {
                raw: self.between(start, self.at),
                escaped: false,
            });
        }
        self.string_from_special(start, end)
    }

    /// The rest of the string that starts at `start`, from its first byte
    /// that is not plain text at `at`: an escape, a control character or
    /// the end of the text.
    #[inline(never)]
    fn string_from_special(
        &mut self,
        start: usize,
        mut at: usize,
    ) -> Result<JsonStr<'a>, SyntaxError> {
        let bytes = self.bytes();
        let mut escaped = false;
        loop {
            match bytes.get(at) {
                Some(b'"') => {
                    self.at = at + 1;
                    return Ok(JsonStr {
                        raw: self.between(start, self.at),
                        escaped,
                    });
                }
                Some(b'\\') => {
                    escaped = true;
                    at = plain_end(bytes, escape_end(bytes, at)?);
                }
                Some(_) => {
                    return Err(SyntaxError {
                        at,
                        expected: "no control character in a string (escape it)",
                    })
                }
                None => {
                    return Err(SyntaxError {
                        at,
                        expected: "'\"' to close the string",
                    })
                }
            }
        }
    }

    fn number(&mut self) -> Result<(), SyntaxError> {
        let bytes = self.bytes();
        let digits = |mut i: usize| {
            while bytes.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            i
        };
        let mut i = self.at;
        if bytes.get(i) == Some(&b'-') {
            i += 1;
        }
        i = match bytes.get(i) {
            Some(b'0') => i + 1,
            Some(b'1'..=b'9') => digits(i + 1),
            _ => {
                return Err(SyntaxError {
                    at: i,
                    expected: "a digit",
                })
            }
        };
        if bytes.get(i) == Some(&b'.') {
            let end = digits(i + 1);
            if end == i + 1 {
                return Err(SyntaxError {
                    at: end,
                    expected: "a digit after '.'",
                });
            }
            i = end;
        }
        if let Some(b'e' | b'E') = bytes.get(i) {
            i += 1;
            if let Some(b'+' | b'-') = bytes.get(i) {
                i += 1;
            }
            let end = digits(i);
            if end == i {
                return Err(SyntaxError {
                    at: end,
                    expected: "a digit in the exponent",
                });
            }
            i = end;
        }
        self.at = i;
        Ok(())
    }

    fn literal(&mut self, word: &'static str) -> Result<(), SyntaxError> {
        if self.bytes()[self.at..].starts_with(word.as_bytes()) {
            self.at += word.len();
            Ok(())
        } else {
            Err(self.error(word))
        }
    }
}

/// The index of the first `"`, `\\` or control character (below 0x20,
/// which JSON strings may not hold unescaped) in `bytes` from `at` on, or
/// `bytes.len()`.
#[inline]
fn plain_end(bytes: &[u8], mut at: usize) -> usize {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        // Whole chunks while 16 bytes are left (the usual case: a string
        // is rarely within 16 bytes of the end of its message); the rest
        // out of line, so this loop stays small enough to inline.
        while let Some(chunk) = bytes
            .get(at..at.wrapping_add(16))
            .and_then(|chunk| <&[u8; 16]>::try_from(chunk).ok())
        {
            let found = sse2::specials(chunk);
            if found != 0 {
                return at + found.trailing_zeros() as usize;
            }
            at += 16;
        }
        plain_end_of_tail(bytes, at)
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    {
        while let Some(&b) = bytes.get(at) {
            if b == b'"' || b == b'\\' || b < 0x20 {
                break;
            }
            at += 1;
        }
        at
    }
}

/// [`plain_end`] in the last 15 bytes or fewer: padded with spaces (plain
/// text) to one chunk.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline(never)]
fn plain_end_of_tail(bytes: &[u8], at: usize) -> usize {
    let rest = bytes.get(at..).unwrap_or_default();
    let mut padded = [b' '; 16];
    padded[..rest.len()].copy_from_slice(rest);
    let found = sse2::specials(&padded);
    at + (found.trailing_zeros() as usize).min(rest.len())
}

/// Sixteen bytes at a time: the scan of string text is most of the work of
/// validating a message, and SSE2 is part of every x86-64 CPU.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
mod sse2 {
    use std::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_loadu_si128, _mm_max_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };

    /// Bit `i` is set when `chunk[i]` is `"`, `\\` or below 0x20.
    #[inline]
    pub(super) fn specials(chunk: &[u8; 16]) -> u32 {
        // SAFETY: the load reads the 16 bytes of `chunk`; the target has
        // SSE2 (cfg).
        unsafe {
            let text = _mm_loadu_si128(chunk.as_ptr().cast());
            let quote = _mm_cmpeq_epi8(text, _mm_set1_epi8(b'"' as i8));
            let backslash = _mm_cmpeq_epi8(text, _mm_set1_epi8(b'\\' as i8));
            // Unsigned `byte <= 0x1f` is `max(byte, 0x1f) == 0x1f`.
            let limit = _mm_set1_epi8(0x1f);
            let control = _mm_cmpeq_epi8(_mm_max_epu8(text, limit), limit);
            _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), control)) as u32
        }
    }
}

/// `bytes[at]` is a backslash inside a string: the index past its escape.
fn escape_end(bytes: &[u8], at: usize) -> Result<usize, SyntaxError> {
    match bytes.get(at + 1) {
        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => Ok(at + 2),
        Some(b'u') => {
            for i in at + 2..at + 6 {
                if !bytes.get(i).is_some_and(u8::is_ascii_hexdigit) {
                    return Err(SyntaxError {
                        at: i.min(bytes.len()),
                        expected: "four hex digits after '\\u'",
                    });
                }
            }
            Ok(at + 6)
        }
        _ => Err(SyntaxError {
            at: (at + 1).min(bytes.len()),
            expected: "an escape: one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX",
        }),
    }
}

/// The open containers of a value being validated: one bit each, 1 for an
/// array. The first `INLINE` levels live in a word; deeper ones (only a
/// pathological message nests that far) spill to the heap.
#[derive(Default)]
struct Nesting {
    inline: u128,
    depth: usize,
    deeper: Vec<bool>,
}

impl Nesting {
    const INLINE: usize = 128;

    fn push(&mut self, array: bool) {
        if self.depth < Self::INLINE {
            let bit = 1u128 << self.depth;
            if array {
                self.inline |= bit;
            } else {
                self.inline &= !bit;
            }
        } else {
            self.deeper.push(array);
        }
        self.depth += 1;
    }

    fn pop(&mut self) {
        self.depth -= 1;
        if self.depth >= Self::INLINE {
            self.deeper.pop();
        }
    }

    /// Whether the innermost open container is an array; `None` at the top.
    fn top(&self) -> Option<bool> {
        let level = self.depth.checked_sub(1)?;
        Some(if level < Self::INLINE {
            self.inline & (1u128 << level) != 0
        } else {
            self.deeper.last().copied().unwrap_or(false)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serde_accepts(text: &str) -> bool {
        serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
    }

    fn agree(text: &str) {
        assert_eq!(
            validate(text).is_ok(),
            serde_accepts(text),
            "validate and serde_json disagree on {text:?}: {:?}",
            validate(text)
        );
    }

    #[test]
    fn strings_agree_with_serde_json_wherever_they_fall_in_a_chunk() {
        // The scan reads 16 bytes at a time while 16 are left and pads the
        // rest: every special byte at every offset from a chunk's start,
        // and strings ending at, before and past the end of the text.
        let specials = [
            "",
            "\\n",
            "\\u00e9",
            "\\ud83d\\ude00",
            "\\ud83d",
            "\\x",
            "\\",
            "\u{1}",
            "\u{1f}",
            "\t",
            "é",
        ];
        for lead in 0..20 {
            for special in specials {
                for tail in 0..20 {
                    let inner = format!("{}{special}{}", "a".repeat(lead), "b".repeat(tail));
                    for text in [
                        format!("\"{inner}\""),
                        format!("\"{inner}"),
                        format!("[\"{inner}\",1]"),
                        format!("{{\"{inner}\":\"{inner}\"}}"),
                    ] {
                        agree(&text);
                    }
                }
            }
        }
    }

    #[test]
    fn accepts_and_rejects_what_serde_json_does() {
        let cases = [
            "",
            " ",
            "null",
            "true",
            "false",
            "nul",
            "truex",
            "0",
            "-0",
            "01",
            "-",
            "1.",
            "1.5",
            "1e",
            "1e+",
            "1e+5",
            "1E-05",
            "-1.5e3",
            ".5",
            "+1",
            "1.5.3",
            "\"\"",
            "\"a\"",
            "\"a",
            "\"\\\"",
            "\"\\u12\"",
            "\"\\u12g4\"",
            "\"\\u1234\"",
            "\"\\ud800\"",
            "\"\\x\"",
            "\"\\/\"",
            "\"\u{1}\"",
            "\"\u{1f}\"",
            "\"\u{7f}\"",
            "\"é\"",
            "[]",
            "[ ]",
            "[1,]",
            "[,1]",
            "[1 2]",
            "[1,2]",
            "[[[]]]",
            "[[]",
            "[]]",
            "{}",
            "{ }",
            "{\"a\"}",
            "{\"a\":}",
            "{\"a\":1,}",
            "{\"a\":1 \"b\":2}",
            "{1:2}",
            "{\"a\":1}",
            "{\"a\":[1,{\"b\":null}]}",
            "{\"a\":1}}",
            "{\"a\":1]",
            "[1}",
            " [1] ",
            "[1] x",
            "1 2",
            "\t\r\n1\n",
            "\u{a0}1",
            "[\"a\\\\\"]",
            "[\"a\\\\\\\"\"]",
            "{\"\\u0061\":1}",
            "[-]",
            "[-a]",
            "[1e5x]",
            "[0x1]",
            "{\"a\" : 1 , \"b\" : [ 1 , 2 ] }",
            "[true,false,null]",
            "[tru]",
        ];
        for text in cases {
            agree(text);
        }
    }

    #[test]
    fn strings_of_every_length_with_specials_at_every_position() {
        // Long enough to cross several 16-byte steps and a padded tail.
        for len in 0..70 {
            for at in 0..=len {
                for special in ["\\\"", "\\\\", "\\n", "\\u00e9", "\"", "\\", "\u{1}", "\\q"] {
                    let mut text = "a".repeat(len);
                    text.insert_str(at, special);
                    agree(&format!("\"{text}\""));
                    agree(&format!("{{\"{text}\":1}}"));
                }
            }
        }
    }

    #[test]
    fn deep_nesting_spills_and_unwinds() {
        for depth in [1, 127, 128, 129, 1000] {
            let arrays = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
            assert_eq!(validate(&arrays), Ok(()), "{depth}");
            let mixed = format!("{}1{}", "{\"k\":[".repeat(depth), "]}".repeat(depth));
            assert_eq!(validate(&mixed), Ok(()), "{depth}");
            let unbalanced = format!("{}{}", "[".repeat(depth), "]".repeat(depth - 1));
            assert!(validate(&unbalanced).is_err(), "{depth}");
            // A closer of the wrong kind at the deepest level.
            let crossed = format!("{}}}{}", "[".repeat(depth), "]".repeat(depth - 1));
            assert!(validate(&crossed).is_err(), "{depth}");
        }
    }

    #[test]
    fn errors_say_where_and_what() {
        let error = validate("{\"a\":1 \"b\":2}").unwrap_err();
        assert_eq!(error.at, 7);
        assert_eq!(error.to_string(), "expected ',' or '}' at byte 7");
        assert_eq!(validate("[1,2").unwrap_err().at, 4);
        assert_eq!(validate("\"abc").unwrap_err().at, 4);
    }

    #[test]
    fn the_index_records_members_with_exact_text() {
        let text = r#"{ "serviceId" : "s\u0031" , "method":"m","params":{"x":[1,"]"]},"n":-1 }"#;
        let mut cursor = Cursor::new(text);
        let mut index = MemberIndex::default();
        cursor.object_into(&mut index).unwrap();
        cursor.end().unwrap();
        let copy = String::from(text);
        assert!(index.members_of(&copy).is_none(), "equal text elsewhere");
        let members: Vec<_> = index.members_of(text.trim_end()).unwrap().collect();
        assert_eq!(members.len(), 4);
        assert!(members[0].key.is("serviceId") && !members[0].key.escaped);
        assert_eq!(members[0].value, r#""s\u0031""#);
        assert_eq!(members[0].value_str().as_deref(), Ok("s1"));
        assert_eq!(members[1].value_str().as_deref(), Ok("m"));
        assert_eq!(members[2].value, r#"{"x":[1,"]"]}"#);
        assert_eq!(members[2].value_str(), Err(TextError::NotAString));
        assert_eq!(members[3].value, "-1");
    }

    #[test]
    fn an_index_past_capacity_says_it_is_incomplete() {
        let members: Vec<String> = (0..=MemberIndex::CAPACITY)
            .map(|i| format!("\"k{i}\":{i}"))
            .collect();
        let text = format!("{{{}}}", members.join(","));
        let mut index = MemberIndex::default();
        Cursor::new(&text).object_into(&mut index).unwrap();
        assert!(index.members_of(&text).is_none());
    }

    #[test]
    fn depth_counts_the_levels_serde_json_counts() {
        for (text, expected) in [
            ("1", 0),
            ("\"[[[\"", 0),
            ("[]", 1),
            ("{}", 1),
            ("{\"a\":1}", 1),
            ("[[]]", 2),
            ("[1,[2,[3]],[]]", 3),
            ("{\"a\":{\"b\":[]},\"c\":[[[{}]]]}", 5),
        ] {
            assert_eq!(depth(text), Ok(expected), "{text}");
        }
        // serde_json reads 127 levels into a `Value` and refuses the 128th:
        // what `limits::MAX_FORWARDED_DEPTH` rests on.
        for levels in [126, 127, 128, 129, 300] {
            let text = format!("{}{}", "[".repeat(levels), "]".repeat(levels));
            assert_eq!(depth(&text), Ok(levels));
            let read = serde_json::from_str::<serde_json::Value>(&text).is_ok();
            assert_eq!(read, levels <= 127, "{levels} levels");
        }
    }

    #[test]
    fn the_walk_of_an_object_counts_its_own_level() {
        let text = r#"{"a":{"b":[1]},"c":{}}"#;
        let mut cursor = Cursor::new(text);
        let mut index = MemberIndex::default();
        cursor.object_into(&mut index).unwrap();
        assert_eq!(cursor.deepest(), 3);
        assert_eq!(depth(text), Ok(3));
    }

    #[test]
    fn only_json_whitespace_is_trimmed() {
        assert_eq!(trim_space(b" \t\r\n{} \n"), b"{}");
        assert_eq!(trim_space(b" \n "), b"");
        assert_eq!(trim_space(b""), b"");
        assert_eq!(trim_space(b"\x0c{}"), b"\x0c{}");
        assert_eq!(trim_space(b"{}\x0c\n"), b"{}\x0c");
        assert_eq!(trim_space(b" \x0b "), b"\x0b");
    }

    #[test]
    fn a_lone_surrogate_escape_has_no_text() {
        assert_eq!(string_text(r#""a\u00e9""#).as_deref(), Ok("aé"));
        assert_eq!(string_text(r#""\ud83d\ude00""#).as_deref(), Ok("\u{1f600}"));
        for lone in [
            r#""\ud800""#,
            r#""\udc00""#,
            r#""x\ud800y""#,
            r#""\ud800\u0041""#,
        ] {
            assert_eq!(validate(lone), Ok(()), "valid JSON: {lone}");
            assert_eq!(string_text(lone), Err(TextError::LoneSurrogate), "{lone}");
        }
        assert_eq!(string_text("12"), Err(TextError::NotAString));
        let key = JsonStr {
            raw: r#""params\ud800""#,
            escaped: true,
        };
        assert_eq!(key.text(), None);
        assert!(!key.is("params") && !key.is(""));
    }

    #[test]
    fn escaped_keys_match_by_their_text() {
        let key = JsonStr {
            raw: r#""para\u006ds""#,
            escaped: true,
        };
        assert!(key.is("params"));
        assert!(!key.is("para\\u006ds"));
    }
}
