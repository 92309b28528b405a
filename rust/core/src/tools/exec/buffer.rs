//! Text plumbing between a command's output pipe and the model: a streaming UTF-8 decoder that
//! never splits a character across reads, and the capped buffer that holds output nobody has
//! read yet.
//!
//! Data flow: the reader thread of a command session feeds raw bytes from the pipe (or pty
//! master) through [`Utf8Decoder::decode`] and appends the text to a [`CappedBuffer`]; the
//! collecting tool call drains the buffer into output deltas. Both types are pure (no I/O) and
//! cannot fail or panic on any input.

use std::collections::VecDeque;

/// Unread output kept per command session, in characters (Unicode scalar values). A command
/// that prints gigabytes while nobody polls keeps only its newest 1 MiB of text; the SPEC's
/// "unread buffer 1 MiB chars, oldest dropped".
pub const OUTPUT_BUFFER_CAP_CHARS: usize = 1_048_576;

/// Output that has not been read yet, capped at a number of characters: when full, the oldest
/// text is dropped and counted, and the next [`drain`](CappedBuffer::drain) starts with
/// `[... N chars of earlier output dropped ...]\n`.
///
/// Stored as a queue of chunks (as they were read), so dropping old text costs a pop rather
/// than moving the whole buffer.
#[derive(Debug)]
pub struct CappedBuffer {
    cap: usize,
    /// Chunks with their character counts, oldest first; no chunk is empty.
    chunks: VecDeque<(String, usize)>,
    /// Characters currently held.
    chars: usize,
    /// Characters dropped since the last drain.
    dropped: usize,
}

impl Default for CappedBuffer {
    fn default() -> Self {
        CappedBuffer::new(OUTPUT_BUFFER_CAP_CHARS)
    }
}

impl CappedBuffer {
    /// An empty buffer holding at most `cap` characters (a `cap` of 0 keeps nothing).
    pub fn new(cap: usize) -> Self {
        CappedBuffer {
            cap,
            chunks: VecDeque::new(),
            chars: 0,
            dropped: 0,
        }
    }

    /// Whether a drain would return nothing (no text and no pending drop marker).
    pub fn is_empty(&self) -> bool {
        self.chunks.is_empty() && self.dropped == 0
    }

    /// Characters currently held (the drop marker not included).
    pub fn len_chars(&self) -> usize {
        self.chars
    }

    /// Appends `text`, dropping the oldest characters beyond the cap.
    pub fn append(&mut self, text: String) {
        if text.is_empty() {
            return;
        }
        let n = text.chars().count();
        self.chunks.push_back((text, n));
        self.chars += n;
        while self.chars > self.cap {
            let excess = self.chars - self.cap;
            let Some((front, front_chars)) = self.chunks.front_mut() else {
                break;
            };
            if *front_chars <= excess {
                let gone = *front_chars;
                self.chunks.pop_front();
                self.chars -= gone;
                self.dropped += gone;
            } else {
                // Cut `excess` characters off the front of the oldest chunk, on a char boundary.
                let cut = front
                    .char_indices()
                    .nth(excess)
                    .map_or(front.len(), |(i, _)| i);
                front.drain(..cut);
                *front_chars -= excess;
                self.chars -= excess;
                self.dropped += excess;
            }
        }
    }

    /// Takes everything unread, prefixed with the drop marker when text was dropped since the
    /// last drain; empties the buffer.
    pub fn drain(&mut self) -> String {
        if self.is_empty() {
            return String::new();
        }
        let bytes: usize = self.chunks.iter().map(|(s, _)| s.len()).sum();
        let mut out = String::with_capacity(bytes + 64);
        if self.dropped > 0 {
            out.push_str(&format!(
                "[... {} chars of earlier output dropped ...]\n",
                self.dropped
            ));
            self.dropped = 0;
        }
        for (chunk, _) in self.chunks.drain(..) {
            out.push_str(&chunk);
        }
        self.chars = 0;
        out
    }
}

/// Turns a byte stream into text without ever splitting a character across reads: an
/// incomplete sequence at the end of one read waits for the next. Invalid bytes become U+FFFD
/// (one per maximal invalid sequence, as `String::from_utf8_lossy` does).
#[derive(Debug, Default)]
pub struct Utf8Decoder {
    /// The start of a character whose remaining bytes have not arrived yet (at most 3 bytes).
    pending: Vec<u8>,
}

impl Utf8Decoder {
    /// Decodes the next read.
    pub fn decode(&mut self, input: &[u8]) -> String {
        if self.pending.is_empty() {
            self.decode_slice(input)
        } else {
            let mut joined = std::mem::take(&mut self.pending);
            joined.extend_from_slice(input);
            self.decode_slice(&joined)
        }
    }

    fn decode_slice(&mut self, bytes: &[u8]) -> String {
        let mut out = String::with_capacity(bytes.len());
        let mut rest = bytes;
        loop {
            match std::str::from_utf8(rest) {
                Ok(text) => {
                    out.push_str(text);
                    return out;
                }
                Err(err) => {
                    let (valid, after) = rest.split_at(err.valid_up_to());
                    // `valid` is exactly the prefix `from_utf8` accepted.
                    out.push_str(std::str::from_utf8(valid).unwrap_or_default());
                    match err.error_len() {
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            rest = after.get(bad..).unwrap_or_default();
                        }
                        None => {
                            // An incomplete character at the very end: keep it for the next read.
                            self.pending = after.to_vec();
                            return out;
                        }
                    }
                }
            }
        }
    }

    /// Ends the stream: a character left incomplete becomes one U+FFFD.
    pub fn finish(&mut self) -> String {
        if self.pending.is_empty() {
            String::new()
        } else {
            self.pending.clear();
            char::REPLACEMENT_CHARACTER.to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capped_buffer_table() {
        // (cap, appends, expected drain)
        let table: Vec<(usize, Vec<&str>, &str)> = vec![
            (10, vec![], ""),
            (10, vec!["abc", "def"], "abcdef"),
            (10, vec!["0123456789"], "0123456789"),
            (
                10,
                vec!["0123456789", "ab"],
                "[... 2 chars of earlier output dropped ...]\n23456789ab",
            ),
            (
                4,
                vec!["ab", "cd", "ef", "gh"],
                "[... 4 chars of earlier output dropped ...]\nefgh",
            ),
            (
                3,
                vec!["abcdefgh"],
                "[... 5 chars of earlier output dropped ...]\nfgh",
            ),
            // Characters, not bytes: the cut never lands inside a multi-byte character.
            (
                3,
                vec!["€€€€", "ü"],
                "[... 2 chars of earlier output dropped ...]\n€€ü",
            ),
            (
                0,
                vec!["xyz"],
                "[... 3 chars of earlier output dropped ...]\n",
            ),
        ];
        for (cap, appends, want) in table {
            let mut b = CappedBuffer::new(cap);
            for a in &appends {
                b.append((*a).to_owned());
            }
            assert_eq!(b.drain(), want, "cap {cap}, appends {appends:?}");
            assert!(b.is_empty());
            assert_eq!(b.drain(), "");
        }
    }

    #[test]
    fn drop_count_resets_after_a_drain() {
        let mut b = CappedBuffer::new(2);
        b.append("abc".into());
        assert_eq!(b.drain(), "[... 1 chars of earlier output dropped ...]\nbc");
        b.append("de".into());
        assert_eq!(b.drain(), "de");
    }

    #[test]
    fn memory_stays_flat_under_a_flood() {
        let mut b = CappedBuffer::new(1000);
        let chunk = "x".repeat(300);
        for _ in 0..10_000 {
            b.append(chunk.clone());
            assert!(b.len_chars() <= 1000);
            assert!(b.chunks.len() <= 5);
        }
        let out = b.drain();
        assert_eq!(
            out,
            format!(
                "[... {} chars of earlier output dropped ...]\n{}",
                3_000_000 - 1000,
                "x".repeat(1000)
            )
        );
    }

    #[test]
    fn decoder_table() {
        // (reads, expected text after finish)
        let table: Vec<(Vec<&[u8]>, &str)> = vec![
            (vec![b"hello"], "hello"),
            (vec![b"\xe2", b"\x82\xac"], "€"),
            (vec![b"\xe2\x82", b"\xac!"], "€!"),
            (vec![b"\xf0", b"\x9f", b"\x98", b"\x80"], "😀"),
            (vec![b"a\xffb"], "a\u{FFFD}b"),
            (vec![b"a\xe2\x82"], "a\u{FFFD}"),
            (vec![b"\xe2", b"x"], "\u{FFFD}x"),
            (vec![b"\xc3\x28"], "\u{FFFD}("),
            (vec![b"\xed\xa0\x80"], "\u{FFFD}\u{FFFD}\u{FFFD}"),
            (vec![b"", b"\xe2\x82\xac", b""], "€"),
        ];
        for (reads, want) in table {
            let mut d = Utf8Decoder::default();
            let mut got = String::new();
            for r in &reads {
                got.push_str(&d.decode(r));
            }
            got.push_str(&d.finish());
            assert_eq!(got, want, "reads {reads:?}");
        }
    }

    #[test]
    fn decoder_agrees_with_lossy_on_every_split() {
        let input: &[u8] = b"x\xe2\x82\xacy\xf0\x9f\x98\x80\xff\xc3\xa9\xe2\x82z";
        let want = String::from_utf8_lossy(input).into_owned();
        for cut in 0..=input.len() {
            let (a, b) = input.split_at(cut);
            let mut d = Utf8Decoder::default();
            let got = d.decode(a) + &d.decode(b) + &d.finish();
            assert_eq!(got, want, "split at {cut}");
        }
    }
}
