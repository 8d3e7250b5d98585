//! Credentials the proxy puts into a sandbox's HTTPS requests, so the sandbox never holds
//! them: a header added for a host (`inject`), or a placeholder the sandbox holds instead of
//! the secret, swapped for it in the headers of requests to the bound hosts only (`swap`; inside
//! `Basic` credentials too, as git sends a token given in a URL).
//! Applied only inside TLS the proxy terminates (`intercept`): a secret never crosses the
//! network in clear text, and never reaches a host it is not bound to.

use hyper::header::{HeaderMap, HeaderName, HeaderValue};

#[derive(Clone)]
enum Action {
    Inject {
        header: HeaderName,
        value: HeaderValue,
    },
    Swap {
        placeholder: String,
        value: String,
    },
}

/// One bound credential: the hosts it is for (lowercase names) and what it does.
#[derive(Clone)]
pub struct Credential {
    hosts: Vec<String>,
    action: Action,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.action {
            Action::Inject { header, .. } => format!("inject {header}"),
            Action::Swap { .. } => "swap".to_owned(),
        };
        // Never the value, nor the placeholder (which stands for it).
        f.debug_struct("Credential")
            .field("hosts", &self.hosts)
            .field("action", &kind)
            .finish()
    }
}

fn hosts(hosts: &[String]) -> Vec<String> {
    hosts
        .iter()
        .map(|h| h.trim_end_matches('.').to_ascii_lowercase())
        .collect()
}

impl Credential {
    /// Sets `header` to `value` on every request to `hosts` (replacing what the sandbox sent).
    pub fn inject(on: &[String], header: &str, value: &str) -> Result<Self, String> {
        let header = HeaderName::from_bytes(header.as_bytes())
            .map_err(|_| format!("'{header}' is not a header name"))?;
        let mut value = HeaderValue::from_str(value).map_err(|_| {
            "the secret cannot be a header value (a control character or a line break)".to_owned()
        })?;
        value.set_sensitive(true);
        Ok(Credential {
            hosts: hosts(on),
            action: Action::Inject { header, value },
        })
    }

    /// Replaces `placeholder` with `value` in the headers of requests to `hosts`. Refused
    /// when the secret could not stand in a header (a control character or a line break):
    /// the placeholder would go out unswapped.
    pub fn swap(on: &[String], placeholder: &str, value: &str) -> Result<Self, String> {
        if HeaderValue::from_str(value).is_err() {
            return Err(
                "the secret cannot be a header value (a control character or a line break)"
                    .to_owned(),
            );
        }
        Ok(Credential {
            hosts: hosts(on),
            action: Action::Swap {
                placeholder: placeholder.to_owned(),
                value: value.to_owned(),
            },
        })
    }

    pub fn applies_to(&self, host: &str) -> bool {
        self.hosts.iter().any(|h| h == host)
    }

    /// Applies the credential to a request's headers.
    pub fn apply(&self, headers: &mut HeaderMap) {
        match &self.action {
            Action::Inject { header, value } => {
                headers.insert(header.clone(), value.clone());
            }
            Action::Swap { placeholder, value } => {
                for v in headers.values_mut() {
                    let Ok(text) = v.to_str() else { continue };
                    let swapped = if text.contains(placeholder.as_str()) {
                        text.replace(placeholder.as_str(), value)
                    } else if let Some(basic) = swap_in_basic(text, placeholder, value) {
                        basic
                    } else {
                        continue;
                    };
                    if let Ok(mut swapped) = HeaderValue::from_str(&swapped) {
                        swapped.set_sensitive(true);
                        *v = swapped;
                    }
                }
            }
        }
    }
}

/// `Basic <base64(user:password)>` with the placeholder swapped inside the encoded part:
/// how git, pip and curl send a token given in a URL (`https://user:$TOKEN@host/`) or by a
/// credential helper. `None` when the value is not Basic or holds no placeholder.
fn swap_in_basic(text: &str, placeholder: &str, value: &str) -> Option<String> {
    use base64::Engine;
    let (scheme, encoded) = text.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let b64 = base64::engine::general_purpose::STANDARD;
    let decoded = String::from_utf8(b64.decode(encoded.trim()).ok()?).ok()?;
    decoded.contains(placeholder).then(|| {
        format!(
            "{scheme} {}",
            b64.encode(decoded.replace(placeholder, value))
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inject_replaces_what_the_sandbox_sent_and_swap_touches_only_the_placeholder() {
        let on = vec!["API.test.".to_owned()];
        let mut h = HeaderMap::new();
        h.insert("authorization", HeaderValue::from_static("Bearer forged"));
        h.insert("x-other", HeaderValue::from_static("ph-123 and more"));
        Credential::inject(&on, "Authorization", "Bearer real")
            .unwrap()
            .apply(&mut h);
        Credential::swap(&on, "ph-123", "s3cret")
            .unwrap()
            .apply(&mut h);
        assert_eq!(h["authorization"], "Bearer real");
        assert_eq!(h["x-other"], "s3cret and more");
        assert!(Credential::swap(&on, "p", "v")
            .unwrap()
            .applies_to("api.test"));
        assert!(!Credential::swap(&on, "p", "v")
            .unwrap()
            .applies_to("other.test"));
        assert!(Credential::swap(&on, "p", "line\nbreak").is_err());

        // Inside Basic credentials (git's `https://user:$TOKEN@host/`), and only there.
        use base64::Engine;
        let b64 = base64::engine::general_purpose::STANDARD;
        let mut h = HeaderMap::new();
        let basic = format!("Basic {}", b64.encode("x-access-token:ph-123"));
        h.insert("authorization", HeaderValue::from_str(&basic).unwrap());
        h.insert(
            "x-b64",
            HeaderValue::from_str(&b64.encode("ph-123")).unwrap(),
        );
        Credential::swap(&on, "ph-123", "s3cret")
            .unwrap()
            .apply(&mut h);
        let sent = h["authorization"].to_str().unwrap();
        let decoded = b64.decode(sent.strip_prefix("Basic ").unwrap()).unwrap();
        assert_eq!(decoded, b"x-access-token:s3cret");
        assert!(h["authorization"].is_sensitive());
        assert_eq!(
            h["x-b64"],
            b64.encode("ph-123").as_str(),
            "not Basic: untouched"
        );
        assert!(Credential::inject(&on, "Bad Header", "v").is_err());
        assert!(Credential::inject(&on, "X", "line\nbreak").is_err());
        let shown = format!("{:?}", Credential::swap(&on, "ph-123", "s3cret").unwrap());
        assert!(
            !shown.contains("s3cret") && !shown.contains("ph-123"),
            "{shown}"
        );
    }
}
