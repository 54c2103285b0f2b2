"""The meter on its own: tokens checked, the real key put where each API wants it,
answers streamed through as they come, usage read from all four wire formats."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from loopkit.boundary.dialects import KNOWN_APIS, Api, Upstream, find_upstream
from loopkit.boundary.meter import Meter
from loopkit.boundary.prices import Prices

KEY = "real-key-0123456789abcdef"
ANTHROPIC = Api(
    "anthropic", ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"), "ANTHROPIC_BASE_URL", "x"
)
OPENAI, GEMINI = KNOWN_APIS[1], KNOWN_APIS[2]

Reply = Callable[[BaseHTTPRequestHandler], None]


@contextmanager
def upstream(reply: Reply) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A fake API on 127.0.0.1 that records what reached it and answers with ``reply``."""
    seen: list[dict[str, Any]] = []

    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a: Any) -> None:
            pass

        def do_POST(self) -> None:
            n = int(self.headers.get("content-length") or 0)
            seen.append(
                {"path": self.path, "headers": dict(self.headers), "body": self.rfile.read(n)}
            )
            reply(self)

    server = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def json_reply(payload: Any, status: int = 200) -> Reply:
    def send(h: BaseHTTPRequestHandler) -> None:
        data = json.dumps(payload).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    return send


def sse_reply(events: list[Any], *, between: Callable[[], None] | None = None) -> Reply:
    def send(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Connection", "close")
        h.end_headers()
        for i, e in enumerate(events):
            h.wfile.write(f"data: {json.dumps(e)}\n\n".encode())
            h.wfile.flush()
            if i == 0 and between is not None:
                between()
        h.close_connection = True

    return send


def post(
    meter: Meter, path: str, headers: dict[str, str], body: Any = None
) -> tuple[int, dict[str, str], bytes]:
    u = urlsplit(meter.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    conn.request("POST", path, json.dumps(body or {}).encode(), headers)
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, dict(r.getheaders()), data


@contextmanager
def metered(
    url: str, api: Api, key_var: str, ttl: float = 60, tmp: Path | None = None
) -> Iterator[Meter]:
    m = Meter.start(Upstream(url, KEY, key_var, api), ttl_s=ttl, log=tmp)
    try:
        yield m
    finally:
        m.stop()


@pytest.mark.parametrize(
    ("api", "var", "header", "value", "path"),
    [
        (ANTHROPIC, "ANTHROPIC_API_KEY", "x-api-key", KEY, "/v1/messages"),
        (ANTHROPIC, "ANTHROPIC_AUTH_TOKEN", "authorization", f"Bearer {KEY}", "/v1/messages"),
        (OPENAI, "OPENAI_API_KEY", "authorization", f"Bearer {KEY}", "/responses"),
        (GEMINI, "GEMINI_API_KEY", "x-goog-api-key", KEY, "/v1beta/models/g:generateContent"),
    ],
)
def test_the_real_key_goes_where_the_api_wants_it(
    api: Api, var: str, header: str, value: str, path: str
) -> None:
    with (
        upstream(json_reply({"model": "m", "usage": {}})) as (url, seen),
        metered(url, api, var) as m,
    ):
        status, _, _ = post(m, path + "?key=" + m.token + "&alt=sse", {"x-api-key": m.token})
    assert status == 200
    got = {k.lower(): v for k, v in seen[0]["headers"].items()}
    assert got[header] == value
    # The token the worker sent is not passed on, in any header or the query.
    assert m.token not in json.dumps(seen[0]["headers"]) and m.token not in seen[0]["path"]
    assert seen[0]["path"] == path + "?alt=sse"
    others = {"x-api-key", "authorization", "x-goog-api-key"} - {header}
    assert not others & set(got)


@pytest.mark.parametrize(
    ("headers", "why"),
    [
        ({}, "no token"),
        ({"x-api-key": "lk-run-guessed"}, "wrong token"),
        ({"authorization": "Bearer " + KEY}, "wrong token"),  # the real key is no token
    ],
)
def test_anything_but_the_token_is_refused(
    headers: dict[str, str], why: str, tmp_path: Path
) -> None:
    log = tmp_path / "meter.jsonl"
    with (
        upstream(json_reply({})) as (url, seen),
        metered(url, OPENAI, "OPENAI_API_KEY", tmp=log) as m,
    ):
        status, _, body = post(m, "/v1/responses", headers)
    assert status == 401 and seen == []  # never forwarded
    assert json.loads(body)["error"]["code"] == "invalid_api_key"  # OpenAI's shape
    entry = json.loads(log.read_text())
    assert entry["status"] == 401 and entry["refused"] == why


def test_an_expired_token_is_refused() -> None:
    with (
        upstream(json_reply({})) as (url, seen),
        metered(url, GEMINI, "GEMINI_API_KEY", ttl=0.2) as m,
    ):
        ok, _, _ = post(m, "/v1beta/models/g:generateContent", {"x-goog-api-key": m.token})
        time.sleep(0.3)
        late, _, body = post(m, "/v1beta/models/g:generateContent", {"x-goog-api-key": m.token})
    assert ok == 200 and late == 401 and len(seen) == 1
    assert json.loads(body)["error"]["status"] == "UNAUTHENTICATED"
    assert m.records[-1]["refused"] == "token expired"


def test_a_stream_is_passed_on_as_it_comes() -> None:
    """The upstream sends its first event and then waits until the client has read it
    through the meter: a meter that buffered the answer would never deliver it."""
    first_read = threading.Event()
    events = [
        {"type": "message_start", "message": {"model": "claude-x", "usage": {"input_tokens": 7}}},
        {"type": "message_delta", "usage": {"output_tokens": 5}},
    ]
    waited: list[bool] = []
    reply = sse_reply(events, between=lambda: waited.append(first_read.wait(5)))
    with upstream(reply) as (url, _), metered(url, ANTHROPIC, "ANTHROPIC_API_KEY") as m:
        u = urlsplit(m.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        conn.request("POST", "/v1/messages", b"{}", {"x-api-key": m.token})
        r = conn.getresponse()
        line = b""
        while b"message_start" not in line:
            chunk = r.read1(65536)
            assert chunk, "the stream ended before its first event"
            line += chunk
        first_read.set()
        rest = r.read()
        assert b"message_delta" in rest
        conn.close()
    assert b"message_start" in line and waited == [True]  # read before the rest was sent
    rec = m.records[0]
    assert rec["model"] == "claude-x" and rec["input"] == 7 and rec["output"] == 5


USAGE_CASES = {
    "anthropic-sse": (
        "sse",
        [
            {
                "type": "message_start",
                "message": {
                    "model": "claude-sonnet-4-5-20250929",
                    "usage": {
                        "input_tokens": 10,
                        "cache_read_input_tokens": 100,
                        "cache_creation_input_tokens": 20,
                        "output_tokens": 1,
                    },
                },
            },
            {"type": "message_delta", "usage": {"output_tokens": 42}},
        ],
        ("claude-sonnet-4-5-20250929", 10, 42, 100, 20),
    ),
    "openai-responses-sse": (
        "sse",
        [
            {"type": "response.created", "response": {"model": "gpt-5", "usage": None}},
            {
                "type": "response.completed",
                "response": {
                    "model": "gpt-5-2025-08-07",
                    "usage": {
                        "input_tokens": 300,
                        "input_tokens_details": {"cached_tokens": 200},
                        "output_tokens": 9,
                    },
                },
            },
        ],
        ("gpt-5-2025-08-07", 100, 9, 200, 0),
    ),
    "openai-chat-sse": (
        "sse",
        [
            {"model": "gpt-4.1", "choices": [{"delta": {"content": "hi"}}]},
            {
                "model": "gpt-4.1",
                "choices": [],
                "usage": {
                    "prompt_tokens": 50,
                    "completion_tokens": 4,
                    "prompt_tokens_details": {"cached_tokens": 10},
                },
            },
        ],
        ("gpt-4.1", 40, 4, 10, 0),
    ),
    "gemini-sse": (
        "sse",
        [
            {"modelVersion": "gemini-2.5-pro", "usageMetadata": {"promptTokenCount": 30}},
            {
                "modelVersion": "gemini-2.5-pro",
                "usageMetadata": {
                    "promptTokenCount": 30,
                    "candidatesTokenCount": 6,
                    "thoughtsTokenCount": 4,
                    "cachedContentTokenCount": 5,
                },
            },
        ],
        ("gemini-2.5-pro", 25, 10, 5, 0),
    ),
    "anthropic-json": (
        "json",
        {"model": "claude-haiku-4-5", "usage": {"input_tokens": 3, "output_tokens": 2}},
        ("claude-haiku-4-5", 3, 2, 0, 0),
    ),
}


@pytest.mark.parametrize("case", list(USAGE_CASES))
def test_usage_from_every_wire_format(case: str) -> None:
    shape, payload, (model, inp, out, cread, cwrite) = USAGE_CASES[case]
    reply = sse_reply(payload) if shape == "sse" else json_reply(payload)
    with upstream(reply) as (url, _), metered(url, ANTHROPIC, "ANTHROPIC_API_KEY") as m:
        status, _, _ = post(m, "/v1/messages", {"x-api-key": m.token})
    assert status == 200
    r = m.records[0]
    assert (r["model"], r["input"], r["output"], r["cache_read"], r["cache_write"]) == (
        model,
        inp,
        out,
        cread,
        cwrite,
    )


def test_429s_and_5xx_are_counted_and_trip_the_watch() -> None:
    statuses = iter([429, 529, 500, 200])

    def reply(h: BaseHTTPRequestHandler) -> None:
        json_reply({"type": "error", "error": {"type": "x"}}, next(statuses))(h)

    tripped: list[int] = []
    with upstream(reply) as (url, _), metered(url, ANTHROPIC, "ANTHROPIC_API_KEY") as m:
        m.watch(3, lambda: tripped.append(m.streak))
        got = []
        for n in range(1, 5):
            got.append(post(m, "/v1/messages", {"x-api-key": m.token})[0])
            # The record follows the answer: a client that retries at once could otherwise
            # have its next answer recorded first (a CLI's backoff is seconds).
            deadline = time.monotonic() + 10
            while len(m.records) < n and time.monotonic() < deadline:
                time.sleep(0.005)
        section = m.section(Prices({}, "none"))
    assert got == [429, 529, 500, 200]
    assert tripped == [3]
    assert section["transient"] == 3 and section["statuses"] == {
        "429": 1,
        "529": 1,
        "500": 1,
        "200": 1,
    }
    assert section["last_status"] == 200


def test_an_unreachable_upstream_is_a_502_in_the_dialect() -> None:
    with metered("http://127.0.0.1:9", ANTHROPIC, "ANTHROPIC_API_KEY") as m:
        status, _, body = post(m, "/v1/messages", {"x-api-key": m.token})
    assert status == 502 and json.loads(body)["type"] == "error"
    assert m.records[0]["status"] == 502 and m.section()["transient"] == 1


def test_prices_match_the_longest_entry_and_never_guess(tmp_path: Path) -> None:
    table = tmp_path / "p.yaml"
    table.write_text(
        "models:\n"
        "  m: {input: 1, output: 2, as_of: '2026-01-01', source: s}\n"
        "  m-big: {input: 10, output: 20, cache_read: 1, as_of: '2026-02-01', source: t}\n"
    )
    prices = Prices.load({"LOOPKIT_PRICES": str(table)})
    assert prices.cost(
        "m-big-2026", {"input": 1_000_000, "output": 0, "cache_read": 1_000_000}
    ) == (
        11.0,
        "t",
        "2026-02-01",
    )
    assert prices.cost("m-1", {"input": 1_000_000})[0] == 1.0  # type: ignore[index]
    assert prices.cost("mbig", {"input": 1}) is None
    shipped = Prices.load({})
    for name, entry in shipped.models.items():
        assert entry.get("as_of") and entry.get("source"), name


def test_find_upstream_takes_the_persons_key_and_base_url() -> None:
    env = {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": "http://127.0.0.1:1/v1/"}
    up = find_upstream(OPENAI, env)
    assert up is not None and up.url == "http://127.0.0.1:1/v1" and up.key == KEY
    assert (
        find_upstream(OPENAI, env, url="https://other.example/v1").url == "https://other.example/v1"
    )  # type: ignore[union-attr]
    assert find_upstream(OPENAI, {}) is None
    assert find_upstream(OPENAI, {"OPENAI_API_KEY": "  "}) is None


def test_lk_status_shows_the_wire_while_the_worker_runs(tmp_path: Path) -> None:
    """A worker mid-run whose CLI is retrying 429s in silence: its meter log already
    says so, and lk status shows it."""
    from loopkit.views import status

    state = tmp_path / ".loopkit"
    run = state / "runs" / "fix-x" / "r1"
    run.mkdir(parents=True)
    (run / "start.json").write_text("{}")
    (run / "1-admit.json").write_text("{}")
    (run / "1-invoke.json").write_text("")  # the stage in progress
    folder = state / "artifacts" / "a1"
    folder.mkdir(parents=True)
    lines = [
        {"status": 429, "path": "/v1/messages"},
        {"status": 429, "path": "/v1/messages"},
        {"status": 401, "refused": "wrong token"},
        {"status": 200, "input": 10, "output": 5},
    ]
    (folder / "meter.jsonl").write_text(
        "".join(json.dumps(x) + "\n" for x in lines) + '{"status": 2'  # one being written
    )
    body = status.gather(state)
    assert body["wire"] == {
        "requests": 4,
        "statuses": {"429": 2, "401": 1, "200": 1},
        "transient": 2,
        "refused": 1,
        "last_status": 200,
        "tokens": 15,
    }
    from loopkit import schema

    schema.validate(body, "status")
    assert "wire (meter): 4 request(s), 2 transient, 1 refused (1×401, 2×429)" in status.text(body)


def test_an_answer_cut_halfway_is_cut_for_the_worker_too_and_recorded() -> None:
    def reply(h: BaseHTTPRequestHandler) -> None:
        data = json.dumps({"model": "m", "usage": {"output_tokens": 3}}).encode()
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data[: len(data) // 2])
        h.wfile.flush()
        h.close_connection = True
        h.connection.shutdown(2)

    with upstream(reply) as (url, _), metered(url, ANTHROPIC, "ANTHROPIC_API_KEY") as m:
        u = urlsplit(m.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        conn.request("POST", "/v1/messages", b"{}", {"x-api-key": m.token})
        r = conn.getresponse()
        with pytest.raises(http.client.IncompleteRead):
            r.read()
        m.settled()
    assert m.records[0]["status"] == 200 and m.records[0]["error"].startswith("cut")
