//! The bounded output of one job: the last `capacity` bytes.

use std::collections::VecDeque;

#[derive(Debug)]
pub struct TailBuffer {
    bytes: VecDeque<u8>,
    capacity: usize,
    /// Whether anything was ever dropped from the front.
    truncated: bool,
}

impl TailBuffer {
    pub fn new(capacity: usize) -> Self {
        TailBuffer {
            bytes: VecDeque::new(),
            capacity,
            truncated: false,
        }
    }

    pub fn push(&mut self, data: &[u8]) {
        let data = if data.len() > self.capacity {
            self.truncated = true;
            &data[data.len() - self.capacity..]
        } else {
            data
        };
        let overflow = (self.bytes.len() + data.len()).saturating_sub(self.capacity);
        if overflow > 0 {
            self.truncated = true;
            self.bytes.drain(..overflow);
        }
        self.bytes.extend(data);
    }

    /// The kept bytes as text (a character cut at the front, or invalid
    /// UTF-8 from the program, shows as U+FFFD).
    pub fn text(&self) -> String {
        let (front, back) = self.bytes.as_slices();
        let mut joined = Vec::with_capacity(self.bytes.len());
        joined.extend_from_slice(front);
        joined.extend_from_slice(back);
        String::from_utf8_lossy(&joined).into_owned()
    }

    pub fn truncated(&self) -> bool {
        self.truncated
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_exactly_the_tail_at_the_bound() {
        let mut tail = TailBuffer::new(4);
        tail.push(b"abcd");
        assert_eq!((tail.text().as_str(), tail.truncated()), ("abcd", false));
        tail.push(b"e");
        assert_eq!((tail.text().as_str(), tail.truncated()), ("bcde", true));
        let mut big = TailBuffer::new(3);
        big.push(b"0123456");
        assert_eq!((big.text().as_str(), big.truncated()), ("456", true));
    }
}
