//! Webhooks as a consumer sees them: subscribing, and checking a delivery's signature.

use crate::receiver::Received;
use crate::TestApp;
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

/// Checks a request's signature the way a consumer does: HMAC-SHA256 over "<t>." + body.
pub fn verify(secret: &str, r: &Received) -> bool {
    let header = r.header("x-anecdote-signature");
    let mut t = None;
    let mut v1 = None;
    for part in header.split(',') {
        match part.split_once('=') {
            Some(("t", v)) => t = Some(v.to_owned()),
            Some(("v1", v)) => v1 = Some(v.to_owned()),
            _ => {}
        }
    }
    let (Some(t), Some(v1)) = (t, v1) else {
        return false;
    };
    let age = time::OffsetDateTime::now_utc().unix_timestamp() - t.parse::<i64>().unwrap_or(0);
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("{t}.").as_bytes());
    mac.update(&r.body);
    age.abs() <= 300 && hex::encode(mac.finalize().into_bytes()) == v1
}

pub async fn subscribe(app: &TestApp, body: Value) -> Value {
    let r = app
        .http
        .post(app.url("/api/webhooks"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    r.json().await.unwrap()
}
