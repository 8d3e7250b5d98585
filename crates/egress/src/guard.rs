//! The addresses no policy opens: the host's own addresses (so the control plane, its
//! bridge gateways and anything else listening on it), the networks the operator names as
//! the control plane's or the sandboxes', loopback, link-local and metadata addresses, and
//! private ranges unless the operator names some with `--egress-allow-private`.
//!
//! Checked on the address the proxy is about to connect to, after resolving: a name that
//! resolves (or is rebound) to a refused address is refused, whatever the policy said of the
//! name.

use ipnet::IpNet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long the host's own addresses are trusted before they are listed again. New
/// bridges (a network created since) are private addresses, refused anyway unless named in
/// `allow_private`, and an address inside `allow_private` is checked against a fresh list.
const LOCAL_ADDRESSES_TTL: Duration = Duration::from_secs(5);

/// Why an address is refused whatever the policy; `reason()` is what the denial says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// An address of this host (any interface, bridges included).
    Host,
    /// A network the operator closed to sandboxes (`--egress-deny`): the control plane's
    /// own networks, say. Checked first: no other setting opens it.
    Denied,
    Loopback,
    /// `169.254.0.0/16`, `fe80::/10`, and the cloud metadata addresses.
    LinkLocalOrMetadata,
    /// Private, shared (CGNAT) or benchmarking ranges, and unique-local IPv6.
    Private,
    /// Unspecified, multicast, broadcast or reserved: nothing a connection goes to.
    NotUnicast,
}

impl Refused {
    pub fn reason(self) -> &'static str {
        match self {
            Refused::Host => "an address of the control plane's host",
            Refused::Denied => "a network the operator closed to sandboxes (--egress-deny)",
            Refused::Loopback => "a loopback address",
            Refused::LinkLocalOrMetadata => "a link-local or metadata address",
            Refused::Private => {
                "a private address (the operator can allow ranges with --egress-allow-private)"
            }
            Refused::NotUnicast => "not a unicast address",
        }
    }

    /// The label of the decision counter.
    pub fn label(self) -> &'static str {
        match self {
            Refused::Host => "host",
            Refused::Denied => "denied_network",
            Refused::Loopback => "loopback",
            Refused::LinkLocalOrMetadata => "metadata",
            Refused::Private => "private",
            Refused::NotUnicast => "not_unicast",
        }
    }
}

/// The operator's say on what the guard refuses.
#[derive(Clone, Debug, Default)]
pub struct GuardSettings {
    /// Private ranges sandboxes may reach when a policy allows them
    /// (`--egress-allow-private`). Never opens loopback, link-local, metadata, the host or
    /// the control plane's networks.
    pub allow_private: Vec<IpNet>,
    /// Networks always refused besides the host's own addresses (`--egress-deny`): the
    /// control plane's (when it runs elsewhere), the sandboxes' (on a backend where they have
    /// addresses), anything else the operator closes. Wins over `allow_private`.
    pub denied: Vec<IpNet>,
}

/// The always-refused check.
#[derive(Debug)]
pub struct Guard {
    settings: GuardSettings,
    /// The host's addresses and when they were listed.
    local: Mutex<(Vec<IpAddr>, Option<Instant>)>,
    /// Whether the host's own addresses are refused. Only the crate's tests turn it off, to
    /// reach servers they run on loopback.
    refuse_host: bool,
}

impl Guard {
    pub fn new(settings: GuardSettings) -> Self {
        Guard {
            settings,
            local: Mutex::new((Vec::new(), None)),
            refuse_host: true,
        }
    }

    /// A guard that lets loopback and the host's addresses through: for this crate's tests of
    /// the proxy against servers on loopback, never for a server.
    #[cfg(test)]
    pub(crate) fn permitting_host_for_tests(settings: GuardSettings) -> Self {
        Guard {
            refuse_host: false,
            ..Guard::new(settings)
        }
    }

    /// Why `ip` is refused, if it is.
    pub fn check(&self, ip: IpAddr) -> Option<Refused> {
        let given = ip;
        let ip = canonical(ip);
        // Both forms: an operator may close an IPv6 range that embeds IPv4 (NAT64, 6to4).
        if self
            .settings
            .denied
            .iter()
            .any(|n| n.contains(&ip) || n.contains(&given))
        {
            return Some(Refused::Denied);
        }
        let class = classify(ip);
        if !self.refuse_host && class == Some(Refused::Loopback) {
            return None;
        }
        // What no setting opens, named for what it is before it is called the host's.
        if class.is_some_and(|c| c != Refused::Private) {
            return class;
        }
        let named = self.settings.allow_private.iter().any(|n| n.contains(&ip));
        if self.refuse_host && self.is_local(ip, named) {
            return Some(Refused::Host);
        }
        match class {
            Some(Refused::Private) if named => None,
            other => other,
        }
    }

    /// Whether `ip` is one of the host's addresses; `fresh` lists them again first (an
    /// address the operator opened may be a bridge created a moment ago).
    fn is_local(&self, ip: IpAddr, fresh: bool) -> bool {
        let mut local = self.local.lock().unwrap_or_else(|e| e.into_inner());
        let stale = local.1.is_none_or(|at| at.elapsed() > LOCAL_ADDRESSES_TTL);
        if fresh || stale {
            match if_addrs::get_if_addrs() {
                Ok(ifs) => {
                    *local = (
                        ifs.iter().map(|i| canonical(i.ip())).collect(),
                        Some(Instant::now()),
                    )
                }
                Err(e) => tracing::warn!(error = %e, "the host's addresses could not be listed"),
            }
        }
        local.0.contains(&ip)
    }
}

/// An IPv6 address that reaches an IPv4 one (mapped, the NAT64 well-known prefix, 6to4,
/// IPv4-compatible) as that IPv4 address, so every check sees what is really reached.
fn canonical(ip: IpAddr) -> IpAddr {
    let IpAddr::V6(v6) = ip else { return ip };
    let s = v6.segments();
    let o = v6.octets();
    let embedded = if let Some(v4) = v6.to_ipv4_mapped() {
        Some(v4)
    } else if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0]
        || (s[..6] == [0, 0, 0, 0, 0, 0] && !v6.is_loopback() && !v6.is_unspecified())
    {
        // NAT64 (64:ff9b::/96), IPv4-compatible (::a.b.c.d).
        Some(Ipv4Addr::new(o[12], o[13], o[14], o[15]))
    } else if s[0] == 0x2002 {
        // 6to4 (2002:AABB:CCDD::/48).
        Some(Ipv4Addr::new(o[2], o[3], o[4], o[5]))
    } else {
        None
    };
    embedded.map_or(ip, IpAddr::V4)
}

/// The class of an address no policy opens (before the operator's exceptions).
pub fn classify(ip: IpAddr) -> Option<Refused> {
    match canonical(ip) {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<Refused> {
    let o = ip.octets();
    if ip.is_loopback() {
        Some(Refused::Loopback)
    } else if ip.is_link_local() {
        Some(Refused::LinkLocalOrMetadata)
    } else if o[0] == 0 || ip.is_multicast() || ip.is_broadcast() || o[0] >= 240 {
        Some(Refused::NotUnicast)
    } else if ip.is_private()
        // 100.64.0.0/10, shared address space (carrier-grade NAT).
        || (o[0] == 100 && (o[1] & 0xc0) == 64)
        // 192.0.0.0/24, IETF protocol assignments.
        || (o[0] == 192 && o[1] == 0 && o[2] == 0)
        // 198.18.0.0/15, benchmarking.
        || (o[0] == 198 && (o[1] & 0xfe) == 18)
    {
        Some(Refused::Private)
    } else {
        None
    }
}

/// AWS's IPv6 metadata address.
const METADATA_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254);

fn classify_v6(ip: Ipv6Addr) -> Option<Refused> {
    let first = ip.segments()[0];
    if ip.is_loopback() {
        Some(Refused::Loopback)
    } else if ip == METADATA_V6 || (first & 0xffc0) == 0xfe80 {
        Some(Refused::LinkLocalOrMetadata)
    } else if ip.is_unspecified() || ip.is_multicast() {
        Some(Refused::NotUnicast)
    } else if (first & 0xfe00) == 0xfc00
        // Site-local (deprecated, still routed inside some networks).
        || (first & 0xffc0) == 0xfec0
        // Local-use NAT64 (64:ff9b:1::/48) and Teredo (2001::/32): tunnels to addresses
        // this check cannot see.
        || ip.segments()[..3] == [0x64, 0xff9b, 1]
        || ip.segments()[..2] == [0x2001, 0]
    {
        Some(Refused::Private)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_ranges_no_policy_opens_are_classified() {
        for (addr, class) in [
            ("127.0.0.1", Some(Refused::Loopback)),
            ("::1", Some(Refused::Loopback)),
            ("::ffff:127.0.0.1", Some(Refused::Loopback)),
            ("169.254.169.254", Some(Refused::LinkLocalOrMetadata)),
            ("fd00:ec2::254", Some(Refused::LinkLocalOrMetadata)),
            ("fe80::1", Some(Refused::LinkLocalOrMetadata)),
            ("10.1.2.3", Some(Refused::Private)),
            ("172.17.0.1", Some(Refused::Private)),
            ("192.168.1.1", Some(Refused::Private)),
            ("100.100.100.200", Some(Refused::Private)),
            ("fd12::1", Some(Refused::Private)),
            ("64:ff9b::a00:1", Some(Refused::Private)),
            ("64:ff9b::7f00:1", Some(Refused::Loopback)),
            ("2002:a9fe:a9fe::1", Some(Refused::LinkLocalOrMetadata)),
            ("::a00:1", Some(Refused::Private)),
            ("fec0::1", Some(Refused::Private)),
            ("64:ff9b:1::1", Some(Refused::Private)),
            ("2001:0:4136:e378::1", Some(Refused::Private)),
            ("0.0.0.0", Some(Refused::NotUnicast)),
            ("224.0.0.1", Some(Refused::NotUnicast)),
            ("255.255.255.255", Some(Refused::NotUnicast)),
            ("::", Some(Refused::NotUnicast)),
            ("203.0.113.7", None),
            ("2001:db8::1", None),
            ("1.1.1.1", None),
        ] {
            assert_eq!(classify(ip(addr)), class, "{addr}");
        }
    }

    #[test]
    fn the_operator_opens_private_ranges_only() {
        let guard = Guard::new(GuardSettings {
            allow_private: vec![
                "10.0.0.0/8".parse().unwrap(),
                "127.0.0.0/8".parse().unwrap(),
                "169.254.0.0/16".parse().unwrap(),
            ],
            denied: vec!["10.9.0.0/16".parse().unwrap()],
        });
        assert_eq!(guard.check(ip("10.1.2.3")), None);
        assert_eq!(guard.check(ip("192.168.1.1")), Some(Refused::Private));
        // Naming them does not open loopback or metadata addresses.
        assert_eq!(guard.check(ip("127.0.0.1")), Some(Refused::Loopback));
        assert_eq!(
            guard.check(ip("169.254.169.254")),
            Some(Refused::LinkLocalOrMetadata)
        );
        // The control plane's networks stay refused inside an allowed range.
        assert_eq!(guard.check(ip("10.9.1.1")), Some(Refused::Denied));
        let nat64 = Guard::new(GuardSettings {
            allow_private: Vec::new(),
            denied: vec!["64:ff9b::/96".parse().unwrap()],
        });
        // Refused for what it embeds (a public address) only because the operator said so.
        assert_eq!(nat64.check(ip("64:ff9b::cb00:7107")), Some(Refused::Denied));
    }

    #[test]
    fn the_hosts_own_addresses_are_refused_even_when_their_range_is_allowed() {
        let ifs = if_addrs::get_if_addrs().unwrap();
        let Some(own) = ifs.iter().map(|i| i.ip()).find(|a| !a.is_loopback()) else {
            panic!("this machine has no address besides loopback");
        };
        let guard = Guard::new(GuardSettings {
            allow_private: vec![IpNet::from(own)],
            denied: Vec::new(),
        });
        assert_eq!(guard.check(own), Some(Refused::Host));
    }
}
