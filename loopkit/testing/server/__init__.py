"""The scripted model server: the Anthropic Messages API, the OpenAI Responses and Chat
Completions APIs and the Gemini API answered from a script, on 127.0.0.1, with the
standard library alone.

    from loopkit.testing import ModelServer, script
    with ModelServer(script.from_data([{"text": "Hello"}])) as server:
        ...  # point ANTHROPIC_BASE_URL (claude) or a codex provider at server.url
        server.requests  # every request, decoded

The turn is chosen from the conversation in the request -- the number of assistant
turns it already holds -- so a client that re-sends a request (a retry, a resume, a
cut stream re-sent without ``stream``) gets the same turn again, and a resumed session
continues the script. On Chat Completions and Gemini, an assistant turn a client seeded
itself (text the script never says) counts for nothing, and a request without tools is a
side request answered without taking a turn. Fault counters (``error.times``, ``cut.times``) are kept per API,
conversation and turn for the server's lifetime. A request without ``stream`` gets one
JSON answer (Claude Code re-sends a cut stream that way).

The package: :mod:`~loopkit.testing.server.http` reads, records and routes requests and
sends the answers; :mod:`~loopkit.testing.server.anthropic`,
:mod:`~loopkit.testing.server.openai`, :mod:`~loopkit.testing.server.chat` and
:mod:`~loopkit.testing.server.gemini` are the wire formats, behind the small interface
in :mod:`~loopkit.testing.server.wire`; :mod:`~loopkit.testing.server.faults` breaks an
answer when the script says so. This module keeps the server's state: the script, the
request log and the fault counters.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loopkit.testing.script import Error, Script, Turn
from loopkit.testing.server import anthropic, chat, gemini, openai
from loopkit.testing.server.http import handler_for
from loopkit.testing.server.wire import DEFAULT_USAGE, Wire, client_cwd

if TYPE_CHECKING:
    from loopkit.sections import JSONObject

__all__ = ["DEFAULT_USAGE", "END_TEXT", "ModelServer", "Pick", "assistant_turns", "client_cwd"]

#: The text served past the script's last turn (``exhausted: end``).
END_TEXT = "End of script."


#: The wire format of each API the script names.
WIRES: dict[str, Wire] = {"anthropic": anthropic, "openai": openai, "chat": chat, "gemini": gemini}


def assistant_turns(api: str, body: Any, *, said: tuple[str, ...] = ()) -> int:
    """How many model turns the conversation in a request already holds."""
    if not isinstance(body, dict):
        return 0
    return WIRES[api].assistant_turns(body, said=said)


@dataclass(frozen=True)
class Pick:
    """The turn chosen for a request."""

    session: int  # which of the script's conversations (0 unless it has ``sessions``)
    index: int  # the turn's index: assistant turns already in the conversation
    turn: Turn
    exhausted: bool  # past the end of the script


class ModelServer:
    """A scripted model API on 127.0.0.1; ``start()`` serves in a background thread."""

    def __init__(
        self,
        script: Script,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        log: str | Path | None = None,
    ) -> None:
        self.script = script
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._requests: list[JSONObject] = []
        self._counters: dict[tuple[str, int, int, str], int] = {}
        self._sessions: dict[tuple[str, str], int] = {}
        self._stopping = threading.Event()
        self._serving = threading.Event()
        self._log_path = Path(log) if log is not None else None
        self._log_file = self._log_path.open("a", encoding="utf-8") if self._log_path else None
        self._started = time.monotonic()
        self._said = (*script.texts(), END_TEXT)
        self._httpd = ThreadingHTTPServer((host, port), handler_for(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------
    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def host(self) -> str:
        return str(self._httpd.server_address[0])

    @property
    def url(self) -> str:
        """The base URL: ``ANTHROPIC_BASE_URL`` as is; a Responses client adds ``/v1``."""
        return f"http://{self.host}:{self.port}"

    def start(self) -> ModelServer:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._httpd.serve_forever,
                kwargs={"poll_interval": 0.05},
                name="loopkit-model-server",
                daemon=True,
            )
            self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in the calling thread until ``stop()`` is called from another."""
        self._serving.set()
        try:
            self._httpd.serve_forever(poll_interval=0.05)
        finally:
            self._serving.clear()

    def stop(self) -> None:
        """Stop serving (waiting answers are released), close the port and the log."""
        self._stopping.set()
        if self._thread is not None or self._serving.is_set():
            self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        with self._lock:
            if self._log_file is not None:
                self._log_file.close()
                self._log_file = None

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the request log -------------------------------------------------------------
    @property
    def requests(self) -> list[JSONObject]:
        """Every request so far (a copy), oldest first."""
        with self._lock:
            return list(self._requests)

    def model_requests(self, api: str | None = None) -> list[JSONObject]:
        """The requests that asked for a model turn (optionally of one API)."""
        return [
            r
            for r in self.requests
            if r.get("turn") is not None and (api is None or r.get("api") == api)
        ]

    def record(self, entry: JSONObject) -> None:
        with self._lock:
            entry["seq"] = len(self._requests) + 1
            entry["t"] = round(time.monotonic() - self._started, 3)
            self._requests.append(entry)
            if self._log_file is not None:
                self._log_file.write(json.dumps(entry, separators=(",", ":")) + "\n")
                self._log_file.flush()
            self._arrived.notify_all()

    def wait_for(self, count: int = 1, *, api: str | None = None, timeout: float = 30.0) -> bool:
        """Block until ``count`` model requests (of ``api``) have arrived; False on timeout."""

        def enough() -> bool:
            return (
                sum(
                    1
                    for r in self._requests
                    if r.get("turn") is not None and (api is None or r.get("api") == api)
                )
                >= count
            )

        with self._arrived:
            return self._arrived.wait_for(enough, timeout=timeout)

    # -- the script ------------------------------------------------------------------
    def session_index(self, api: str, session: str | None) -> int:
        """Which of the script's conversations a client session is (0 without sessions)."""
        if not self.script.more or not session:
            return 0
        with self._lock:
            key = (api, session)
            if key not in self._sessions:
                self._sessions[key] = sum(1 for a, _ in self._sessions if a == api)
            return self._sessions[key]

    def pick(self, api: str, body: Any, *, session: str | None = None) -> Pick:
        """The turn that answers a request."""
        conversation = self.session_index(api, session)
        turns = self.script.turns(api, conversation)
        index = assistant_turns(api, body, said=self._said)
        if index < len(turns):
            return Pick(conversation, index, turns[index], exhausted=False)
        if self.script.exhausted == "repeat_last" and turns:
            return Pick(conversation, index, turns[-1], exhausted=True)
        if self.script.exhausted == "error":
            error = Error(status=400, message=f"the model script has no turn {index + 1}")
            return Pick(conversation, index, Turn(error=error), exhausted=True)
        return Pick(conversation, index, Turn(text=END_TEXT), exhausted=True)

    def take(self, api: str, pick: Pick, what: str, times: int | None) -> bool:
        """Count one fault of a turn; False once it has been served ``times`` times."""
        with self._lock:
            key = (api, pick.session, pick.index, what)
            n = self._counters.get(key, 0)
            if times is not None and n >= times:
                return False
            self._counters[key] = n + 1
            return True

    def wait(self, seconds: float) -> None:
        self._stopping.wait(seconds)
