//! Any bytes as a streaming call's request body (the E2B API's data plane): the envelope
//! parser never panics, takes a message only when the body is exactly one uncompressed
//! envelope within the limit, and a message it takes wraps back to the same body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sandbox_agents_domain::e2b::envelope::{single, wrap, MAX_MESSAGE};

fuzz_target!(|data: &[u8]| {
    if let Ok(message) = single(data) {
        assert!(message.len() <= MAX_MESSAGE);
        assert_eq!(wrap(0, message), data);
    }
});
