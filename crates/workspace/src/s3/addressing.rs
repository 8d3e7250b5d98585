//! How a bucket is addressed: path-style (`https://endpoint/bucket/key`, the default, which
//! every S3-compatible store and AWS accept) or virtual-hosted-style
//! (`https://bucket.endpoint/key`, which some stores require and AWS recommends), and the
//! proxy the client may go through. Checked once at start, so a mistake in the flags is a
//! refusal to start rather than a failed boot later.

use super::S3Settings;

/// The URL a client of `bucket` is built with, given `--s3-addressing-style` and the endpoint.
/// `None`: let the client derive AWS's own (`s3.<region>.amazonaws.com`, path-style or
/// `<bucket>.s3.<region>.amazonaws.com`), which it does for both styles.
pub(crate) fn bucket_endpoint(s: &S3Settings, bucket: &str) -> Result<Option<String>, String> {
    if s.virtual_hosted {
        let https = s
            .endpoint
            .as_deref()
            .is_none_or(|e| e.starts_with("https://"));
        check_host_label(bucket, https)?;
    }
    let Some(endpoint) = &s.endpoint else {
        return Ok(None);
    };
    if !s.virtual_hosted {
        // The client appends `/bucket` itself.
        return Ok(Some(endpoint.clone()));
    }
    let mut url = url::Url::parse(endpoint).map_err(|e| format!("--s3-endpoint: {e}"))?;
    let host = match url.host() {
        Some(url::Host::Domain(d)) => d.to_owned(),
        _ => {
            return Err(format!(
                "--s3-addressing-style virtual puts the bucket in the host name, and --s3-endpoint {endpoint} has no host name (an address cannot take a bucket in front of it); use --s3-addressing-style path"
            ))
        }
    };
    url.set_host(Some(&format!("{bucket}.{host}")))
        .map_err(|e| format!("the host name of bucket '{bucket}': {e}"))?;
    Ok(Some(url.as_str().trim_end_matches('/').to_owned()))
}

/// A bucket name is one or more host labels when it is addressed by host: lowercase letters,
/// digits and hyphens. Over TLS it must be a single label, since a certificate for
/// `*.endpoint` covers one label only (the AWS SDKs fall back to path-style for such names; a
/// store that needs virtual-hosted-style cannot serve them over TLS at all, so this says so).
fn check_host_label(bucket: &str, https: bool) -> Result<(), String> {
    let valid_label = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    if !bucket.split('.').all(valid_label) {
        return Err(format!(
            "bucket '{bucket}' cannot be a host name (lowercase letters, digits, hyphens and dots), which --s3-addressing-style virtual needs; use --s3-addressing-style path"
        ));
    }
    if https && bucket.contains('.') {
        return Err(format!(
            "bucket '{bucket}' has dots, and a TLS certificate for the endpoint's subdomains does not cover a name with dots in front of it; use --s3-addressing-style path for it"
        ));
    }
    Ok(())
}

/// The settings as flags give them, checked before the server starts: the proxy is a URL a
/// client can use, and with virtual-hosted-style the endpoint has a host name to put buckets
/// in front of.
pub fn check(s: &S3Settings) -> Result<(), String> {
    if let Some(proxy) = &s.proxy {
        let url = url::Url::parse(proxy).map_err(|e| format!("--s3-proxy: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
            return Err(format!(
                "--s3-proxy must be an http:// or https:// URL with a host, not {}",
                shown_proxy(proxy)
            ));
        }
    }
    if s.virtual_hosted && s.endpoint.is_some() {
        // Any valid bucket name shows whether the endpoint can take one.
        bucket_endpoint(s, "bucket")?;
    }
    Ok(())
}

/// The hosts `--s3-proxy` never carries: the credential endpoints of the instance, the task
/// or the pod (the link-local ones, and any the environment names), which answer only from
/// the machine itself; through a proxy they would fail, or give the proxy's own role.
pub(crate) fn proxy_excludes(s: &S3Settings) -> String {
    let mut hosts: Vec<String> = [
        "169.254.169.254",
        "169.254.170.2",
        "fd00:ec2::254",
        "fd00:ec2::23",
    ]
    .map(str::to_owned)
    .to_vec();
    let named = match &s.ambient {
        Some(super::AmbientCredentials::Instance {
            metadata_endpoint: Some(e),
        }) => Some(e),
        Some(super::AmbientCredentials::PodIdentity { full_uri, .. }) => Some(full_uri),
        _ => None,
    };
    if let Some(host) = named
        .and_then(|e| url::Url::parse(e).ok())
        .and_then(|u| u.host_str().map(|h| h.trim_matches(['[', ']']).to_owned()))
    {
        hosts.push(host);
    }
    hosts.join(",")
}

/// The proxy URL without its password, for logs and messages.
pub(crate) fn shown_proxy(proxy: &str) -> String {
    match url::Url::parse(proxy) {
        Ok(mut url) if url.password().is_some() => {
            let _ = url.set_password(Some("***"));
            url.to_string()
        }
        Ok(url) => url.to_string(),
        Err(_) => "(not a URL)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(endpoint: Option<&str>, virtual_hosted: bool) -> S3Settings {
        S3Settings {
            endpoint: endpoint.map(str::to_owned),
            virtual_hosted,
            ..Default::default()
        }
    }

    #[test]
    fn path_style_keeps_the_endpoint_and_virtual_style_puts_the_bucket_in_front_of_its_host() {
        let path = settings(Some("https://s3.example.com"), false);
        assert_eq!(
            bucket_endpoint(&path, "data").unwrap().as_deref(),
            Some("https://s3.example.com")
        );
        let virt = settings(Some("https://s3.example.com:8443/base"), true);
        assert_eq!(
            bucket_endpoint(&virt, "data").unwrap().as_deref(),
            Some("https://data.s3.example.com:8443/base")
        );
        // AWS itself: the client derives both styles from the region.
        assert_eq!(
            bucket_endpoint(&settings(None, true), "data").unwrap(),
            None
        );
        assert_eq!(
            bucket_endpoint(&settings(None, false), "Data_1").unwrap(),
            None
        );
    }

    #[test]
    fn names_a_host_cannot_carry_are_refused_with_the_way_out() {
        let virt = settings(Some("https://s3.example.com"), true);
        for bad in ["Data", "a_b", "-a", "a..b"] {
            let e = bucket_endpoint(&virt, bad).unwrap_err();
            assert!(e.contains(bad) && e.contains("path"), "{e}");
        }
        let e = bucket_endpoint(&virt, "my.data").unwrap_err();
        assert!(e.contains("dots"), "{e}");
        // Over plain http a dotted name is only more labels.
        let plain = settings(Some("http://s3.test:9000"), true);
        assert_eq!(
            bucket_endpoint(&plain, "my.data").unwrap().as_deref(),
            Some("http://my.data.s3.test:9000")
        );
        let e = bucket_endpoint(&settings(None, true), "my.data").unwrap_err();
        assert!(e.contains("dots"), "{e}");
    }

    #[test]
    fn the_proxy_never_carries_the_credential_endpoints() {
        let plain = proxy_excludes(&S3Settings::default());
        assert!(plain.contains("169.254.169.254") && plain.contains("169.254.170.2"));
        let pod = S3Settings {
            ambient: Some(super::super::AmbientCredentials::PodIdentity {
                full_uri: "http://[fd00:ec2::23]/v1/credentials".into(),
                token_file: "/t".into(),
            }),
            ..Default::default()
        };
        assert!(proxy_excludes(&pod).ends_with(",fd00:ec2::23"));
        let imds = S3Settings {
            ambient: Some(super::super::AmbientCredentials::Instance {
                metadata_endpoint: Some("http://imds.internal:1338".into()),
            }),
            ..Default::default()
        };
        assert!(proxy_excludes(&imds).ends_with(",imds.internal"));
    }

    #[test]
    fn the_flags_are_checked_at_start() {
        assert!(check(&settings(Some("http://127.0.0.1:9000"), false)).is_ok());
        let e = check(&settings(Some("http://127.0.0.1:9000"), true)).unwrap_err();
        assert!(e.contains("no host name"), "{e}");
        assert!(check(&settings(Some("http://s3.test:9000"), true)).is_ok());
        let proxied = |p: &str| S3Settings {
            proxy: Some(p.into()),
            ..Default::default()
        };
        assert!(check(&proxied("http://proxy.internal:3128")).is_ok());
        for bad in ["proxy:3128", "socks5://proxy:1080", "not a url"] {
            assert!(check(&proxied(bad)).is_err(), "{bad}");
        }
        let e = check(&proxied("ftp://user:hunter2@proxy:21")).unwrap_err();
        assert!(!e.contains("hunter2") && e.contains("***"), "{e}");
    }
}
