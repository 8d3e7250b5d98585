//! Whether one connection leaves: the session's policy layers first (a name by name rules,
//! so that a name no allowlist holds is refused without being resolved; an address by CIDR
//! rules), then every address the proxy would connect to meets the [`Guard`]. The proxy
//! connects only to an address that passed, so a name rebound between the check and the
//! connection changes nothing.

use crate::guard::Guard;
use crate::resolve::Resolve;
use async_trait::async_trait;
use sandbox_agents_domain::network::{Egress, NetworkPolicy, Rule, Target};
use std::net::{IpAddr, SocketAddr};

/// Where the proxy reads a sandbox's policy.
#[async_trait]
pub trait PolicySource: Send + Sync {
    /// The policy of the sandbox the backend calls `sandbox_id`; [`Policy::closed`] for one
    /// that serves no session.
    async fn policy(&self, sandbox_id: &str) -> Result<Policy, String>;
}

/// One policy that applies, parsed: where it comes from (`agent`, `environment`,
/// `session`), its egress and its rules.
#[derive(Clone, Debug)]
struct Layer {
    from: String,
    egress: Egress,
    rules: Vec<Rule>,
}

impl Layer {
    fn has_net_rules(&self) -> bool {
        self.rules
            .iter()
            .any(|r| matches!(r.target, Target::Net(_)))
    }
}

/// What applies to one sandbox's connections: the session it serves (none for a sandbox
/// no session has claimed, which reaches nothing) and every layer of its policy.
#[derive(Clone, Debug)]
pub struct Policy {
    pub session: Option<String>,
    layers: Vec<Layer>,
    /// The credentials the proxy adds to the session's HTTPS requests (`credentials`).
    pub credentials: Vec<crate::credentials::Credential>,
    /// Set for a sandbox without a session: every connection is refused.
    closed: bool,
}

impl Policy {
    /// The policy of `session`, from its layers (`from`, policy). No layer at all is `open`.
    pub fn new<'a>(
        session: impl Into<String>,
        layers: impl IntoIterator<Item = (&'a str, &'a NetworkPolicy)>,
    ) -> Self {
        Policy {
            session: Some(session.into()),
            layers: layers
                .into_iter()
                .map(|(from, p)| Layer {
                    from: from.to_owned(),
                    egress: p.egress,
                    rules: p.rules(),
                })
                .collect(),
            credentials: Vec::new(),
            closed: false,
        }
    }

    /// The policy with `credentials` bound for its HTTPS requests.
    pub fn with_credentials(mut self, credentials: Vec<crate::credentials::Credential>) -> Self {
        self.credentials = credentials;
        self
    }

    /// A sandbox that serves no session (a pooled one, or one that is not ours).
    pub fn closed() -> Self {
        Policy {
            session: None,
            layers: Vec::new(),
            credentials: Vec::new(),
            closed: true,
        }
    }
}

/// Where a connection goes, as the sandbox asked for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Host {
    Name(String),
    Ip(IpAddr),
}

impl Host {
    /// A host as a request names it (brackets around IPv6 allowed); names are lowercased.
    pub fn parse(text: &str) -> Option<Host> {
        let bare = text
            .strip_prefix('[')
            .and_then(|t| t.strip_suffix(']'))
            .unwrap_or(text);
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return Some(Host::Ip(ip));
        }
        let lower = bare.trim_end_matches('.').to_ascii_lowercase();
        sandbox_agents_domain::network::is_host_name(&lower).then_some(Host::Name(lower))
    }
}

impl std::fmt::Display for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Host::Name(n) => f.write_str(n),
            Host::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

/// A refusal: what the proxy answers and the event says (`reason`), and the counter's label.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denial {
    pub reason: String,
    pub label: &'static str,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Connect to one of `addrs` (in order). `rule`: what allowed it, for the logs.
    Allow {
        addrs: Vec<SocketAddr>,
        rule: String,
    },
    Deny(Denial),
}

fn deny(label: &'static str, reason: String) -> Decision {
    Decision::Deny(Denial { reason, label })
}

/// The port a decision is for: a connection's, or any port at all for a name the sandbox
/// asks its DNS about (`dns`), which connects nowhere: such a name is allowed when some rule
/// would let it be reached on some port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Port {
    One(u16),
    Any,
}

impl Port {
    /// The port `rule` is matched on: the connection's, or, for any port, the rule's own
    /// (any port matches a rule that names none).
    fn for_rule(self, rule: &Rule) -> u16 {
        match self {
            Port::One(p) => p,
            Port::Any => rule.port.unwrap_or(0),
        }
    }

    /// The port of the addresses an allowing decision returns (0 for any port).
    fn number(self) -> u16 {
        match self {
            Port::One(p) => p,
            Port::Any => 0,
        }
    }
}

/// `host:port` as a refusal names it; the host alone when any port was asked about.
fn place(host: &Host, port: Port) -> String {
    match port {
        Port::One(p) => format!("{host}:{p}"),
        Port::Any => host.to_string(),
    }
}

/// Decides a connection of a sandbox under `policy` to `host`:`port`.
pub async fn decide(
    policy: &Policy,
    host: &Host,
    port: u16,
    resolver: &dyn Resolve,
    guard: &Guard,
) -> Decision {
    decide_at(policy, host, Port::One(port), resolver, guard).await
}

/// Decides whether the sandbox's DNS answers `host`: [`decide`] on any port, by the same
/// rules: every layer must permit the name on some port (not necessarily the same port in
/// each layer), and only addresses the guard lets through are answered. An allowing
/// decision's addresses carry port 0.
pub async fn decide_any_port(
    policy: &Policy,
    host: &Host,
    resolver: &dyn Resolve,
    guard: &Guard,
) -> Decision {
    decide_at(policy, host, Port::Any, resolver, guard).await
}

async fn decide_at(
    policy: &Policy,
    host: &Host,
    port: Port,
    resolver: &dyn Resolve,
    guard: &Guard,
) -> Decision {
    if policy.closed {
        return deny("no_session", "this sandbox serves no session".into());
    }
    if let Some(l) = policy.layers.iter().find(|l| l.egress == Egress::None) {
        return deny("none", format!("the {} policy's egress is 'none'", l.from));
    }
    // A name is matched by name rules only, an address by CIDR rules only: a name no
    // allowlist holds is refused before it is resolved, so the proxy's resolver never
    // carries a name the policy did not allow (no exfiltration through lookups).
    let mut matched = Vec::new();
    let mut by_address = Vec::new();
    for l in policy
        .layers
        .iter()
        .filter(|l| l.egress == Egress::Allowlist)
    {
        let by_name = match host {
            Host::Name(n) => l.rules.iter().find(|r| r.permits_name(n, port.for_rule(r))),
            Host::Ip(_) => None,
        };
        match by_name {
            Some(r) => matched.push(r.source.clone()),
            None if matches!(host, Host::Ip(_)) && l.has_net_rules() => by_address.push(l),
            None => {
                return deny(
                    "policy",
                    format!(
                        "{} is not in the {} policy's allowlist",
                        place(host, port),
                        l.from
                    ),
                )
            }
        }
    }
    let addrs = match host {
        Host::Ip(ip) => vec![*ip],
        Host::Name(name) => match resolver.resolve(name).await {
            Ok(a) if !a.is_empty() => a,
            Ok(_) => return deny("resolve", format!("{name} has no address")),
            Err(e) => {
                // The resolver's own words stay in the server's log: they can name internal
                // servers.
                tracing::debug!(%name, error = %e, "an egress name did not resolve");
                return deny("resolve", format!("{name} does not resolve"));
            }
        },
    };
    let permitted: Vec<IpAddr> = addrs
        .iter()
        .copied()
        .filter(|ip| {
            by_address
                .iter()
                .all(|l| l.rules.iter().any(|r| r.permits_ip(*ip, port.for_rule(r))))
        })
        .collect();
    if permitted.is_empty() {
        let l = by_address.first().map_or("session", |l| l.from.as_str());
        return deny(
            "policy",
            format!("{} is not in the {l} policy's allowlist", place(host, port)),
        );
    }
    let mut refusal = None;
    let passed: Vec<SocketAddr> = permitted
        .iter()
        .filter(|ip| match guard.check(**ip) {
            Some(r) => {
                refusal.get_or_insert(r);
                false
            }
            None => true,
        })
        .map(|ip| SocketAddr::new(*ip, port.number()))
        .collect();
    if passed.is_empty() {
        let r = refusal.expect("an address was refused");
        // The class, never the address a name resolved to: a sandbox must not map the
        // control plane's internal names through its refusals.
        let reason = match host {
            Host::Ip(_) => format!("{host} is {}", r.reason()),
            Host::Name(_) => format!("{host} resolves to {}", r.reason()),
        };
        return deny(r.label(), reason);
    }
    matched.extend(
        by_address
            .iter()
            .filter_map(|l| {
                l.rules
                    .iter()
                    .find(|r| r.permits_ip(passed[0].ip(), port.for_rule(r)))
            })
            .map(|r| r.source.clone()),
    );
    let rule = if matched.is_empty() {
        "open".to_owned()
    } else {
        matched.join(", ")
    };
    Decision::Allow {
        addrs: passed,
        rule,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guard::GuardSettings;
    use crate::resolve::StaticResolver;

    fn policy(layers: &[(&str, policies::P)]) -> Policy {
        let parsed: Vec<(&str, NetworkPolicy)> =
            layers.iter().map(|(from, p)| (*from, p.build())).collect();
        Policy::new("s1", parsed.iter().map(|(f, p)| (*f, p)))
    }

    /// Builds policies without JSON.
    mod policies {
        use sandbox_agents_domain::network::{Egress, NetworkPolicy};
        pub struct P(
            pub Egress,
            pub &'static [&'static str],
            pub &'static [&'static str],
        );
        impl P {
            pub fn build(&self) -> NetworkPolicy {
                NetworkPolicy {
                    egress: self.0,
                    allow: self.1.iter().map(|s| s.to_string()).collect(),
                    presets: self.2.iter().map(|s| s.to_string()).collect(),
                }
            }
        }
    }
    use policies::P;

    fn resolver() -> StaticResolver {
        StaticResolver::new([
            ("pypi.org", "151.101.0.223"),
            ("files.pythonhosted.org", "151.101.64.223"),
            ("inside.example", "10.0.0.5"),
            ("meta.example", "169.254.169.254"),
            ("net.example", "203.0.113.9"),
        ])
    }

    async fn run(p: &Policy, host: &str, port: u16) -> Decision {
        let guard = Guard::new(GuardSettings::default());
        decide(p, &Host::parse(host).unwrap(), port, &resolver(), &guard).await
    }

    fn label(d: &Decision) -> &'static str {
        match d {
            Decision::Allow { .. } => "allowed",
            Decision::Deny(d) => d.label,
        }
    }

    #[tokio::test]
    async fn open_is_the_internet_without_private_or_metadata_addresses() {
        let p = policy(&[("agent", P(Egress::Open, &[], &[]))]);
        assert_eq!(label(&run(&p, "pypi.org", 443).await), "allowed");
        assert_eq!(label(&run(&p, "inside.example", 80).await), "private");
        assert_eq!(label(&run(&p, "meta.example", 80).await), "metadata");
        assert_eq!(label(&run(&p, "169.254.169.254", 80).await), "metadata");
        assert_eq!(label(&run(&p, "unknown.example", 80).await), "resolve");
        let none = Policy::new("s1", std::iter::empty());
        assert_eq!(
            label(&run(&none, "pypi.org", 443).await),
            "allowed",
            "no layer is open"
        );
    }

    #[tokio::test]
    async fn every_layer_must_allow_and_none_closes_everything() {
        let p = policy(&[
            ("agent", P(Egress::Allowlist, &[], &["pypi"])),
            ("session", P(Egress::Allowlist, &["pypi.org:443"], &[])),
        ]);
        assert_eq!(label(&run(&p, "pypi.org", 443).await), "allowed");
        assert_eq!(label(&run(&p, "pypi.org", 80).await), "policy");
        assert_eq!(
            label(&run(&p, "files.pythonhosted.org", 443).await),
            "policy"
        );
        let p = policy(&[
            ("agent", P(Egress::Open, &[], &[])),
            ("environment", P(Egress::None, &[], &[])),
        ]);
        match run(&p, "pypi.org", 443).await {
            Decision::Deny(d) => assert!(d.reason.contains("environment"), "{}", d.reason),
            d => panic!("{d:?}"),
        }
        assert_eq!(
            label(&run(&Policy::closed(), "pypi.org", 443).await),
            "no_session"
        );
    }

    #[tokio::test]
    async fn a_name_outside_the_allowlist_is_refused_without_resolving() {
        let p = policy(&[("agent", P(Egress::Allowlist, &["pypi.org"], &[]))]);
        // `unknown.example` does not resolve: refused by the policy, not by the resolver.
        match run(&p, "unknown.example", 443).await {
            Decision::Deny(d) => assert_eq!(d.label, "policy", "{}", d.reason),
            d => panic!("{d:?}"),
        }
    }

    #[tokio::test]
    async fn cidr_rules_allow_addresses_only_and_allowed_names_still_meet_the_guard() {
        let p = policy(&[(
            "agent",
            P(
                Egress::Allowlist,
                &["203.0.113.0/24", "inside.example"],
                &[],
            ),
        )]);
        match run(&p, "203.0.113.9", 8443).await {
            Decision::Allow { addrs, rule } => {
                assert_eq!(addrs, vec!["203.0.113.9:8443".parse().unwrap()]);
                assert_eq!(rule, "203.0.113.0/24");
            }
            d => panic!("{d:?}"),
        }
        // A name is never resolved to be matched against CIDR rules.
        assert_eq!(label(&run(&p, "net.example", 8443).await), "policy");
        assert_eq!(label(&run(&p, "pypi.org", 443).await), "policy");
        // Allowed by name, refused by where it resolves.
        assert_eq!(label(&run(&p, "inside.example", 80).await), "private");
    }

    #[tokio::test]
    async fn any_port_allows_a_name_some_rule_allows_on_some_port() {
        let guard = Guard::new(GuardSettings::default());
        let any = |p: Policy, host: &'static str| {
            let guard = &guard;
            async move { decide_any_port(&p, &Host::parse(host).unwrap(), &resolver(), guard).await }
        };
        let p = policy(&[
            (
                "agent",
                P(Egress::Allowlist, &["pypi.org:443", "inside.example"], &[]),
            ),
            (
                "session",
                P(Egress::Allowlist, &["pypi.org:8443", "inside.example"], &[]),
            ),
        ]);
        match any(p.clone(), "pypi.org").await {
            Decision::Allow { addrs, rule } => {
                assert_eq!(addrs, vec!["151.101.0.223:0".parse().unwrap()]);
                assert_eq!(rule, "pypi.org:443, pypi.org:8443");
            }
            d => panic!("{d:?}"),
        }
        match any(p.clone(), "files.pythonhosted.org").await {
            Decision::Deny(d) => assert_eq!(
                d.reason,
                "files.pythonhosted.org is not in the agent policy's allowlist"
            ),
            d => panic!("{d:?}"),
        }
        assert_eq!(label(&any(p, "inside.example").await), "private");
        let open = policy(&[("agent", P(Egress::Open, &[], &[]))]);
        assert_eq!(label(&any(open, "meta.example").await), "metadata");
        assert_eq!(
            label(&any(Policy::closed(), "pypi.org").await),
            "no_session"
        );
    }
}
