"""What went over the wire: each answer's usage read as it passes (the JSON answer, or
the stream's usage events of the Anthropic Messages API, the OpenAI Responses and Chat
Completions APIs and the Gemini API), the run record's ``meter`` section summed from the
requests, and the live tally ``lk status`` reads."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypedDict
from urllib.parse import urlsplit

from loopkit.boundary.dialects import Upstream
from loopkit.boundary.prices import Prices

#: A JSON answer larger than this is forwarded but not parsed for its usage.
MAX_PARSED_BYTES = 8 << 20
#: Requests recorded in the run record's ``meter.requests`` (the JSONL log has them all).
MAX_LISTED = 200


class Exchange(TypedDict, total=False):
    """One request through the meter, as ``meter.jsonl`` and ``run.meter.listed`` hold it:
    when, what, the answer's status and usage, or why the meter refused it."""

    time: str
    method: str
    path: str
    status: int
    refused: str
    error: str
    model: str | None
    input: int
    output: int
    cache_read: int
    cache_write: int
    stream: bool
    ttfb_ms: float
    latency_ms: float


class MeterCost(TypedDict):
    usd: float | None
    trusted: bool
    source: str
    unpriced: list[str]


class MeterSection(TypedDict, total=False):
    """The run record's ``meter`` section (schemas/run.json)."""

    upstream: str
    dialect: str
    requests: int
    statuses: dict[str, int]
    refused: int
    transient: int
    retried: int
    last_status: int | None
    models: list[str]
    tokens: dict[str, int]
    cost: MeterCost
    latency_ms: dict[str, float | None]
    log: str | None
    listed: list[Exchange]
    withheld: list[str]
    unmetered: list[str]


class Tally(TypedDict):
    """What a meter log holds so far (``tally``)."""

    requests: int
    statuses: dict[str, int]
    transient: int
    refused: int
    last_status: int | None
    tokens: int


class Usage:
    """What one answer says it served and used. Each figure is the largest any event
    reported: Anthropic's ``message_delta`` and Gemini's chunks carry running totals,
    OpenAI's ``response.completed`` and the chat stream's last chunk the final ones."""

    __slots__ = ("cache_read", "cache_write", "error", "input", "model", "output", "total_input")

    def __init__(self) -> None:
        self.model: str | None = None
        self.input = 0  # uncached input tokens
        self.total_input = 0  # as reported, when the API counts cached input in it
        self.output = 0
        self.cache_read = 0
        self.cache_write = 0
        self.error: str | None = None

    def absorb(self, obj: Any) -> None:
        if not isinstance(obj, dict):
            return
        kind = obj.get("type")
        if kind == "error" or (kind is None and isinstance(obj.get("error"), dict)):
            err = obj.get("error")
            if isinstance(err, dict):
                self.error = str(err.get("type") or err.get("status") or err.get("code") or "error")
        for inner in ("message", "response"):  # anthropic message_start, openai response.*
            if isinstance(obj.get(inner), dict):
                self.absorb(obj[inner])
        if kind == "response.failed" or obj.get("status") == "failed":
            err = obj.get("error")
            if isinstance(err, dict):
                self.error = str(err.get("code") or err.get("type") or "failed")
        model = obj.get("model") or obj.get("modelVersion")
        if isinstance(model, str) and model:
            self.model = model
        usage = obj.get("usage")
        if isinstance(usage, dict):
            self._usage(usage)
        meta = obj.get("usageMetadata")
        if isinstance(meta, dict):  # gemini
            cached = _n(meta.get("cachedContentTokenCount"))
            self.total_input = max(self.total_input, _n(meta.get("promptTokenCount")))
            self.cache_read = max(self.cache_read, cached)
            self.input = max(0, self.total_input - self.cache_read)
            out = _n(meta.get("candidatesTokenCount")) + _n(meta.get("thoughtsTokenCount"))
            self.output = max(self.output, out)

    def _usage(self, u: Mapping[str, Any]) -> None:
        if "prompt_tokens" in u or "completion_tokens" in u:  # openai chat completions
            details = u.get("prompt_tokens_details")
            cached = _n(details.get("cached_tokens")) if isinstance(details, dict) else 0
            self.total_input = max(self.total_input, _n(u.get("prompt_tokens")))
            self.cache_read = max(self.cache_read, cached)
            self.input = max(0, self.total_input - self.cache_read)
            self.output = max(self.output, _n(u.get("completion_tokens")))
            return
        details = u.get("input_tokens_details")
        if isinstance(details, dict):  # openai responses: input counts the cached part
            cached = _n(details.get("cached_tokens"))
            self.total_input = max(self.total_input, _n(u.get("input_tokens")))
            self.cache_read = max(self.cache_read, cached)
            self.input = max(0, self.total_input - self.cache_read)
        else:  # anthropic: input_tokens excludes the cache
            self.input = max(self.input, _n(u.get("input_tokens")))
            self.cache_read = max(self.cache_read, _n(u.get("cache_read_input_tokens")))
            self.cache_write = max(self.cache_write, _n(u.get("cache_creation_input_tokens")))
            self.total_input = max(self.total_input, self.input + self.cache_read)
        self.output = max(self.output, _n(u.get("output_tokens")))


def _n(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 0


class Reader:
    """Reads an answer's bytes as they pass: SSE ``data:`` lines one by one, or a JSON
    body whole (up to ``MAX_PARSED_BYTES``)."""

    def __init__(self, sse: bool) -> None:
        self.sse = sse
        self.usage = Usage()
        self._buf = bytearray()
        self._over = False

    def feed(self, chunk: bytes) -> None:
        if self._over:
            return
        self._buf += chunk
        if not self.sse:
            if len(self._buf) > MAX_PARSED_BYTES:
                self._over = True
                self._buf.clear()
            return
        while True:
            cut = self._buf.find(b"\n")
            if cut < 0:
                if len(self._buf) > MAX_PARSED_BYTES:
                    self._buf.clear()
                return
            line = bytes(self._buf[:cut]).strip()
            del self._buf[: cut + 1]
            if line.startswith(b"data:"):
                self._json(line[5:])

    def finish(self) -> Usage:
        if self._buf and not self._over:
            if self.sse:
                line = bytes(self._buf).strip()
                if line.startswith(b"data:"):
                    self._json(line[5:])
            else:
                self._json(bytes(self._buf))
        self._buf.clear()
        return self.usage

    def _json(self, raw: bytes) -> None:
        raw = raw.strip()
        if not raw or raw == b"[DONE]":
            return
        try:
            obj = json.loads(raw)
        except ValueError:
            return
        if isinstance(obj, list):  # gemini's non-SSE streamGenerateContent: an array
            for item in obj:
                self.usage.absorb(item)
        else:
            self.usage.absorb(obj)


def summarize(
    records: list[Exchange],
    *,
    upstream: Upstream,
    prices: Prices,
    log: Path | None = None,
) -> MeterSection:
    statuses: dict[str, int] = {}
    models: dict[str, None] = {}
    tokens = {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0}
    per_model: dict[str, dict[str, int]] = {}
    refused = transient = 0
    latencies: list[float] = []
    answered = [r for r in records if not r.get("refused")]
    # A transient answer with a request after it was retried (by the CLI, in silence or not).
    retried = sum(1 for r in answered[:-1] if is_transient(r))
    for r in records:
        statuses[str(r["status"])] = statuses.get(str(r["status"]), 0) + 1
        if r.get("refused"):
            refused += 1
            continue
        if is_transient(r):
            transient += 1
        latencies.append(float(r.get("latency_ms") or 0))
        used = {
            "input": r.get("input") or 0,
            "output": r.get("output") or 0,
            "cache_read": r.get("cache_read") or 0,
            "cache_write": r.get("cache_write") or 0,
        }
        model = r.get("model")
        if model:
            models.setdefault(model, None)
            bucket = per_model.setdefault(model, dict.fromkeys(tokens, 0))
            for k in tokens:
                bucket[k] += used[k]
        for k in tokens:
            tokens[k] += used[k]
    usd = 0.0
    unpriced: list[str] = []
    sources: dict[str, None] = {}
    host = (urlsplit(upstream.url).hostname or "").lower()
    elsewhere: list[str] = []
    for model, used in per_model.items():
        priced = prices.cost(model, used)
        if priced is None:
            unpriced.append(model)
            continue
        if not prices.holds_at(model, host, upstream.api.vendor_domain):
            elsewhere.append(model)
        usd += priced[0]
        sources.setdefault(f"{priced[1]} (as of {priced[2]})" if priced[2] else priced[1], None)
    known = not unpriced and bool(per_model)
    parts = urlsplit(upstream.url)
    latencies.sort()
    return {
        "upstream": f"{parts.scheme}://{parts.netloc}",
        "dialect": upstream.dialect,
        "requests": len(records),
        "statuses": statuses,
        "refused": refused,
        "transient": transient,
        "retried": retried,
        "last_status": answered[-1]["status"] if answered else None,
        "models": list(models),
        "tokens": tokens,
        "cost": {
            "usd": round(usd, 6) if known else None,
            # The table's prices are the vendor's: an answer from another host (a local
            # server, a gateway the table does not name) may be billed otherwise.
            "trusted": known and not elsewhere,
            "source": "; ".join(sources)
            if known
            else "no price for " + ", ".join(unpriced)
            if unpriced
            else "no usage metered",
            "unpriced": unpriced,
        },
        "latency_ms": {
            "median": latencies[len(latencies) // 2] if latencies else None,
            "max": latencies[-1] if latencies else None,
        },
        "log": str(log) if log is not None else None,
        "listed": records[:MAX_LISTED],
    }


def tally(log: Path) -> Tally | None:
    """What a run's meter log holds so far (``lk status`` reads it while the worker
    runs): requests, statuses, transient answers, refusals, the last status, tokens.
    None when the run is not metered."""
    try:
        raw = log.read_bytes()
    except OSError:
        return None
    out: Tally = {
        "requests": 0,
        "statuses": {},
        "transient": 0,
        "refused": 0,
        "last_status": None,
        "tokens": 0,
    }
    for line in raw.splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue  # a line being written
        if not isinstance(r, dict) or not isinstance(r.get("status"), int):
            continue
        out["requests"] += 1
        out["statuses"][str(r["status"])] = out["statuses"].get(str(r["status"]), 0) + 1
        out["last_status"] = r["status"]
        if r.get("refused"):
            out["refused"] += 1
        elif is_transient(r):
            out["transient"] += 1
        out["tokens"] += sum(int(r.get(k) or 0) for k in ("input", "output", "cache_read"))
    return out


def is_transient(r: Mapping[str, Any]) -> bool:
    """A 429, a 5xx (529 overloaded too), or an error event inside a 200 stream that says
    overloaded or rate limited."""
    status = int(r.get("status") or 0)
    if status == 429 or status >= 500:
        return True
    err = str(r.get("error") or "")
    return status == 200 and any(w in err for w in ("overloaded", "rate_limit", "server_error"))
