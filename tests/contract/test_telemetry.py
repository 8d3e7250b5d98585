"""Traces over OTLP: a server started with `OTEL_EXPORTER_OTLP_ENDPOINT` sends its spans, as
OTLP/HTTP protobuf, to a collector of the test's own. A turn with one shell tool call shows
the model calls and the tool call with the GenAI semantic conventions' attributes, and the
request id of the message that started the turn travels with the turn's spans.

The collector decodes each body with OpenTelemetry's own protobuf schema
(`opentelemetry-proto`).
"""
from __future__ import annotations

import http.server
import threading
import time
import uuid

import httpx
import pytest
import sandbox_agents
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

import harness
import sandboxes
from conftest import CA_ENV, model_env
from fakemodel import text, tool_calls
from sandboxes import Janitor


class Collector:
    """An OTLP/HTTP receiver on 127.0.0.1 that keeps every body posted to /v1/traces."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.paths: list[str] = []
        collector = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (the stdlib's name)
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                collector.paths.append(self.path)
                collector.bodies.append(body)
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def spans(self) -> list[dict]:
        """Every span received: name, trace id, its attributes (strings and ints), and the
        service that sent it."""
        out = []
        for body in list(self.bodies):
            req = ExportTraceServiceRequest.FromString(body)
            for rs in req.resource_spans:
                service = next(
                    (a.value.string_value for a in rs.resource.attributes if a.key == "service.name"), None
                )
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        attrs = {}
                        for a in span.attributes:
                            v = a.value
                            attrs[a.key] = v.string_value if v.HasField("string_value") else (
                                v.int_value if v.HasField("int_value") else str(v)
                            )
                        out.append(
                            {"name": span.name, "trace": span.trace_id.hex(), "attrs": attrs, "service": service}
                        )
        return out

    def close(self) -> None:
        self.httpd.shutdown()


@pytest.fixture(scope="module")
def collector():
    c = Collector()
    yield c
    c.close()


@pytest.fixture(scope="module")
def traced_server(fake_model, collector):
    env = {
        **model_env(fake_model),
        **CA_ENV,
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
        # Export every 200 ms rather than every 5 s, so the test waits less.
        "OTEL_BSP_SCHEDULE_DELAY": "200",
        "OTEL_SERVICE_NAME": "sandbox-agents-contract",
    }
    with sandboxes.own_server("traced server", env) as process:
        yield process


def test_a_turn_is_traced_with_genai_attributes_and_its_request_id(traced_server, collector, fake_model):
    fake_model.set_script(
        [
            text("Listed.", last_tool_result_contains="exit code: 0"),
            tool_calls([("shell", {"command": "echo traced"})], last_user_contains="trace me"),
        ]
    )
    janitor = Janitor(traced_server.base_url)
    try:
        with sandbox_agents.Client(base_url=traced_server.base_url) as client:
            agent = client.agents.create(
                slug=f"traced-{time.time_ns()}", name="Traced",
                instructions="You are a contract-test agent.", model="contract-traced-model",
            )
            janitor.track_agent(agent)
            session = janitor.create_and_wait(client, agent.id)
            request_id = f"contract-{uuid.uuid4().hex}"
            r = httpx.post(
                f"{traced_server.base_url}/api/sessions/{session.id}/messages",
                json={"prompt": "trace me"},
                headers={"x-request-id": request_id},
                timeout=30,
            )
            assert r.status_code == 202, r.text
            run_id = r.json()["id"]

            def turn():
                """The turn's spans once its tool call and both model calls are in."""
                spans = collector.spans()
                runs = [x for x in spans if x["name"] == "run" and x["attrs"].get("run.id") == run_id]
                if not runs:
                    return None
                trace = runs[0]["trace"]
                mine = [x for x in spans if x["trace"] == trace]
                chats = [x for x in mine if x["name"] == "chat contract-traced-model"]
                tools = [x for x in mine if x["name"] == "execute_tool shell"]
                return (mine, chats, tools) if len(chats) == 2 and tools else None

            mine, chats, tools = harness.wait_until(
                turn,
                timeout=60,
                what="the turn's spans at the collector",
                last=lambda: sorted({x["name"] for x in collector.spans()}),
            )
            assert all(p == "/v1/traces" for p in collector.paths), collector.paths
            assert {x["service"] for x in mine} == {"sandbox-agents-contract"}
            # The request that sent the message is in the same trace, with its request id.
            requests = [x for x in mine if x["name"] == "request"]
            assert any(r["attrs"].get("request_id") == request_id for r in requests), requests
            for chat in chats:
                a = chat["attrs"]
                assert a["gen_ai.operation.name"] == "chat"
                assert a["gen_ai.provider.name"] == "openai"
                assert a["gen_ai.request.model"] == "contract-traced-model"
                assert int(a["gen_ai.usage.input_tokens"]) > 0
                assert int(a["gen_ai.usage.output_tokens"]) > 0
                assert a["gen_ai.response.finish_reasons"] in ("stop", "tool_calls")
            tool = tools[0]["attrs"]
            assert tool["gen_ai.operation.name"] == "execute_tool"
            assert tool["gen_ai.tool.name"] == "shell"
            assert tool["gen_ai.tool.call.id"]
    finally:
        janitor.cleanup()
