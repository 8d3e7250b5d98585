//! People's browser sessions over HTTP: the session cookie (`sa_session`, HttpOnly,
//! SameSite=Lax; Secure behind https). Opening and ending sessions, passwords and recovery
//! codes are `sandbox_agents_credentials::people`'s.

use axum::http::{header, HeaderMap, HeaderValue};
use sandbox_agents_credentials::people::SESSION_TTL;

/// The browser session cookie.
pub const SESSION_COOKIE: &str = "sa_session";

/// The session cookie's value, if the request carries exactly one. Several mean somebody
/// planted one next to ours (a page on another port of the same host can set cookies for
/// it), and then none is trusted.
pub fn session_cookie(headers: &HeaderMap) -> Option<String> {
    let mut found = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .filter(|(k, _)| *k == SESSION_COOKIE)
        .map(|(_, v)| v.to_owned());
    let first = found.next()?;
    if found.next().is_some() {
        tracing::info!("a request carried several session cookies; none is used");
        return None;
    }
    Some(first).filter(|v| !v.is_empty())
}

/// `Set-Cookie` for a session (`token` None: clears it).
pub fn set_cookie(token: Option<&str>, secure: bool) -> HeaderValue {
    let value = match token {
        Some(t) => format!(
            "{SESSION_COOKIE}={t}; Path=/; HttpOnly; SameSite=Lax; Max-Age={}",
            SESSION_TTL.whole_seconds()
        ),
        None => format!("{SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0"),
    };
    let value = if secure { value + "; Secure" } else { value };
    HeaderValue::from_str(&value).expect("a cookie of hex and ASCII is a valid header")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_cookie_is_found_among_others() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; sa_session=abc; b=2"),
        );
        assert_eq!(session_cookie(&h).as_deref(), Some("abc"));
        h.append(
            header::COOKIE,
            HeaderValue::from_static("sa_session=planted"),
        );
        assert_eq!(
            session_cookie(&h),
            None,
            "a planted second cookie trusts neither"
        );
        let c = set_cookie(Some("abc"), true);
        let c = c.to_str().unwrap();
        assert!(c.contains("HttpOnly") && c.contains("SameSite=Lax") && c.ends_with("Secure"));
    }
}
