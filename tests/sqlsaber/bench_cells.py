"""A Python cell's round trip, submit to result, side by side (scripts/bench-sqlsaber):

1. sqlsaber-sandbox's `SandboxSession.execute` with `SandboxAgentsBackend` (its kernel in a
   session of our server, every command through `POST .../exec`);
2. the same call with sqlsaber-sandbox's own `docker` provider (`docker exec` through the
   CLI), in a container of the same image: the raw thing the provider replaces;
3. our own `python` capability: a turn whose (instant, scripted) model calls the `python`
   tool once and then answers, timed from `POST .../messages` to the run's terminal event.

The image is the server's built-in `analysis` environment's, built first. Each iteration runs
every variant once, in an order that rotates. Markdown goes to stdout, progress to stderr.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import time
import uuid
from pathlib import Path

import httpx
import sandbox_agents
from sqlsaber_sandbox import SandboxConfig, SandboxError, SandboxSession

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "contract"))
import fakemodel  # noqa: E402
import harness  # noqa: E402
import sandboxes  # noqa: E402

from sandbox_agents_sqlsaber import SandboxAgentsBackend  # noqa: E402

CELL = "total = sum(range(1000))\ntotal"
EXPECTED = "499500"
BUILD_DEADLINE = 900.0


def log(msg: str) -> None:
    print(f"bench-sqlsaber: {msg}", file=sys.stderr, flush=True)


def result_of(cell) -> str:
    return "".join(o["data"]["text/plain"] for o in cell.outputs if "text/plain" in o.get("data", {}))


def percentile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def analysis_image(client: sandbox_agents.Client, agent_slug: str) -> str:
    """Builds the built-in `analysis` environment (a first session of a python agent waits for
    it) and returns its image."""
    first = client.sessions.create(agent_slug, title="builds the analysis environment")
    try:
        client.sessions.wait_until_running(first.id, timeout=BUILD_DEADLINE)
    finally:
        client.sessions.delete(first.id)
    (env,) = [e for e in client.environments.list() if e.name == "analysis"]
    return env.build.image


async def native_turn(http: httpx.AsyncClient, session_id: str) -> None:
    r = await http.post(f"/api/sessions/{session_id}/messages", json={"prompt": "run the cell", "max_turns": None})
    r.raise_for_status()
    run = r.json()["id"]
    async with http.stream("GET", f"/api/sessions/{session_id}/events/stream", params={"after": 0}) as stream:
        async for line in stream.aiter_lines():
            if line.startswith("data:") and run in line and (
                '"session.status_idle"' in line or '"session.status_error"' in line
            ):
                assert '"session.status_idle"' in line, line
                return
    raise AssertionError("the stream ended before the run did")


async def bench(args) -> str:
    fake = fakemodel.FakeModel().start()
    env = {
        "LITELLM_PROXY_API_BASE": fake.url,
        "LITELLM_PROXY_API_KEY": "bench",
        "SANDBOX_AGENTS_WARM_POOL_SIZE": "0",
        "SANDBOX_AGENTS_EXTRA_CA_CERTS": "/etc/ssl/certs/ca-certificates.crt",
    }
    process = harness.ServerProcess(harness.short_tmpdir(), name="bench server", env=env)
    deployment = None
    try:
        process.start()
        deployment = sandboxes.deployment_id(process.data_dir)
        client = sandbox_agents.Client(base_url=process.base_url, timeout=120.0)
        slug = f"bench-{uuid.uuid4().hex[:6]}"
        client.agents.create(slug=slug, name="bench", instructions="Run the cell.", capabilities=["python"])
        log("building the analysis environment (minutes the first time)")
        image = analysis_image(client, slug)
        log(f"image {image}")
        fake.set_script(
            [fakemodel.text("done", last_message_role="tool"), fakemodel.tool_calls([("python", {"code": CELL})])]
        )
        native = client.sessions.create(slug, title="native")
        client.sessions.wait_until_running(native.id, timeout=120)
        samples: dict[str, list[float]] = {"ours": [], "docker": [], "native": []}
        async with sandbox_agents.AsyncClient(base_url=process.base_url, timeout=120.0) as aclient, httpx.AsyncClient(
            base_url=process.base_url, timeout=120.0
        ) as http:
            ours = SandboxSession(
                model="test", config=SandboxConfig(open_seconds=300), backend=SandboxAgentsBackend(aclient, slug)
            )
            docker_config = SandboxConfig(provider="docker", image=image, open_seconds=300)
            docker = SandboxSession(model="test", config=docker_config)
            lost = 0
            async with ours:

                async def run(variant: str) -> float | None:
                    nonlocal docker, lost
                    t0 = time.perf_counter()
                    if variant == "native":
                        await native_turn(http, native.id)
                    elif variant == "ours":
                        cell = await ours.execute(CELL)
                        assert result_of(cell) == EXPECTED, cell.outputs
                    else:
                        try:
                            cell = await docker.execute(CELL)
                        except SandboxError as e:
                            # The docker provider removes its container when one of its
                            # `docker exec`s is cancelled or times out: a new session, and
                            # this sample does not count.
                            lost += 1
                            log(f"the docker provider lost its container ({e}); opening another")
                            await docker.close()
                            docker = SandboxSession(model="test", config=docker_config)
                            await docker.execute(CELL)
                            return None
                        assert result_of(cell) == EXPECTED, cell.outputs
                    return (time.perf_counter() - t0) * 1000

                variants = list(samples)
                for i in range(args.warmup + args.iterations):
                    for k in range(len(variants)):
                        v = variants[(i + k) % len(variants)]
                        ms = await run(v)
                        if i >= args.warmup and ms is not None:
                            samples[v].append(ms)
                    if (i + 1) % 10 == 0:
                        log(f"{i + 1} / {args.warmup + args.iterations} iterations")
                await docker.close()
        client.sessions.delete(native.id)
        return report(samples, args, lost)
    finally:
        if deployment:
            sandboxes.force_remove(sandboxes.deployment_containers(deployment))
            sandboxes.remove_deployment_images(deployment)
        process.stop()
        process.cleanup()
        fake.stop()


def report(samples: dict[str, list[float]], args, lost: int) -> str:
    labels = {
        "ours": "sqlsaber-sandbox `execute`, SandboxAgentsBackend (our server)",
        "native": "our `python` tool: a whole turn (POST messages → terminal event), model instant",
        "docker": "sqlsaber-sandbox `execute`, its own `docker` provider (raw)",
    }
    base = statistics.median(samples["docker"])
    load = os.getloadavg()
    out = [
        f"Machine: {os.cpu_count()} CPUs, {platform.platform()}, load average {load[0]:.2f} at the end; "
        f"{args.iterations} iterations per variant after {args.warmup} warm-up, order rotating; cell `{CELL!r}`.",
        "",
        "| Path | p50 ms | p99 ms | mean ms | ÷ docker provider (p50) |",
        "|---|---:|---:|---:|---:|",
    ]
    for key in ("ours", "native", "docker"):
        xs = samples[key]
        out.append(
            f"| {labels[key]} | {statistics.median(xs):.1f} | {percentile(xs, 0.99):.1f} | "
            f"{statistics.fmean(xs):.1f} | {statistics.median(xs) / base:.2f} |"
        )
    out += ["", f"The docker provider lost its container {lost} time(s) during the run (those samples are left out)."]
    return "\n".join(out) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iterations", type=int, default=30)
    p.add_argument("--warmup", type=int, default=3)
    args = p.parse_args()
    print(asyncio.run(bench(args)))


if __name__ == "__main__":
    main()
