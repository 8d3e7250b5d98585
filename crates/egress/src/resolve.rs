//! How the proxy finds a name's addresses. The proxy resolves names itself (never the
//! sandbox), so that what it checks is what it connects to.

use async_trait::async_trait;
use std::collections::HashMap;
use std::net::IpAddr;

#[async_trait]
pub trait Resolve: Send + Sync {
    /// The addresses of `name` (lowercase, no trailing dot); an error says why not.
    async fn resolve(&self, name: &str) -> Result<Vec<IpAddr>, String>;
}

/// The host's resolver configuration (`/etc/resolv.conf`, `/etc/hosts`), through hickory.
pub struct SystemResolver(hickory_resolver::TokioResolver);

impl SystemResolver {
    pub fn new() -> Result<Self, String> {
        let builder = hickory_resolver::TokioResolver::builder_tokio()
            .map_err(|e| format!("the host's resolver configuration is unusable: {e}"))?;
        Ok(SystemResolver(builder.build()))
    }
}

#[async_trait]
impl Resolve for SystemResolver {
    async fn resolve(&self, name: &str) -> Result<Vec<IpAddr>, String> {
        // Fully qualified: the host's search domains never apply to a sandbox's names.
        let fqdn = format!("{name}.");
        match self.0.lookup_ip(fqdn).await {
            Ok(found) => Ok(found.iter().collect()),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// Fixed answers: the tests' names for servers on networks they create, which no DNS
/// server knows.
#[derive(Clone, Debug, Default)]
pub struct StaticResolver(HashMap<String, Vec<IpAddr>>);

impl StaticResolver {
    pub fn new<'a>(entries: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut map: HashMap<String, Vec<IpAddr>> = HashMap::new();
        for (name, ip) in entries {
            let ip = ip.parse().expect("a static resolver entry is an address");
            map.entry(name.to_ascii_lowercase()).or_default().push(ip);
        }
        StaticResolver(map)
    }

    pub fn insert(&mut self, name: &str, ip: IpAddr) {
        self.0
            .entry(name.to_ascii_lowercase())
            .or_default()
            .push(ip);
    }
}

#[async_trait]
impl Resolve for StaticResolver {
    async fn resolve(&self, name: &str) -> Result<Vec<IpAddr>, String> {
        self.0
            .get(name)
            .cloned()
            .ok_or_else(|| "no such name".to_owned())
    }
}
