"""A small ACP agent for tests: it does what its plan says, whatever its client answers.

    python3 tests/helpers/acp_agent.py '[{"ask": {...toolCall...}}, {"fs_write": {...}}]'
    python3 tests/helpers/acp_agent.py @plan.json

The real adapters obey a refusal; this one is the hostile worker they cannot be: it asks
permission, then writes anyway (``write_anyway``); it writes through the client
(``fs_write``), reads through it (``fs_read``), and says what each answer was in an
``agent_message_chunk`` (one JSON object a message), so the test reads every answer from
loopkit's stream. Steps: ``ask`` (a ``toolCall``), ``fs_write`` ({path, content}),
``fs_read`` ({path}), ``write_anyway`` ({path, content}: straight to disk), ``say`` (text),
``sleep`` (seconds). Supports ``loadSession`` (it remembers nothing: a load just answers).
"""

from __future__ import annotations

import itertools
import json
import sys
import time
from typing import Any

_ids = itertools.count(1000)


def send(msg: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **msg}) + "\n")
    sys.stdout.flush()


def receive() -> dict[str, Any]:
    line = sys.stdin.readline()
    if not line:
        sys.exit(0)
    msg: dict[str, Any] = json.loads(line)
    return msg


def call(method: str, params: dict[str, Any]) -> dict[str, Any]:
    rid = next(_ids)
    send({"id": rid, "method": method, "params": params})
    while True:
        msg = receive()
        if msg.get("id") == rid and "method" not in msg:
            return msg


def say(session: str, text: str) -> None:
    send(
        {
            "method": "session/update",
            "params": {
                "sessionId": session,
                "update": {
                    "sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": text},
                },
            },
        }
    )


def update(session: str, **fields: Any) -> None:
    send({"method": "session/update", "params": {"sessionId": session, "update": fields}})


def run(plan: list[dict[str, Any]], session: str) -> None:
    for n, step in enumerate(plan):
        if "ask" in step:
            tool = {"toolCallId": f"call-{n}", "status": "pending", **step["ask"]}
            update(session, sessionUpdate="tool_call", **tool)
            answer = call("session/request_permission", {
                "sessionId": session,
                "toolCall": tool,
                "options": [
                    {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
                    {"optionId": "no", "name": "Reject", "kind": "reject_once"},
                ],
            })  # fmt: skip
            say(session, json.dumps({"step": n, "answer": answer.get("result")}))
            allowed = (answer.get("result") or {}).get("outcome", {}).get("optionId") == "yes"
            update(
                session,
                sessionUpdate="tool_call_update",
                toolCallId=f"call-{n}",
                status="completed" if allowed else "failed",
            )
        elif "fs_write" in step:
            answer = call("fs/write_text_file", {"sessionId": session, **step["fs_write"]})
            say(session, json.dumps({"step": n, "answer": answer}))
        elif "fs_read" in step:
            answer = call("fs/read_text_file", {"sessionId": session, **step["fs_read"]})
            say(session, json.dumps({"step": n, "answer": answer}))
        elif "write_anyway" in step:
            with open(step["write_anyway"]["path"], "w", encoding="utf-8") as f:
                f.write(step["write_anyway"]["content"])
        elif "say" in step:
            say(session, step["say"])
        elif "sleep" in step:
            time.sleep(float(step["sleep"]))


def main() -> None:
    arg = sys.argv[1] if len(sys.argv) > 1 else "[]"
    if arg.startswith("@"):  # a plan too long for one argument: read from a file
        with open(arg[1:], encoding="utf-8") as f:
            arg = f.read()
    plan = json.loads(arg)
    while True:
        msg = receive()
        method, rid = msg.get("method"), msg.get("id")
        params = msg.get("params") or {}
        if method == "initialize":
            send(
                {
                    "id": rid,
                    "result": {"protocolVersion": 1, "agentCapabilities": {"loadSession": True}},
                }
            )
        elif method == "session/new":
            send({"id": rid, "result": {"sessionId": "test-session-1"}})
        elif method == "session/load":
            send({"id": rid, "result": None})
        elif method == "session/prompt":
            run(plan, params["sessionId"])
            send({"id": rid, "result": {"stopReason": "end_turn"}})
        elif rid is not None and method:
            send({"id": rid, "error": {"code": -32601, "message": f"no {method}"}})


if __name__ == "__main__":
    main()
