"""Capture the golden streams: the real worker CLIs (claude, codex, gemini, qwen, opencode,
pi, copilot), run through lk-invoke against the scripted model server, their saved native
streams normalized by ``lk-invoke --transcript``.

    .venv/bin/python tests/golden/capture.py [CASE ...]

Writes tests/golden/<case>.jsonl (the stream, temporary paths replaced by /repo) and
<case>.expected.json (the run record ``--transcript`` makes of it). Review the diff.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from tests.helpers.agents import (  # noqa: E402
    claude_bin,
    claude_env_for,
    env_for,
    model_server,
)
from tests.helpers.invoke import lk_invoke, lk_invoke_bin, write_contract  # noqa: E402

WRITE = {"name": "Write", "input": {"file_path": "{{cwd}}/hello.py", "content": "print('hello')\n"}}
READ = {"name": "Read", "input": {"file_path": "{{cwd}}/hello.py"}}
EDIT = {
    "name": "Edit",
    "input": {"file_path": "{{cwd}}/hello.py", "old_string": "hello", "new_string": "hello, world"},
}
BAD_EDIT = {
    "name": "Edit",
    "input": {"file_path": "{{cwd}}/hello.py", "old_string": "absent text", "new_string": "x"},
}
PATCH = {
    "name": "apply_patch",
    "input": "*** Begin Patch\n*** Add File: hello.py\n+print('hello')\n*** End Patch\n",
}


GWRITE = {"name": "write_file", "input": {"file_path": "{{cwd}}/hello.py", "content": "print(1)\n"}}


def shell(cmd: str) -> dict[str, Any]:
    return {"name": "run_shell_command", "input": {"command": cmd}}


def cat(cmd: str) -> dict[str, Any]:
    return {"name": "exec_command", "input": {"cmd": cmd}}


OC_WRITE = {
    "name": "write",
    "input": {"filePath": "{{cwd}}/hello.py", "content": "print('hello')\n"},
}


def oc_bash(cmd: str) -> dict[str, Any]:
    return {"name": "bash", "input": {"command": cmd, "description": "run"}}


PI_WRITE = {"name": "write", "input": {"path": "hello.py", "content": "print('hello')\n"}}


def pi_bash(cmd: str) -> dict[str, Any]:
    return {"name": "bash", "input": {"command": cmd}}


GH_CREATE = {
    "name": "create",
    "input": {"path": "{{cwd}}/hello.py", "file_text": "print('hello')\n"},
}

#: opencode retries silently; a short retry-after keeps a capture quick.
FAST_RETRY = {"retry-after-ms": "20"}

CASES: dict[str, dict[str, Any]] = {
    "claude_write_edit": {
        "provider": "claude",
        "turns": [
            {"text": "Creating hello.py.", "tools": [WRITE]},
            {"tools": [READ]},
            {"tools": [EDIT]},
            {"tools": [{"name": "Bash", "input": {"command": "curl -s http://127.0.0.1:9/x"}}]},
            {"text": "Wrote and edited hello.py."},
        ],
        "worker": {"allowed_tools": ["Bash(curl:*)"]},
    },
    "claude_max_turns": {
        "provider": "claude",
        "turns": [{"tools": [WRITE]}, {"tools": [READ]}, {"tools": [READ]}, {"text": "done"}],
        "worker": {"max_turns": 2},
    },
    "claude_529_then_ok": {
        "provider": "claude",
        "turns": [{"error": {"status": 529, "times": 2}, "text": "All good."}],
        "retries": 3,
    },
    "claude_500_forever": {
        "provider": "claude",
        "turns": [{"error": {"status": 500}}],
        "retries": 1,
    },
    "claude_429": {
        "provider": "claude",
        "turns": [{"error": {"status": 429, "headers": {"x-should-retry": "false"}}}],
        "retries": 0,
    },
    "claude_denied": {
        "provider": "claude",
        "turns": [
            {"tools": [{"name": "Bash", "input": {"command": "git push origin main"}}]},
            {"text": "I could not push."},
        ],
    },
    "claude_stuck": {
        "provider": "claude",
        "turns": [{"tools": [WRITE]}, {"tools": [READ]}]
        + [{"tools": [BAD_EDIT]} for _ in range(6)]
        + [{"text": "gave up"}],
    },
    "codex_patch_exec": {
        "provider": "codex",
        "turns": [
            {"text": "Creating hello.py.", "tools": [PATCH]},
            {"tools": [cat("cat hello.py")]},
            {"tools": [cat("pip install requests-nothing-here --dry-run || true")]},
            {"text": "Done."},
        ],
    },
    "codex_429": {
        "provider": "codex",
        "turns": [{"error": {"status": 429}}],
    },
    "codex_usage_limit": {
        "provider": "codex",
        "turns": [
            {
                "error": {
                    "status": 429,
                    "body": {
                        "error": {
                            "type": "usage_limit_reached",
                            "message": "The usage limit has been reached",
                            "plan_type": "plus",
                            "resets_at": 1800000000,  # 2027-01-15T08:00:00Z
                        }
                    },
                }
            }
        ],
    },
    "claude_usage_limit": {
        "provider": "claude",
        "turns": [
            {"error": {"status": 429, "message": "Claude AI usage limit reached|1800000000"}}
        ],
        "retries": 0,
    },
    "claude_401": {
        "provider": "claude",
        "turns": [{"error": {"status": 401}}],
        "retries": 0,
    },
    "claude_400": {
        "provider": "claude",
        "turns": [{"error": {"status": 400, "message": "prompt is too long"}}],
        "retries": 0,
    },
    "codex_401": {
        "provider": "codex",
        "turns": [{"error": {"status": 401}}],
    },
    "codex_cut_then_ok": {
        "provider": "codex",
        "turns": [{"cut": {"times": 1}, "text": "Done after a reconnect."}],
        "retries": 2,
    },
    "codex_500_forever": {
        "provider": "codex",
        "turns": [{"error": {"status": 500}}],
    },
    "gemini_write_shell": {
        "provider": "gemini",
        "turns": [
            {"text": "Creating hello.py.", "tools": [GWRITE]},
            {"tools": [shell("cat hello.py && git push origin main")]},
            {"text": "Wrote hello.py."},
        ],
    },
    "gemini_refused": {
        "provider": "gemini",
        "turns": [{"tools": [GWRITE]}, {"text": "Done."}],
        "worker": {"permission_mode": "default"},
    },
    "gemini_400": {"provider": "gemini", "turns": [{"error": 400}]},
    "gemini_500": {"provider": "gemini", "turns": [{"error": 500}]},
    "qwen_write_shell": {
        "provider": "qwen",
        "turns": [
            {"text": "Creating hello.py.", "tools": [GWRITE]},
            {"tools": [shell("cat hello.py && git push origin main")]},
            {"text": "Wrote hello.py."},
        ],
    },
    "qwen_refused": {
        "provider": "qwen",
        "turns": [{"tools": [GWRITE]}, {"text": "Done."}],
        "worker": {"permission_mode": "default"},
    },
    "qwen_400": {"provider": "qwen", "turns": [{"error": 400}]},
    "opencode_write_bash": {
        "provider": "opencode",
        "turns": [
            {"text": "Creating hello.py.", "tools": [OC_WRITE]},
            {"tools": [oc_bash("python3 hello.py && cat hello.py")]},
            {"text": "Done."},
        ],
    },
    "opencode_failed_claim": {
        "provider": "opencode",
        "turns": [
            {"tools": [oc_bash("exit 2")]},
            {"tools": [{"name": "no_such_tool", "input": {"x": 1}}]},
            {"text": "Done."},
        ],
    },
    "opencode_denied": {
        "provider": "opencode",
        "turns": [
            {"tools": [{"name": "write", "input": {"filePath": "/etc/x.txt", "content": "x\n"}}]},
            {"text": "Done."},
        ],
    },
    "opencode_429": {
        "provider": "opencode",
        "turns": [{"error": {"status": 429, "headers": FAST_RETRY}}],
    },
    "opencode_500": {
        "provider": "opencode",
        "turns": [{"error": {"status": 500, "headers": FAST_RETRY}}],
    },
    "pi_write_bash": {
        "provider": "pi",
        "turns": [
            {"text": "Creating hello.py.", "tools": [PI_WRITE]},
            {"tools": [pi_bash("python3 hello.py && cat hello.py")]},
            {"text": "Done."},
        ],
    },
    "pi_failed_claim": {
        "provider": "pi",
        "turns": [
            {"tools": [pi_bash("exit 2")]},
            {"tools": [{"name": "no_such_tool", "input": {"x": 1}}]},
            {"text": "Done."},
        ],
    },
    "pi_429": {"provider": "pi", "turns": [{"error": {"status": 429}}], "retries": 1},
    "pi_500": {"provider": "pi", "turns": [{"error": {"status": 500}}], "retries": 1},
    "copilot_create_bash": {
        "provider": "copilot",
        "turns": [
            {"text": "Creating hello.py.", "tools": [GH_CREATE]},
            {"tools": [oc_bash("python3 hello.py && cat hello.py")]},
            {"text": "Done."},
        ],
    },
    "copilot_failed_claim": {
        "provider": "copilot",
        "turns": [
            {"tools": [oc_bash("exit 2")]},
            {"tools": [{"name": "no_such_tool", "input": {"x": 1}}]},
            {"text": "Done."},
        ],
    },
    "copilot_denied": {
        "provider": "copilot",
        "turns": [
            {"tools": [{"name": "create", "input": {"path": "/etc/x.txt", "file_text": "x\n"}}]},
            {"text": "Done."},
        ],
    },
    "copilot_429": {
        "provider": "copilot",
        "turns": [{"error": {"status": 429, "headers": {**FAST_RETRY, "retry-after": "0"}}}],
    },
    "copilot_500": {
        "provider": "copilot",
        "turns": [{"error": {"status": 500, "headers": {**FAST_RETRY, "retry-after": "0"}}}],
    },
    "codex_stuck": {
        "provider": "codex",
        "turns": [{"tools": [cat("python3 -c 'import nothing_here'")]} for _ in range(6)]
        + [{"text": "gave up"}],
    },
}


def capture_claude_json(name: str) -> None:
    """``claude -p --output-format json``: the result object alone, on one line."""
    tmp = Path(tempfile.mkdtemp(prefix="golden-"))
    repo = tmp / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    turns = [{"text": "Creating hello.py.", "tools": [WRITE]}, {"text": "Wrote hello.py."}]
    with model_server(turns) as server:
        env = claude_env_for(server, tmp / "home", retries=0)
        done = subprocess.run(
            [
                claude_bin(),
                "-p",
                "write hello.py",
                "--output-format",
                "json",
                "--permission-mode",
                "acceptEdits",
                "--max-turns",
                "5",
            ],
            cwd=repo,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
        )
    out = HERE / f"{name}.jsonl"
    out.write_text(done.stdout.replace(str(repo), "/repo"), encoding="utf-8")
    _expect(name, out)


def _expect(name: str, out: Path) -> None:
    done = subprocess.run(
        [lk_invoke_bin(), "--transcript", out.name], capture_output=True, text=True, cwd=HERE
    )
    record = json.loads(done.stdout)
    record.pop("transcript", None)
    (HERE / f"{name}.expected.json").write_text(json.dumps(record, indent=2) + "\n")
    print(f"{name}: transcript {record['stop_reason']}")


def capture(name: str, case: dict[str, Any]) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="golden-"))
    repo = tmp / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "init"], cwd=repo, check=True)
    worker = {"provider": case["provider"], **case.get("worker", {})}
    contract = write_contract(tmp / "loop.yaml", worker=worker)
    with model_server(case["turns"]) as server:
        name = case["provider"]
        home = tmp / ("pi-agent" if name == "pi" else "home")
        env = env_for(name, server, home, retries=case.get("retries", 0))
        if name != "codex":  # codex lays out helpers only outside the temporary folder
            env["LOOPKIT_HOMES"] = str(tmp / "homes")
        run = lk_invoke(["--contract", str(contract), "--timeout", "60"], cwd=repo, env=env)
    stream = repo / run.run["transcript"]
    text = stream.read_text(encoding="utf-8").replace(str(repo), "/repo")
    out = HERE / f"{name}.jsonl"
    out.write_text(text, encoding="utf-8")
    print(f"{name}: live {run.run['stop_reason']}")
    _expect(name, out)


if __name__ == "__main__":
    wanted = sys.argv[1:] or [*CASES, "claude_json"]
    for case_name in wanted:
        if case_name == "claude_json":
            capture_claude_json(case_name)
        else:
            capture(case_name, CASES[case_name])
