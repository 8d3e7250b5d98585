//! Where a remote MCP server may be: the webhooks' rules against loopback, private,
//! link-local and metadata addresses, with their own operator switch
//! (`--mcp-allow-private`). The check runs where the connection is made: names go through
//! [`GuardedResolver`], which hands the connector only permitted addresses (so a name that
//! resolved outside at save time and inside now, DNS rebinding, still cannot reach in), and
//! IP literals are checked by [`check_url`] before every connection.

use reqwest13::dns::{Addrs, Name, Resolve, Resolving};
use sandbox_agents_webhooks::address::{names_internal_host, permitted_addrs};
use std::sync::Arc;
use std::time::Duration;
use url::Url;

/// What an operator sets to allow servers on a private network.
const SWITCH: &str = "the operator can allow private MCP servers with --mcp-allow-private (SANDBOX_AGENTS_MCP_ALLOW_PRIVATE=true)";

/// Parses a server's URL and refuses what can never be reached: a scheme other than
/// http(s), credentials in the URL (they belong in `headers`), or an internal IP literal (or
/// `localhost`) when private servers are not allowed.
pub fn check_url(raw: &str, allow_private: bool) -> Result<Url, String> {
    let url = Url::parse(raw).map_err(|e| format!("the url is not valid: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err("the url must start with https:// or http://".into());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(
            "the url must not carry credentials; send them as headers (which may read a secret)"
                .into(),
        );
    }
    if allow_private {
        return Ok(url);
    }
    if names_internal_host(&url)? {
        return Err(format!(
            "refused: {} is a loopback, private or link-local address; {SWITCH}",
            url.host_str().unwrap_or_default()
        ));
    }
    Ok(url)
}

/// A DNS resolver that drops internal addresses (unless allowed) and fails when none is left.
#[derive(Clone, Debug)]
struct GuardedResolver {
    allow_private: bool,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow_private = self.allow_private;
        Box::pin(async move {
            let permitted = permitted_addrs(name.as_str(), allow_private, SWITCH).await?;
            let addrs: Addrs = Box::new(permitted.into_iter());
            Ok(addrs)
        })
    }
}

/// The HTTP client every remote server is reached with: the guarded resolver, no proxy from
/// the environment (a proxy would resolve names itself, past the guard), no redirects (a
/// redirect could point inside), rustls over ring with the WebPKI roots.
pub fn http_client(allow_private: bool) -> Result<reqwest13::Client, String> {
    let roots = rustls::RootCertStore::from_iter(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| format!("TLS: {e}"))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    reqwest13::Client::builder()
        .tls_backend_preconfigured(tls)
        .dns_resolver(Arc::new(GuardedResolver { allow_private }))
        .no_proxy()
        .redirect(reqwest13::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| format!("the MCP HTTP client: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked_for_scheme_credentials_and_internal_literals() {
        assert!(check_url("https://example.com/mcp", false).is_ok());
        assert!(check_url("ftp://example.com", false).is_err());
        assert!(check_url("https://u:p@example.com/mcp", false).is_err());
        for inside in [
            "http://127.0.0.1:9/mcp",
            "http://[::1]/mcp",
            "http://localhost/mcp",
            "http://169.254.169.254/latest",
            "http://10.0.0.1/mcp",
        ] {
            let e = check_url(inside, false).unwrap_err();
            assert!(e.contains("--mcp-allow-private"), "{e}");
        }
        assert!(check_url("http://127.0.0.1:9/mcp", true).is_ok());
    }

    #[tokio::test]
    async fn the_resolver_refuses_names_that_resolve_inside() {
        let name: Name = "localhost".parse().unwrap();
        let refused = GuardedResolver {
            allow_private: false,
        }
        .resolve(name)
        .await;
        let err = refused.err().expect("localhost is refused").to_string();
        assert!(err.contains("internal addresses"), "{err}");
        let name: Name = "localhost".parse().unwrap();
        let allowed = GuardedResolver {
            allow_private: true,
        }
        .resolve(name)
        .await;
        assert!(allowed.unwrap().next().is_some());
    }

    #[test]
    fn the_client_builds() {
        http_client(false).unwrap();
    }
}
