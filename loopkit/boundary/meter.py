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

The rooms beside it: ``dialects`` (which variables a provider's CLI reads for its key
and base URL, declared once per provider as an ``Api``; each dialect's endpoints, headers,
where the key goes, what a refusal looks like), ``usage`` (what an answer used, the run
record's section), ``prices`` (the dated price table). This module is the proxy.

    meter = Meter.start(upstream="https://api.anthropic.com", key=real, dialect="anthropic",
                        ttl_s=960, log=folder / "meter.jsonl")
    env["ANTHROPIC_BASE_URL"], env["ANTHROPIC_API_KEY"] = meter.url, meter.token
    ...                                             # the worker runs
    meter.stop(); run["meter"] = meter.section()
"""

from __future__ import annotations

import hmac
import http.client
import json
import secrets
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from loopkit.boundary import listeners
from loopkit.boundary.dialects import (
    FORWARDED_HEADERS,
    Upstream,
    credential,
    endpoint,
    presented_token,
    refusal,
)
from loopkit.boundary.prices import Prices
from loopkit.boundary.usage import Exchange, MeterSection, Reader, is_transient, summarize

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
#: The token outlives the worker's timeout by this much (a slow last request).
TTL_MARGIN_S = 120.0
UPSTREAM_TIMEOUT_S = 600.0
TOKEN_PREFIX = "lk-run-"


# --------------------------------------------------------------------------- the proxy


class _Server:
    """The meter's listeners: threads per connection, at most ``MAX_CONNECTIONS`` open."""

    @staticmethod
    def make(meter: Meter, address: str | tuple[str, int], cap: int) -> Any:
        base: type = HTTPServer if isinstance(address, tuple) else socketserver.UnixStreamServer

        class Server(listeners.capped(base, cap, meter._lock)):  # type: ignore[misc]
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
        self.upstream = upstream
        self.token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        self.expires = time.time() + ttl_s
        self.log = log
        self.max_body = max_body
        #: The person's credentials the worker did not get, and those it got raw.
        self.withheld: list[str] = []
        self.unmetered: list[str] = []
        self.records: list[Exchange] = []
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
        if not presented:
            return "no token"
        if not hmac.compare_digest(presented.encode(), self.token.encode()):
            return "wrong token"
        if time.time() > self.expires:
            return "token expired"
        return None

    def connection(self) -> http.client.HTTPConnection:
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

    def record(self, entry: Exchange) -> None:
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
    def section(self, prices: Prices | None = None) -> MeterSection:
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


class _Handler(BaseHTTPRequestHandler):
    """One connection of a worker to its meter (``meter``: the run's)."""

    meter: Meter
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
        self.meter.deadline(self.connection, HEAD_S)
        try:
            super().handle_one_request()
        finally:
            self.meter.deadline(self.connection, None)

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
        self.meter.begin()
        try:
            self._forward()
        finally:
            self.meter.end()

    def _length(self) -> int | None:
        """The body's announced length (None: chunked); ``_Refused`` when it cannot
        be read safely or is over the cap."""
        if "chunked" in (self.headers.get("transfer-encoding") or "").lower():
            return None
        raw = (self.headers.get("content-length") or "0").strip()
        if not raw.isdigit():
            raise _Refused(400, "a malformed Content-Length")
        if int(raw) > self.meter.max_body:
            raise _Refused(413, f"a body over {self.meter.max_body} bytes")
        return int(raw)

    def _check(self, parts: Any) -> int | None:
        """Everything the request's head decides, before any byte of its body is
        read: the token, the endpoint, the size. Returns the body's length."""
        why = self.meter.admits(presented_token(self.headers, parts.query))
        if why is not None:
            raise _Refused(401, why)
        why = endpoint(self.meter.upstream.dialect, self.command, parts.path, self.meter.prefix)
        if why is not None:
            raise _Refused(404, why)
        return self._length()

    def _refuse(self, refused: _Refused, entry: Exchange, started: float) -> None:
        # A small body still on the wire is read and dropped, so the client reads the
        # answer rather than a reset; a larger one is never read: the connection closes.
        try:
            length = int(self.headers.get("content-length") or "x")
        except ValueError:
            length = -1
        if 0 < length <= DRAIN_BYTES and refused.status != 413:
            self.meter.deadline(self.connection, HEAD_S)
            self.rfile.read(length)
        self._reply(
            refused.status,
            refusal(self.meter.upstream.dialect, refused.status, f"loopkit meter: {refused.why}"),
            close=True,
        )
        self.meter.record(
            {
                **entry,
                "status": refused.status,
                "refused": refused.why,
                "latency_ms": _ms(started),
            }
        )

    def _forward(self) -> None:
        started = time.monotonic()
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        parts = urlsplit(self.path)
        entry: Exchange = {"time": when, "method": self.command, "path": parts.path}
        try:
            length = self._check(parts)
        except _Refused as refused:
            self._refuse(refused, entry, started)
            return
        if "100-continue" in (self.headers.get("expect") or "").lower():
            self.send_response_only(100)
            self.end_headers()
        query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "key"]
        target = parts.path + ("?" + urlencode(query) if query else "")
        headers = {k: v for k, v in self.headers.items() if k.lower() in FORWARDED_HEADERS}
        headers.update(credential(self.meter.upstream))
        headers["Accept-Encoding"] = "identity"  # the usage must be readable
        self.meter.deadline(self.connection, BODY_S)
        try:
            try:
                resp = self._send(target, headers, length)
            finally:
                self.meter.deadline(self.connection, None)
        except _Refused as refused:
            self.meter.drop_connection()
            self._refuse(refused, entry, started)
            return
        except (OSError, http.client.HTTPException) as e:
            self.meter.drop_connection()
            self._reply(
                502,
                refusal(
                    self.meter.upstream.dialect, 502, f"loopkit meter: upstream unreachable: {e}"
                ),
                close=True,
            )
            self.meter.record(
                {
                    **entry,
                    "status": 502,
                    "error": f"unreachable: {e}",
                    "latency_ms": _ms(started),
                }
            )
            return
        self._relay(resp, entry, started)

    def _relay(self, resp: http.client.HTTPResponse, entry: Exchange, started: float) -> None:
        """Stream the upstream's answer back as it arrives, reading its usage on the way,
        and record the request."""
        first = _ms(started)
        sse = "text/event-stream" in (resp.getheader("content-type") or "")
        reader = Reader(sse)
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
                answer_length is not None and answer_length.isdigit() and sent < int(answer_length)
            ):
                raise http.client.IncompleteRead(b"", int(answer_length) - sent)
        except (OSError, http.client.HTTPException) as e:
            # The upstream cut its answer (or the worker went away): the worker sees
            # the cut too, its connection closed short of what was promised.
            cut = str(e) or type(e).__name__
            self.close_connection = True
            self.meter.drop_connection()
        if resp.will_close or cut:
            self.meter.drop_connection()
        usage = reader.finish()
        entry.update(
            {
                "status": resp.status,
                "model": usage.model,
                "input": usage.input,
                "output": usage.output,
                "cache_read": usage.cache_read,
                "cache_write": usage.cache_write,
                "stream": sse,
                "ttfb_ms": first,
                "latency_ms": _ms(started),
            }
        )
        if usage.error or cut:
            entry["error"] = usage.error or f"cut: {cut}"
        self.meter.record(entry)

    def _send(self, target: str, headers: dict[str, str], length: int | None) -> Any:
        """Send the request upstream, its body streamed from the client as it comes.
        A body of up to ``REPLAYABLE_BYTES`` is held (bounded) so that a kept-alive
        upstream connection that went stale can be retried once on a fresh one; a
        larger one goes out on a fresh connection as it is read, never held whole."""
        body = _body_chunks(self.rfile, length, self.meter.max_body)
        head = bytearray()
        for chunk in body:
            head += chunk
            if len(head) > REPLAYABLE_BYTES:
                break
        else:
            headers["Content-Length"] = str(len(head))
            for again in (True, False):
                conn = self.meter.connection()
                try:
                    conn.request(self.command, target, bytes(head), headers)
                    return conn.getresponse()
                except (OSError, http.client.HTTPException):
                    self.meter.drop_connection()
                    if not again:
                        raise
        self.meter.drop_connection()
        conn = self.meter.connection()
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


def _handler_for(meter: Meter) -> type[_Handler]:
    """The handler class of ``meter``'s connections."""
    return type("Handler", (_Handler,), {"meter": meter})


def _chain(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    yield first
    yield from rest


def _ms(since: float) -> float:
    return round((time.monotonic() - since) * 1000, 2)
