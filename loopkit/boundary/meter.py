"""The meter: the worker's one door to its model API, and the only holder of the real key.

Reference 002's credential boundary. The worker in its sandbox never sees the person's
API key: lk-invoke starts a loopback proxy for the run (``Meter``), gives the worker a
random token bound to the run (with an expiry) and a base URL pointing at the proxy, and
the proxy -- outside the sandbox -- checks the token, puts the real key in the header the
API expects, forwards the request to the real upstream and streams the answer back
byte for byte as it arrives (server-sent events are never buffered whole).

Every request is recorded (``meter.jsonl`` beside the run's artifacts, and the ``meter``
section of the run record): when, the path, the status, the model the API says it
served, the tokens it says it used (input, output, cache reads and writes; from the JSON
answer or the stream's usage events of the Anthropic Messages API, the OpenAI Responses
and Chat Completions APIs and the Gemini API), the latency, and what was refused. 429s and
5xx on the wire are counted whichever CLI retried them in silence. The cost is the
metered usage times a dated price table (``prices.yaml``, each model with ``as_of`` and
``source``; ``LOOPKIT_PRICES`` names another): loopkit's own figure, trusted over the
CLI's.

Which variables a provider's CLI reads for its key and base URL is declared once per
provider (``Provider.api``, an :class:`Api`); this module knows the dialects: where the
key goes, what a refusal looks like, where the usage is.

    meter = Meter.start(upstream="https://api.anthropic.com", key=real, dialect="anthropic",
                        ttl_s=960, log=folder / "meter.jsonl")
    env["ANTHROPIC_BASE_URL"], env["ANTHROPIC_API_KEY"] = meter.url, meter.token
    ...                                             # the worker runs
    meter.stop(); run["meter"] = meter.section()
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

TYPE_CHECKING = False
if TYPE_CHECKING:
    import http.client

#: The dialects the meter speaks: where the real key goes, how a refusal looks.
DIALECTS = ("anthropic", "openai", "gemini")
#: Request headers that may carry a credential: never forwarded as they came.
CREDENTIAL_HEADERS = ("authorization", "x-api-key", "x-goog-api-key", "api-key")
#: The only request headers forwarded (the APIs' own, and what a body needs); any other
#: header a client sends stays at the meter.
FORWARDED_HEADERS = frozenset(
    (
        "accept",
        "content-type",
        "content-encoding",
        "user-agent",
        "anthropic-version",
        "anthropic-beta",
        "openai-beta",
        "x-goog-api-client",
        "x-app",
        "x-claude-code-session-id",
        "session_id",
        "conversation_id",
        "originator",
    )
)
_MODEL = r"[A-Za-z0-9][A-Za-z0-9._@-]*"
#: Each dialect's endpoints (method, path under the upstream's prefix; the version
#: segment is the prefix's own when the base URL ends in it, as opencode's and codex's
#: do): nothing else is forwarded, not even to the same host.
ENDPOINTS: dict[str, tuple[tuple[str, re.Pattern[str]], ...]] = {
    "anthropic": (
        ("POST", re.compile(r"(/v1)?/messages(/count_tokens)?")),
        ("GET", re.compile(rf"(/v1)?/models(/{_MODEL})?")),
    ),
    "openai": (
        ("POST", re.compile(r"(/v1)?/(responses|chat/completions)")),
        ("GET", re.compile(rf"(/v1)?/models(/{_MODEL})?")),
    ),
    "gemini": (
        (
            "POST",
            re.compile(
                rf"/v1(beta|alpha)?/models/{_MODEL}:"
                r"(generateContent|streamGenerateContent|countTokens)"
            ),
        ),
        ("GET", re.compile(rf"/v1(beta|alpha)?/models(/{_MODEL})?")),
    ),
}
#: A request body over this is refused (413): its head says so, or it grows past it.
MAX_BODY_BYTES = 32 << 20
#: A body up to this is held (so a stale upstream connection can be retried); a larger
#: one is forwarded as it is read.
REPLAYABLE_BYTES = 1 << 20
#: A refused request's body up to this is read and dropped (its client then reads the
#: refusal rather than a reset); a larger one is never read.
DRAIN_BYTES = 64 << 10
CHUNK_BYTES = 64 << 10
#: Seconds: any one read or write on a worker's connection (and the wait between its
#: requests); a request's head from its first byte; an authenticated body in all.
IDLE_S = 75.0
HEAD_S = 20.0
BODY_S = 300.0
#: Connections open at once; one more is closed as it comes.
MAX_CONNECTIONS = 64
#: Hop-by-hop headers (RFC 9110 7.6.1): each side of the proxy has its own.
HOP_BY_HOP = (
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
    "host",
    "accept-encoding",
)
#: A JSON answer larger than this is forwarded but not parsed for its usage.
MAX_PARSED_BYTES = 8 << 20
#: Requests recorded in the run record's ``meter.requests`` (the JSONL log has them all).
MAX_LISTED = 200
#: The token outlives the worker's timeout by this much (a slow last request).
TTL_MARGIN_S = 120.0
UPSTREAM_TIMEOUT_S = 600.0
TOKEN_PREFIX = "lk-run-"


class Api:
    """Where a provider's CLI finds its model API: the variables that hold the key (the
    first set one is used), the variable that holds the base URL, the dialect, and the
    vendor's own endpoint when no base URL is set (its domain is where the price table's
    prices hold). Declared once per provider (``Provider.api``); a new provider adds one
    line. ``bearer_vars``: the key variables whose key the API takes as
    ``Authorization: Bearer`` (an Anthropic key otherwise goes in ``x-api-key``)."""

    dialect: str
    key_vars: tuple[str, ...]
    base_url_var: str | None
    default_upstream: str
    bearer_vars: tuple[str, ...]

    def __init__(
        self,
        dialect: str,
        key_vars: tuple[str, ...],
        base_url_var: str | None,
        default_upstream: str,
        bearer_vars: tuple[str, ...] = ("ANTHROPIC_AUTH_TOKEN",),
    ) -> None:
        if dialect not in DIALECTS:
            raise ValueError(f"unknown dialect {dialect!r}")
        self.dialect = dialect
        self.key_vars = key_vars
        self.base_url_var = base_url_var
        self.default_upstream = default_upstream
        self.bearer_vars = bearer_vars

    @property
    def vendor_domain(self) -> str:
        """``anthropic.com`` for ``https://api.anthropic.com``: its hosts are the vendor's."""
        from urllib.parse import urlsplit

        host = urlsplit(self.default_upstream).hostname or ""
        return ".".join(host.split(".")[-2:])


class Upstream:
    """The real endpoint and key one run's meter forwards to (found outside the sandbox)."""

    url: str
    key: str
    key_var: str
    api: Api
    #: The CLI's own name for this endpoint in its config (codex's ``[model_providers.X]``),
    #: when the base URL lives there rather than in a variable.
    section: str | None

    def __init__(
        self, url: str, key: str, key_var: str, api: Api, section: str | None = None
    ) -> None:
        self.url = url.rstrip("/")
        self.key = key
        self.key_var = key_var
        self.api = api
        self.section = section

    @property
    def dialect(self) -> str:
        return self.api.dialect


#: The APIs a command worker may hold a key for: naming the key's variable in
#: ``worker.env_allow`` meters it like a provider's (the command gets the token).
KNOWN_APIS = (
    Api("anthropic", ("ANTHROPIC_API_KEY",), "ANTHROPIC_BASE_URL", "https://api.anthropic.com"),
    Api("openai", ("OPENAI_API_KEY",), "OPENAI_BASE_URL", "https://api.openai.com/v1"),
    Api(
        "gemini",
        ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
        "GOOGLE_GEMINI_BASE_URL",
        "https://generativelanguage.googleapis.com",
    ),
)


def find_upstream(
    api: Api, environ: Mapping[str, str], *, url: str | None = None
) -> Upstream | None:
    """The upstream for ``api`` from ``environ`` (the person's), or None when no key is set.
    ``url`` (the contract's ``worker.upstream``) wins over the environment's base URL."""
    for var in api.key_vars:
        key = environ.get(var, "")
        if key.strip():
            base = url or (environ.get(api.base_url_var) if api.base_url_var else None)
            return Upstream(base or api.default_upstream, key, var, api)
    return None


def wanted(setting: Any, upstream: Upstream | None) -> bool:
    """Whether ``worker.meter`` (``on``, ``off``, ``auto``; YAML's true/false too) asks for
    the meter: ``auto`` (the default) meters whenever a key is there to hide."""
    if setting is False or setting == "off":
        return False
    return upstream is not None


# --------------------------------------------------------------------------- usage


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

    def _usage(self, u: dict[str, Any]) -> None:
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


class _Reader:
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


# --------------------------------------------------------------------------- prices


class Prices:
    """A dated price table: USD per million tokens, per model (a served name matches the
    longest entry it starts with: ``claude-sonnet-4-5-20250929`` is ``claude-sonnet-4-5``)."""

    def __init__(self, models: Mapping[str, Mapping[str, Any]], origin: str) -> None:
        self.models = dict(models)
        self.origin = origin

    @classmethod
    def load(cls, environ: Mapping[str, str] | None = None) -> Prices:
        from loopkit import loader

        env = os.environ if environ is None else environ
        chosen = env.get("LOOPKIT_PRICES")
        path = Path(chosen) if chosen else Path(__file__).with_name("prices.yaml")
        try:
            data = loader.yaml_load(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return cls({}, str(path))
        models = data.get("models") if isinstance(data, dict) else None
        return cls(models if isinstance(models, dict) else {}, str(path))

    def entry(self, model: str) -> tuple[str, Mapping[str, Any]] | None:
        best = None
        for name in self.models:
            if (model == name or model.startswith(name + "-") or model.startswith(name + "@")) and (
                best is None or len(name) > len(best)
            ):
                best = name
        return (best, self.models[best]) if best is not None else None

    def cost(self, model: str, tokens: Mapping[str, int]) -> tuple[float, str, str] | None:
        """USD for ``tokens`` of ``model``, with the table's source and date; None when
        the table has no price for it."""
        found = self.entry(model)
        if found is None:
            return None
        _, e = found
        per = {k: float(e.get(k, 0) or 0) for k in ("input", "output", "cache_read", "cache_write")}
        if "cache_read" not in e:
            per["cache_read"] = per["input"]
        if "cache_write" not in e:
            per["cache_write"] = per["input"]
        usd = sum(per[k] * tokens.get(k, 0) for k in per) / 1e6
        return usd, str(e.get("source") or self.origin), str(e.get("as_of") or "")

    def holds_at(self, model: str, host: str, vendor_domain: str) -> bool:
        """Whether ``model``'s price holds for answers from ``host``: the vendor's own
        hosts, or those the entry lists in ``hosts`` (a gateway that bills the same)."""
        found = self.entry(model)
        if found is None:
            return False
        if host == vendor_domain or host.endswith("." + vendor_domain):
            return True
        hosts = found[1].get("hosts")
        return isinstance(hosts, list) and host in hosts


# --------------------------------------------------------------------------- the proxy


class _Server:
    """The meter's listeners: threads per connection, at most ``MAX_CONNECTIONS`` open."""

    @staticmethod
    def make(meter: Meter, address: str | tuple[str, int], cap: int) -> Any:
        import socketserver
        from http.server import HTTPServer

        base: type = HTTPServer if isinstance(address, tuple) else socketserver.UnixStreamServer

        class Server(socketserver.ThreadingMixIn, base):  # type: ignore[misc]
            daemon_threads = True
            block_on_close = False
            open = 0

            def verify_request(self, request: Any, client_address: Any) -> bool:
                with meter._lock:
                    if Server.open >= cap:
                        return False
                    Server.open += 1
                return True

            def process_request_thread(self, request: Any, client_address: Any) -> None:
                try:
                    super().process_request_thread(request, client_address)
                finally:
                    with meter._lock:
                        Server.open -= 1

            def server_bind(self) -> None:
                if isinstance(address, tuple):
                    HTTPServer.server_bind(self)
                else:
                    socketserver.UnixStreamServer.server_bind(self)
                    self.server_name, self.server_port = "localhost", 0

        return Server(address, _handler_for(meter))


class Meter:
    """One run's loopback proxy: a token, an expiry, an upstream, a record of requests."""

    def __init__(
        self,
        upstream: Upstream,
        *,
        ttl_s: float,
        log: Path | None = None,
        host: str = "127.0.0.1",
        max_body: int = MAX_BODY_BYTES,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        import secrets
        from urllib.parse import urlsplit

        self.upstream = upstream
        self.token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        self.expires = time.time() + ttl_s
        self.log = log
        self.max_body = max_body
        #: The person's credentials the worker did not get, and those it got raw.
        self.withheld: list[str] = []
        self.unmetered: list[str] = []
        self.records: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        parts = urlsplit(upstream.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {upstream.url}")
        self._scheme = parts.scheme
        self._host = parts.hostname
        self._port = parts.port
        self.prefix = parts.path.rstrip("/")
        self._local = threading.local()
        self.streak = 0  # transient answers in a row
        self._active = 0  # requests being answered
        self._idle = threading.Condition(self._lock)
        self._limit = 0
        self._trip: Callable[[], None] | None = None
        self._deadlines: dict[socket.socket, float] = {}
        self._cap = max_connections
        self._servers = [_Server.make(self, (host, 0), max_connections)]
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()
        self.port = int(self._servers[0].server_address[1])
        self.url = f"http://{host}:{self.port}{self.prefix}"

    @classmethod
    def start(
        cls, upstream: Upstream, *, ttl_s: float, log: Path | None = None, **kw: Any
    ) -> Meter:
        meter = cls(upstream, ttl_s=ttl_s, log=log, **kw)
        for server in meter._servers:
            meter._threads.append(
                threading.Thread(
                    target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
                )
            )
        meter._threads.append(threading.Thread(target=meter._watch, daemon=True))
        for t in meter._threads:
            t.start()
        return meter

    def listen(self, path: Path) -> None:
        """Listen on the unix socket ``path`` too (a sandbox's way in without a network,
        ``loopkit.boundary.egress``)."""
        server = _Server.make(self, str(path), self._cap)
        self._servers.append(server)
        thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
        )
        self._threads.append(thread)
        thread.start()

    def stop(self) -> None:
        self._stopping.set()
        for server in self._servers:
            if self._threads:
                server.shutdown()
            server.server_close()
        for t in self._threads:
            t.join(timeout=5)

    def __enter__(self) -> Meter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def deadline(self, conn: socket.socket, seconds: float | None) -> None:
        """Cut ``conn`` off once ``seconds`` have passed (None: no deadline)."""
        with self._lock:
            if seconds is None:
                self._deadlines.pop(conn, None)
            else:
                self._deadlines[conn] = time.monotonic() + seconds

    def _watch(self) -> None:
        # One thread for every deadline: a client too slow with its request's head or
        # body has its connection shut, which ends the read its handler waits in.
        while not self._stopping.wait(0.25):
            now = time.monotonic()
            with self._lock:
                late = [c for c, t in self._deadlines.items() if t <= now]
                for c in late:
                    del self._deadlines[c]
            for c in late:
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    # -- what the handler asks --------------------------------------------------------
    def admits(self, presented: str | None) -> str | None:
        """None when ``presented`` is this run's live token, else why not."""
        import hmac

        if not presented:
            return "no token"
        if not hmac.compare_digest(presented.encode(), self.token.encode()):
            return "wrong token"
        if time.time() > self.expires:
            return "token expired"
        return None

    def connection(self) -> http.client.HTTPConnection:
        import http.client

        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            if self._scheme == "https":
                conn = http.client.HTTPSConnection(
                    self._host, self._port, timeout=UPSTREAM_TIMEOUT_S
                )
            else:
                conn = http.client.HTTPConnection(
                    self._host, self._port, timeout=UPSTREAM_TIMEOUT_S
                )
            self._local.conn = conn
        return conn

    def drop_connection(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
        self._local.conn = None

    def begin(self) -> None:
        with self._lock:
            self._active += 1

    def end(self) -> None:
        with self._lock:
            self._active -= 1
            self._idle.notify_all()

    def settled(self, timeout: float = 5.0) -> None:
        """Wait until no request is still being answered (the worker may have read its
        last answer a moment before the meter wrote that answer's record)."""
        with self._lock:
            self._idle.wait_for(lambda: self._active == 0, timeout=timeout)

    def watch(self, limit: int, trip: Callable[[], None]) -> None:
        """Call ``trip`` once ``limit`` transient answers came in a row (the breaker of
        a CLI retrying a 429 or a 5xx in silence)."""
        self._limit, self._trip = limit, trip

    def record(self, entry: dict[str, Any]) -> None:
        line = json.dumps(entry, sort_keys=True) + "\n"
        trip = None
        with self._lock:
            self.records.append(entry)
            if self.log is not None:
                with open(self.log, "a", encoding="utf-8") as f:
                    f.write(line)
            if not entry.get("refused"):
                self.streak = self.streak + 1 if is_transient(entry) else 0
                if self._limit and self.streak >= self._limit and self._trip is not None:
                    trip, self._trip = self._trip, None
        if trip is not None:
            trip()

    # -- the summary ------------------------------------------------------------------
    def section(self, prices: Prices | None = None) -> dict[str, Any]:
        """The run record's ``meter`` section (schemas/run.json), once every request
        under way has its record."""
        self.settled()
        out = summarize(
            self.records,
            upstream=self.upstream,
            prices=prices or Prices.load(),
            log=self.log,
        )
        out["withheld"], out["unmetered"] = self.withheld, self.unmetered
        return out


def summarize(
    records: list[dict[str, Any]],
    *,
    upstream: Upstream,
    prices: Prices,
    log: Path | None = None,
) -> dict[str, Any]:
    from urllib.parse import urlsplit

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
        model = r.get("model")
        if model:
            models.setdefault(model, None)
            bucket = per_model.setdefault(model, dict.fromkeys(tokens, 0))
            for k in tokens:
                bucket[k] += int(r.get(k) or 0)
        for k in tokens:
            tokens[k] += int(r.get(k) or 0)
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


def tally(log: Path) -> dict[str, Any] | None:
    """What a run's meter log holds so far (``lk status`` reads it while the worker
    runs): requests, statuses, transient answers, refusals, the last status, tokens.
    None when the run is not metered."""
    try:
        raw = log.read_bytes()
    except OSError:
        return None
    out: dict[str, Any] = {
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


# --------------------------------------------------------------------------- handler


def refusal(dialect: str, status: int, message: str) -> dict[str, Any]:
    """An error body in the dialect's own shape, so the CLI reports it as it would the
    vendor's."""
    if dialect == "anthropic":
        kind = "authentication_error" if status == 401 else "api_error"
        return {"type": "error", "error": {"type": kind, "message": message}}
    if dialect == "gemini":
        state = "UNAUTHENTICATED" if status == 401 else "UNAVAILABLE"
        return {"error": {"code": status, "message": message, "status": state}}
    code = "invalid_api_key" if status == 401 else "upstream_error"
    return {"error": {"message": message, "type": "invalid_request_error", "code": code}}


def presented_token(headers: Any, query: str) -> str | None:
    """The credential the client sent, wherever its dialect puts it."""
    for name in ("x-api-key", "x-goog-api-key", "api-key"):
        v = headers.get(name)
        if v:
            return str(v).strip()
    auth = headers.get("authorization")
    if auth:
        scheme, _, value = str(auth).partition(" ")
        return value.strip() if scheme.lower() == "bearer" else str(auth).strip()
    if query:
        from urllib.parse import parse_qs

        keys = parse_qs(query).get("key")
        if keys:
            return keys[0]
    return None


def endpoint(dialect: str, method: str, path: str, prefix: str) -> str | None:
    """None when ``method path`` is one of the dialect's API endpoints under the upstream's
    ``prefix``, else why not (the meter forwards nothing else, not even to the same host)."""
    if "%" in path or "\\" in path or posixpath.normpath(path) != path or "//" in path:
        return f"not the API: {method} {path[:200]}"
    rest = path[len(prefix) :] if path.startswith(prefix + "/") else None
    if rest is not None:
        for allowed, shape in ENDPOINTS[dialect]:
            if method == allowed and shape.fullmatch(rest):
                return None
    return f"not the API: {method} {path[:200]}"


class _Refused(Exception):
    """A request the meter answers itself: the status and why."""

    def __init__(self, status: int, why: str) -> None:
        super().__init__(why)
        self.status = status
        self.why = why


def _body_chunks(rfile: Any, length: int | None, cap: int) -> Iterator[bytes]:
    """The request body as it arrives, at most ``CHUNK_BYTES`` at a time, never more than
    ``cap`` bytes in all (``_Refused`` 413 once it would be): ``length`` bytes, or the
    chunked encoding's chunks when ``length`` is None."""
    seen = 0
    if length is not None:
        while seen < length:
            chunk = rfile.read1(min(CHUNK_BYTES, length - seen))
            if not chunk:
                raise OSError("the client closed the body short")
            seen += len(chunk)
            yield chunk
        return
    while True:
        line = rfile.readline(1024)
        try:
            size = int(line.split(b";")[0].strip() or b"x", 16)
        except ValueError:
            raise _Refused(400, "a malformed chunked body") from None
        if size == 0:
            for _ in range(64):  # trailers, up to the blank line
                if rfile.readline(1024) in (b"\r\n", b"\n", b""):
                    return
            raise _Refused(400, "a malformed chunked body")
        if seen + size > cap:
            raise _Refused(413, f"a body over {cap} bytes")
        left = size
        while left:
            chunk = rfile.read1(min(CHUNK_BYTES, left))
            if not chunk:
                raise OSError("the client closed the body short")
            left -= len(chunk)
            seen += len(chunk)
            yield chunk
        rfile.readline(16)


def _handler_for(meter: Meter) -> type:
    from http.server import BaseHTTPRequestHandler

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "loopkit-meter"
        timeout = IDLE_S  # any one read or write; the watchdog bounds a request's head

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def handle_one_request(self) -> None:
            # Wait (at most IDLE_S) for a request's first byte, then give its head HEAD_S
            # in all: a client sending a byte now and then is cut off all the same.
            try:
                if not self.rfile.peek(1):  # type: ignore[attr-defined]
                    self.close_connection = True
                    return
            except OSError:
                self.close_connection = True
                return
            meter.deadline(self.connection, HEAD_S)
            try:
                super().handle_one_request()
            finally:
                meter.deadline(self.connection, None)

        def handle_expect_100(self) -> bool:
            return True  # "100 Continue" only once the token and the endpoint are checked

        def do_POST(self) -> None:
            self._proxy()

        def do_GET(self) -> None:
            self._proxy()

        def do_PUT(self) -> None:
            self._proxy()

        def do_DELETE(self) -> None:
            self._proxy()

        def _reply(self, status: int, payload: Any, *, close: bool = False) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if close:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self.wfile.write(data)

        def _proxy(self) -> None:
            meter.begin()
            try:
                self._forward()
            finally:
                meter.end()

        def _length(self) -> int | None:
            """The body's announced length (None: chunked); ``_Refused`` when it cannot
            be read safely or is over the cap."""
            if "chunked" in (self.headers.get("transfer-encoding") or "").lower():
                return None
            raw = (self.headers.get("content-length") or "0").strip()
            if not raw.isdigit():
                raise _Refused(400, "a malformed Content-Length")
            if int(raw) > meter.max_body:
                raise _Refused(413, f"a body over {meter.max_body} bytes")
            return int(raw)

        def _check(self, parts: Any) -> int | None:
            """Everything the request's head decides, before any byte of its body is
            read: the token, the endpoint, the size. Returns the body's length."""
            why = meter.admits(presented_token(self.headers, parts.query))
            if why is not None:
                raise _Refused(401, why)
            why = endpoint(meter.upstream.dialect, self.command, parts.path, meter.prefix)
            if why is not None:
                raise _Refused(404, why)
            return self._length()

        def _refuse(self, refused: _Refused, entry: dict[str, Any], started: float) -> None:
            # A small body still on the wire is read and dropped, so the client reads the
            # answer rather than a reset; a larger one is never read: the connection closes.
            try:
                length = int(self.headers.get("content-length") or "x")
            except ValueError:
                length = -1
            if 0 < length <= DRAIN_BYTES and refused.status != 413:
                meter.deadline(self.connection, HEAD_S)
                self.rfile.read(length)
            self._reply(
                refused.status,
                refusal(meter.upstream.dialect, refused.status, f"loopkit meter: {refused.why}"),
                close=True,
            )
            meter.record(
                {
                    **entry,
                    "status": refused.status,
                    "refused": refused.why,
                    "latency_ms": _ms(started),
                }
            )

        def _forward(self) -> None:
            import http.client
            from urllib.parse import parse_qsl, urlencode, urlsplit

            started = time.monotonic()
            when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            parts = urlsplit(self.path)
            entry: dict[str, Any] = {"time": when, "method": self.command, "path": parts.path}
            try:
                length = self._check(parts)
            except _Refused as refused:
                self._refuse(refused, entry, started)
                return
            if "100-continue" in (self.headers.get("expect") or "").lower():
                self.send_response_only(100)
                self.end_headers()
            query = [
                (k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "key"
            ]
            target = parts.path + ("?" + urlencode(query) if query else "")
            headers = {k: v for k, v in self.headers.items() if k.lower() in FORWARDED_HEADERS}
            headers.update(_credential(meter.upstream))
            headers["Accept-Encoding"] = "identity"  # the usage must be readable
            meter.deadline(self.connection, BODY_S)
            try:
                try:
                    resp = self._send(target, headers, length)
                finally:
                    meter.deadline(self.connection, None)
            except _Refused as refused:
                meter.drop_connection()
                self._refuse(refused, entry, started)
                return
            except (OSError, http.client.HTTPException) as e:
                meter.drop_connection()
                self._reply(
                    502,
                    refusal(
                        meter.upstream.dialect, 502, f"loopkit meter: upstream unreachable: {e}"
                    ),
                    close=True,
                )
                meter.record(
                    {
                        **entry,
                        "status": 502,
                        "error": f"unreachable: {e}",
                        "latency_ms": _ms(started),
                    }
                )
                return
            first = _ms(started)
            sse = "text/event-stream" in (resp.getheader("content-type") or "")
            reader = _Reader(sse)
            self.send_response(resp.status, resp.reason)
            for k, v in resp.getheaders():
                if k.lower() not in HOP_BY_HOP:
                    self.send_header(k, v)
            answer_length = resp.getheader("content-length")
            chunked = answer_length is None
            if chunked:
                self.send_header("Transfer-Encoding", "chunked")
            else:
                self.send_header("Content-Length", answer_length or "0")
            self.end_headers()
            cut = None
            sent = 0
            try:
                while True:
                    chunk = resp.read1(65536)
                    if not chunk:
                        break
                    sent += len(chunk)
                    reader.feed(chunk)
                    if chunked:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    else:
                        self.wfile.write(chunk)
                    self.wfile.flush()
                if chunked:
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                elif (
                    answer_length is not None
                    and answer_length.isdigit()
                    and sent < int(answer_length)
                ):
                    raise http.client.IncompleteRead(b"", int(answer_length) - sent)
            except (OSError, http.client.HTTPException) as e:
                # The upstream cut its answer (or the worker went away): the worker sees
                # the cut too, its connection closed short of what was promised.
                cut = str(e) or type(e).__name__
                self.close_connection = True
                meter.drop_connection()
            if resp.will_close or cut:
                meter.drop_connection()
            usage = reader.finish()
            entry.update(
                status=resp.status,
                model=usage.model,
                input=usage.input,
                output=usage.output,
                cache_read=usage.cache_read,
                cache_write=usage.cache_write,
                stream=sse,
                ttfb_ms=first,
                latency_ms=_ms(started),
            )
            if usage.error or cut:
                entry["error"] = usage.error or f"cut: {cut}"
            meter.record(entry)

        def _send(self, target: str, headers: dict[str, str], length: int | None) -> Any:
            """Send the request upstream, its body streamed from the client as it comes.
            A body of up to ``REPLAYABLE_BYTES`` is held (bounded) so that a kept-alive
            upstream connection that went stale can be retried once on a fresh one; a
            larger one goes out on a fresh connection as it is read, never held whole."""
            import http.client

            body = _body_chunks(self.rfile, length, meter.max_body)
            head = bytearray()
            for chunk in body:
                head += chunk
                if len(head) > REPLAYABLE_BYTES:
                    break
            else:
                headers["Content-Length"] = str(len(head))
                for again in (True, False):
                    conn = meter.connection()
                    try:
                        conn.request(self.command, target, bytes(head), headers)
                        return conn.getresponse()
                    except (OSError, http.client.HTTPException):
                        meter.drop_connection()
                        if not again:
                            raise
            meter.drop_connection()
            conn = meter.connection()
            conn.putrequest(self.command, target, skip_accept_encoding=True)
            if length is not None:
                headers["Content-Length"] = str(length)
            else:
                headers["Transfer-Encoding"] = "chunked"
            for k, v in headers.items():
                conn.putheader(k, v)
            conn.endheaders()
            framed = length is None
            for chunk in _chain(bytes(head), body):
                conn.send(b"%x\r\n%s\r\n" % (len(chunk), chunk) if framed else chunk)
            if framed:
                conn.send(b"0\r\n\r\n")
            return conn.getresponse()

    return Handler


def _chain(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    yield first
    yield from rest


def _credential(upstream: Upstream) -> dict[str, str]:
    if upstream.dialect == "gemini":
        return {"x-goog-api-key": upstream.key}
    if upstream.dialect == "anthropic" and upstream.key_var not in upstream.api.bearer_vars:
        return {"x-api-key": upstream.key}
    return {"Authorization": f"Bearer {upstream.key}"}


def _ms(since: float) -> float:
    return round((time.monotonic() - since) * 1000, 2)
