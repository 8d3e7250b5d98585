//! Any bytes through the frame codec: it never panics and never takes more than a frame's
//! limit, and every frame it decodes encodes back to bytes that decode to the same frame.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use sandboxd::proto::{Frame, FrameCodec, MAX_FRAME};
use tokio_util::codec::Decoder;

fuzz_target!(|data: &[u8]| {
    let mut buf = BytesMut::from(data);
    let mut codec = FrameCodec;
    loop {
        match codec.decode(&mut buf) {
            Ok(Some(frame)) => {
                let mut again = BytesMut::from(&frame.encode_to_bytes()[..]);
                let back: Frame = codec
                    .decode(&mut again)
                    .expect("an encoded frame decodes")
                    .expect("whole");
                assert_eq!(back, frame);
                assert!(again.is_empty());
            }
            // Too short for a whole frame: a decoder holds it, bounded by the limit.
            Ok(None) => {
                assert!(buf.len() <= MAX_FRAME + 5);
                break;
            }
            Err(_) => break,
        }
    }
});
