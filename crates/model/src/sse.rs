//! An incremental server-sent-events parser: feed it bytes as they arrive, take out the
//! `data` of each complete event.
//!
//! Invariants: bytes may be split anywhere (inside a line, inside a UTF-8 character); an event
//! is only returned once its terminating blank line has arrived, so a half-received event is
//! never parsed. Lines end in `\n`, `\r\n` or `\r`. Comments (`:`), `event:`, `id:` and `retry:`
//! fields are ignored; several `data:` lines of one event are joined with `\n`.

#[derive(Debug, Default)]
pub struct SseParser {
    buffer: Vec<u8>,
    data: Option<String>,
    /// The previous chunk ended with `\r`; a `\n` at the start of the next one belongs to it.
    after_cr: bool,
}

impl SseParser {
    /// Adds bytes and returns the data of every event they completed, in order.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut bytes = bytes;
        if self.after_cr && bytes.first() == Some(&b'\n') {
            bytes = &bytes[1..];
        }
        self.after_cr = false;
        self.buffer.extend_from_slice(bytes);
        let mut events = Vec::new();
        let mut start = 0;
        let mut i = 0;
        while i < self.buffer.len() {
            let end_of_line = match self.buffer[i] {
                b'\n' => Some(i + 1),
                b'\r' if self.buffer.get(i + 1) == Some(&b'\n') => Some(i + 2),
                b'\r' if i + 1 == self.buffer.len() => {
                    self.after_cr = true;
                    Some(i + 1)
                }
                b'\r' => Some(i + 1),
                _ => None,
            };
            if let Some(next) = end_of_line {
                let line = String::from_utf8_lossy(&self.buffer[start..i]).into_owned();
                if let Some(event) = self.line(&line) {
                    events.push(event);
                }
                start = next;
                i = next;
            } else {
                i += 1;
            }
        }
        self.buffer.drain(..start);
        events
    }

    /// At the end of the body: the last event, if it lacked its closing blank line.
    pub fn finish(&mut self) -> Option<String> {
        let rest = std::mem::take(&mut self.buffer);
        if !rest.is_empty() {
            let line = String::from_utf8_lossy(&rest).into_owned();
            if let Some(event) = self.line(&line) {
                return Some(event);
            }
        }
        self.data.take()
    }

    fn line(&mut self, line: &str) -> Option<String> {
        if line.is_empty() {
            return self.data.take();
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        if field == "data" {
            match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_anywhere_come_out_whole() {
        let stream =
            ": comment\r\ndata: {\"a\":1}\r\n\r\nevent: x\ndata: é\ndata: two\n\ndata: [DONE]\n\n";
        let bytes = stream.as_bytes();
        for split in 0..bytes.len() {
            let mut parser = SseParser::default();
            let mut events = parser.feed(&bytes[..split]);
            events.extend(parser.feed(&bytes[split..]));
            assert_eq!(
                events,
                ["{\"a\":1}", "é\ntwo", "[DONE]"],
                "split at {split}"
            );
            assert_eq!(parser.finish(), None);
        }
    }

    #[test]
    fn a_lone_cr_ends_a_line_and_the_last_event_may_lack_its_blank_line() {
        let mut parser = SseParser::default();
        assert_eq!(parser.feed(b"data: a\r"), Vec::<String>::new());
        assert_eq!(parser.feed(b"\r\ndata: b"), ["a"]);
        assert_eq!(parser.finish().as_deref(), Some("b"));
    }
}
