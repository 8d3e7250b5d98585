"""The soak of issue 17 (scripts/soak, see docs/benchmarks.md): N sessions (default 1000)
created, used and deleted at a steady rate through the warm pool, against the real release
binary on a fresh data directory (its own embedded PostgreSQL), with an eye on what a
long-lived server could leak: containers, memory, file descriptors.

Sessions start at a steady `--rate` (default 1 per second: session i starts no earlier than
i / rate seconds into the run), each on one of `--concurrency` workers (default 4; with
`--rate 0` the workers run a closed loop, as fast as they go):

1. `POST /api/sessions` of one agent (its manifest: one small file), then
   `GET /api/sessions/{id}` polled until `running` (a deadline, no fixed sleeps);
2. `POST …/exec` of `echo hi && ls /workspace`, checking the output (the manifest's file);
3. a file written through the workspace files API (`POST …/files?path=…`, multipart) and
   read back (`GET …/files/content?path=…`), byte for byte;
4. `DELETE /api/sessions/{id}`, then polled until the session is a 404 and its container is
   gone from Docker.

The server process is sampled (VmRSS, VmHWM, threads from /proc/<pid>/status, open fds from
/proc/<pid>/fd) with the deployment's containers (Docker's API, filtered on the
`io.sandbox-agents.deployment` label) before the first session, after the warm-up
(`--warmup`, 20 sessions), every `--sample-every` (50) sessions and once more at the end, when
nothing is in flight. A container is **leaked** when its session (the `io.sandbox-agents.session`
label, or the `sa-<session>` name a claimed pool sandbox gets) was deleted before the sample
was taken, when it belongs to no session of this run and is not a pool sandbox, or when the
unclaimed pool sandboxes (`sa-pool-*`, label `io.sandbox-agents.pool`) outnumber the pool's
maximum. At the end no container but the pool's may remain; after a graceful stop (SIGTERM,
exit 0) and `sandbox-agents teardown`, none.

Exits 1 on a leak (containers), a failed session, RSS growth over `--max-rss-growth-pct` of
the post-warm-up RSS (measured both end to end and along the least-squares line through the
post-warm-up samples, so that one noisy sample neither hides nor fakes a trend), or fd growth
over `--max-fd-growth`. Markdown goes to stdout, progress to stderr.

Everything is removed however the run ends: the server (SIGTERM, then SIGKILL), its embedded
cluster, every container of its deployment, the data directory. The server's log is copied to
target/soak/server.log first.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "tests" / "contract"))
import harness  # noqa: E402
import seed  # noqa: E402

# crates/sandbox/src/lib.rs
LABEL_DEPLOYMENT = "io.sandbox-agents.deployment"
LABEL_SESSION = "io.sandbox-agents.session"
LABEL_POOL = "io.sandbox-agents.pool"

#: The server's default --warm-pool-max (README, Configuration).
DEFAULT_POOL_MAX = 8
TOKEN = "soak-" + uuid.uuid4().hex
FILE_NAME = "soak-manifest.txt"


def log(msg: str) -> None:
    print(f"soak {time.strftime('%H:%M:%S')}: {msg}", file=sys.stderr, flush=True)


def percentile(xs: list[float], q: float) -> float:
    """Nearest rank."""
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[max(0, min(len(s) - 1, math.ceil(q * len(s)) - 1))]


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of y over x."""
    if len(points) < 2:
        return 0.0
    mx = statistics.fmean(p[0] for p in points)
    my = statistics.fmean(p[1] for p in points)
    den = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / den if den else 0.0


# ---- Docker, through its API on the local socket (the CLI when DOCKER_HOST points elsewhere) ----


class Docker:
    def __init__(self) -> None:
        host = os.environ.get("DOCKER_HOST", "")
        sock = host[len("unix://"):] if host.startswith("unix://") else ("/var/run/docker.sock" if not host else "")
        self.http = (
            httpx.Client(transport=httpx.HTTPTransport(uds=sock), base_url="http://docker", timeout=60.0)
            if sock
            else None
        )

    def containers(self, deployment: str) -> list[dict]:
        """Every container (any state) of the deployment: id, name, state, labels."""
        if self.http is not None:
            r = self.http.get(
                "/containers/json",
                params={"all": "true", "filters": json.dumps({"label": [f"{LABEL_DEPLOYMENT}={deployment}"]})},
            )
            r.raise_for_status()
            return [
                {"id": c["Id"], "name": c["Names"][0].lstrip("/"), "state": c["State"], "labels": c.get("Labels") or {}}
                for c in r.json()
            ]
        out = cli("ps", "-a", "--no-trunc", "--filter", f"label={LABEL_DEPLOYMENT}={deployment}", "--format", "{{json .}}")
        rows = []
        for line in out.splitlines():
            c = json.loads(line)
            labels = dict(kv.split("=", 1) for kv in c.get("Labels", "").split(",") if "=" in kv)
            rows.append({"id": c["ID"], "name": c["Names"], "state": c["State"], "labels": labels})
        return rows

    def exists(self, container_id: str) -> bool:
        if self.http is not None:
            r = self.http.get(f"/containers/{container_id}/json")
            if r.status_code == 404:
                return False
            r.raise_for_status()
            return True
        return subprocess.run(
            ["docker", "inspect", container_id], capture_output=True, stdin=subprocess.DEVNULL, timeout=60
        ).returncode == 0

    def remove(self, ids: list[str]) -> None:
        if ids:
            subprocess.run(["docker", "rm", "-f", "-v", *ids], capture_output=True, stdin=subprocess.DEVNULL, timeout=300)


def cli(*args: str) -> str:
    r = subprocess.run(["docker", *args], capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args)}: {r.stderr.strip()}")
    return r.stdout


# ---- the process ----------------------------------------------------------------------------


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS, VmHWM (KiB) and Threads of a process."""
    out: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM", "Threads"):
            out[key] = int(value.split()[0])
    return out


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def dockerd_rss() -> int | None:
    try:
        pid = int(Path("/var/run/docker.pid").read_text().strip())
        return proc_status(pid)["VmRSS"]
    except (OSError, ValueError, KeyError):
        return None


_METRIC = re.compile(r'^(sandbox_agents_[a-z_]+)(?:\{([^}]*)\})? ([0-9.eE+-]+|NaN)$')


_scrape_failed: list = []


def scrape(http: httpx.Client) -> dict[str, float]:
    """The metrics the report uses: pool claims by outcome, boots and boot failures by path,
    the pool's gauges, database connections. Keys are `name{labels}`."""
    wanted = (
        "sandbox_agents_warm_pool_claims_total",
        "sandbox_agents_session_boot_duration_seconds_count",
        "sandbox_agents_session_boot_failures_total",
        "sandbox_agents_warm_pool_sandboxes",
        "sandbox_agents_db_pool_connections",
        "sandbox_agents_sessions",
    )
    try:
        r = http.get("/metrics", timeout=30)
        r.raise_for_status()
    except httpx.HTTPError as e:
        if not _scrape_failed:
            log(f"scraping /metrics failed (said once): {e!r}")
            _scrape_failed.append(e)
        return {}
    out = {}
    for line in r.text.splitlines():
        m = _METRIC.match(line)
        if m and m.group(1) in wanted:
            out[f"{m.group(1)}{{{m.group(2) or ''}}}"] = float(m.group(3))
    return out


def metric_sum(metrics: dict[str, float], name: str, **labels: str) -> float:
    total = 0.0
    for key, value in metrics.items():
        if key.split("{", 1)[0] != name:
            continue
        if all(f'{k}="{v}"' in key for k, v in labels.items()):
            total += value
    return total


# ---- the run's bookkeeping ------------------------------------------------------------------


@dataclass
class Timing:
    index: int
    session: str
    create_ms: float = 0.0  # POST /api/sessions → 202
    running_ms: float = 0.0  # POST sent → GET says running
    exec_ms: float = 0.0
    write_ms: float = 0.0
    read_ms: float = 0.0
    delete_ms: float = 0.0  # DELETE → 204
    gone_ms: float = 0.0  # DELETE sent → 404 and no container
    total_ms: float = 0.0


@dataclass
class Sample:
    label: str
    completed: int
    elapsed_s: float
    rss_kib: int
    hwm_kib: int
    threads: int
    fds: int
    containers: int
    pool: int
    in_flight_containers: int
    leaked: list[str]
    dockerd_rss_kib: int | None
    metrics: dict[str, float] = field(default_factory=dict)


class State:
    def __init__(self, total: int) -> None:
        self.total = total
        self.lock = threading.Lock()
        self.next_index = 0
        self.completed = 0
        self.created: set[str] = set()
        self.deleted: set[str] = set()
        self.timings: list[Timing] = []
        self.errors: list[str] = []
        self.retries_429 = 0
        self.stop = threading.Event()
        self.completed_changed = threading.Condition(self.lock)

    def take(self) -> int | None:
        with self.lock:
            if self.stop.is_set() or self.next_index >= self.total:
                return None
            i = self.next_index
            self.next_index += 1
            return i

    def done(self, timing: Timing | None, error: str | None) -> None:
        with self.lock:
            self.completed += 1
            if timing is not None:
                self.timings.append(timing)
            if error is not None:
                self.errors.append(error)
            self.completed_changed.notify_all()


class Api:
    """httpx with the token, and 429s waited out (counted)."""

    def __init__(self, base_url: str, state: State) -> None:
        self.http = httpx.Client(
            base_url=base_url, timeout=120.0, headers={"authorization": f"Bearer {TOKEN}"}
        )
        self.state = state

    def request(self, method: str, url: str, **kwargs) -> httpx.Response:
        for _ in range(20):
            r = self.http.request(method, url, **kwargs)
            if r.status_code != 429:
                return r
            with self.state.lock:
                self.state.retries_429 += 1
            time.sleep(float(r.headers.get("retry-after", "1")))
        return r

    def close(self) -> None:
        self.http.close()


class Failure(Exception):
    pass


def expect(r: httpx.Response, status: int, what: str) -> httpx.Response:
    if r.status_code != status:
        raise Failure(f"{what}: HTTP {r.status_code} {r.text[:300]}")
    return r


def poll(predicate, deadline_s: float, what: str):
    """Polls until `predicate()` is truthy (the contract suite's `poll_until`, every 20 ms);
    a `Failure` of this session after `deadline_s`."""
    value = harness.poll_until(predicate, deadline_s, poll=0.02)
    if not value:
        raise Failure(f"timed out after {deadline_s:g}s waiting for {what}")
    return value


def one_session(api: Api, docker: Docker, state: State, agent: str, i: int, deadline: float) -> Timing:
    t0 = time.perf_counter()
    r = expect(api.request("POST", "/api/sessions", json={"agent_id": agent, "title": f"soak {i}"}), 202, "create")
    t_created = time.perf_counter()
    sid = r.json()["id"]
    with state.lock:
        state.created.add(sid)
    timing = Timing(index=i, session=sid, create_ms=(t_created - t0) * 1000)
    container = None
    try:
        last = {}

        def running():
            nonlocal last
            last = expect(api.request("GET", f"/api/sessions/{sid}"), 200, "get").json()
            if last["status"] in ("error", "stopped"):
                raise Failure(f"session {sid} became {last['status']}: {last.get('error')}")
            return last["status"] == "running"

        poll(running, deadline, f"session {sid} to run")
        timing.running_ms = (time.perf_counter() - t0) * 1000
        container = last.get("container_id")

        t = time.perf_counter()
        r = expect(
            api.request("POST", f"/api/sessions/{sid}/exec", json={"command": "echo hi && ls /workspace", "timeout": 60}),
            200,
            "exec",
        )
        timing.exec_ms = (time.perf_counter() - t) * 1000
        out = r.json()
        if out["exit_code"] != 0 or not out["stdout"].startswith("hi\n") or FILE_NAME not in out["stdout"]:
            raise Failure(f"exec in {sid}: unexpected {out!r}")

        body = f"soak {i} {uuid.uuid4()}\n".encode()
        t = time.perf_counter()
        expect(
            api.request(
                "POST", f"/api/sessions/{sid}/files", params={"path": f"soak/{i}.txt"}, files={"file": (f"{i}.txt", body)}
            ),
            201,
            "file write",
        )
        timing.write_ms = (time.perf_counter() - t) * 1000
        t = time.perf_counter()
        r = expect(api.request("GET", f"/api/sessions/{sid}/files/content", params={"path": f"soak/{i}.txt"}), 200, "file read")
        timing.read_ms = (time.perf_counter() - t) * 1000
        if r.content != body:
            raise Failure(f"file read in {sid}: {r.content!r} != {body!r}")
    finally:
        # Deleted whatever happened above: a failed session must not leak either.
        t = time.perf_counter()
        r = api.request("DELETE", f"/api/sessions/{sid}")
        timing.delete_ms = (time.perf_counter() - t) * 1000
        if r.status_code not in (204, 404):
            raise Failure(f"delete {sid}: HTTP {r.status_code} {r.text[:300]}")

        def gone():
            if api.request("GET", f"/api/sessions/{sid}").status_code != 404:
                return False
            return container is None or not docker.exists(container)

        poll(gone, 60, f"session {sid} and its container {container} to be gone")
        timing.gone_ms = (time.perf_counter() - t) * 1000
        with state.lock:
            state.deleted.add(sid)
    timing.total_ms = (time.perf_counter() - t0) * 1000
    return timing


def worker(base_url: str, docker: Docker, state: State, agent: str, args, t_start: float) -> None:
    api = Api(base_url, state)
    try:
        while (i := state.take()) is not None:
            if args.rate > 0:
                # A steady rate: session i starts no earlier than t_start + i / rate.
                delay = t_start + i / args.rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            try:
                state.done(one_session(api, docker, state, agent, i, args.boot_deadline), None)
            except Exception as exc:  # noqa: BLE001 - counted and reported
                msg = f"session #{i}: {exc!r}"
                log(msg)
                state.done(None, msg)
                with state.lock:
                    if len(state.errors) >= args.max_errors:
                        log(f"{len(state.errors)} failed sessions: stopping the run")
                        state.stop.set()
    finally:
        api.close()


# ---- sampling -------------------------------------------------------------------------------


def classify(containers: list[dict], deleted: set[str], created: set[str], pool_max: int) -> tuple[int, int, list[str]]:
    """(pool sandboxes unclaimed, containers of sessions in flight, leaks described)."""
    pool, in_flight, leaked = [], [], []
    for c in containers:
        name, labels = c["name"], c["labels"]
        sid = labels.get(LABEL_SESSION) or (name[3:] if name.startswith("sa-") and not name.startswith("sa-pool-") else None)
        if sid is None and name.startswith("sa-pool-") and LABEL_POOL in labels:
            pool.append(c)
        elif sid is not None and sid in deleted:
            leaked.append(f"{c['id'][:12]} {name} ({c['state']}): its session was deleted")
        elif sid is not None and sid in created:
            in_flight.append(c)
        else:
            leaked.append(f"{c['id'][:12]} {name} ({c['state']}): no session of this run owns it {labels}")
    if len(pool) > pool_max:
        leaked += [f"{c['id'][:12]} {c['name']} ({c['state']}): pool sandbox over the pool's maximum {pool_max}" for c in pool]
    return len(pool), len(in_flight), leaked


def take_sample(label: str, pid: int, docker: Docker, deployment: str, state: State, metrics_http: httpx.Client,
                pool_max: int, t_start: float) -> Sample:
    with state.lock:
        deleted = set(state.deleted)  # deleted (204 and gone) before the containers are listed
        completed = state.completed
    status = proc_status(pid)
    fds = fd_count(pid)
    containers = docker.containers(deployment)
    with state.lock:
        created = set(state.created)
    pool, in_flight, leaked = classify(containers, deleted, created, pool_max)
    return Sample(
        label=label, completed=completed, elapsed_s=time.monotonic() - t_start, rss_kib=status["VmRSS"],
        hwm_kib=status["VmHWM"], threads=status["Threads"], fds=fds, containers=len(containers), pool=pool,
        in_flight_containers=in_flight, leaked=leaked, dockerd_rss_kib=dockerd_rss(), metrics=scrape(metrics_http),
    )


def fmt_sample(s: Sample) -> str:
    return (
        f"{s.label}: {s.completed} done, RSS {s.rss_kib / 1024:.1f} MiB (HWM {s.hwm_kib / 1024:.1f}), "
        f"{s.threads} threads, {s.fds} fds, {s.containers} containers ({s.pool} pool, {s.in_flight_containers} in flight)"
        + (f", LEAKED {len(s.leaked)}" if s.leaked else "")
    )


# ---- the run --------------------------------------------------------------------------------


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sessions", type=int, default=1000, help="sessions to create, use and delete (default 1000)")
    p.add_argument("--concurrency", type=int, default=4, help="sessions in flight at once (default 4)")
    p.add_argument("--rate", type=float, default=1.0,
                   help="session starts per second, steady (default 1, which the default pool keeps up with on 2 "
                        "busy cores); 0: as fast as the workers go (a closed loop, which outruns the pool's refill)")
    p.add_argument("--warmup", type=int, default=20, help="sessions before the baseline sample (default 20)")
    p.add_argument("--sample-every", type=int, default=50, help="sessions between samples (default 50)")
    p.add_argument("--pool-size", type=int, default=2, help="SANDBOX_AGENTS_WARM_POOL_SIZE (default 2)")
    p.add_argument("--pool-max", type=int, default=None, help="SANDBOX_AGENTS_WARM_POOL_MAX (default: the server's, 8)")
    p.add_argument("--boot-deadline", type=float, default=120.0, help="seconds a session may take to run")
    p.add_argument("--max-errors", type=int, default=10, help="failed sessions that stop the run early")
    p.add_argument("--max-rss-growth-pct", type=float, default=20.0,
                   help="RSS growth after the warm-up that fails the run, in %% of the post-warm-up RSS (default 20)")
    p.add_argument("--max-fd-growth", type=int, default=32, help="open fds at the end over the post-warm-up count that fail the run")
    p.add_argument("--json", type=Path, help="also write every sample and timing here")
    args = p.parse_args()
    if args.sessions <= args.warmup:
        p.error("--sessions must be more than --warmup")
    pool_max = args.pool_max if args.pool_max is not None else DEFAULT_POOL_MAX
    pool_max = max(pool_max, args.pool_size)

    def on_term(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)

    binary = harness.server_binary()
    env = {
        "SANDBOX_AGENTS_TOKEN": TOKEN,
        "SANDBOX_AGENTS_WARM_POOL_SIZE": str(args.pool_size),
        "SANDBOX_AGENTS_EXTRA_CA_CERTS": os.environ.get("SANDBOX_AGENTS_EXTRA_CA_CERTS", ""),
    }
    if not env["SANDBOX_AGENTS_EXTRA_CA_CERTS"]:
        del env["SANDBOX_AGENTS_EXTRA_CA_CERTS"]
    if args.pool_max is not None:
        env["SANDBOX_AGENTS_WARM_POOL_MAX"] = str(args.pool_max)
    process = harness.ServerProcess(harness.short_tmpdir(prefix="sa-soak-"), name="soak server", env=env)
    docker = Docker()
    deployment = None
    state = State(args.sessions)
    samples: list[Sample] = []
    problems: list[str] = []
    after_stop: dict = {}
    uptime_before = uptime()
    wall_start = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    run_s = 0.0
    try:
        log(f"starting {binary} (data dir {process.data_dir}, warm pool {args.pool_size}, max {pool_max})")
        process.start()
        deployment = seed.psql(process.data_dir, "select id from deployment;").strip()
        pid = process.proc.pid
        log(f"server pid {pid}, deployment {deployment}, {process.base_url}")
        metrics_http = httpx.Client(base_url=process.base_url, headers={"authorization": f"Bearer {TOKEN}"})
        api = Api(process.base_url, state)
        r = expect(
            api.request(
                "POST", "/api/agents",
                json={"slug": f"soak-{uuid.uuid4().hex[:8]}", "name": "Soak",
                      "manifest": {"entries": {FILE_NAME: {"kind": "file", "content": "soak\n"}}}},
            ),
            201, "create the agent",
        )
        agent = r.json()["id"]

        def pool_ready():
            m = scrape(metrics_http)
            if m:
                return metric_sum(m, "sandbox_agents_warm_pool_sandboxes", state="ready") >= args.pool_size
            # A server without /metrics: its started pool sandboxes, as Docker sees them.
            pooled = [c for c in docker.containers(deployment) if c["name"].startswith("sa-pool-") and c["state"] == "running"]
            return len(pooled) >= args.pool_size

        poll(pool_ready, 180, f"the warm pool to hold {args.pool_size} started sandboxes")
        t_start = time.monotonic()
        samples.append(take_sample("start (pool full, no session yet)", pid, docker, deployment, state, metrics_http, pool_max, t_start))
        log(fmt_sample(samples[-1]))

        thresholds = [args.warmup] + list(range((args.warmup // args.sample_every + 1) * args.sample_every,
                                                 args.sessions + 1, args.sample_every))
        if thresholds[-1] != args.sessions:
            thresholds.append(args.sessions)
        threads = [
            threading.Thread(target=worker, args=(process.base_url, docker, state, agent, args, t_start), daemon=True)
            for _ in range(args.concurrency)
        ]
        for t in threads:
            t.start()
        for n in thresholds:
            with state.lock:
                while state.completed < n and any(t.is_alive() for t in threads):
                    state.completed_changed.wait(timeout=1.0)
                if state.completed < n:
                    break
            label = "after warm-up" if n == args.warmup else f"{n}"
            samples.append(take_sample(label, pid, docker, deployment, state, metrics_http, pool_max, t_start))
            s = samples[-1]
            rate = s.completed / s.elapsed_s if s.elapsed_s else 0
            log(fmt_sample(s) + f"; {rate:.2f} sessions/s, {len(state.errors)} failed")
            if process.proc.poll() is not None:
                raise Failure(f"the server exited with {process.proc.returncode}")
        for t in threads:
            t.join()
        run_s = time.monotonic() - t_start
        # Nothing in flight now: the pool may still be refilling, so wait until it is steady
        # (no sandbox starting) before the last sample.
        try:
            poll(lambda: not _scrape_failed and metric_sum(scrape(metrics_http), "sandbox_agents_warm_pool_sandboxes",
                                                           state="starting") == 0
                 or bool(_scrape_failed), 60, "the warm pool to stop starting sandboxes")
        except Failure as e:
            log(str(e))
        samples.append(take_sample("end (idle)", pid, docker, deployment, state, metrics_http, pool_max, t_start))
        log(fmt_sample(samples[-1]))
        api.close()
        metrics_http.close()

        # A graceful stop keeps the pool (by design); teardown removes it.
        log("stopping the server (SIGTERM)")
        code = process.stop()
        after_stop["exit_code"] = code
        after_stop["containers_after_stop"] = docker.containers(deployment)
        log(f"exit code {code}; {len(after_stop['containers_after_stop'])} containers left (the pool's)")
        td = subprocess.run(
            [str(binary), "teardown", "--data-dir", str(process.data_dir)],
            capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300,
            env={**{k: v for k, v in os.environ.items() if k not in harness._SERVER_ENV_DROP}, **env, "NO_COLOR": "1"},
        )
        after_stop["teardown_exit"] = td.returncode
        if td.returncode != 0:
            problems.append(f"`sandbox-agents teardown` exited {td.returncode}: {harness.strip_ansi(td.stderr)[-1500:]}")
        after_stop["containers_after_teardown"] = docker.containers(deployment)
        cli_left = cli("ps", "-aq", "--filter", f"label={LABEL_DEPLOYMENT}={deployment}").split()
        after_stop["cli_after_teardown"] = cli_left
        log(f"teardown exit {td.returncode}; containers left: {len(after_stop['containers_after_teardown'])} "
            f"(docker ps -a --filter label=…: {len(cli_left)})")
        if code != 0:
            problems.append(f"the server exited {code} on SIGTERM")
    except BaseException as exc:
        problems.append(f"the run was cut short: {exc!r}")
        log(problems[-1])
        if process.proc is not None:
            log("--- server log (tail) ---\n" + process.log_tail(40))
        if not isinstance(exc, Exception):
            raise
    finally:
        state.stop.set()
        out_dir = REPO_ROOT / "target" / "soak"
        out_dir.mkdir(parents=True, exist_ok=True)
        try:
            shutil.copyfile(process.log_path, out_dir / "server.log")
        except OSError:
            pass
        if deployment:
            left = docker.containers(deployment)
            if left:
                log(f"removing {len(left)} containers of deployment {deployment}")
                docker.remove([c["id"] for c in left])
        forced = process.cleanup()
        for f in forced:
            log(f"cleanup: {f}")
    uptime_after = uptime()

    report, failed = render(args, pool_max, state, samples, after_stop, problems, run_s,
                            uptime_before, uptime_after, wall_start, deployment, out_dir / "server.log")
    print(report)
    if args.json:
        args.json.write_text(json.dumps({
            "args": vars(args) | {"json": str(args.json)},
            "samples": [s.__dict__ for s in samples],
            "timings": [t.__dict__ for t in state.timings],
            "errors": state.errors,
            "problems": problems,
            "after_stop": {k: v for k, v in after_stop.items()},
        }, indent=1, default=str))
    return 1 if failed else 0


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"


def render(args, pool_max, state, samples, after_stop, problems, run_s, up_before, up_after, wall_start, deployment,
           server_log: Path) -> tuple[str, bool]:
    t = state.timings
    failed = bool(problems) or bool(state.errors)
    lines = []
    lines.append(f"## Soak: {len(t)} of {args.sessions} sessions, concurrency {args.concurrency}"
                 + (f", at most {args.rate:g}/s" if args.rate > 0 else "")
                 + f", warm pool {args.pool_size} (max {pool_max})")
    lines.append("")
    commit = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "?"
    binary = harness.server_binary()
    built = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(binary.stat().st_mtime)) if binary.exists() else "?"
    lines.append(f"Started {wall_start}; main at `{commit}` (binary `{binary.name}` built {built}); machine: "
                 f"{os.cpu_count()} CPUs, {platform.platform()}.")
    lines.append(f"- `uptime` before: {up_before}")
    lines.append(f"- `uptime` after: {up_after}")
    lines.append("")
    if t:
        lines.append("| step | p50 ms | p99 ms | mean ms | max ms |")
        lines.append("|---|---:|---:|---:|---:|")
        for name, attr in [
            ("POST /api/sessions → 202", "create_ms"),
            ("create → running (POST sent → GET says running)", "running_ms"),
            ("exec `echo hi && ls /workspace`", "exec_ms"),
            ("file write (POST …/files, multipart)", "write_ms"),
            ("file read (GET …/files/content)", "read_ms"),
            ("DELETE → 204", "delete_ms"),
            ("DELETE → session 404 and container gone", "gone_ms"),
            ("whole session (create to gone)", "total_ms"),
        ]:
            xs = [getattr(x, attr) for x in t]
            lines.append(f"| {name} | {percentile(xs, .5):.1f} | {percentile(xs, .99):.1f} | "
                         f"{statistics.fmean(xs):.1f} | {max(xs):.1f} |")
        lines.append("")
        lines.append(f"Throughput: {len(t)} sessions in {run_s:.0f} s = **{len(t) / run_s:.2f} sessions/s** "
                     f"({state.completed - len(t)} failed, {state.retries_429} requests answered 429 and retried).")
        end = samples[-1].metrics if samples else {}
        hit = metric_sum(end, "sandbox_agents_warm_pool_claims_total", outcome="hit")
        miss = metric_sum(end, "sandbox_agents_warm_pool_claims_total", outcome="miss")
        dead = metric_sum(end, "sandbox_agents_warm_pool_claims_total", outcome="dead")
        boots = {path: metric_sum(end, "sandbox_agents_session_boot_duration_seconds_count", path=path)
                 for path in ("pool", "cold", "environment")}
        fails = metric_sum(end, "sandbox_agents_session_boot_failures_total")
        lines.append(f"Warm pool claims (from /metrics): {hit:.0f} hit, {miss:.0f} miss, {dead:.0f} dead; boots by path: "
                     + ", ".join(f"{k} {v:.0f}" for k, v in boots.items()) + f"; boot failures {fails:.0f}.")
        lines.append("")

    # Memory, fds and containers over the run.
    lines.append("| sample | sessions done | elapsed s | RSS MiB | HWM MiB | threads | fds | containers (pool + in flight) | leaked | dockerd RSS MiB |")
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for s in samples:
        d = f"{s.dockerd_rss_kib / 1024:.0f}" if s.dockerd_rss_kib else "–"
        lines.append(f"| {s.label} | {s.completed} | {s.elapsed_s:.0f} | {s.rss_kib / 1024:.1f} | {s.hwm_kib / 1024:.1f} | "
                     f"{s.threads} | {s.fds} | {s.containers} ({s.pool} + {s.in_flight_containers}) | {len(s.leaked)} | {d} |")
    lines.append("")

    base = next((s for s in samples if s.label == "after warm-up"), None)
    after = [s for s in samples if base is not None and s.completed >= base.completed and s.label != "start (pool full, no session yet)"]
    verdicts = []
    if base is not None and len(after) >= 2:
        last = after[-1]
        k = slope([(s.completed, s.rss_kib) for s in after])  # KiB per session
        span = last.completed - base.completed
        fitted = k * span
        end_growth = last.rss_kib - base.rss_kib
        limit = base.rss_kib * args.max_rss_growth_pct / 100
        fd_k = slope([(s.completed, s.fds) for s in after])
        verdicts.append(
            f"RSS after the warm-up {base.rss_kib / 1024:.1f} MiB, at the end {last.rss_kib / 1024:.1f} MiB "
            f"({end_growth / 1024:+.1f} MiB, {100 * end_growth / base.rss_kib:+.1f} %); least-squares slope "
            f"**{k * 100:+.0f} KiB per 100 sessions** ({fitted / 1024:+.1f} MiB over the {span} sessions after the "
            f"warm-up); peak (HWM) {max(s.hwm_kib for s in samples) / 1024:.1f} MiB. Limit: "
            f"{args.max_rss_growth_pct:g} % = {limit / 1024:.1f} MiB."
        )
        if end_growth > limit or fitted > limit:
            failed = True
            verdicts.append(f"**FAIL: memory grew more than {args.max_rss_growth_pct:g} %.**")
        verdicts.append(f"Open fds: {base.fds} after the warm-up, {last.fds} at the end (slope {fd_k * 100:+.1f} per 100 sessions); "
                        f"threads {base.threads} → {last.threads}.")
        if last.fds - base.fds > args.max_fd_growth:
            failed = True
            verdicts.append(f"**FAIL: {last.fds - base.fds} more open fds than after the warm-up (limit {args.max_fd_growth}).**")
    elif samples:
        verdicts.append("Too few samples after the warm-up for a memory verdict.")
        failed = True
    leaked = sorted({l for s in samples for l in s.leaked})
    if leaked:
        failed = True
        verdicts.append(f"**FAIL: {len(leaked)} leaked containers** seen in the samples:\n" + "\n".join(f"- {l}" for l in leaked[:20]))
    else:
        verdicts.append(f"No leaked container in any of the {len(samples)} samples (deployment `{deployment}`).")
    if after_stop:
        stop_left = after_stop.get("containers_after_stop", [])
        non_pool = [c for c in stop_left if not c["name"].startswith("sa-pool-")]
        verdicts.append(
            f"After SIGTERM (exit {after_stop.get('exit_code')}): {len(stop_left)} containers left, "
            f"{len(stop_left) - len(non_pool)} of them the pool's; after `sandbox-agents teardown` (exit "
            f"{after_stop.get('teardown_exit')}): {len(after_stop.get('containers_after_teardown', []))} "
            f"(`docker ps -a --filter label={LABEL_DEPLOYMENT}=…`: {len(after_stop.get('cli_after_teardown', []))})."
        )
        if non_pool or after_stop.get("containers_after_teardown") or after_stop.get("cli_after_teardown"):
            failed = True
            verdicts.append("**FAIL: containers outlived the sessions or the teardown:**\n"
                            + "\n".join(f"- {c['id'][:12]} {c['name']} {c['state']}" for c in
                                        non_pool + after_stop.get("containers_after_teardown", [])))
    for e in state.errors[:20]:
        verdicts.append(f"- failed: {e}")
    for pr in problems:
        verdicts.append(f"- **problem**: {pr}")
    try:
        text = server_log.read_text(errors="replace")
        errs = sum(1 for line in text.splitlines() if " ERROR " in harness.strip_ansi(line))
        warns = sum(1 for line in text.splitlines() if " WARN " in harness.strip_ansi(line))
        verdicts.append(f"Server log ({server_log.relative_to(REPO_ROOT)}): {errs} ERROR and {warns} WARN lines.")
    except (OSError, ValueError):
        pass
    lines += verdicts
    lines.append("")
    lines.append("**Result: " + ("FAIL" if failed else "PASS") + "**")
    return "\n".join(lines), failed


if __name__ == "__main__":
    sys.exit(main())
