//! E2B sandbox hosts (`--e2b-domain`): `{port}-{sandbox id}.{domain}` names a sandbox and a
//! port as the `E2b-Sandbox-Id` and `E2b-Sandbox-Port` headers do, so a request to such a host
//! is the data plane's (`/e2b-sandbox`), whatever its path. This is how the SDKs reach
//! sandboxes when `E2B_SANDBOX_URL` is unset (E2B's cloud), and the only way their signed file
//! URLs, which carry no headers, can name a sandbox.
//!
//! It runs before routing (the router is wrapped by it), so the rewritten path is the one
//! routed; the host check (`guard`) admits the domain's subdomains.

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::Response;
use std::sync::Arc;

/// The sandbox and port a host names under `domain`: `None` for a host outside it,
/// `Some(Err)` for one under it that names none.
pub fn parse(host: &str, domain: &str) -> Option<Result<(u16, uuid::Uuid), ()>> {
    let name = host
        .rsplit_once(':')
        .filter(|(_, port)| port.bytes().all(|b| b.is_ascii_digit()))
        .map_or(host, |(name, _)| name)
        .trim_end_matches('.')
        .to_ascii_lowercase();
    let domain = domain.trim_matches('.').to_ascii_lowercase();
    let label = name.strip_suffix(&domain)?.strip_suffix('.')?;
    let parsed = label
        .split_once('-')
        .and_then(|(port, id)| Some((port.parse::<u16>().ok()?, uuid::Uuid::try_parse(id).ok()?)));
    Some(parsed.ok_or(()))
}

/// Routes requests for sandbox hosts to the data plane.
pub async fn layer(State(domain): State<Arc<str>>, mut req: Request, next: Next) -> Response {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or_else(|| req.uri().authority().map(|a| a.as_str().to_owned()));
    let Some(named) = host.as_deref().and_then(|h| parse(h, &domain)) else {
        return next.run(req).await;
    };
    let Ok((port, id)) = named else {
        return super::errors::answer(
            StatusCode::NOT_FOUND,
            format!(
                "{} names no sandbox: sandbox hosts are <port>-<sandbox id>.{domain}",
                host.unwrap_or_default()
            ),
        );
    };
    let path = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    let Ok(uri) = format!("{}{path}", super::envd::PREFIX).parse::<Uri>() else {
        return super::errors::answer(StatusCode::BAD_REQUEST, "the request's path is not valid");
    };
    *req.uri_mut() = uri;
    let headers = req.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&id.to_string()) {
        headers.insert("e2b-sandbox-id", v);
    }
    headers.insert("e2b-sandbox-port", HeaderValue::from(port));
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn hosts_name_a_port_and_a_sandbox_under_the_domain() {
        let id = "01a25253-478c-72c0-9bf5-0ecbda360b52";
        let d = "e2b.example.com";
        let ok = |h: &str| parse(h, d).unwrap().unwrap();
        assert_eq!(ok(&format!("49983-{id}.e2b.example.com")).0, 49983);
        assert_eq!(ok(&format!("49999-{id}.E2B.example.com:443")).0, 49999);
        assert_eq!(
            ok(&format!("49983-{id}.e2b.example.com.")).1.to_string(),
            id
        );
        assert_eq!(parse("api.example.com", d), None);
        assert_eq!(parse("e2b.example.com", d), None);
        assert_eq!(parse(&format!("49983-{id}.xe2b.example.com"), d), None);
        assert_eq!(parse("49983-nope.e2b.example.com", d), Some(Err(())));
        assert_eq!(
            parse(&format!("port-{id}.e2b.example.com"), d),
            Some(Err(()))
        );
    }
}
