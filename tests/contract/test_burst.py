"""A burst of sessions, as a team's script makes one (issue 33): a hundred
`create_and_wait` calls at once through one published `AsyncClient`, each followed by a turn
that runs a command in its sandbox, on a server of default settings and again on one with
`--db-max-connections 8`. Every session comes up and takes its turn, and once they are all
deleted no container of theirs is left.

Before the lifecycle leases, a burst past the pool's size wedged the server: each boot held an
advisory lock on a pooled connection across its Docker calls and needed more connections from
the same pool, so 39 of 40 sessions never came up. The same burst through two processes on one
database is `crates/server/tests/api/burst.rs`.
"""
from __future__ import annotations

import asyncio
import time

import pytest
from sandbox_agents import AsyncClient

import harness
import sandboxes
from conftest import CA_ENV, model_env
from fakemodel import text, tool_calls

BURST = 100
#: The client's own deadline for a boot (create_and_wait's default) and for a turn.
BOOT = 300.0
TURN = 300.0


async def one_session(client: AsyncClient, n: int) -> tuple[str, str, str]:
    """Creates session `n`, waits until it runs, and runs a turn; its id, status and answer."""
    session = await client.sessions.create_and_wait("burst", title=f"burst-{n}", timeout=BOOT)
    result = await client.sessions.run(session.id, f"burst job {n}", timeout=TURN)
    return session.id, result.status, result.text


async def burst(base_url: str) -> tuple[list[tuple[str, str, str]], float]:
    async with AsyncClient(base_url=base_url) as client:
        agent = await client.agents.create(slug="burst", name="Burst", instructions="Run the job.")
        started = time.monotonic()
        outcomes = await asyncio.gather(
            *(one_session(client, n) for n in range(BURST)), return_exceptions=True
        )
        took = time.monotonic() - started
        failures = [f"session {n}: {o!r}" for n, o in enumerate(outcomes) if isinstance(o, BaseException)]
        done = [o for o in outcomes if not isinstance(o, BaseException)]
        # Deleted whatever happened, so that the containers are checked either way.
        ids = [s.id async for s in client.sessions.iterate(agent_id=agent.id)]
        await asyncio.gather(*(client.sessions.delete(i) for i in ids))
        assert not failures, f"{len(failures)} of {BURST} failed:\n" + "\n".join(failures[:20])
        return done, took


@pytest.mark.parametrize(
    "env",
    [{}, {"SANDBOX_AGENTS_DB_MAX_CONNECTIONS": "8"}],
    ids=["default-settings", "db-max-connections-8"],
)
def test_a_hundred_create_and_wait_calls_at_once_all_come_up_and_take_a_turn(fake_model, env):
    fake_model.set_script(
        [
            text("The command ran: burst-ok.", last_tool_result_contains="burst-ok"),
            tool_calls([("shell", {"command": "echo burst-ok"})], last_user_contains="burst job"),
        ]
    )
    process = harness.ServerProcess(
        harness.short_tmpdir(), name="burst server", env={**model_env(fake_model), **CA_ENV, **env}
    )
    deployment = None
    try:
        process.start()
        deployment = sandboxes.deployment_id(process.data_dir)
        done, took = asyncio.run(burst(process.base_url))
        assert len({sid for sid, _, _ in done}) == BURST
        assert all(status == "completed" and answer == "The command ran: burst-ok." for _, status, answer in done), done
        print(f"burst ({env or 'defaults'}): {BURST} sessions up and a turn each in {took:.1f} s")
        left = sandboxes.leftover_containers(deployment)
        assert not left, f"containers remain after the sessions were deleted:\n{sandboxes.describe(left)}"
        assert process.stop() == 0, process.log_tail(60)
        assert "a boot could not record its outcome" not in process.log_text()
    finally:
        if deployment:
            sandboxes.force_remove(sandboxes.deployment_containers(deployment))
        process.cleanup()
