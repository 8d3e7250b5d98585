//! The proxy's own HTTP answers and the headers it never passes on.

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Response, StatusCode, Uri};

pub(crate) type Body = BoxBody<Bytes, hyper::Error>;

/// The headers that belong to one hop (RFC 9110 §7.6.1), and the proxy's own.
pub(crate) fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let listed: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok())
        .collect();
    for name in listed {
        headers.remove(name);
    }
    for name in [
        header::CONNECTION,
        header::PROXY_AUTHORIZATION,
        header::PROXY_AUTHENTICATE,
        header::TE,
        header::TRAILER,
        header::UPGRADE,
        HeaderName::from_static("keep-alive"),
        HeaderName::from_static("proxy-connection"),
    ] {
        headers.remove(name);
    }
}

/// A plain-text answer of the proxy's own.
pub(crate) fn text(status: StatusCode, body: String) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(body)).map_err(|n| match n {}).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// A request's target in origin form (`/path?query`), as a host expects it; `/` when it has
/// none.
pub(crate) fn origin_form(uri: &Uri) -> Uri {
    uri.path_and_query()
        .and_then(|pq| Uri::try_from(pq.as_str()).ok())
        .unwrap_or_else(|| Uri::from_static("/"))
}
