"""The server's memory: idle, and per open SSE stream.

Starts the real binary (`SANDBOX_AGENTS_BIN`, a release build for figures worth reporting) on
a fresh data directory with its embedded PostgreSQL, reads its resident set (VmRSS) once it
has been idle for a while, seeds one session straight into the database (no sandbox: a stream
needs none), opens `--streams` SSE streams on it over raw sockets (each reads its response
headers, so the server holds every stream), appends `--events` events so that every stream
has carried traffic, reads the RSS again, closes them and reads it once more.

Per-stream memory = (RSS with the streams open - idle RSS) / streams. The server's RSS is what
is read: the clients are this process.

    scripts/bench-memory                       # 1000 streams
    scripts/bench-memory --streams 2000
"""
from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "contract"))

from harness import ServerProcess, short_tmpdir  # noqa: E402
import seed  # noqa: E402
from soak import proc_status  # noqa: E402

#: How long the server is left alone before its idle memory is read, and how often it is read
#: meanwhile (the figure reported is the last; the series shows it has settled).
IDLE_SECONDS = 10.0
SAMPLE_EVERY = 1.0


def rss_kib(pid: int) -> tuple[int, int]:
    """VmRSS and VmHWM of `pid`, KiB."""
    status = proc_status(pid)
    return status["VmRSS"], status["VmHWM"]


async def open_stream(port: int, path: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n\r\n".encode()
    )
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
    status = head.split(b"\r\n", 1)[0]
    if b" 200 " not in status:
        raise RuntimeError(f"the stream answered {status!r}")
    return reader, writer


async def drain(reader: asyncio.StreamReader, want: int, seen: list[int]) -> None:
    """Reads frames until `want` `id:` lines have arrived."""
    n = 0
    while n < want:
        line = await reader.readline()
        if not line:
            raise RuntimeError("a stream ended early")
        if line.startswith(b"id:"):
            n += 1
    seen.append(n)


async def measure(server: ServerProcess, streams: int, events: int) -> dict[str, object]:
    pid = server.proc.pid
    series = []
    deadline = time.monotonic() + IDLE_SECONDS
    while time.monotonic() < deadline:
        series.append(rss_kib(pid)[0])
        await asyncio.sleep(SAMPLE_EVERY)
    idle, _ = rss_kib(pid)

    import httpx

    agent = httpx.post(f"{server.base_url}/api/agents", json={"slug": "memory", "name": "memory"}, timeout=30)
    agent.raise_for_status()
    # Stopped: no sandbox, and nothing boots one; its stream works all the same.
    session = seed.create_session(
        server.data_dir, agent.json()["id"], status="stopped", stopped_reason="requested"
    )
    path = f"/api/sessions/{session}/events/stream"
    opened = []
    started = time.monotonic()
    # 64 at a time: the accept backlog need not see them all at once.
    for i in range(0, streams, 64):
        opened += await asyncio.gather(*(open_stream(server.port, path) for _ in range(min(64, streams - i))))
    open_seconds = time.monotonic() - started
    with_open, _ = rss_kib(pid)

    seen: list[int] = []
    readers = [asyncio.create_task(drain(r, events, seen)) for r, _ in opened]
    seed.append_events(server.data_dir, session, seed.messages(events, tag="mem"))
    await asyncio.wait_for(asyncio.gather(*readers), 120)
    after_traffic, hwm = rss_kib(pid)

    for _, w in opened:
        w.close()
    await asyncio.gather(*(w.wait_closed() for _, w in opened), return_exceptions=True)
    # The server notices closed streams on its next write or read; give it a moment.
    deadline = time.monotonic() + 5
    closed = rss_kib(pid)[0]
    while time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        closed = rss_kib(pid)[0]
    return {
        "idle_series_kib": series,
        "idle_kib": idle,
        "open_kib": with_open,
        "after_traffic_kib": after_traffic,
        "closed_kib": closed,
        "hwm_kib": hwm,
        "open_seconds": open_seconds,
        "delivered": sum(seen),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--streams", type=int, default=1000)
    ap.add_argument("--events", type=int, default=20, help="events appended while the streams are open")
    args = ap.parse_args()

    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = args.streams + 256
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(max(need, soft), hard), hard))

    server = ServerProcess(short_tmpdir("sa-mem-"), name="memory", env={"SANDBOX_AGENTS_WARM_POOL_SIZE": "0", "RUST_LOG": "warn",
                                   # One address opens every stream: no per-address budget.
                                   "SANDBOX_AGENTS_RATE_LIMIT_PER_MINUTE": "0"})
    try:
        server.start()
        r = asyncio.run(measure(server, args.streams, args.events))
    finally:
        server.cleanup()
    n = args.streams
    per_stream = (r["open_kib"] - r["idle_kib"]) / n
    per_stream_traffic = (r["after_traffic_kib"] - r["idle_kib"]) / n
    print(f"idle RSS series (KiB, every {SAMPLE_EVERY:g} s): {r['idle_series_kib']}")
    print()
    print("| Server memory (VmRSS) | KiB | MiB |")
    print("|---|---:|---:|")
    for label, key in (
        ("idle, after 10 s", "idle_kib"),
        (f"{n} SSE streams open", "open_kib"),
        (f"{n} streams after {args.events} events each ({r['delivered']:,} frames)", "after_traffic_kib"),
        ("streams closed", "closed_kib"),
        ("high-water mark (VmHWM)", "hwm_kib"),
    ):
        print(f"| {label} | {r[key]:,} | {r[key] / 1024:.1f} |")
    print()
    print(f"Per open stream: **{per_stream:.1f} KiB** idle, {per_stream_traffic:.1f} KiB after traffic "
          f"({n} streams opened in {r['open_seconds']:.2f} s).")
    expected = n * args.events
    if r["delivered"] != expected:
        print(f"error: {r['delivered']} frames delivered, expected {expected}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
