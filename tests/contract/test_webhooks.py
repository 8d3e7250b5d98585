"""Webhooks against the published client (signed deliveries of a project's events, retried until
they land): a receiver written with `sandbox_agents.webhooks` gets every event of a real
session, with a signature that `verify` accepts, a body that `parse` reads, and through a
receiver outage at the start.
"""
from __future__ import annotations

import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from sandbox_agents import UnprocessableEntityError, webhooks

import harness
import sandboxes


class Receiver:
    """A consumer as the client's docs describe one: verify the raw body, then parse it.

    It refuses the first `refuse` requests with 503, then accepts. Every request is kept with
    whether it verified, so the test can assert that all did.
    """

    def __init__(self, refuse: int = 0) -> None:
        self.secret = ""
        self.refuse = refuse
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (the stdlib's name)
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                header = self.headers.get(webhooks.SIGNATURE_HEADER)
                with receiver.lock:
                    verified = webhooks.verify(receiver.secret, body, header)
                    accept = len(receiver.requests) >= receiver.refuse
                    receiver.requests.append(
                        {
                            "verified": verified,
                            "payload": webhooks.parse(body) if verified else None,
                            "event_header": self.headers.get(webhooks.EVENT_HEADER),
                            "delivery_header": self.headers.get(webhooks.DELIVERY_HEADER),
                            "accepted": accept and verified,
                        }
                    )
                self.send_response(204 if accept and verified else (503 if verified else 401))
                self.end_headers()

            def log_message(self, *args):  # quiet
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hooks/sandbox-agents"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def snapshot(self) -> list[dict]:
        with self.lock:
            return list(self.requests)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def receiver():
    r = Receiver(refuse=3)
    yield r
    r.close()


def test_the_catalogue_is_the_twenty_two_stored_types(client):
    # The 14 of API.md §7.5, and our additions agent.compaction, session.queued,
    # session.run_queued, session.s3_conflict, sandbox.egress_denied, session.budget_reached,
    # session.spend_warning and agent.tool_confirmation (the client fetches the list, so
    # adding a type on the server is enough).
    types = client.webhooks.event_types()
    names = {t.type for t in types}
    assert len(types) == 23 and "session.status_idle" in names and "agent.compaction" in names
    assert "agent.tool_confirmation" in names
    assert "session.queued" in names and "session.run_queued" in names
    assert "session.s3_conflict" in names and "sandbox.egress_denied" in names
    assert "session.budget_reached" in names and "session.spend_warning" in names
    assert "agent.text_delta" not in names and "stream_gap" not in names
    assert all(t.group in ("session", "user", "agent") and t.description for t in types)


def test_unknown_event_types_are_refused(client):
    with pytest.raises(UnprocessableEntityError):
        client.webhooks.create(name="bad", url="https://example.com/h", event_types=["session.exploded"])


def test_a_receiver_built_on_the_client_gets_every_event_of_a_real_session(
    client, server, receiver, new_slug
):
    agent = client.agents.create(slug=new_slug("hooked"), name="Hooked")
    janitor = sandboxes.Janitor(server.base_url)
    janitor.track_agent(agent)
    created = client.webhooks.create(name=f"contract-{uuid.uuid4().hex[:6]}", url=receiver.url, agent_id=agent.id)
    receiver.secret = created.secret
    try:
        assert created.secret and created.agent_id == agent.id and created.event_types == []
        assert not hasattr(client.webhooks.get(created.id), "secret") or getattr(
            client.webhooks.get(created.id), "secret", None
        ) is None

        session = client.sessions.create_and_wait(agent.slug, timeout=sandboxes.BOOT_DEADLINE, title="hooked")
        client.sessions.stop(session.id)
        stored = list(client.sessions.history(session.id))
        types = [e.type for e in stored]
        assert types[:2] == ["session.created", "session.status_running"] and "session.status_stopped" in types

        def delivered() -> set[int]:
            return {r["payload"].event.seq for r in receiver.snapshot() if r["accepted"]}

        want = {e.seq for e in stored}
        harness.wait_until(lambda: want <= delivered(), timeout=60, what="every event to be delivered")

        requests = receiver.snapshot()
        assert all(r["verified"] for r in requests), "every request verifies with webhooks.verify"
        by_id: dict[str, int] = {}
        for r in requests:
            p = r["payload"]
            assert p.session_id == session.id and p.event.session_id == session.id
            assert r["event_header"] == p.type == p.event.type
            assert r["delivery_header"] == p.id
            # An id stands for one event: ids repeat only across retries of one delivery.
            assert by_id.setdefault(p.id, p.event.seq) == p.event.seq
            # The event is the same JSON as the log.
            assert p.event == next(e for e in stored if e.seq == p.event.seq)
        assert len(requests) > len(want), "the refused requests were retried"

        # Outcomes are recorded in batches, a moment after the receiver answered.
        harness.wait_until(
            lambda: client.webhooks.deliveries(created.id, status="delivered", limit=50).total >= len(want),
            timeout=30,
            what="every delivery to be recorded as delivered",
        )
        page = client.webhooks.deliveries(created.id, status="delivered", limit=50)
        assert page.total == len(want)
        assert {d.event_seq for d in page.items} == want
        assert all(d.status == "delivered" and d.delivered_at and d.subscription_id == created.id for d in page.items)
        assert any(d.attempt > 1 for d in page.items), "the outage shows in the attempt counts"
        assert client.webhooks.deliveries(created.id, status="pending").total == 0
    finally:
        client.webhooks.delete(created.id)
        janitor.cleanup()


def test_rotation_returns_a_new_secret_once(client):
    created = client.webhooks.create(name="rotate", url="https://example.com/h", event_types=["session.status_idle"])
    try:
        rotated = client.webhooks.rotate_secret(created.id)
        assert rotated.secret and rotated.secret != created.secret
        assert rotated.event_types == ["session.status_idle"]
        updated = client.webhooks.update(created.id, event_types=None, active=False)
        assert updated.event_types == [] and updated.active is False
        assert time.time()  # the listing shows it without a secret
        listed = [w for w in client.webhooks.list() if w.id == created.id]
        assert listed and getattr(listed[0], "secret", None) is None
    finally:
        client.webhooks.delete(created.id)
