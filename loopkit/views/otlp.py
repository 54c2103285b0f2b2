"""The ledger as OpenTelemetry traces: an OTLP/HTTP JSON export request, and its sending.

One trace per task run (a task's attempts; a person's reopen starts the next run), a span
per attempt (from its ``started_at`` to its ``recorded_at``), a child span per stage from
the record's ``timings`` (laid end to end from the attempt's start, in their order: an
entry carries its length, not its start), and under the verify stage a span per check.
The attempt span carries the GenAI semantic conventions where they fit (``gen_ai.system``,
``gen_ai.request.model``, ``gen_ai.usage.*``, ``gen_ai.operation.name``) and ``loopkit.*``
for the rest (the outcome, the failure class, the cost). Every id is derived from the
ledger (a hash of the task, the run's first attempt and the span's place), so exporting
the same ledger twice sends the same spans. The standard library alone: the protobuf
JSON mapping is written by hand (ids in hex, times as strings of nanoseconds).
"""

from __future__ import annotations

import calendar
import hashlib
import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

#: Where an OTLP/HTTP receiver takes traces when the URL names no path.
TRACES_PATH = "/v1/traces"
SCOPE = "loopkit.ledger"
#: OTLP span kinds and status codes (opentelemetry/proto/trace/v1/trace.proto).
KIND_INTERNAL = 1
STATUS_OK, STATUS_ERROR = 1, 2


@dataclass
class Run:
    """One task run: its attempt records in ledger order."""

    task_id: str
    attempts: list[Mapping[str, Any]] = field(default_factory=list)


def runs(records: Iterable[Mapping[str, Any]]) -> list[Run]:
    """The ledger's attempt records grouped into runs (a reopen ends a task's run)."""
    open_runs: dict[str, Run] = {}
    out: list[Run] = []
    for r in records:
        task = r.get("task_id")
        if not isinstance(task, str):
            continue
        if r.get("type") == "reopen":
            open_runs.pop(task, None)
        elif r.get("type") == "attempt":
            run = open_runs.get(task)
            if run is None:
                run = open_runs[task] = Run(task)
                out.append(run)
            run.attempts.append(r)
    return out


def _hex(n: int, *parts: object) -> str:
    return hashlib.sha256("\0".join(map(str, parts)).encode()).hexdigest()[:n]


def _nanos(stamp: object) -> int | None:
    """An ISO time the ledger writes (``2026-01-02T03:04:05.678Z``) in Unix nanoseconds."""
    if not isinstance(stamp, str) or not stamp.endswith("Z"):
        return None
    whole, _, frac = stamp[:-1].partition(".")
    try:
        seconds = calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S"))
        fraction = int((frac + "000000000")[:9]) if frac else 0
    except ValueError:
        return None
    return seconds * 1_000_000_000 + fraction


def _value(v: object) -> dict[str, object]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}  # int64 is a string in the JSON mapping
    if isinstance(v, float):
        return {"doubleValue": v}
    return {"stringValue": str(v)}


def _attributes(pairs: Mapping[str, object]) -> list[dict[str, object]]:
    return [{"key": k, "value": _value(v)} for k, v in pairs.items() if v is not None]


def _span(
    trace_id: str,
    span_id: str,
    parent: str | None,
    name: str,
    start: int,
    end: int,
    attributes: Mapping[str, object],
    error: bool | None = None,
) -> dict[str, object]:
    span: dict[str, object] = {
        "traceId": trace_id,
        "spanId": span_id,
        "name": name,
        "kind": KIND_INTERNAL,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(max(start, end)),
        "attributes": _attributes(attributes),
    }
    if parent:
        span["parentSpanId"] = parent
    if error is not None:
        span["status"] = {"code": STATUS_ERROR if error else STATUS_OK}
    return span


def _part(record: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """A section of the record; empty when absent or not an object (a damaged record)."""
    value = record.get(key)
    return value if isinstance(value, dict) else {}


def _attempt_attributes(record: Mapping[str, Any], run_no: int) -> dict[str, object]:
    run, usage, decision = _part(record, "run"), _part(record, "usage"), _part(record, "decision")
    diff, verify = _part(record, "diff"), _part(record, "verify")
    return {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.system": run.get("provider"),
        "gen_ai.request.model": run.get("effective_model"),
        "gen_ai.conversation.id": run.get("session_id"),
        "gen_ai.usage.input_tokens": usage.get("input_tokens"),
        "gen_ai.usage.output_tokens": usage.get("output_tokens"),
        "loopkit.task_id": record.get("task_id"),
        "loopkit.run": run_no,
        "loopkit.attempt": record.get("attempt"),
        "loopkit.attempt_id": record.get("attempt_id"),
        "loopkit.decision": decision.get("outcome"),
        "loopkit.failure_class": decision.get("failure_class"),
        "loopkit.reason": record.get("reason"),
        "loopkit.cost_usd": usage.get("cost_usd"),
        "loopkit.cost_source": usage.get("cost_source"),
        "loopkit.diff.files": diff.get("files"),
        "loopkit.diff.lines": diff.get("lines"),
        "loopkit.tree": verify.get("tree") or diff.get("tree"),
        "loopkit.verify.passed": verify.get("passed"),
    }


def _stage_spans(
    trace_id: str, parent: str, record: Mapping[str, Any], start: int
) -> list[dict[str, object]]:
    spans: list[dict[str, object]] = []
    at = start
    timings = record.get("timings")
    for i, entry in enumerate(timings if isinstance(timings, list) else ()):
        if not isinstance(entry, dict) or not isinstance(entry.get("s"), (int, float)):
            continue
        stage = str(entry.get("stage"))
        span_id = _hex(16, trace_id, parent, "stage", i, stage)
        end = at + int(entry["s"] * 1e9)
        git = _part(entry, "git")
        attributes = {
            "loopkit.stage": stage,
            "loopkit.git.processes": git.get("processes"),
            "loopkit.git.s": git.get("s"),
            "loopkit.worker_s": entry.get("worker_s"),
        }
        spans.append(_span(trace_id, span_id, parent, f"lk-{stage}", at, end, attributes))
        checked = at
        checks = entry.get("checks")
        for j, check in enumerate(checks if isinstance(checks, list) else ()):
            if not isinstance(check, dict) or not isinstance(check.get("s"), (int, float)):
                continue
            done = checked + int(check["s"] * 1e9)
            check_id = _hex(16, trace_id, span_id, "check", j, check.get("name"))
            name = f"check {check.get('name')}"
            spans.append(
                _span(
                    trace_id,
                    check_id,
                    span_id,
                    name,
                    checked,
                    done,
                    {"loopkit.check": check.get("name")},
                )
            )
            checked = done
        at = end
    return spans


def request(records: Iterable[Mapping[str, Any]], service: str = "loopkit") -> dict[str, object]:
    """The ExportTraceServiceRequest (protobuf JSON mapping) of the ledger's records."""
    spans: list[dict[str, object]] = []
    counts: dict[str, int] = {}
    for run in runs(records):
        counts[run.task_id] = run_no = counts.get(run.task_id, 0) + 1
        first = run.attempts[0]
        seed = first.get("attempt_id") or first.get("started_at") or first.get("recorded_at")
        trace_id = _hex(32, "loopkit-run", run.task_id, seed)
        for record in run.attempts:
            end = _nanos(record.get("recorded_at"))
            if end is None:
                continue
            start = _nanos(record.get("started_at")) or end
            span_id = _hex(16, trace_id, "attempt", record.get("attempt"), record.get("attempt_id"))
            outcome = _part(record, "decision").get("outcome")
            name = f"attempt {record.get('attempt')} of {run.task_id}"
            error = outcome in ("failed", "blocked", "budget_exhausted")
            attributes = _attempt_attributes(record, run_no)
            spans.append(_span(trace_id, span_id, None, name, start, end, attributes, error))
            spans.extend(_stage_spans(trace_id, span_id, record, start))
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": _attributes({"service.name": service})},
                "scopeSpans": [{"scope": {"name": SCOPE}, "spans": spans}],
            }
        ]
    }


def endpoint(url: str) -> str | None:
    """The traces URL a receiver's URL names (its /v1/traces when it names no path); None
    when it is not an http(s) URL."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in ("http", "https") or not rest.split("/", 1)[0]:
        return None
    return url if "/" in rest.strip("/") else url.rstrip("/") + TRACES_PATH


def send(url: str, body: Mapping[str, object], timeout: float = 30.0) -> str | None:
    """POST the request to the receiver; None when it took it, else why not (one line)."""
    data = json.dumps(body, separators=(",", ":")).encode()
    req = urllib.request.Request(
        url, data=data, method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as answer:
            answer.read()
    except urllib.error.HTTPError as e:
        return f"the receiver answered {e.code} {e.reason}"
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        return f"the receiver could not be reached: {reason}"
    return None


def span_count(body: Mapping[str, Any]) -> int:
    return sum(
        len(s.get("spans") or ())
        for r in body.get("resourceSpans") or ()
        for s in r.get("scopeSpans") or ()
    )
