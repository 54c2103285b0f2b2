"""lk report --otlp: the ledger's runs, attempts and stages as OpenTelemetry spans.

The receiver is an OTLP/HTTP endpoint on 127.0.0.1 that reads each request the way the
OTLP/JSON specification says (the protobuf JSON mapping, trace and span ids in hex) into
opentelemetry-proto's ExportTraceServiceRequest, with protobuf's own strict parser: a
field the message does not have, or a value of the wrong type, is refused with 400.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import socket
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as trace_service

from loopkit.views import otlp
from tests.helpers.evidence import BIN, lk_run, notes_project


def _ids_to_base64(node: Any) -> Any:
    """OTLP/JSON writes ids in hex where the generic mapping has base64: the receiver's turn."""
    if isinstance(node, list):
        return [_ids_to_base64(n) for n in node]
    if isinstance(node, dict):
        return {
            k: base64.b64encode(bytes.fromhex(v)).decode()
            if k in ("traceId", "spanId", "parentSpanId")
            else _ids_to_base64(v)
            for k, v in node.items()
        }
    return node


class Receiver(BaseHTTPRequestHandler):
    received: ClassVar[list[Any]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        try:
            assert self.path == "/v1/traces", self.path
            assert self.headers["Content-Type"] == "application/json"
            message = trace_service.ExportTraceServiceRequest()
            json_format.Parse(json.dumps(_ids_to_base64(json.loads(body))), message)
        except (AssertionError, ValueError, json_format.ParseError) as e:
            self.send_response(400)
            self.end_headers()
            self.wfile.write(str(e).encode())
            return
        self.received.append(message)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[Any]]]:
    Receiver.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", Receiver.received
    finally:
        server.shutdown()
        server.server_close()


def _attempt(repo: Path) -> None:
    task = lk_run(["lk-plan", "next", "TASKS.md", "--contract", "loop.yaml"], repo)
    assert task.returncode == 0, task.stderr
    out = subprocess.run(
        [str(BIN / "lk"), "attempt", "--contract", "loop.yaml", "--base", "HEAD"],
        cwd=repo,
        input=task.stdout,
        capture_output=True,
        text=True,
        env=os.environ,
        check=False,
    )
    assert out.returncode == 0, out.stderr


def _attributes(span: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in span.attributes:
        kind = kv.value.WhichOneof("value")
        out[kv.key] = getattr(kv.value, kind)
    return out


def test_a_real_attempt_arrives_as_one_trace_of_spans_and_again_the_same(
    git_repo: Path, receiver: tuple[str, list[Any]]
) -> None:
    url, received = receiver
    notes_project(
        git_repo, "mkdir -p notes; echo hi > notes/a.txt", wall_seconds=600, check_timeout=5
    )
    _attempt(git_repo)

    first = lk_run(["lk", "report", "--otlp", url], git_repo)
    assert first.returncode == 0, first.stderr
    assert f"{url}/v1/traces" in first.stderr
    (request,) = received
    (resource,) = request.resource_spans
    assert {kv.key: kv.value.string_value for kv in resource.resource.attributes} == {
        "service.name": "loopkit"
    }
    spans = [s for scope in resource.scope_spans for s in scope.spans]
    roots = [s for s in spans if not s.parent_span_id]
    (attempt,) = roots
    assert len(attempt.trace_id) == 16 and len(attempt.span_id) == 8
    assert {s.trace_id for s in spans} == {attempt.trace_id}
    assert attempt.end_time_unix_nano >= attempt.start_time_unix_nano > 0
    attrs = _attributes(attempt)
    assert attrs["gen_ai.operation.name"] == "invoke_agent"
    assert attrs["gen_ai.system"] == "command"
    assert attrs["loopkit.task_id"] == "notes"
    assert attrs["loopkit.attempt"] == 1
    assert attrs["loopkit.decision"] == "complete"
    assert attrs["loopkit.verify.passed"] is True
    assert isinstance(attrs["gen_ai.usage.input_tokens"], int)

    stages = [s for s in spans if s.parent_span_id == attempt.span_id]
    assert [s.name for s in stages] == ["lk-invoke", "lk-diff", "lk-verify", "lk-decide"]
    for before, after in itertools.pairwise(stages):
        assert after.start_time_unix_nano == before.end_time_unix_nano
    diff = stages[1]
    assert _attributes(diff)["loopkit.git.processes"] >= 1
    (check,) = [s for s in spans if s.parent_span_id == stages[2].span_id]
    assert check.name == "check notes"
    assert len({s.span_id for s in spans}) == len(spans)

    # A re-export sends the very same spans: the ids come from the ledger.
    again = lk_run(["lk", "report", "--otlp", f"{url}/v1/traces"], git_repo)
    assert again.returncode == 0, again.stderr
    assert received[1] == received[0]


def test_a_second_run_after_a_reopen_is_a_trace_of_its_own() -> None:
    def rec(attempt: int, aid: str) -> dict[str, Any]:
        return {
            "type": "attempt",
            "task_id": "t",
            "attempt": attempt,
            "attempt_id": aid,
            "started_at": "2026-01-01T00:00:00.000Z",
            "recorded_at": "2026-01-01T00:00:01.500Z",
            "decision": {"outcome": "failed"},
        }

    ledger = [rec(1, "a"), rec(2, "b"), {"type": "reopen", "task_id": "t"}, rec(3, "c")]
    body = otlp.request(ledger)
    assert otlp.request(ledger) == body
    spans = body["resourceSpans"][0]["scopeSpans"][0]["spans"]  # type: ignore[index]
    assert len({s["traceId"] for s in spans}) == 2
    assert spans[0]["traceId"] == spans[1]["traceId"] != spans[2]["traceId"]
    assert spans[0]["startTimeUnixNano"] == "1767225600000000000"
    assert spans[0]["endTimeUnixNano"] == "1767225601500000000"
    assert spans[0]["status"] == {"code": 2}


def test_no_receiver_and_a_bad_url_each_say_one_line(git_repo: Path) -> None:
    notes_project(
        git_repo, "mkdir -p notes; echo hi > notes/a.txt", wall_seconds=600, check_timeout=5
    )
    _attempt(git_repo)
    # A port nobody listens on: bind one, take its number, close it.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    gone = lk_run(["lk", "report", "--otlp", f"http://127.0.0.1:{port}"], git_repo)
    assert gone.returncode == 4, gone.stderr
    assert "could not be reached" in gone.stderr and "Traceback" not in gone.stderr
    bad = lk_run(["lk", "report", "--otlp", "ftp://127.0.0.1/x"], git_repo)
    assert bad.returncode == 3, bad.stderr
    assert "http(s) URL" in bad.stderr and "Traceback" not in bad.stderr


def test_a_damaged_record_is_sent_with_what_it_has() -> None:
    damaged = {
        "type": "attempt",
        "task_id": "t",
        "attempt": 1,
        "started_at": "2026-01-01T00:00:00.000Z",
        "recorded_at": "2026-01-01T00:00:01.000Z",
        "run": "not an object",
        "decision": ["nor this"],
        "timings": [{"stage": "diff", "s": 0.5, "git": 3, "checks": "x"}, "junk"],
    }
    spans = otlp.request([damaged])["resourceSpans"][0]["scopeSpans"][0]["spans"]  # type: ignore[index]
    assert [s["name"] for s in spans] == ["attempt 1 of t", "lk-diff"]
