//! How a link's batch of lines is cut into NATS messages: whole lines only,
//! about `target` bytes per message, a longer line alone, and a line over
//! NATS's `max` payload set apart so the writer can answer for it.
//!
//! Pure (no I/O, no clock): `relay.rs` publishes what this yields, so the
//! cutting is tested here on its own.

use std::ops::Range;

/// A piece of a batch, as a byte range of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece {
    /// Whole lines to publish as one message.
    Message(Range<usize>),
    /// One line longer than NATS carries: not sent, answered for instead.
    TooLarge(Range<usize>),
}

#[cfg(test)]
impl Piece {
    fn range(&self) -> Range<usize> {
        match self {
            Piece::Message(range) | Piece::TooLarge(range) => range.clone(),
        }
    }
}

/// The pieces of `batch` in order; together they cover it exactly once.
/// Each line is shown to `on_line` once, when the cut first reaches it (so
/// a writer that stops at a failed publish has counted only the lines up to
/// the next cut). A line is `\n`-ended; text after the last `\n` counts as
/// one more line.
pub(crate) struct Pieces<'a, F> {
    batch: &'a [u8],
    /// Bytes per message, unless one line alone is longer.
    target: usize,
    /// The most bytes a message may carry.
    max: usize,
    /// Where the message being gathered starts.
    start: usize,
    /// Where the next line starts.
    end: usize,
    /// A too-large line found after lines that had to go first.
    held: Option<Piece>,
    on_line: F,
}

impl<'a, F: FnMut(&[u8])> Pieces<'a, F> {
    pub(crate) fn new(batch: &'a [u8], target: usize, max: usize, on_line: F) -> Self {
        Pieces {
            batch,
            target: target.min(max),
            max,
            start: 0,
            end: 0,
            held: None,
            on_line,
        }
    }
}

impl<F: FnMut(&[u8])> Iterator for Pieces<'_, F> {
    type Item = Piece;

    fn next(&mut self) -> Option<Piece> {
        if let Some(piece) = self.held.take() {
            return Some(piece);
        }
        let batch = self.batch;
        while self.end < batch.len() {
            let line_end = memchr::memchr(b'\n', &batch[self.end..])
                .map_or(batch.len(), |at| self.end + at + 1);
            (self.on_line)(&batch[self.end..line_end]);
            if line_end - self.end > self.max {
                // The lines before it go first, as one message.
                let before =
                    (self.start < self.end).then_some(Piece::Message(self.start..self.end));
                let too_large = Piece::TooLarge(self.end..line_end);
                self.start = line_end;
                self.end = line_end;
                return match before {
                    Some(message) => {
                        self.held = Some(too_large);
                        Some(message)
                    }
                    None => Some(too_large),
                };
            }
            if line_end - self.start > self.target && self.start < self.end {
                // The lines gathered so far make a message; this one starts
                // the next (alone, if it is longer than `target`).
                let message = Piece::Message(self.start..self.end);
                self.start = self.end;
                self.end = line_end;
                return Some(message);
            }
            self.end = line_end;
        }
        if self.start < batch.len() {
            let message = Piece::Message(self.start..batch.len());
            self.start = batch.len();
            return Some(message);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch of lines of these lengths, `\n` included (each at least 1).
    fn batch_of(lengths: &[usize]) -> Vec<u8> {
        let mut batch = Vec::new();
        for (i, &length) in lengths.iter().enumerate() {
            let fill = b'a' + (i % 26) as u8;
            batch.extend(std::iter::repeat_n(fill, length - 1));
            batch.push(b'\n');
        }
        batch
    }

    fn cut(batch: &[u8], target: usize, max: usize) -> (Vec<Piece>, Vec<usize>) {
        let mut lines = Vec::new();
        let pieces = Pieces::new(batch, target, max, |line| lines.push(line.len())).collect();
        (pieces, lines)
    }

    #[test]
    fn lines_under_the_target_go_as_one_message() {
        let batch = batch_of(&[10, 20, 30]);
        let (pieces, lines) = cut(&batch, 100, 1000);
        assert_eq!(pieces, [Piece::Message(0..60)]);
        assert_eq!(lines, [10, 20, 30]);
    }

    #[test]
    fn a_message_ends_before_the_line_that_would_pass_the_target() {
        // 40 + 40 = 80 fits 100; + 40 would be 120.
        let batch = batch_of(&[40, 40, 40, 40, 20]);
        let (pieces, _) = cut(&batch, 100, 1000);
        assert_eq!(pieces, [Piece::Message(0..80), Piece::Message(80..180)]);
        // Exactly the target is still one message.
        let batch = batch_of(&[50, 50]);
        assert_eq!(cut(&batch, 100, 1000).0, [Piece::Message(0..100)]);
    }

    #[test]
    fn a_line_longer_than_the_target_goes_alone_whole() {
        let batch = batch_of(&[30, 250, 30]);
        let (pieces, _) = cut(&batch, 100, 1000);
        assert_eq!(
            pieces,
            [
                Piece::Message(0..30),
                Piece::Message(30..280),
                Piece::Message(280..310)
            ]
        );
        // First in the batch, it needs no cut before it.
        let batch = batch_of(&[250, 30]);
        let (pieces, _) = cut(&batch, 100, 1000);
        assert_eq!(pieces, [Piece::Message(0..250), Piece::Message(250..280)]);
    }

    #[test]
    fn a_line_over_the_maximum_is_set_apart_between_the_messages_around_it() {
        let batch = batch_of(&[30, 30, 500, 30]);
        let (pieces, lines) = cut(&batch, 100, 400);
        assert_eq!(
            pieces,
            [
                Piece::Message(0..60),
                Piece::TooLarge(60..560),
                Piece::Message(560..590)
            ]
        );
        assert_eq!(lines, [30, 30, 500, 30]);
        // Alone, first, last, twice in a row.
        let batch = batch_of(&[500, 401, 30, 500]);
        let (pieces, _) = cut(&batch, 100, 400);
        assert_eq!(
            pieces,
            [
                Piece::TooLarge(0..500),
                Piece::TooLarge(500..901),
                Piece::Message(901..931),
                Piece::TooLarge(931..1431)
            ]
        );
        // Exactly the maximum is carried.
        let batch = batch_of(&[400]);
        assert_eq!(cut(&batch, 100, 400).0, [Piece::Message(0..400)]);
    }

    #[test]
    fn text_after_the_last_line_feed_is_one_more_line() {
        let mut batch = batch_of(&[10]);
        batch.extend_from_slice(b"tail");
        let (pieces, lines) = cut(&batch, 100, 1000);
        assert_eq!(pieces, [Piece::Message(0..14)]);
        assert_eq!(lines, [10, 4]);
    }

    #[test]
    fn an_empty_batch_has_no_pieces() {
        assert_eq!(cut(b"", 100, 1000).0, []);
    }

    #[test]
    fn lines_are_shown_only_as_far_as_the_cut_has_reached() {
        let batch = batch_of(&[60, 60, 60]);
        let mut seen = 0;
        let first = Pieces::new(&batch, 100, 1000, |_| seen += 1).next();
        assert_eq!(first, Some(Piece::Message(0..60)));
        // The second line had to be seen to know the first message ended.
        assert_eq!(seen, 2);
    }

    /// Every mix of line lengths: the pieces cover the batch in order, cut
    /// only after a line feed, hold at most `target` unless one line alone,
    /// and set apart exactly the lines over `max`.
    #[test]
    fn pieces_cover_the_batch_in_whole_lines_within_their_bounds() {
        let (target, max) = (100, 300);
        // A fixed pseudo-random walk over lengths 1..=400 (xorshift).
        let mut state = 0x9e37_79b9_u32;
        for _ in 0..500 {
            let lengths: Vec<usize> = (0..1 + state as usize % 12)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 17;
                    state ^= state << 5;
                    1 + state as usize % 400
                })
                .collect();
            let batch = batch_of(&lengths);
            let (pieces, lines) = cut(&batch, target, max);
            assert_eq!(lines, lengths);
            let mut next = 0;
            for piece in &pieces {
                let range = piece.range();
                assert_eq!(range.start, next, "{lengths:?}: {pieces:?}");
                assert!(range.end > range.start);
                assert_eq!(batch[range.end - 1], b'\n');
                next = range.end;
                let text = &batch[range.clone()];
                let line_count = text.iter().filter(|&&b| b == b'\n').count();
                match piece {
                    Piece::TooLarge(_) => assert!(line_count == 1 && text.len() > max),
                    Piece::Message(_) => {
                        assert!(text.len() <= max);
                        assert!(text.len() <= target || line_count == 1, "{lengths:?}");
                    }
                }
            }
            assert_eq!(next, batch.len());
            // Cut only where the next line would pass the target.
            for pair in pieces.windows(2) {
                if let [Piece::Message(first), Piece::Message(second)] = pair {
                    let next_line =
                        memchr::memchr(b'\n', &batch[second.clone()]).map_or(0, |at| at + 1);
                    assert!(first.len() + next_line > target, "{lengths:?}: {pieces:?}");
                }
            }
            let too_large = lengths.iter().filter(|&&length| length > max).count();
            let set_apart = pieces
                .iter()
                .filter(|piece| matches!(piece, Piece::TooLarge(_)))
                .count();
            assert_eq!(set_apart, too_large);
        }
    }
}
