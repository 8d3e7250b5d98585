//! Egress control on Docker (see `crate::egress`): a sandbox made with a gateway has the
//! network `none` (loopback only) and the gateway's directory for it mounted read-only, so
//! its only way out is the proxy's socket in that directory; the directory's `resolv.conf`
//! is its `/etc/resolv.conf`, naming the daemon's DNS server on loopback.

use crate::egress::{proxy_env, EgressGateway};
use bollard::models::{ContainerCreateBody, Mount, MountType};
use std::path::Path;

/// The label holding the key a sandbox's way in was made under (its name at creation; a
/// pooled sandbox is renamed when claimed), so a restarted control plane binds it again.
pub const LABEL_EGRESS_KEY: &str = "io.sandbox-agents.egress-key";

/// The host name of a confined sandbox, which resolves to its loopback.
pub const HOSTNAME: &str = "sandbox";

/// `body`, made a sandbox whose traffic leaves only through the proxy: no network, no
/// published port, the socket's directory `dir` mounted, the proxy in its environment.
pub(crate) fn confine(body: &mut ContainerCreateBody, dir: &Path, key: &str) {
    // Its own name resolves locally, as on a bridge network (where Docker writes it into
    // /etc/hosts, and does not under `none`): tools that look their host up (Python's
    // getfqdn, sudo, the JVM) neither wait on DNS nor fill the log with refusals of it.
    body.hostname = Some(HOSTNAME.to_owned());
    let hc = body.host_config.get_or_insert_with(Default::default);
    hc.network_mode = Some("none".to_owned());
    hc.port_bindings = None;
    // Both families: a lookup of one the hosts file lacks would go to DNS.
    hc.extra_hosts = Some(vec![
        format!("{HOSTNAME}:127.0.0.1"),
        format!("{HOSTNAME}:::1"),
    ]);
    hc.mounts.get_or_insert_with(Vec::new).push(Mount {
        target: Some(sandboxd::egress::SOCKET_DIR.to_owned()),
        source: Some(dir.to_string_lossy().into_owned()),
        typ: Some(MountType::BIND),
        // Read-only: the sandbox cannot replace the socket; connecting needs no write.
        read_only: Some(true),
        ..Default::default()
    });
    // Names are asked of the daemon, which asks the proxy (allowed names only). Docker
    // mounts a resolv.conf of its own only where none is mounted.
    hc.mounts.get_or_insert_with(Vec::new).push(Mount {
        target: Some("/etc/resolv.conf".to_owned()),
        source: Some(
            dir.join(sandboxd::egress::RESOLV_CONF_NAME)
                .to_string_lossy()
                .into_owned(),
        ),
        typ: Some(MountType::BIND),
        // Read-only: the sandbox cannot point its names elsewhere (nothing else answers).
        read_only: Some(true),
        ..Default::default()
    });
    let env = body.env.get_or_insert_with(Vec::new);
    // Last, so that they win over variables of the same name the session set: another
    // proxy would have no route anyway.
    env.extend(proxy_env().into_iter().map(|(k, v)| format!("{k}={v}")));
    body.labels
        .get_or_insert_with(Default::default)
        .insert(LABEL_EGRESS_KEY.to_owned(), key.to_owned());
}

/// Binds the ways in of the sandboxes that exist (after a restart of the control plane),
/// and abandons those no sandbox holds any more.
pub(crate) fn reattach(gateway: &dyn EgressGateway, existing: &[(String, String)]) {
    for (key, id) in existing {
        match gateway.prepare(key) {
            Ok(_) => gateway.bind(key, id),
            Err(e) => {
                tracing::error!(%key, container.id = %id, error = %e, "a sandbox's egress socket could not be made again: it has no network")
            }
        }
    }
    for key in gateway.keys() {
        if !existing.iter().any(|(k, _)| *k == key) {
            gateway.abandon(&key);
        }
    }
}
