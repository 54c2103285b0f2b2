"""The ACP client lk-invoke starts for the ``acp`` provider: ``python -m loopkit.worker.acp``.

Usage:  python -m loopkit.worker.acp            (the run's settings in $LOOPKIT_ACP_CONFIG)

Input:  a JSON file: ``agent`` (argv), ``cwd``, ``prompt``, ``resume`` (a session id),
        ``max_turns``, ``read_only``, ``scope`` (the contract's), ``control`` (the files
        that steer the loop, repository-relative).
Output: one JSON line per event on stdout, for ``loopkit.worker.providers.acp``:
        ``{"acp": "in", "msg": …}`` every message the agent sent (``"re"`` names the
        request a response answers), ``{"acp": "gate", …}`` every decision on a
        permission request or a file write, ``{"acp": "turn", "n": N}`` each model turn,
        ``{"acp": "end", "stop_reason": …, "stopped": …, "error": …}`` once.
Exit:   0 the prompt turn ended (whatever its stopReason), 1 the agent failed (it
        refused a request, exited early), 3 bad settings, 143 terminated.

The protocol (JSON-RPC 2.0, one message a line on the agent's stdio): ``initialize``
(the client offers ``fs.readTextFile`` and ``fs.writeTextFile``, no terminal: commands
run in the agent's own process, inside loopkit's sandbox), ``session/new`` -- or
``session/load`` to resume, when the agent says ``loadSession`` -- and one
``session/prompt``. Permission requests are answered from the scope (``gate``); past
``max_turns`` model turns, or on SIGTERM, the client sends ``session/cancel``, answers
what is pending as cancelled, and ends the agent if it has not ended its turn shortly.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from typing import IO, Any

from loopkit.worker.acp.gate import Escape, Gate, Room, changed_paths, window

TYPE_CHECKING = False
if TYPE_CHECKING:
    from loopkit.worker.providers.base import JsonObject

PROTOCOL_VERSION = 1
#: Seconds an agent has to end its turn after ``session/cancel`` before it is ended.
CANCEL_GRACE_S = 3.0
#: Longest text of one message kept in the stream (an agent's command list can be large).
MAX_LINE = 200_000
JSON_RPC_NO_METHOD = -32601
JSON_RPC_INVALID = -32602
#: Errors loopkit answers a refused file request with (ACP leaves codes to the client).
REFUSED = -32000


class Client:
    def __init__(self, config: Mapping[str, Any], out: IO[str]) -> None:
        self.config = config
        self.out = out
        self.cwd = str(config["cwd"])
        self.gate = Gate(
            self.cwd,
            config.get("scope"),
            control=config.get("control") or (),
            read_only=bool(config.get("read_only")),
        )
        self.room = Room(self.cwd)
        self.inbox: queue.Queue[JsonObject | None] = queue.Queue()
        self.next_id = 0
        self.waiting: dict[int, str] = {}
        self.pending_permissions: list[Any] = []
        self.session: str | None = None
        self.turns = 0
        self.fresh_turn = True
        self.stopped: str | None = None
        self.cancel_sent_at: float | None = None
        self.agent: subprocess.Popen[bytes] | None = None
        self.lock = threading.Lock()

    # ------------------------------------------------------------------ the wire

    def emit(self, line: JsonObject) -> None:
        text = json.dumps(line, ensure_ascii=False, separators=(",", ":"))
        if len(text) > MAX_LINE and line.get("acp") == "in":
            clipped = {"acp": "in", "clipped": len(text)}
            msg = line.get("msg") or {}
            clipped["msg"] = {k: msg[k] for k in ("id", "method") if k in msg}
            text = json.dumps(clipped, separators=(",", ":"))
        with self.lock:
            self.out.write(text + "\n")
            self.out.flush()

    def send(self, message: JsonObject) -> None:
        assert self.agent is not None and self.agent.stdin is not None
        data = json.dumps({"jsonrpc": "2.0", **message}, separators=(",", ":")) + "\n"
        try:
            self.agent.stdin.write(data.encode("utf-8"))
            self.agent.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # the agent is gone: its exit is what the run reports

    def request(self, method: str, params: JsonObject) -> int:
        self.next_id += 1
        self.waiting[self.next_id] = method
        self.send({"id": self.next_id, "method": method, "params": params})
        return self.next_id

    def reply(self, rid: Any, result: Any = None, *, error: tuple[int, str] | None = None) -> None:
        if error is not None:
            self.send({"id": rid, "error": {"code": error[0], "message": error[1]}})
        else:
            self.send({"id": rid, "result": result})

    def _read(self, stream: IO[bytes]) -> None:
        for raw in stream:
            try:
                msg = json.loads(raw)
            except ValueError:
                self.emit({"acp": "noise", "text": raw.decode("utf-8", "replace")[:2000]})
                continue
            if isinstance(msg, dict):
                self.inbox.put(msg)
        self.inbox.put(None)

    # ------------------------------------------------------------------ the run

    def run(self) -> int:
        argv = [str(a) for a in self.config["agent"]]
        self.emit({"acp": "start", "agent": argv, "cwd": self.cwd})
        try:
            self.agent = subprocess.Popen(
                argv, cwd=self.cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE
            )
        except OSError as e:
            return self.end(None, error=f"cannot start the agent {argv[0]}: {e.strerror or e}")
        assert self.agent.stdout is not None
        threading.Thread(target=self._read, args=(self.agent.stdout,), daemon=True).start()
        init = self.call(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "clientCapabilities": {
                    "fs": {"readTextFile": True, "writeTextFile": True},
                    "terminal": False,
                },
                "clientInfo": {"name": "loopkit", "version": "1"},
            },
        )
        if isinstance(init, str):
            return self.end(None, error=f"initialize: {init}")
        caps = init.get("agentCapabilities") if isinstance(init, dict) else None
        resume = self.config.get("resume")
        if resume:
            if not (isinstance(caps, dict) and caps.get("loadSession")):
                return self.end(None, error="the agent cannot resume a session (no loadSession)")
            self.session = str(resume)
            got = self.call(
                "session/load", {"sessionId": self.session, "cwd": self.cwd, "mcpServers": []}
            )
            if isinstance(got, str):
                return self.end(None, error=f"session/load: {got}")
        else:
            got = self.call("session/new", {"cwd": self.cwd, "mcpServers": []})
            if isinstance(got, str):
                return self.end(None, error=f"session/new: {got}")
            sid = got.get("sessionId") if isinstance(got, dict) else None
            if not isinstance(sid, str):
                return self.end(None, error="session/new: no sessionId in the answer")
            self.session = sid
        self.emit({"acp": "session", "sessionId": self.session, "resumed": bool(resume)})
        model = self.config.get("model")
        if isinstance(model, str) and model:
            # ACP's session/set_model is not stable yet: an agent without it keeps its own
            # model, and the run says which one it reported.
            chosen = self.call("session/set_model", {"sessionId": self.session, "modelId": model})
            self.emit(
                {
                    "acp": "model",
                    "modelId": model,
                    "error": chosen if isinstance(chosen, str) else None,
                }
            )
        prompt = [{"type": "text", "text": str(self.config.get("prompt") or "")}]
        done = self.call("session/prompt", {"sessionId": self.session, "prompt": prompt})
        if isinstance(done, str):
            return self.end(None, error=f"session/prompt: {done}")
        reason = done.get("stopReason") if isinstance(done, dict) else None
        return self.end(reason if isinstance(reason, str) else None)

    def call(self, method: str, params: JsonObject) -> Any:
        """Send a request and serve the agent until its answer: the result, or the error's
        text (a str) when the agent answered with one or ended first."""
        rid = self.request(method, params)
        while True:
            if self.stopped and self.cancel_sent_at is None:
                self.cancel()
            if (
                self.cancel_sent_at is not None
                and time.monotonic() - self.cancel_sent_at > CANCEL_GRACE_S
            ):
                return "the agent did not end its turn after session/cancel"
            try:
                msg = self.inbox.get(timeout=0.1)
            except queue.Empty:
                continue
            if msg is None:
                code = self.agent.wait() if self.agent is not None else None
                return f"the agent exited ({code}) before it answered"
            if "method" in msg:
                self.emit({"acp": "in", "msg": msg})
                self.serve(msg)
                continue
            mid = msg.get("id")
            method_of = self.waiting.pop(mid, None) if isinstance(mid, int) else None
            self.emit({"acp": "in", "re": method_of, "msg": msg})
            if mid != rid:
                continue
            if "error" in msg:
                return describe_error(msg.get("error"))
            return msg.get("result")

    def serve(self, msg: JsonObject) -> None:
        method = msg.get("method")
        params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
        assert isinstance(params, dict)
        rid = msg.get("id")
        if method == "session/update":
            self.observe(params.get("update"))
            return
        if rid is None:
            return  # a notification loopkit has no use for
        if method == "session/request_permission":
            self.permission(rid, params)
        elif method == "fs/write_text_file":
            self.write_file(rid, params)
        elif method == "fs/read_text_file":
            self.read_file(rid, params)
        else:
            self.reply(rid, error=(JSON_RPC_NO_METHOD, f"loopkit does not offer {method}"))

    def observe(self, update: Any) -> None:
        """Count model turns: a turn begins with the first message or tool call after the
        start or after a tool call ended."""
        if not isinstance(update, dict):
            return
        kind = update.get("sessionUpdate")
        if kind in ("agent_message_chunk", "agent_thought_chunk", "tool_call"):
            if self.fresh_turn:
                self.fresh_turn = False
                self.turns += 1
                self.emit({"acp": "turn", "n": self.turns})
                cap = self.config.get("max_turns")
                if isinstance(cap, int) and self.turns > cap and not self.stopped:
                    self.stopped = "max_turns"
        elif kind == "tool_call_update" and update.get("status") in ("completed", "failed"):
            self.fresh_turn = True

    def permission(self, rid: Any, params: JsonObject) -> None:
        call = params.get("toolCall") if isinstance(params.get("toolCall"), dict) else {}
        assert isinstance(call, dict)
        offered = params.get("options")
        options = [o for o in offered if isinstance(o, dict)] if isinstance(offered, list) else []
        if self.stopped:
            self.reply(rid, {"outcome": {"outcome": "cancelled"}})
            return
        verdict = self.gate.tool(call)
        wanted = (
            ("allow_once", "allow_always") if verdict.allowed else ("reject_once", "reject_always")
        )
        chosen = next((o for kind in wanted for o in options if o.get("kind") == kind), None)
        self.emit(
            {
                "acp": "gate",
                "via": "permission",
                "toolCallId": call.get("toolCallId"),
                "title": call.get("title"),
                "kind": call.get("kind"),
                "paths": changed_paths(call)[:20],
                "allowed": verdict.allowed,
                "rule": verdict.rule,
                "path": verdict.path,
                "option": chosen.get("optionId") if chosen else None,
            }
        )
        if chosen is None:
            self.reply(rid, {"outcome": {"outcome": "cancelled"}})
        else:
            self.reply(
                rid, {"outcome": {"outcome": "selected", "optionId": chosen.get("optionId")}}
            )

    def write_file(self, rid: Any, params: JsonObject) -> None:
        path, content = params.get("path"), params.get("content")
        if not isinstance(path, str) or not isinstance(content, str):
            self.reply(rid, error=(JSON_RPC_INVALID, "fs/write_text_file needs path and content"))
            return
        verdict = self.gate.write(path)
        error = None
        if verdict.allowed and verdict.path is not None:
            try:
                self.room.write(verdict.path, content)
            except Escape:
                verdict.allowed, verdict.rule = False, "symlink"
            except OSError as e:
                error = f"{path}: {e.strerror or e}"
        self.emit(
            {
                "acp": "gate",
                "via": "fs/write_text_file",
                "path": verdict.path or path,
                "allowed": verdict.allowed,
                "rule": verdict.rule,
                "error": error,
            }
        )
        if not verdict.allowed:
            self.reply(rid, error=(REFUSED, refusal(verdict.rule, verdict.path or path)))
        elif error is not None:
            self.reply(rid, error=(REFUSED, error))
        else:
            self.reply(rid, None)

    def read_file(self, rid: Any, params: JsonObject) -> None:
        path = params.get("path")
        rel = self.gate.relative(path) if isinstance(path, str) else None
        if rel is None:
            self.reply(rid, error=(REFUSED, f"loopkit refused: {path} is outside the repository"))
            return
        try:
            text = self.room.read(rel)
        except Escape:
            self.reply(rid, error=(REFUSED, f"loopkit refused: {path} leads out of the repository"))
            return
        except OSError as e:
            self.reply(rid, error=(REFUSED, f"{path}: {e.strerror or e}"))
            return
        self.reply(rid, {"content": window(text, params.get("line"), params.get("limit"))})

    def cancel(self) -> None:
        self.cancel_sent_at = time.monotonic()
        self.emit({"acp": "cancel", "reason": self.stopped})
        if self.session is not None:
            self.send({"method": "session/cancel", "params": {"sessionId": self.session}})

    def end(self, stop_reason: str | None, *, error: str | None = None) -> int:
        self.emit(
            {"acp": "end", "stop_reason": stop_reason, "stopped": self.stopped, "error": error}
        )
        agent = self.agent
        if agent is not None:
            if agent.stdin is not None:
                try:
                    agent.stdin.close()
                except OSError:
                    pass
            try:
                agent.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                agent.terminate()
                try:
                    agent.wait(timeout=2.0)
                except subprocess.TimeoutExpired:
                    agent.kill()
                    agent.wait()
        return 0 if stop_reason is not None else 1


def refusal(rule: str | None, path: str) -> str:
    why = {
        "outside_writable": "is outside the contract's writable scope",
        "protected": "is protected by the contract",
        "add_only": "is a file of the base under add_only: new files only",
        "control_file": "steers the loop (contract, task list, memory)",
        "outside_repository": "is outside the repository",
        "git_folder": "is inside .git",
        "read_only": "cannot be written: this run is read-only",
        "symlink": "leads out of the repository through a symlink",
    }.get(rule or "", "is out of scope")
    return f"loopkit refused the write: {path} {why}"


def describe_error(error: Any) -> str:
    if not isinstance(error, dict):
        return str(error)
    text = str(error.get("message") or "error")
    data = error.get("data")
    if isinstance(data, dict) and (data.get("details") or data.get("message")):
        text += f": {data.get('details') or data.get('message')}"
    elif isinstance(data, str) and data:
        text += f": {data}"
    return text


def main() -> int:
    path = os.environ.get("LOOPKIT_ACP_CONFIG")
    try:
        if not path:
            raise ValueError("LOOPKIT_ACP_CONFIG is not set")
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
        if not isinstance(config, dict) or not config.get("agent") or not config.get("cwd"):
            raise ValueError("expected an object with agent and cwd")
    except (OSError, ValueError) as e:
        print(f"loopkit acp client: {path}: {e}", file=sys.stderr)
        return 3
    client = Client(config, sys.stdout)

    def terminated(signum: int, frame: Any) -> None:
        client.stopped = client.stopped or "cancelled"

    signal.signal(signal.SIGTERM, terminated)
    signal.signal(signal.SIGINT, terminated)
    return client.run()
