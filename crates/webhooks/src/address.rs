//! Which addresses a delivery may go to. Loopback, private, link-local, shared (CGNAT),
//! multicast and reserved addresses are refused unless the deployment allows private
//! targets. The check runs where the connection is made: names are resolved by
//! [`GuardedResolver`], which hands the connector only permitted addresses, so a name that
//! resolved to a public address when the subscription was made and to 127.0.0.1 now (DNS
//! rebinding) still cannot reach the inside. IP literals never reach a resolver and are
//! checked by [`check_target`] before every request.

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::Url;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// Whether `ip` is inside the deployment's own networks (or otherwise not a public host).
pub fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_internal_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_internal_v4(v4);
            }
            let s = v6.segments();
            // NAT64 (64:ff9b::/96) and IPv4-compatible (::/96) embed an IPv4 address.
            if (s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0])
                || (s[0..6] == [0, 0, 0, 0, 0, 0] && !v6.is_loopback() && !v6.is_unspecified())
            {
                let [a, b] = s[6].to_be_bytes();
                let [c, d] = s[7].to_be_bytes();
                return is_internal_v4(Ipv4Addr::new(a, b, c, d));
            }
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00 // unique local fc00::/7
                || (s[0] & 0xffc0) == 0xfe80 // link-local fe80::/10
                || (s[0] & 0xffc0) == 0xfec0 // site-local (deprecated) fec0::/10
                || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
        }
    }
}

fn is_internal_v4(v4: Ipv4Addr) -> bool {
    let [a, b, ..] = v4.octets();
    v4.is_loopback()
        || v4.is_private()
        || v4.is_link_local()
        || v4.is_unspecified()
        || v4.is_broadcast()
        || v4.is_multicast()
        || v4.is_documentation()
        || a == 0 // "this network"
        || (a == 100 && (b & 0xc0) == 64) // shared address space 100.64.0.0/10
        || (a == 198 && (b & 0xfe) == 18) // benchmarking 198.18.0.0/15
        || a >= 240 // reserved
}

/// Parses a subscription's URL and refuses what can never be delivered to: a scheme other
/// than http(s), no host, credentials in the URL, or an internal IP literal (or `localhost`)
/// when private targets are not allowed. Names are checked again at every send.
pub fn check_url(raw: &str, allow_private: bool) -> Result<Url, String> {
    let url = Url::parse(raw).map_err(|e| format!("the url is not valid: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err("the url must start with http:// or https://".into());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(
            "the url must not carry credentials; the signature authenticates deliveries".into(),
        );
    }
    check_target(&url, allow_private)?;
    Ok(url)
}

/// Whether the URL's host is an internal IP literal or `localhost` (names are checked where
/// they are resolved); `Err` when it has no host.
pub fn names_internal_host(url: &Url) -> Result<bool, String> {
    Ok(match url.host() {
        None => return Err("the url has no host".into()),
        Some(url::Host::Ipv4(ip)) => is_internal(IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => is_internal(IpAddr::V6(ip)),
        Some(url::Host::Domain(d)) => {
            let d = d.trim_end_matches('.').to_ascii_lowercase();
            d == "localhost" || d.ends_with(".localhost")
        }
    })
}

/// The per-request check of a URL's host when it is an IP literal (or `localhost`).
pub fn check_target(url: &Url, allow_private: bool) -> Result<(), String> {
    if allow_private {
        return Ok(());
    }
    if names_internal_host(url)? {
        return Err(format!(
            "refused: {} is a loopback, private or link-local address \
             (set SANDBOX_AGENTS_WEBHOOK_ALLOW_PRIVATE=true to allow internal receivers)",
            url.host_str().unwrap_or_default()
        ));
    }
    Ok(())
}

/// A DNS resolver that drops internal addresses (unless allowed) and fails when none is left.
#[derive(Clone, Debug)]
pub struct GuardedResolver {
    pub allow_private: bool,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow_private = self.allow_private;
        Box::pin(async move {
            let permitted = permitted_addrs(
                name.as_str(),
                allow_private,
                "set SANDBOX_AGENTS_WEBHOOK_ALLOW_PRIVATE=true to allow internal receivers",
            )
            .await?;
            let addrs: Addrs = Box::new(permitted.into_iter());
            Ok(addrs)
        })
    }
}

/// The addresses `host` resolves to that a connection may use: all of them when private
/// ones are allowed, else the public ones; an error naming what it found when none is left
/// (`hint`: what the operator can set). Every guarded resolver of the control plane uses it.
pub async fn permitted_addrs(
    host: &str,
    allow_private: bool,
    hint: &str,
) -> Result<Vec<SocketAddr>, Box<dyn std::error::Error + Send + Sync>> {
    let found: Vec<SocketAddr> = tokio::net::lookup_host((host, 0)).await?.collect();
    let permitted: Vec<SocketAddr> = found
        .iter()
        .copied()
        .filter(|a| allow_private || !is_internal(a.ip()))
        .collect();
    if permitted.is_empty() {
        let shown: Vec<String> = found.iter().map(|a| a.ip().to_string()).collect();
        return Err(format!(
            "refused: {host} resolves only to internal addresses ({}); {hint}",
            if shown.is_empty() {
                "none".to_owned()
            } else {
                shown.join(", ")
            }
        )
        .into());
    }
    Ok(permitted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_ranges_are_recognised_in_both_families() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
            "224.0.0.1",
        ] {
            assert!(is_internal(ip.parse().unwrap()), "{ip}");
        }
        for ip in [
            "93.184.216.34",
            "1.1.1.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert!(!is_internal(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn urls_are_checked_for_scheme_credentials_and_internal_literals() {
        assert!(check_url("https://example.com/hook", false).is_ok());
        assert!(check_url("ftp://example.com", false).is_err());
        assert!(check_url("http://u:p@example.com", false).is_err());
        assert!(check_url("http://127.0.0.1:9/x", false).is_err());
        assert!(check_url("http://[::1]/x", false).is_err());
        assert!(check_url("http://localhost/x", false).is_err());
        assert!(check_url("http://127.0.0.1:9/x", true).is_ok());
    }

    #[tokio::test]
    async fn the_resolver_refuses_names_that_resolve_inside() {
        let name: Name = "localhost".parse().unwrap();
        let refused = GuardedResolver {
            allow_private: false,
        }
        .resolve(name)
        .await;
        assert!(refused.is_err());
        let name: Name = "localhost".parse().unwrap();
        let allowed = GuardedResolver {
            allow_private: true,
        }
        .resolve(name)
        .await;
        assert!(allowed.unwrap().next().is_some());
    }
}
