//! Incremental Server-Sent Events parser (the WHATWG `text/event-stream` rules).
//!
//! Data flow: the HTTP body arrives in arbitrary network reads; [`SseParser::push`] takes each
//! read as it comes and appends every event it completes to the caller's vector. A read may
//! end anywhere: inside a `data:` line, between `\r` and `\n`, or inside a multi-byte UTF-8
//! character. The parser therefore buffers raw bytes and only decodes whole lines: line
//! terminators are ASCII, so a complete line never ends inside a UTF-8 sequence.
//!
//! Rules followed: lines end with `\r\n`, `\n` or `\r`; a leading BOM is dropped; lines
//! starting with `:` are comments (`: OPENROUTER PROCESSING`); `field: value` loses one space
//! after the colon; `data` lines of one event are joined with `\n`; `event` names the event; a
//! blank line dispatches it; an event without any `data` line is not dispatched. `id` and
//! `retry` are accepted and ignored (the clients never reconnect on their own).
//! Memory is bounded by [`MAX_EVENT_BYTES`].

/// Largest line or event (bytes) the parser buffers. Provider events are a few KB; a whole
/// tool call in one chunk (Ollama, xAI) stays far below this. Anything bigger is treated as a
/// broken stream rather than allowed to grow memory without bound.
pub const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// One dispatched event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` name, if the event had one.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// Why a stream cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    /// A line or an event exceeded [`MAX_EVENT_BYTES`].
    #[error("an SSE event exceeded {limit} bytes")]
    TooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// A line is not valid UTF-8.
    #[error("an SSE line is not valid UTF-8 ({detail})")]
    InvalidUtf8 {
        /// Decoder message with the byte offset.
        detail: String,
    },
}

/// The parser state; see the module docs.
#[derive(Debug, Default)]
pub struct SseParser {
    /// Bytes of the current, not yet terminated line.
    line: Vec<u8>,
    /// The previous read ended with `\r`: a `\n` starting the next read belongs to it.
    pending_cr: bool,
    /// No line has been completed yet (BOM handling).
    at_start: bool,
    /// `event:` of the event being assembled.
    name: Option<String>,
    /// `data:` of the event being assembled.
    data: String,
    /// At least one `data` line was seen for the current event.
    has_data: bool,
}

impl SseParser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        SseParser {
            at_start: true,
            ..Default::default()
        }
    }

    /// Feeds one network read; completed events are appended to `out` in order.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        let mut input = bytes;
        if input.is_empty() {
            // An empty read must not settle a pending `\r` (the `\n` may still come).
            return Ok(());
        }
        if self.pending_cr {
            self.pending_cr = false;
            if let Some(rest) = input.strip_prefix(b"\n") {
                input = rest;
            }
        }
        loop {
            match input.iter().position(|&b| b == b'\n' || b == b'\r') {
                None => {
                    self.append_line(input)?;
                    return Ok(());
                }
                Some(i) => {
                    self.append_line(&input[..i])?;
                    let terminator = input[i];
                    input = &input[i + 1..];
                    if terminator == b'\r' {
                        match input.first() {
                            None => self.pending_cr = true,
                            Some(b'\n') => input = &input[1..],
                            Some(_) => {}
                        }
                    }
                    self.process_line(out)?;
                }
            }
        }
    }

    /// The body ended: a last line without terminator is processed and an event that was not
    /// closed by a blank line is still delivered (lenient: some servers omit the final blank
    /// line before closing the connection).
    pub fn finish(&mut self, out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if !self.line.is_empty() {
            self.process_line(out)?;
        }
        self.dispatch(out);
        Ok(())
    }

    fn append_line(&mut self, bytes: &[u8]) -> Result<(), SseError> {
        if self.line.len() + bytes.len() > MAX_EVENT_BYTES {
            return Err(SseError::TooLarge {
                limit: MAX_EVENT_BYTES,
            });
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    fn process_line(&mut self, out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        let raw = std::mem::take(&mut self.line);
        let mut line = std::str::from_utf8(&raw).map_err(|e| SseError::InvalidUtf8 {
            detail: e.to_string(),
        })?;
        if self.at_start {
            self.at_start = false;
            line = line.strip_prefix('\u{feff}').unwrap_or(line);
        }
        if line.is_empty() {
            self.dispatch(out);
        } else if !line.starts_with(':') {
            let (field, value) = match line.split_once(':') {
                Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
                None => (line, ""),
            };
            match field {
                "data" => {
                    if self.data.len() + value.len() + 1 > MAX_EVENT_BYTES {
                        return Err(SseError::TooLarge {
                            limit: MAX_EVENT_BYTES,
                        });
                    }
                    if self.has_data {
                        self.data.push('\n');
                    }
                    self.data.push_str(value);
                    self.has_data = true;
                }
                "event" => self.name = Some(value.to_owned()),
                // `id` and `retry` only matter for automatic reconnection, which the clients
                // never do; unknown fields are ignored as the standard requires.
                _ => {}
            }
        }
        // Keep the allocation for the next line.
        self.line = raw;
        self.line.clear();
        Ok(())
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        let name = self.name.take();
        if self.has_data {
            self.has_data = false;
            out.push(SseEvent {
                event: name.filter(|n| !n.is_empty()),
                data: std::mem::take(&mut self.data),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(event: Option<&str>, data: &str) -> SseEvent {
        SseEvent {
            event: event.map(str::to_owned),
            data: data.to_owned(),
        }
    }

    fn parse_in_pieces(pieces: &[&[u8]]) -> Result<Vec<SseEvent>, SseError> {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        for piece in pieces {
            p.push(piece, &mut out)?;
        }
        p.finish(&mut out)?;
        Ok(out)
    }

    /// A stream exercising every rule at once: BOM, comments, `\r\n`, bare `\r`, `event:`,
    /// multi-line data, no space after the colon, multi-byte UTF-8 (2, 3 and 4 bytes), padded
    /// JSON, an event without data (not dispatched), `id`/`retry` fields and `[DONE]`.
    const SAMPLE: &str = "\u{feff}: OPENROUTER PROCESSING\r\n\r\n\
        event: message_start\r\n\
        data: {\"type\":\"message_start\",\"text\":\"h\u{e9}llo \u{4e16}\u{754c} \u{1f427}\"}   \r\n\r\n\
        id: 7\nretry: 10\n\
        data:{\"a\":1}\n\
        data: second line\n\n\
        event: ping\n\n\
        : comment between events\n\
        data: cr only\r\rdata: [DONE]\n\n";

    fn sample_expected() -> Vec<SseEvent> {
        vec![
            ev(
                Some("message_start"),
                "{\"type\":\"message_start\",\"text\":\"h\u{e9}llo \u{4e16}\u{754c} \u{1f427}\"}   ",
            ),
            ev(None, "{\"a\":1}\nsecond line"),
            ev(None, "cr only"),
            ev(None, "[DONE]"),
        ]
    }

    #[test]
    fn whole_sample_parses() {
        assert_eq!(
            parse_in_pieces(&[SAMPLE.as_bytes()]).unwrap(),
            sample_expected()
        );
    }

    #[test]
    fn every_single_split_point_gives_the_same_events() {
        let bytes = SAMPLE.as_bytes();
        for cut in 0..=bytes.len() {
            let (a, b) = bytes.split_at(cut);
            assert_eq!(
                parse_in_pieces(&[a, b]).unwrap(),
                sample_expected(),
                "split at byte {cut}"
            );
        }
    }

    #[test]
    fn every_pair_of_split_points_gives_the_same_events() {
        let bytes = SAMPLE.as_bytes();
        for first in 0..=bytes.len() {
            for second in first..=bytes.len() {
                let pieces = [&bytes[..first], &bytes[first..second], &bytes[second..]];
                assert_eq!(
                    parse_in_pieces(&pieces).unwrap(),
                    sample_expected(),
                    "splits at bytes {first} and {second}"
                );
            }
        }
    }

    #[test]
    fn one_byte_reads_give_the_same_events() {
        let pieces: Vec<&[u8]> = SAMPLE.as_bytes().chunks(1).collect();
        assert_eq!(parse_in_pieces(&pieces).unwrap(), sample_expected());
    }

    #[test]
    fn table_of_small_streams() {
        let cases: Vec<(&str, &str, Vec<SseEvent>)> = vec![
            ("empty body", "", vec![]),
            ("only comments", ": a\n: b\n\n", vec![]),
            ("no trailing blank line", "data: x", vec![ev(None, "x")]),
            ("empty data line", "data:\n\n", vec![ev(None, "")]),
            (
                "two empty data lines",
                "data\ndata\n\n",
                vec![ev(None, "\n")],
            ),
            (
                "one leading space only",
                "data:   x\n\n",
                vec![ev(None, "  x")],
            ),
            ("colon in value", "data: a:b\n\n", vec![ev(None, "a:b")]),
            (
                "event without data",
                "event: x\n\ndata: y\n\n",
                vec![ev(None, "y")],
            ),
            (
                "empty event name",
                "event:\ndata: y\n\n",
                vec![ev(None, "y")],
            ),
            (
                "name applies to its event only",
                "event: error\ndata: 1\n\ndata: 2\n\n",
                vec![ev(Some("error"), "1"), ev(None, "2")],
            ),
            (
                "unknown field",
                "foo: bar\ndata: y\n\n",
                vec![ev(None, "y")],
            ),
            (
                "bom only at start",
                "data: \u{feff}x\n\n",
                vec![ev(None, "\u{feff}x")],
            ),
        ];
        for (name, input, expected) in cases {
            assert_eq!(
                parse_in_pieces(&[input.as_bytes()]).unwrap(),
                expected,
                "{name}"
            );
        }
    }

    #[test]
    fn invalid_utf8_is_an_error() {
        let err = parse_in_pieces(&[b"data: \xff\xfe\n\n"]).unwrap_err();
        assert!(matches!(err, SseError::InvalidUtf8 { .. }), "{err:?}");
    }

    #[test]
    fn an_endless_line_is_refused_without_growing_memory() {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        let block = vec![b'a'; 1024 * 1024];
        let mut result = Ok(());
        for _ in 0..(MAX_EVENT_BYTES / block.len() + 2) {
            result = p.push(&block, &mut out);
            if result.is_err() {
                break;
            }
        }
        assert_eq!(
            result,
            Err(SseError::TooLarge {
                limit: MAX_EVENT_BYTES
            })
        );
        assert!(p.line.len() <= MAX_EVENT_BYTES);
    }
}
