//! A sandbox's network policy (`network` on agents, environment configurations and
//! sessions): what it may connect to through the egress proxy, and how the proxy matches a
//! connection against it. Pure: no resolving, no IO.
//!
//! Layers narrow: a session's connection must be permitted by every policy that applies to
//! it (the agent's, the environment's, the session's own). What no policy can open, whatever
//! it says (the control plane, the host, other sandboxes, link-local and metadata addresses,
//! private ranges the operator did not name), is the proxy's to refuse, not this module's.

use crate::validation::Violations;
use ipnet::IpNet;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::net::IpAddr;
use utoipa::ToSchema;

/// At most this many `allow` entries in one policy.
pub const MAX_ALLOW: usize = 256;
/// At most this many presets named in one policy.
pub const MAX_PRESETS: usize = 16;
/// The longest `allow` entry, in bytes.
pub const MAX_ENTRY: usize = 300;

/// What a sandbox may reach: `open` (the internet, never private, host or metadata
/// addresses), `allowlist` (only what `allow` and `presets` name) or `none` (no network at
/// all).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Egress {
    #[default]
    Open,
    Allowlist,
    None,
}

impl Egress {
    pub fn as_str(self) -> &'static str {
        match self {
            Egress::Open => "open",
            Egress::Allowlist => "allowlist",
            Egress::None => "none",
        }
    }
}

/// What a sandbox may connect to, through the egress proxy. On an agent, an environment's
/// configuration or a session; layers narrow: a session's connection must be permitted by
/// every policy that applies to it (its agent's, its environment's, its own), so no layer can
/// widen another. Whatever a policy says, the control plane, the host, other sandboxes,
/// link-local and metadata addresses and private ranges the operator did not name stay
/// unreachable. `{}` is `{"egress": "open"}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NetworkPolicy {
    /// Default `open`.
    #[serde(default)]
    #[schema(default = "open")]
    pub egress: Egress,
    /// With `allowlist`: host names (`pypi.org`), wildcards (`*.pythonhosted.org`: any name
    /// under it, not the name itself), addresses and CIDRs (`203.0.113.0/24`,
    /// `[2001:db8::/32]`), each optionally with a port (`github.com:443`,
    /// `203.0.113.0/24:8443`; none: any port). At most 256.
    #[serde(default)]
    #[schema(example = json!(["pypi.org", "*.pythonhosted.org", "github.com:443", "203.0.113.0/24"]))]
    pub allow: Vec<String>,
    /// With `allowlist`: named lists of hosts, each a documented set of names its registry
    /// serves from: `package_managers` (all of `pypi`, `npm`, `crates`, `go`, `debian` and
    /// `ubuntu`), `pypi` (pypi.org, files.pythonhosted.org, *.pythonhosted.org), `npm`
    /// (registry.npmjs.org, registry.yarnpkg.com), `crates` (crates.io, index.crates.io,
    /// static.crates.io, static.rust-lang.org), `go` (proxy.golang.org, sum.golang.org,
    /// storage.googleapis.com), `debian` (deb.debian.org, security.debian.org,
    /// ftp.debian.org), `ubuntu` (archive.ubuntu.com, *.archive.ubuntu.com,
    /// security.ubuntu.com, ports.ubuntu.com), `github` (github.com, *.github.com,
    /// *.githubusercontent.com). At most 16.
    #[serde(default)]
    #[schema(example = json!(["package_managers"]))]
    pub presets: Vec<String>,
}

/// Where a layer of a session's network policy comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum LayerSource {
    Agent,
    Environment,
    Session,
}

/// One policy that applies to a session, and where it comes from. A connection is allowed
/// only when every layer permits it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
pub struct NetworkLayer {
    /// `agent`, `environment` or `session` (the session's own, `Session.network`).
    pub from: LayerSource,
    pub policy: NetworkPolicy,
}

/// A session's network policies as its row keeps them (`sessions.network`): the agent's and
/// the environment's copied when it was created (later edits of either apply to sessions
/// created afterwards, like the rest of a session's configuration), and its own, which PATCH
/// changes. A row without one (a session from before policies) has neither: open.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionNetwork {
    /// The agent's layer, then the environment's when the session has one.
    #[serde(default)]
    pub inherited: Vec<NetworkLayer>,
    /// The session's own policy; `None`: it narrows nothing.
    #[serde(default)]
    pub own: Option<NetworkPolicy>,
}

impl SessionNetwork {
    /// Every layer that applies, in order: agent, environment, session.
    pub fn layers(&self) -> Vec<NetworkLayer> {
        let own = self.own.iter().map(|p| NetworkLayer {
            from: LayerSource::Session,
            policy: p.clone(),
        });
        self.inherited.iter().cloned().chain(own).collect()
    }

    /// The policies of [`SessionNetwork::layers`], for the proxy (which needs no sources).
    pub fn policies(&self) -> Vec<NetworkPolicy> {
        self.inherited
            .iter()
            .map(|l| l.policy.clone())
            .chain(self.own.iter().cloned())
            .collect()
    }
}

/// The named host lists a policy can include. Documented in OpenAPI and `docs/security.md`;
/// a preset only ever grows by names its registry serves from.
pub const PRESETS: &[(&str, &[&str])] = &[
    (
        "pypi",
        &["pypi.org", "files.pythonhosted.org", "*.pythonhosted.org"],
    ),
    ("npm", &["registry.npmjs.org", "registry.yarnpkg.com"]),
    (
        "crates",
        &[
            "crates.io",
            "index.crates.io",
            "static.crates.io",
            "static.rust-lang.org",
        ],
    ),
    (
        "go",
        &[
            "proxy.golang.org",
            "sum.golang.org",
            "storage.googleapis.com",
        ],
    ),
    (
        "debian",
        &["deb.debian.org", "security.debian.org", "ftp.debian.org"],
    ),
    (
        "ubuntu",
        &[
            "archive.ubuntu.com",
            "*.archive.ubuntu.com",
            "security.ubuntu.com",
            "ports.ubuntu.com",
        ],
    ),
    (
        "github",
        &["github.com", "*.github.com", "*.githubusercontent.com"],
    ),
];

/// Presets made of other presets.
const PRESET_GROUPS: &[(&str, &[&str])] = &[(
    "package_managers",
    &["pypi", "npm", "crates", "go", "debian", "ubuntu"],
)];

/// Every preset name, groups first: what `presets` takes (the OpenAPI document's enum).
pub const PRESET_NAMES: &[&str] = &[
    "package_managers",
    "pypi",
    "npm",
    "crates",
    "go",
    "debian",
    "ubuntu",
    "github",
];

/// Every preset name, groups included, from the tables themselves ([`PRESET_NAMES`] is
/// the same list, as a constant).
pub fn preset_names() -> Vec<&'static str> {
    PRESET_GROUPS
        .iter()
        .map(|(n, _)| *n)
        .chain(PRESETS.iter().map(|(n, _)| *n))
        .collect()
}

/// The host entries of a preset (a group's, flattened); `None` for an unknown name.
pub fn preset_hosts(name: &str) -> Option<Vec<&'static str>> {
    if let Some((_, members)) = PRESET_GROUPS.iter().find(|(n, _)| *n == name) {
        return Some(
            members
                .iter()
                .flat_map(|m| preset_hosts(m).unwrap_or_default())
                .collect(),
        );
    }
    PRESETS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, hosts)| hosts.to_vec())
}

/// What one `allow` entry (or preset host) matches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// Exactly this name (lowercase, no trailing dot).
    Host(String),
    /// Any name ending in `.<suffix>` (not the suffix itself).
    Under(String),
    /// Any address in this network.
    Net(IpNet),
}

/// One parsed entry: what it matches, on which port, and the text it came from (what a
/// decision names as its rule).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub target: Target,
    pub port: Option<u16>,
    pub source: String,
}

impl Rule {
    fn port_ok(&self, port: u16) -> bool {
        self.port.is_none_or(|p| p == port)
    }

    /// Whether the rule permits `name` (a host name, already lowercase) on `port`.
    pub fn permits_name(&self, name: &str, port: u16) -> bool {
        self.port_ok(port)
            && match &self.target {
                Target::Host(h) => h == name,
                Target::Under(suffix) => name
                    .strip_suffix(suffix.as_str())
                    .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
                Target::Net(_) => false,
            }
    }

    /// Whether the rule permits the address `ip` on `port`.
    pub fn permits_ip(&self, ip: IpAddr, port: u16) -> bool {
        self.port_ok(port) && matches!(&self.target, Target::Net(n) if n.contains(&ip))
    }
}

/// Why an entry is not a rule, for a person.
const ENTRY_HELP: &str = "an entry is a host name (pypi.org), a wildcard (*.pythonhosted.org), \
    an address or CIDR (203.0.113.0/24, [2001:db8::/32]), optionally with :port";

/// Parses one `allow` entry.
pub fn parse_rule(entry: &str) -> Result<Rule, String> {
    let text = entry.trim();
    if text.is_empty() || text.len() > MAX_ENTRY {
        return Err(format!("'{entry}' is not an entry: {ENTRY_HELP}"));
    }
    let (target, port) = split_port(text)?;
    let target =
        parse_target(target).ok_or_else(|| format!("'{entry}' is not an entry: {ENTRY_HELP}"))?;
    Ok(Rule {
        target,
        port,
        source: text.to_owned(),
    })
}

/// `target[:port]`, where an IPv6 target is in brackets (`[2001:db8::1]:443`).
fn split_port(text: &str) -> Result<(&str, Option<u16>), String> {
    let port_of = |p: &str| -> Result<u16, String> {
        match p.parse::<u16>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!(
                "'{text}' has port '{p}': a port is a number from 1 to 65535"
            )),
        }
    };
    if let Some(rest) = text.strip_prefix('[') {
        let Some((inner, after)) = rest.split_once(']') else {
            return Err(format!("'{text}' opens a '[' it does not close"));
        };
        return match after {
            "" => Ok((inner, None)),
            _ => match after.strip_prefix(':') {
                Some(p) => Ok((inner, Some(port_of(p)?))),
                None => Err(format!(
                    "'{text}' has '{after}' after its address: {ENTRY_HELP}"
                )),
            },
        };
    }
    match text.rsplit_once(':') {
        // A bare IPv6 address has several colons; it takes no port unless bracketed.
        Some((head, p)) if !head.contains(':') => Ok((head, Some(port_of(p)?))),
        _ => Ok((text, None)),
    }
}

fn parse_target(t: &str) -> Option<Target> {
    if let Ok(net) = t.parse::<IpNet>() {
        return Some(Target::Net(net.trunc()));
    }
    if let Ok(ip) = t.parse::<IpAddr>() {
        return Some(Target::Net(IpNet::from(ip)));
    }
    let lower = t.to_ascii_lowercase();
    let lower = lower.strip_suffix('.').unwrap_or(&lower);
    if let Some(suffix) = lower.strip_prefix("*.") {
        // `*.com` would open a whole top-level domain: a wildcard needs two labels under it.
        return (is_host_name(suffix) && suffix.contains('.'))
            .then(|| Target::Under(suffix.to_owned()));
    }
    // A name whose labels are all digits is an address written wrong, not a host.
    let numeric = lower
        .split('.')
        .all(|l| l.chars().all(|c| c.is_ascii_digit()));
    (is_host_name(lower) && !numeric).then(|| Target::Host(lower.to_owned()))
}

/// A DNS name: labels of letters, digits and inner hyphens (1–63 characters each), at most
/// 253 characters in all.
pub fn is_host_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        })
}

impl NetworkPolicy {
    /// The 422s of a policy at `loc` (e.g. `["network"]`): bad entries, unknown presets,
    /// entries or presets with `open` or `none` (where they would mean nothing), too many.
    pub fn validate(&self, v: &mut Violations, loc: &[&str]) {
        fn at<'a>(loc: &[&'a str], field: &'a str) -> Vec<&'a str> {
            let mut l = loc.to_vec();
            l.push(field);
            l
        }
        if self.egress != Egress::Allowlist && !(self.allow.is_empty() && self.presets.is_empty()) {
            v.push(
                "value_error",
                &at(loc, "egress"),
                format!(
                    "allow and presets apply only with egress 'allowlist'; egress '{}' ignores them, so send them empty",
                    self.egress.as_str()
                ),
                Value::from(self.egress.as_str()),
            );
        }
        if self.allow.len() > MAX_ALLOW {
            v.push(
                "too_long",
                &at(loc, "allow"),
                format!("at most {MAX_ALLOW} entries; got {}", self.allow.len()),
                Value::Null,
            );
        } else {
            for (i, entry) in self.allow.iter().enumerate() {
                if let Err(msg) = parse_rule(entry) {
                    let index = i.to_string();
                    let mut l = at(loc, "allow");
                    l.push(&index);
                    v.push("value_error", &l, msg, Value::from(entry.as_str()));
                }
            }
        }
        if self.presets.len() > MAX_PRESETS {
            v.push(
                "too_long",
                &at(loc, "presets"),
                format!("at most {MAX_PRESETS} presets; got {}", self.presets.len()),
                Value::Null,
            );
        } else {
            for p in &self.presets {
                if preset_hosts(p).is_none() {
                    v.literal(&at(loc, "presets"), &preset_names(), p);
                }
            }
        }
    }

    /// The rules of the policy: its entries, then its presets' hosts. Entries that do not
    /// parse (a policy that was not validated) are left out, which only narrows it.
    pub fn rules(&self) -> Vec<Rule> {
        let presets = self
            .presets
            .iter()
            .flat_map(|p| preset_hosts(p).unwrap_or_default())
            .map(str::to_owned);
        self.allow
            .iter()
            .cloned()
            .chain(presets)
            .filter_map(|e| parse_rule(&e).ok())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(s: &str) -> Rule {
        parse_rule(s).unwrap()
    }

    #[test]
    fn entries_parse_into_hosts_wildcards_networks_and_ports() {
        assert_eq!(rule("PyPI.org.").target, Target::Host("pypi.org".into()));
        assert_eq!(
            rule("*.pythonhosted.org").target,
            Target::Under("pythonhosted.org".into())
        );
        let r = rule("github.com:443");
        assert_eq!(
            (r.target, r.port),
            (Target::Host("github.com".into()), Some(443))
        );
        assert_eq!(
            rule("203.0.113.9/24").target,
            Target::Net("203.0.113.0/24".parse().unwrap())
        );
        assert_eq!(
            rule("203.0.113.9").target,
            Target::Net("203.0.113.9/32".parse().unwrap())
        );
        let r = rule("[2001:db8::/32]:8443");
        assert_eq!(
            (r.target, r.port),
            (Target::Net("2001:db8::/32".parse().unwrap()), Some(8443))
        );
        assert_eq!(rule("2001:db8::1").port, None);
        for bad in [
            "",
            "*",
            "*.com",
            "a..b",
            "-a.com",
            "host:0",
            "host:70000",
            "host:x",
            "[::1",
            "10.0.0.300",
            "a b",
            "*.*.x.org",
        ] {
            assert!(parse_rule(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_wildcard_matches_names_under_it_only() {
        let r = rule("*.pythonhosted.org");
        assert!(r.permits_name("files.pythonhosted.org", 443));
        assert!(r.permits_name("a.b.pythonhosted.org", 80));
        assert!(!r.permits_name("pythonhosted.org", 443));
        assert!(!r.permits_name("evilpythonhosted.org", 443));
    }

    #[test]
    fn a_port_restricts_and_a_network_matches_addresses_only() {
        let r = rule("github.com:443");
        assert!(r.permits_name("github.com", 443) && !r.permits_name("github.com", 22));
        let n = rule("203.0.113.0/24");
        assert!(n.permits_ip("203.0.113.200".parse().unwrap(), 1));
        assert!(!n.permits_ip("203.0.114.1".parse().unwrap(), 1));
        assert!(!n.permits_name("203.0.113.1", 1));
    }

    #[test]
    fn presets_expand_and_groups_flatten() {
        let hosts = preset_hosts("package_managers").unwrap();
        assert!(hosts.contains(&"pypi.org") && hosts.contains(&"registry.npmjs.org"));
        assert!(!hosts.contains(&"github.com"));
        assert!(preset_hosts("nope").is_none());
        let p = NetworkPolicy {
            egress: Egress::Allowlist,
            allow: vec!["example.org".into()],
            presets: vec!["github".into()],
        };
        let rules = p.rules();
        assert!(rules
            .iter()
            .any(|r| r.permits_name("raw.githubusercontent.com", 443)));
        assert!(rules.iter().any(|r| r.permits_name("example.org", 80)));
    }

    #[test]
    fn validation_names_each_bad_field() {
        let mut v = Violations::new();
        NetworkPolicy {
            egress: Egress::Allowlist,
            allow: vec!["ok.org".into(), "bad host".into()],
            presets: vec!["nope".into()],
        }
        .validate(&mut v, &["network"]);
        let errors = v.into_result().unwrap_err();
        assert_eq!(errors.len(), 2);
        assert_eq!(errors[0].loc, vec!["body", "network", "allow", "1"]);
        assert_eq!(errors[1].loc, vec!["body", "network", "presets"]);

        let mut v = Violations::new();
        NetworkPolicy {
            egress: Egress::Open,
            allow: vec!["ok.org".into()],
            presets: vec![],
        }
        .validate(&mut v, &["network"]);
        assert!(!v.is_empty(), "entries with 'open' are refused");

        let mut v = Violations::new();
        NetworkPolicy::default().validate(&mut v, &["network"]);
        assert!(v.is_empty());
    }

    #[test]
    fn a_sessions_layers_are_the_inherited_ones_then_its_own() {
        let allow = |h: &str| NetworkPolicy {
            egress: Egress::Allowlist,
            allow: vec![h.into()],
            presets: vec![],
        };
        let mut n = SessionNetwork {
            inherited: vec![NetworkLayer {
                from: LayerSource::Agent,
                policy: NetworkPolicy::default(),
            }],
            own: Some(allow("a.org")),
        };
        let from: Vec<_> = n.layers().iter().map(|l| l.from).collect();
        assert_eq!(from, [LayerSource::Agent, LayerSource::Session]);
        assert_eq!(n.policies(), [NetworkPolicy::default(), allow("a.org")]);
        n.own = None;
        assert_eq!(n.layers().len(), 1);
        let old: SessionNetwork = serde_json::from_value(serde_json::json!({})).unwrap();
        assert!(old.layers().is_empty(), "a row without policies is open");
    }

    #[test]
    fn the_documented_schema_names_every_preset_and_its_hosts() {
        let schema =
            serde_json::to_string(&<NetworkPolicy as utoipa::PartialSchema>::schema()).unwrap();
        assert_eq!(PRESET_NAMES, preset_names());
        for name in preset_names() {
            assert!(schema.contains(&format!("`{name}`")), "{name}");
        }
        for (_, hosts) in PRESETS {
            for host in *hosts {
                assert!(schema.contains(host), "{host}");
            }
        }
    }

    #[test]
    fn unknown_fields_and_egress_values_do_not_parse() {
        assert!(
            serde_json::from_value::<NetworkPolicy>(serde_json::json!({"egress": "closed"}))
                .is_err()
        );
        assert!(serde_json::from_value::<NetworkPolicy>(serde_json::json!({"alow": []})).is_err());
        let p: NetworkPolicy = serde_json::from_value(serde_json::json!({})).unwrap();
        assert_eq!(p, NetworkPolicy::default());
    }
}
