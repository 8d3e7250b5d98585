//! SSE frames as the bytes a stream writes: `event:`, `data:` and `id:` fields, then a blank
//! line. A frame is built once and written as is (a live event's frame is shared by every
//! stream of its session: cloning `Bytes` is a reference count, not a copy).

use bytes::{BufMut, Bytes, BytesMut};
use sandbox_agents_domain::event::SessionEvent;
use std::fmt::Write;

/// The comment a quiet stream sends so that proxies and clients know it is alive.
pub const PING: &[u8] = b": ping\n\n";

/// One frame. `data` is split at line feeds into one `data:` field per line, as the SSE format
/// requires; a carriage return in it, or a line break in `event`, is a bug of the caller (our
/// data is compact JSON, which escapes both), caught in debug builds.
pub fn frame(event: &str, data: &str, id: Option<i64>) -> Bytes {
    debug_assert!(
        !event.contains(['\n', '\r']),
        "an SSE event name holds a line break: {event:?}"
    );
    debug_assert!(!data.contains('\r'), "SSE data holds a carriage return");
    let mut b = BytesMut::with_capacity(event.len() + data.len() + 40);
    b.put_slice(b"event: ");
    b.put_slice(event.as_bytes());
    b.put_u8(b'\n');
    for line in data.split('\n') {
        b.put_slice(b"data: ");
        b.put_slice(line.as_bytes());
        b.put_u8(b'\n');
    }
    if let Some(id) = id {
        // Writing to a `BytesMut` cannot fail.
        let _ = writeln!(b, "id: {id}");
    }
    b.put_u8(b'\n');
    b.freeze()
}

/// A `SessionEvent`'s frame: its type as `event:`, its JSON as `data:`, its seq as `id:`.
/// Never `id: 0`: a browser would resume from 0 and replay the whole log.
pub fn session_event(e: &SessionEvent) -> Bytes {
    let data = serde_json::to_string(e).expect("a SessionEvent always serializes");
    frame(&e.kind, &data, (e.seq > 0).then_some(e.seq))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_has_its_fields_in_order_and_ends_with_a_blank_line() {
        assert_eq!(
            &frame("agent.message", r#"{"a":1}"#, Some(42))[..],
            b"event: agent.message\ndata: {\"a\":1}\nid: 42\n\n"
        );
        assert_eq!(&frame("exit", "{}", None)[..], b"event: exit\ndata: {}\n\n");
    }

    #[test]
    fn each_line_of_data_is_a_field_of_its_own() {
        assert_eq!(
            &frame("x", "one\ntwo\n", None)[..],
            b"event: x\ndata: one\ndata: two\ndata: \n\n"
        );
    }
}
