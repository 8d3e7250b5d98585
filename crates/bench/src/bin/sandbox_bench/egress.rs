//! The egress proxy (`--parts egress`, issue 36) beside a direct connection. An HTTPS server
//! (Python's `http.server` in TLS, with a self-signed certificate the bench makes) runs in a
//! container on a Docker network the bench creates; no outside address is involved.
//!
//! - In a sandbox: curl in a sandbox of a server with `--egress-proxy` (no network of its
//!   own: curl → 127.0.0.1:3128 → sandboxd → the sandbox's Unix socket → the proxy, which
//!   reads the session's policy from the database per connection → the server), beside curl
//!   in a sandbox of the same image and hardening from a server without egress, attached
//!   straight to the bench network.
//! - From the host, to take the proxy's own cost apart: the server's proxy through the very
//!   socket its sandbox uses (reached through a forwarder like sandboxd's), a proxy with a
//!   fixed policy (no database) the same way, and that proxy on loopback TCP with nothing in
//!   front; beside curl on the host straight to the server.
//!
//! Every request is a new curl process, so a new connection with its TLS handshake; each is
//! timed by curl's own `time_total` (process start excluded), the same on every side. A
//! batch of requests is one exec, outside whose timing the exec's own cost stays.

use crate::egress_host::{
    sandbox_socket, serve_forwarder, serve_on_loopback, serve_on_unix, FixedPolicy,
};
use crate::egress_upstream::{Upstream, BIG_MIB, HOST, PORT, SMALL_BYTES};
use crate::report::{stats, Part, Row};
use crate::{log, ours, Args};
use anyhow::{bail, Context};
use bollard::models::NetworkConnectRequest;
use bollard::Docker;
use sandbox_agents_domain::SessionId;
use sandbox_agents_egress::{Guard, GuardSettings, Proxy, StaticResolver, Unobserved};
use sandbox_agents_server::egress::EgressSettings;
use sandbox_agents_store::projects::DEFAULT_PROJECT;
use sandbox_agents_testkit::TestApp;
use serde_json::{json, Value};
use std::cell::RefCell;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Requests per batch (one exec) in the latency part.
const BATCH: usize = 20;
/// A batch or a download that takes longer has failed.
const EXEC_TIMEOUT_S: u64 = 300;

/// `n` sequential requests for `path`, one curl (one connection) each; one line per request:
/// `<status> <bytes> <seconds>`. `how` says how curl reaches the server.
fn curl_loop(n: usize, path: &str, how: &str) -> String {
    format!(
        "for i in $(seq {n}); do curl -sS -k -o /dev/null {how} \
         -w '%{{http_code}} %{{size_download}} %{{time_total}}\\n' https://{HOST}:{PORT}/{path} \
         || exit 1; done"
    )
}

/// `command`, then one line `cgroup <cpu ns> <throttled ns> <sandboxd ticks>`: the CPU the
/// sandbox's cgroup used while it ran, the time its CPU quota held it back, and the CPU time
/// of its sandboxd processes (the daemon, which joins 127.0.0.1:3128 to the proxy's socket,
/// and the control plane's `sandboxd connect` bridges) in clock ticks. Reads
/// cgroup v1 or v2, whichever the container sees.
fn with_cpu_accounting(command: &str) -> String {
    format!(
        r#"cg() {{ if grep -qs usage_usec /sys/fs/cgroup/cpu.stat; then
  awk '/^usage_usec/{{u=$2*1000}} /^throttled_usec/{{t=$2*1000}} END{{print u, t}}' /sys/fs/cgroup/cpu.stat
else echo $(cat /sys/fs/cgroup/cpuacct/cpuacct.usage) $(awk '/^throttled_time/{{print $2}}' /sys/fs/cgroup/cpu/cpu.stat); fi
for p in $(pgrep -x sandboxd); do cat /proc/$p/stat 2>/dev/null; done | awk '{{s += $14 + $15}} END {{print s + 0}}'; }}
set -- $(cg); u0=$1; t0=$2; d0=$3
{command}
set -- $(cg); echo "cgroup $(($1 - u0)) $(($2 - t0)) $(($3 - d0))""#
    )
}

/// The `cgroup` line of [`with_cpu_accounting`]: (CPU ms, throttled ms, sandboxd ms).
fn cpu_line(out: &str) -> anyhow::Result<(f64, f64, f64)> {
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("cgroup "))
        .context("no cgroup accounting in the output")?;
    let v: Vec<f64> = line
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .with_context(|| format!("cgroup accounting: {line:?}"))?;
    let [cpu, throttled, ticks] = v[..] else {
        bail!("cgroup accounting: {line:?}");
    };
    Ok((cpu / 1e6, throttled / 1e6, ticks * 1e3 / ticks_per_second()))
}

/// `getconf CLK_TCK`: the unit of a process's CPU times in `/proc/<pid>/stat`.
fn ticks_per_second() -> f64 {
    crate::report::command("getconf", &["CLK_TCK"])
        .and_then(|t| t.parse().ok())
        .unwrap_or(100.0)
}

/// Straight to the server's address, whatever the environment says of proxies.
fn direct(ip: &str) -> String {
    format!("--noproxy '*' --resolve {HOST}:{PORT}:{ip}")
}

/// Each request's `time_total`, once its status and size are checked.
fn parse(out: &str, want_bytes: usize) -> anyhow::Result<Vec<Duration>> {
    out.lines()
        .filter(|l| !l.starts_with("cgroup "))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let [code, bytes, total] = f[..] else {
                bail!("not a curl timing line: {l:?}");
            };
            anyhow::ensure!(code == "200", "the server answered {code}: {l:?}");
            let bytes: u64 = bytes.parse()?;
            anyhow::ensure!(
                bytes == want_bytes as u64,
                "{bytes} bytes arrived, {want_bytes} were sent"
            );
            Ok(Duration::from_secs_f64(total.parse()?))
        })
        .collect()
}

/// `POST .../exec` with a long timeout; its stdout, or why it failed.
async fn exec(app: &TestApp, id: &str, command: &str) -> anyhow::Result<String> {
    let r = app
        .http
        .post(app.url(&format!("/api/sessions/{id}/exec")))
        .json(&json!({"command": command, "timeout": EXEC_TIMEOUT_S}))
        .send()
        .await?;
    anyhow::ensure!(r.status() == 200, "exec: {}", r.status());
    let v: Value = r.json().await?;
    if v["exit_code"] != 0 {
        bail!("exec `{command}`: {v}");
    }
    Ok(v["stdout"].as_str().unwrap_or_default().to_owned())
}

async fn host_sh(command: &str) -> anyhow::Result<String> {
    let out = tokio::process::Command::new("sh")
        .args(["-c", command])
        .output()
        .await?;
    if !out.status.success() {
        bail!(
            "`{command}`: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A running session of `app` whose agent has `network`; (session id, sandbox id).
async fn session(
    app: &TestApp,
    slug: &str,
    network: Option<Value>,
) -> anyhow::Result<(String, String)> {
    let mut body = json!({"slug": slug, "name": slug});
    if let Some(n) = network {
        body["network"] = n;
    }
    let agent = ours::create_agent(app, body).await?;
    let (id, _, _) = ours::create_until_running(app, &agent).await?;
    let sid = SessionId::parse(&id).context("a session id")?;
    let sandbox = sandbox_agents_store::sessions::get(&app.db, DEFAULT_PROJECT, sid)
        .await?
        .sandbox_id
        .context("the running session has no sandbox")?;
    Ok((id, sandbox))
}

/// Runs batches of every variant, in an order that rotates; `run(v)` runs one batch of
/// variant `v` and returns its samples. The first `warmup` rounds are not kept.
async fn rounds<F, Fut>(
    rounds: usize,
    warmup: usize,
    rows: &mut [Row],
    mut run: F,
) -> anyhow::Result<()>
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Vec<Duration>>>,
{
    let n = rows.len();
    for it in 0..warmup + rounds {
        for k in 0..n {
            let v = (it + k) % n;
            let samples = run(v).await.with_context(|| rows[v].label)?;
            if it >= warmup {
                rows[v].samples.extend(samples);
            }
        }
    }
    Ok(())
}

/// p95 (nearest rank) in ms.
fn p95(samples: &[Duration]) -> f64 {
    let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    ms.sort_by(f64::total_cmp);
    ms[((0.95 * ms.len() as f64).ceil() as usize).clamp(1, ms.len()) - 1]
}

/// Of each row beside the last (direct): p50, p95 and what the proxy adds at p50.
fn latency_notes(rows: &[Row]) -> String {
    let d = rows.len() - 1;
    let mut s = String::from(
        "| Through the proxy vs direct | p50 ms | p95 ms | direct p50 ms | direct p95 ms | added at p50 ms | ÷ direct (p50) |\n|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for p in 0..d {
        let (sp, sd) = (stats(&rows[p].samples), stats(&rows[d].samples));
        s += &format!(
            "| {} | {:.2} | {:.2} | {:.2} | {:.2} | {:+.2} | {:.2} |\n",
            rows[p].label,
            sp.p50,
            p95(&rows[p].samples),
            sd.p50,
            p95(&rows[d].samples),
            sp.p50 - sd.p50,
            sp.p50 / sd.p50
        );
    }
    s
}

/// MB/s (10^6 bytes) of each download, as a median; of each row, the ratio to the last
/// (direct).
fn throughput_notes(rows: &[Row]) -> String {
    let d = rows.len() - 1;
    let rate = |r: &Row| {
        let mut v: Vec<f64> = r
            .samples
            .iter()
            .map(|d| (BIG_MIB * 1024 * 1024) as f64 / 1e6 / d.as_secs_f64())
            .collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let mut s = format!(
        "| {BIG_MIB} MiB download | MB/s (median) | direct MB/s (median) | ÷ direct |\n|---|---:|---:|---:|\n"
    );
    for p in 0..d {
        let (rp, rd) = (rate(&rows[p]), rate(&rows[d]));
        s += &format!(
            "| {} | {rp:.0} | {rd:.0} | {:.2} |\n",
            rows[p].label,
            rp / rd
        );
    }
    s
}

/// Where the sandbox's CPU went during a download (medians over downloads, warm-up included).
fn cpu_notes(rows: &[Row], cpu: &[Vec<(f64, f64, f64)>]) -> String {
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
    };
    let mut s = String::from(
        "| The sandbox's CPU per download | CPU ms (its cgroup) | of which sandboxd ms | held back by the CPU quota ms |\n|---|---:|---:|---:|\n",
    );
    for (row, samples) in rows.iter().zip(cpu) {
        s += &format!(
            "| {} | {:.0} | {:.0} | {:.0} |\n",
            row.label,
            median(samples.iter().map(|c| c.0).collect()),
            median(samples.iter().map(|c| c.2).collect()),
            median(samples.iter().map(|c| c.1).collect()),
        );
    }
    s
}

pub async fn parts(args: &Args, app: &TestApp, docker: &Docker) -> anyhow::Result<Vec<Part>> {
    let image = app.sessions.settings().default_image.clone();
    let up = Upstream::start(docker, &image).await?;
    let suffix = &up.network[up.network.len() - 8..];
    // Short paths: a Unix socket's address holds 107 bytes.
    let sockets = std::env::temp_dir().join(format!("sa-eb-{suffix}"));
    let fixed = std::env::temp_dir().join(format!("sa-ebf-{suffix}"));
    let result = async {
        std::fs::create_dir_all(&fixed)?;
        measure(args, app, docker, &up, &sockets, &fixed).await
    }
    .await;
    up.remove(docker).await;
    let _ = std::fs::remove_dir_all(&sockets);
    let _ = std::fs::remove_dir_all(&fixed);
    result
}

async fn measure(
    args: &Args,
    app: &TestApp,
    docker: &Docker,
    up: &Upstream,
    sockets: &Path,
    fixed_dir: &Path,
) -> anyhow::Result<Vec<Part>> {
    let subnet: ipnet::IpNet = up.subnet.parse().context("the bench network's subnet")?;
    let resolver = Arc::new(StaticResolver::new([(HOST, up.ip.as_str())]));
    let settings = EgressSettings {
        socket_dir: sockets.to_owned(),
        pod_listen: None,
        allow_private: vec![subnet],
        denied: Vec::new(),
        resolver: resolver.clone(),
    };
    let egress = TestApp::builder()
        .with_db(app.db.clone(), app.db_options.clone())
        .with_settings(move |s| s.services.egress = Some(settings))
        .spawn()
        .await;
    let result = async {
        let network = json!({"egress": "allowlist", "allow": [format!("{HOST}:{PORT}")]});
        let (proxied, _) = session(&egress, "bench-egress", Some(network.clone())).await?;
        let (plain, plain_sandbox) = session(app, "bench-egress-direct", None).await?;
        docker
            .connect_network(
                &up.network,
                NetworkConnectRequest {
                    container: plain_sandbox.clone(),
                    ..Default::default()
                },
            )
            .await
            .context("attaching the direct sandbox to the bench network")?;

        // On the host: the server's own proxy through the socket its sandbox has, reached as
        // sandboxd reaches it (a loopback TCP listener joined to the socket); a proxy with a
        // fixed policy (no database) the same way; and that proxy on loopback TCP alone.
        let server_socket = sandbox_socket(sockets)?;
        let via_server = serve_forwarder(server_socket).await?;
        let fixed = Proxy::new(
            Guard::new(GuardSettings {
                allow_private: vec![subnet],
                denied: Vec::new(),
            }),
            resolver.clone(),
            Arc::new(FixedPolicy(serde_json::from_value(network)?)),
            Arc::new(Unobserved),
        );
        let fixed_socket = fixed_dir.join("proxy.sock");
        serve_on_unix(fixed.clone(), &fixed_socket)?;
        let via_fixed_socket = serve_forwarder(fixed_socket).await?;
        let fixed_tcp = serve_on_loopback(fixed).await?;
        let via = |port: u16| format!("--proxy http://127.0.0.1:{port}");

        let rounds_n = (args.iterations / 2).max(3);
        log(format!(
            "egress latency: {} + {rounds_n} rounds × {BATCH} requests × 6 variants",
            args.warmup.min(1)
        ));
        let mut rows = vec![
            Row::new("in a sandbox, through the proxy", "curl → 127.0.0.1:3128 → sandboxd → Unix socket → proxy (policy read from the database) → server; CONNECT, then TLS"),
            Row::new("in a sandbox, direct", "the same curl in a sandbox of a server without egress, attached to the server's network"),
            Row::new("host, the server's proxy through its sandbox's socket", "curl on the host → loopback TCP → a forwarder like sandboxd's → the same Unix socket → the same proxy (policy read from the database) → server"),
            Row::new("host, a proxy with a fixed policy, through a Unix socket", "the same path without the database lookup"),
            Row::new("host, a proxy with a fixed policy, on loopback TCP", "curl on the host → the proxy → server: no forwarder, no Unix socket, no database"),
            Row::new("host, direct", "curl on the host straight to the server's address"),
        ];
        let small = |how: &str| curl_loop(BATCH, "small", how);
        rounds(rounds_n, args.warmup.min(1), &mut rows, |v| {
            let (proxied, plain, up, egress) = (&proxied, &plain, up, &egress);
            let via = &via;
            async move {
                let out = match v {
                    0 => exec(egress, proxied, &small("")).await?,
                    1 => exec(app, plain, &small(&direct(&up.ip))).await?,
                    2 => host_sh(&small(&via(via_server))).await?,
                    3 => host_sh(&small(&via(via_fixed_socket))).await?,
                    4 => host_sh(&small(&via(fixed_tcp))).await?,
                    _ => host_sh(&small(&direct(&up.ip))).await?,
                };
                parse(&out, SMALL_BYTES)
            }
        })
        .await?;
        let host = rows.split_off(2);
        let mut out = vec![
            Part {
                title: "Egress: an HTTPS request on a new connection (1 KiB), in a sandbox",
                notes: latency_notes(&rows),
                rows,
            },
            Part {
                title: "Egress: the same request from the host, the proxy alone",
                notes: latency_notes(&host),
                rows: host,
            },
        ];

        let downloads = (args.iterations / 3).max(3);
        log(format!("egress throughput: 1 + {downloads} downloads of {BIG_MIB} MiB × 5 variants"));
        let mut rows = vec![
            Row::new("in a sandbox, through the proxy", "the path above"),
            Row::new("in a sandbox, direct", "the path above"),
            Row::new("host, the server's proxy through its sandbox's socket", "the path above"),
            Row::new("host, a proxy with a fixed policy, on loopback TCP", "the path above"),
            Row::new("host, direct", "the path above"),
        ];
        let big = |how: &str| curl_loop(1, "big", how);
        // Per in-sandbox variant, the sandbox's CPU per download (warm-up included).
        let cpu = RefCell::new([Vec::new(), Vec::new()]);
        rounds(downloads, 1, &mut rows, |v| {
            let (proxied, plain, up, egress, cpu) = (&proxied, &plain, up, &egress, &cpu);
            let via = &via;
            async move {
                let out = match v {
                    0 => exec(egress, proxied, &with_cpu_accounting(&big(""))).await?,
                    1 => exec(app, plain, &with_cpu_accounting(&big(&direct(&up.ip)))).await?,
                    2 => host_sh(&big(&via(via_server))).await?,
                    3 => host_sh(&big(&via(fixed_tcp))).await?,
                    _ => host_sh(&big(&direct(&up.ip))).await?,
                };
                if v < 2 {
                    cpu.borrow_mut()[v].push(cpu_line(&out)?);
                }
                parse(&out, BIG_MIB * 1024 * 1024)
            }
        })
        .await?;
        let host = rows.split_off(2);
        out.push(Part {
            title: "Egress: a 256 MiB HTTPS download, in a sandbox",
            notes: throughput_notes(&rows) + "\n" + &cpu_notes(&rows, &cpu.into_inner()),
            rows,
        });
        out.push(Part {
            title: "Egress: the same download from the host, the proxy alone",
            notes: throughput_notes(&host),
            rows: host,
        });
        let _ = ours::delete_session(&egress, &proxied).await;
        let _ = ours::delete_session(app, &plain).await;
        anyhow::Ok(out)
    }
    .await;
    // Whatever happened: no sandbox of the egress server is left.
    if let Ok(listed) = egress.sessions.backend().list().await {
        for c in listed {
            let _ = egress.sessions.backend().remove(&c.id).await;
        }
    }
    let blobs = egress.blobs_dir.clone();
    egress.stop().await;
    let _ = std::fs::remove_dir_all(blobs);
    result
}
