"""The egress mode: a sandbox with no network but its loopback, and one way out.

``sandbox.network: egress`` (the default for a metered worker in a sandbox;
``verify.network: egress`` for the checks). bwrap starts the run in a network namespace of
its own (``--unshare-net``: an unprivileged user needs user namespaces, as for any bwrap
sandbox), where there is only ``lo``: no route to any other address, no resolver. Inside,
``loopkit/boundary/bridge.py`` listens on ``127.0.0.1`` and relays each connection to a unix
socket bound in from outside:

- the meter's port, to the meter (the worker's base URL stays ``http://127.0.0.1:PORT``);
- ``127.0.0.1:3128`` (``HTTP_PROXY``, ``HTTPS_PROXY``), to the gate: an HTTP proxy outside
  that opens a ``CONNECT host:port`` tunnel, or forwards a plain ``http://`` request, only
  for the ``host:port`` pairs the contract lists (``sandbox.hosts``). Anything else gets a
  403 naming the host and the contract key, and is recorded; a refused name is never
  resolved, not even outside.

    way = Way.start(hosts=["pypi.example:443"], meter=meter)   # meter: optional
    argv, env = way.inside(argv, env)       # the bridge in front, the proxy variables set
    sandbox.wrap(argv, env=env, egress=way.folder, ...)
    ...
    way.stop(); record["egress"] = way.section()
"""

from __future__ import annotations

import shutil
import socket
import socketserver
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TypedDict
from urllib.parse import urlsplit

from loopkit.boundary import bridge, listeners

#: Where the sockets' folder appears inside the sandbox (under its private /tmp).


class EgressSection(TypedDict, total=False):
    """What the egress gate saw (``run.sandbox.egress``): the hosts allowed, and those
    used and refused, with counts."""

    mode: str
    allowed: list[str]
    used: dict[str, int]
    refused: dict[str, int]


INNER = "/tmp/.loopkit-egress"
PROXY_PORT = 3128
MODES = ("egress",)
#: A proxy request's head: at most this many bytes, within this many seconds.
MAX_HEAD_BYTES = 16 << 10
HEAD_S = 20.0
CONNECT_S = 30.0
#: Connections through the gate at once; one more is closed as it comes.
MAX_CONNECTIONS = 64
MAX_LISTED = 50

TYPE_CHECKING = False
if TYPE_CHECKING:
    from loopkit.boundary.meter import Meter


def host_port(text: str, default_port: int | None = None) -> str | None:
    """``host:port`` in lower case, or None when ``text`` is not one."""
    text = text.strip().lower()
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = text, str(default_port or "")
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        return None
    if any(c.isspace() or c in "/@?#" for c in host):
        return None
    return f"{host}:{int(port)}"


class Gate:
    """The HTTP proxy outside: tunnels and plain requests to the allowed hosts only."""

    def __init__(self, hosts: Sequence[str], path: Path) -> None:
        self.allowed = {h for h in (host_port(x) for x in hosts) if h}
        self.refused: dict[str, int] = {}
        self.used: dict[str, int] = {}
        self._lock = threading.Lock()
        gate = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                gate._handle(self.request)

        Server = listeners.capped(socketserver.UnixStreamServer, MAX_CONNECTIONS, self._lock)
        self._server = Server(str(path), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _note(self, table: dict[str, int], target: str) -> None:
        with self._lock:
            if target in table or len(table) < MAX_LISTED:
                table[target] = table.get(target, 0) + 1

    def _handle(self, conn: socket.socket) -> None:
        conn.settimeout(HEAD_S)
        head = b""
        try:
            while b"\r\n\r\n" not in head:
                data = conn.recv(4096)
                if not data or len(head) > MAX_HEAD_BYTES:
                    return
                head += data
        except OSError:
            return
        raw, _, rest = head.partition(b"\r\n\r\n")
        lines = raw.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3:
            return _answer(conn, 400, "not an HTTP proxy request")
        method, target, version = parts
        if method == "CONNECT":
            where = host_port(target)
        else:
            url = urlsplit(target)
            where = host_port(url.netloc, 80) if url.scheme == "http" else None
        if where is None:
            return _answer(conn, 400, f"loopkit egress: cannot read a host in {target[:200]!r}")
        if where not in self.allowed:
            self._note(self.refused, where)
            return _answer(
                conn,
                403,
                f"loopkit egress: {where} is not allowed (the contract's sandbox.hosts)",
            )
        host, _, port = where.rpartition(":")
        try:
            out = socket.create_connection((host, int(port)), timeout=CONNECT_S)
        except OSError as e:
            return _answer(conn, 502, f"loopkit egress: {where} unreachable: {e}")
        self._note(self.used, where)
        conn.settimeout(None)
        out.settimeout(None)
        if method == "CONNECT":
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            if rest:
                out.sendall(rest)
        else:
            url = urlsplit(target)
            path = (url.path or "/") + (f"?{url.query}" if url.query else "")
            kept = [
                line
                for line in lines[1:]
                if not line.lower().startswith(("proxy-", "connection:", "keep-alive:"))
            ]
            first = f"{method} {path} {version}\r\n"
            out.sendall(
                (first + "\r\n".join([*kept, "Connection: close"]) + "\r\n\r\n").encode("latin-1")
                + rest
            )
        back = threading.Thread(target=bridge.pump, args=(out, conn), daemon=True)
        back.start()
        bridge.pump(conn, out)
        back.join()
        out.close()

    def section(self) -> EgressSection:
        with self._lock:
            return {
                "allowed": sorted(self.allowed),
                "used": dict(sorted(self.used.items())),
                "refused": dict(sorted(self.refused.items())),
            }


def _answer(conn: socket.socket, status: int, message: str) -> None:
    reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[status]
    body = (message + "\n").encode()
    try:
        conn.sendall(
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
    except OSError:
        pass


class Way:
    """One run's way out of a sandbox without a network: the sockets' folder, the gate,
    and the loopback ports the bridge inside listens on."""

    def __init__(self, folder: Path, gate: Gate, forwards: dict[int, str]) -> None:
        self.folder = folder
        self.gate = gate
        self.forwards = forwards  # port inside -> socket name in the folder
        self.proxy_port = next(p for p, name in forwards.items() if name == "gate.sock")

    @classmethod
    def start(cls, hosts: Sequence[str], meter: Meter | None = None) -> Way:
        folder = Path(tempfile.mkdtemp(prefix="loopkit-egress-"))
        gate = Gate(hosts, folder / "gate.sock")
        forwards: dict[int, str] = {}
        if meter is not None:
            meter.listen(folder / "meter.sock")
            forwards[meter.port] = "meter.sock"
        proxy = PROXY_PORT if PROXY_PORT not in forwards else PROXY_PORT + 1
        forwards[proxy] = "gate.sock"
        return cls(folder, gate, forwards)

    def stop(self) -> None:
        self.gate.stop()
        shutil.rmtree(self.folder, ignore_errors=True)

    def inside(
        self, argv: Sequence[str], env: Mapping[str, str]
    ) -> tuple[list[str], dict[str, str]]:
        """``argv`` behind the bridge, and ``env`` with the proxy variables pointing at
        the gate (the loopback itself goes direct)."""
        bridge = str(Path(__file__).with_name("bridge.py"))
        pairs = [f"{port}={INNER}/{name}" for port, name in self.forwards.items()]
        out = dict(env)
        proxy = f"http://127.0.0.1:{self.proxy_port}"
        for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
            out[var] = proxy
        for var in ("NO_PROXY", "no_proxy"):
            out[var] = "127.0.0.1,localhost,::1"
        out.pop("ALL_PROXY", None)
        out.pop("all_proxy", None)
        return [sys.executable, "-I", "-S", bridge, *pairs, "--", *argv], out

    def section(self) -> EgressSection:
        """The record: the mode, the hosts allowed, used and refused (with counts)."""
        return {"mode": "egress", **self.gate.section()}


def refused_text(refused: Mapping[str, int]) -> str:
    """``a:443 (3×), b:80`` -- the hosts the egress gate refused, most refused first."""
    ranked = sorted(refused.items(), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{h} ({n}×)" if n > 1 else h for h, n in ranked)
