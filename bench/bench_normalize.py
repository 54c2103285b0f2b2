"""Normalizing a worker stream: loopkit's parser against bare ``json.loads`` per line.

A 100 MB claude stream-json transcript (and a codex, opencode, pi and copilot one; name
providers as arguments to bench some) is built from the shapes
of real lines (tests/golden): per step a message, a Read of a 200-line module and its
result, a Write of it (one step in seven fails), so most bytes are file-sized tool inputs
and results, as in a real run. Targets: parsing it into a run
record costs at most 1.5x reading it with ``json.loads`` line by line, and memory stays
flat in the stream's size (peak RSS of a 25 MB and a 100 MB run, each in a fresh process).
Times are this process's CPU time, best of 7 alternating rounds; the ratio is the median of
the 7 back-to-back pair ratios (steadier than either time on a shared machine).
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

TARGET_RATIO = 1.5
FLAT_MB = 25.0  # the 100 MB run may use at most this much more memory than the 25 MB one
BIG_MB = 100
SMALL_MB = 25
#: Lines of a source file read or written (about 9 KB: an ordinary module).
LINES = 200


def _claude_block(i: int) -> list[str]:
    body = "".join(f"    line {n} of a source file, some code = {n * i}\n" for n in range(LINES))
    tid = f"toolu_{i:08d}"
    rid = f"toolu_r{i:08d}"
    out = [
        {
            "type": "assistant",
            "message": {
                "id": f"msg_{i}",
                "model": "claude-x",
                "content": [{"type": "text", "text": f"Step {i}: reading and editing the module."}],
            },
        },
        {
            "type": "assistant",
            "message": {
                "id": f"msg_{i}",
                "model": "claude-x",
                "content": [
                    {
                        "type": "tool_use",
                        "id": rid,
                        "name": "Read",
                        "input": {"file_path": f"/repo/src/mod{i % 50}.py"},
                    }
                ],
            },
        },
        {
            "type": "user",
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": rid, "content": body}],
            },
            "tool_use_result": {"type": "text", "file": {"content": body}},
        },
        {
            "type": "assistant",
            "message": {
                "id": f"msg_{i}b",
                "model": "claude-x",
                "content": [
                    {
                        "type": "tool_use",
                        "id": tid,
                        "name": "Write",
                        "input": {"file_path": f"/repo/src/mod{i % 50}.py", "content": body},
                    }
                ],
            },
        },
        {
            "type": "user",
            "message": {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": tid,
                        "content": "File written",
                        "is_error": i % 7 == 0,
                    }
                ],
            },
        },
    ]
    return [json.dumps(o, separators=(",", ":")) + "\n" for o in out]


def _codex_block(i: int) -> list[str]:
    body = "".join(f"    line {n} of a source file, some code = {n * i}\n" for n in range(LINES))
    cmd = {
        "id": f"item_{i}",
        "type": "command_execution",
        "command": f"/bin/bash -lc 'cat src/mod{i % 50}.py'",
        "aggregated_output": "",
        "exit_code": None,
        "status": "in_progress",
    }
    done = dict(
        cmd,
        aggregated_output=body,
        exit_code=0 if i % 7 else 1,
        status="completed" if i % 7 else "failed",
    )
    out = [
        {
            "type": "item.completed",
            "item": {
                "id": f"m{i}",
                "type": "agent_message",
                "text": f"Step {i}: reading the module.",
            },
        },
        {"type": "item.started", "item": cmd},
        {"type": "item.completed", "item": done},
        {
            "type": "item.completed",
            "item": {
                "id": f"p{i}",
                "type": "file_change",
                "status": "completed",
                "changes": [{"path": f"/repo/src/mod{i % 50}.py", "kind": "update"}],
            },
        },
    ]
    return [json.dumps(o, separators=(",", ":")) + "\n" for o in out]


def _opencode_block(i: int) -> list[str]:
    body = "".join(f"    line {n} of a source file, some code = {n * i}\n" for n in range(LINES))
    sid = "ses_bench"
    path = f"/repo/src/mod{i % 50}.py"

    def ev(t: str, part: dict[str, object]) -> dict[str, object]:
        return {"type": t, "timestamp": i, "sessionID": sid, "part": part}

    tool = {"status": "completed", "input": {"command": f"cat {path}"}, "output": body}
    tool["metadata"] = {"exit": 0 if i % 7 else 1}
    out = [
        ev("step_start", {"type": "step-start"}),
        ev("text", {"type": "text", "text": f"Step {i}: reading the module."}),
        ev("tool_use", {"type": "tool", "tool": "bash", "callID": f"c{i}", "state": tool}),
        ev(
            "tool_use",
            {
                "type": "tool",
                "tool": "write",
                "callID": f"w{i}",
                "state": {"status": "completed", "input": {"filePath": path, "content": body}},
            },
        ),
        ev(
            "step_finish",
            {"type": "step-finish", "reason": "tool-calls", "tokens": {"input": 9, "output": 9}},
        ),
    ]
    return [json.dumps(o, separators=(",", ":")) + "\n" for o in out]


def _pi_block(i: int) -> list[str]:
    body = "".join(f"    line {n} of a source file, some code = {n * i}\n" for n in range(LINES))
    path = f"src/mod{i % 50}.py"
    usage = {"input": 9, "output": 9, "cost": {"total": 0.001}}
    message = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": f"Step {i}: reading the module."},
            {"type": "toolCall", "id": f"r{i}", "name": "read", "arguments": {"path": path}},
            {"type": "toolCall", "id": f"w{i}", "name": "write", "arguments": {"path": path}},
        ],
        "usage": usage,
        "stopReason": "toolUse",
    }
    result = {"content": [{"type": "text", "text": body}]}
    out = [
        {"type": "turn_start"},
        {"type": "message_end", "message": message},
        {"type": "tool_execution_start", "toolCallId": f"r{i}", "toolName": "read",
         "args": {"path": path}},
        {"type": "tool_execution_end", "toolCallId": f"r{i}", "toolName": "read",
         "result": result, "isError": i % 7 == 0},
        {"type": "tool_execution_start", "toolCallId": f"w{i}", "toolName": "write",
         "args": {"path": path, "content": body}},
        {"type": "tool_execution_end", "toolCallId": f"w{i}", "toolName": "write",
         "result": {"content": [{"type": "text", "text": "ok"}]}, "isError": False},
    ]  # fmt: skip
    return [json.dumps(o, separators=(",", ":")) + "\n" for o in out]


def _copilot_block(i: int) -> list[str]:
    body = "".join(f"    line {n} of a source file, some code = {n * i}\n" for n in range(LINES))
    path = f"/repo/src/mod{i % 50}.py"

    def ev(t: str, data: dict[str, object]) -> dict[str, object]:
        return {"type": t, "data": data, "id": f"e{i}", "timestamp": "t"}

    out = [
        ev("assistant.turn_start", {"turnId": str(i)}),
        ev("assistant.message", {"content": f"Step {i}: reading the module.", "model": "m"}),
        ev("tool.execution_start",
           {"toolCallId": f"c{i}", "toolName": "bash", "arguments": {"command": f"cat {path}"}}),
        ev("tool.execution_complete",
           {"toolCallId": f"c{i}", "success": True, "result": {"content": body},
            "shellExecution": {"exitCode": 0 if i % 7 else 1}}),
        ev("tool.execution_start",
           {"toolCallId": f"w{i}", "toolName": "create",
            "arguments": {"path": path, "file_text": body}}),
        ev("tool.execution_complete",
           {"toolCallId": f"w{i}", "success": True, "fileEdits": [{"path": path}]}),
    ]  # fmt: skip
    return [json.dumps(o, separators=(",", ":")) + "\n" for o in out]


#: Each provider's first and last line, and its step.
SHAPES = {
    "opencode": (
        {"type": "step_start", "timestamp": 0, "sessionID": "ses_bench", "part": {}},
        {"type": "step_finish", "timestamp": 1, "sessionID": "ses_bench",
         "part": {"reason": "stop"}},
        _opencode_block,
    ),
    "pi": (
        {"type": "session", "version": 3, "id": "s", "cwd": "/repo"},
        {"type": "agent_end", "messages": []},
        _pi_block,
    ),
    "copilot": (
        {"type": "session.tools_updated", "data": {"model": "m"}, "id": "0", "timestamp": "t"},
        {"type": "result", "sessionId": "s", "exitCode": 0, "usage": {}},
        _copilot_block,
    ),
}  # fmt: skip


def build(path: Path, provider: str, mb: int) -> None:
    target = mb * 1024 * 1024
    size = 0
    with open(path, "w", encoding="utf-8") as f:
        if provider in SHAPES:
            head, tail, step = SHAPES[provider]
            f.write(json.dumps(head) + "\n")
            i = 0
            while size < target:
                for line in step(i):
                    f.write(line)
                    size += len(line)
                i += 1
            f.write(json.dumps(tail) + "\n")
            return
        if provider == "claude":
            head = {"type": "system", "subtype": "init", "session_id": "s", "model": "claude-x"}
        else:
            head = {"type": "thread.started", "thread_id": "t"}
        f.write(json.dumps(head) + "\n")
        i = 0
        block = _claude_block if provider == "claude" else _codex_block
        while size < target:
            for line in block(i):
                f.write(line)
                size += len(line)
            i += 1
        if provider == "claude":
            tail = {
                "type": "result",
                "subtype": "success",
                "is_error": False,
                "num_turns": i,
                "result": "done",
                "session_id": "s",
                "total_cost_usd": 1.0,
            }
        else:
            tail = {"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 1}}
        f.write(json.dumps(tail) + "\n")


def bare(path: Path) -> float:
    start = time.process_time()
    with open(path, "rb") as f:
        for line in f:
            json.loads(line)
    return time.process_time() - start


def ours(path: Path, provider: str) -> float:
    from loopkit.worker.invoke import normalize_transcript

    start = time.process_time()
    record = normalize_transcript(str(path), provider=provider)
    elapsed = time.process_time() - start
    assert record["usage"]["tool_calls"] > 1000, record["usage"]
    return elapsed


def child(path: str, provider: str) -> None:
    """Run in a fresh process: normalize, then print the peak RSS in MB."""
    ours(Path(path), provider)
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def peak_rss(path: Path, provider: str) -> float:
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(path), provider],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return float(out.strip().splitlines()[-1])


def interleaved(path: Path, provider: str, rounds: int = 7) -> tuple[float, float, float]:
    """(best bare, best ours, median of the back-to-back ratios): a busy machine slows
    both halves of a pair alike, so the pair ratio is steadier than either time."""
    t_bare = t_ours = float("inf")
    ratios = []
    for _ in range(rounds):
        b = bare(path)
        o = ours(path, provider)
        t_bare, t_ours = min(t_bare, b), min(t_ours, o)
        ratios.append(o / b)
    return t_bare, t_ours, statistics.median(ratios)


def main() -> int:
    ok = True
    with tempfile.TemporaryDirectory(prefix="bench-normalize-") as d:
        for provider in sys.argv[1:] or ("claude", "codex", *SHAPES):
            big = Path(d) / f"{provider}-{BIG_MB}.jsonl"
            small = Path(d) / f"{provider}-{SMALL_MB}.jsonl"
            build(big, provider, BIG_MB)
            build(small, provider, SMALL_MB)
            mb = os.path.getsize(big) / 1e6
            t_bare, t_ours, ratio = interleaved(big, provider)
            rss_small = peak_rss(small, provider)
            rss_big = peak_rss(big, provider)
            grew = rss_big - rss_small
            met_ratio = ratio <= TARGET_RATIO
            met_flat = grew <= FLAT_MB
            ok = ok and met_ratio and met_flat
            print(
                f"{provider}: {mb:.0f} MB stream: json.loads per line {t_bare:.2f}s "
                f"({mb / t_bare:.0f} MB/s), normalize {t_ours:.2f}s ({mb / t_ours:.0f} MB/s); "
                f"median pair ratio {ratio:.2f}x (target <= {TARGET_RATIO}x) "
                f"{'ok' if met_ratio else 'MISSED'}"
            )
            print(
                f"{provider}: peak RSS {rss_small:.0f} MB for {SMALL_MB} MB, {rss_big:.0f} MB "
                f"for {BIG_MB} MB: +{grew:.1f} MB (target <= +{FLAT_MB:.0f} MB) "
                f"{'ok' if met_flat else 'MISSED'}"
            )
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
        sys.exit(0)
    sys.exit(main())
