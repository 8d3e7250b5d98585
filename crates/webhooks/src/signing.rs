//! The signature consumers verify, byte for byte:
//! `X-Anecdote-Signature: t=<unix seconds>,v1=<lowercase hex HMAC-SHA256(secret, "<t>." + body)>`,
//! keyed with the secret's UTF-8 bytes, re-computed for every attempt (consumers reject
//! timestamps more than 300 s from their clock), over exactly the bytes sent.

use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

pub const SIGNATURE_HEADER: &str = "x-anecdote-signature";
pub const EVENT_HEADER: &str = "x-anecdote-event";
pub const DELIVERY_HEADER: &str = "x-anecdote-delivery";

/// The header value for `body` sent at Unix time `t`.
pub fn signature(secret: &str, t: i64, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key");
    mac.update(t.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("t={t},v1={}", hex::encode(mac.finalize().into_bytes()))
}

/// A new signing secret: `whsec_` and 43 URL-safe characters (32 random bytes), ASCII so that
/// every consumer's verifier reads the same key bytes.
pub fn new_secret() -> String {
    let mut bytes = [0u8; 32];
    sandbox_agents_vault::random_bytes(&mut bytes)
        .expect("the operating system's random source works");
    format!(
        "whsec_{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_matches_a_known_vector() {
        // python3 -c 'import hmac,hashlib;print(hmac.new(b"whsec_test",b"1700000000.{\"a\":1}",hashlib.sha256).hexdigest())'
        assert_eq!(
            signature("whsec_test", 1_700_000_000, br#"{"a":1}"#),
            "t=1700000000,v1=38877139021993b830af32feea6e18a8da83eb2f6e49ee50bd9e4cf4ca4d3789"
        );
    }

    #[test]
    fn secrets_are_ascii_and_distinct() {
        let a = new_secret();
        assert!(a.starts_with("whsec_") && a.len() == 49 && a.is_ascii());
        assert_ne!(a, new_secret());
    }
}
