"""Following `client.sessions.stream(...)` from a background thread.

The stream blocks until the server sends something, so a test drives the writes from the main
thread while a `StreamCollector` reads. Waiting is on a condition variable with a deadline,
never a fixed sleep. A collector stops cleanly when `until(event)` is true (the tests append a
recognisable last event for that); otherwise its client is closed at the end and the daemon
thread is abandoned.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable

import sandbox_agents
from sandbox_agents.models import SessionEvent


class StreamCollector:
    def __init__(
        self,
        base_url: str,
        session_id: str,
        *,
        after: int | None = None,
        until: Callable[[SessionEvent], bool] | None = None,
        reconnect: bool = False,
    ) -> None:
        # `reconnect=False` by default: the client would paper over a stream the server closed
        # on its own (a live stream is never closed by the server while it runs), and a test
        # should see it if that happens.
        self.client = sandbox_agents.Client(base_url=base_url)
        self.session_id = session_id
        self.after = after
        self.until = until
        self.reconnect = reconnect
        self.events: list[SessionEvent] = []
        self.error: BaseException | None = None
        #: Why the reader stopped: "until" (the test's stop condition), "closed" (the stream
        #: ended), "error" (an exception, in `error`).
        self.outcome: str | None = None
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name=f"stream-{session_id[:8]}", daemon=True)

    def start(self) -> "StreamCollector":
        self._thread.start()
        return self

    def _run(self) -> None:
        outcome = "closed"
        try:
            for event in self.client.sessions.stream(self.session_id, after=self.after, reconnect=self.reconnect):
                with self._cond:
                    self.events.append(event)
                    self._cond.notify_all()
                if self.until is not None and self.until(event):
                    outcome = "until"
                    break
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            self.error = exc
            outcome = "error"
        finally:
            with self._cond:
                self.outcome = outcome
                self._cond.notify_all()

    @property
    def done(self) -> bool:
        return self.outcome is not None

    def wait_for(self, count: int, timeout: float = 15.0) -> list[SessionEvent]:
        """Blocks until at least `count` events arrived; returns a copy of all of them."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.events) < count and self.outcome is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            got = list(self.events)
        if len(got) < count:
            raise AssertionError(
                f"expected at least {count} events from the stream within {timeout:g}s, got {len(got)} "
                f"(seqs {[e.seq for e in got][-20:]}; reader outcome {self.outcome}, error {self.error!r})"
            )
        return got

    def join(self, timeout: float = 15.0) -> list[SessionEvent]:
        """Waits for the reader to stop; returns every event it saw."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self.outcome is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(
                        f"the stream reader did not stop within {timeout:g}s; it saw "
                        f"{len(self.events)} events (last seqs {[e.seq for e in self.events][-10:]})"
                    )
                self._cond.wait(remaining)
            return list(self.events)

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> "StreamCollector":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()
