"""The demo: the parser story, end to end, offline, with no API key.

Usage:  python -m loopkit.testing.demo [--provider command|claude] [--keep] [--dir DIR]
        python -m loopkit.testing.demo --recipes          (print where the recipes are)

A fresh temporary git repository holds the example project (``examples/parser-project``,
shipped in the wheel as ``loopkit/testing/fixtures/parser-project``): a header parser
that fails on a blank line, its loop contract and a TASKS.md. The demo then runs the real
recipe, ``recipes/loop.sh``, on the first task -- so what you watch IS the recipe working:

1. reproduce: the checks on the untouched tree fail (the ledger records the fingerprint);
2. attempt 1: the worker strips whitespace -- the blank line still breaks the parser, the
   failure keeps its fingerprint: no progress, replan;
3. attempt 2: the worker stops at the blank line -- the checks pass on the tree on disk:
   complete, committed, the task marked done after its commit.

Then it prints the ledger and ``lk report``. The worker is the embedded ``command``
provider running ``python -m loopkit.testing.demo --worker`` (a scripted fixer); with
``--provider claude`` the same story runs through the real Claude Code CLI against the
scripted model server of ``loopkit.testing`` (needs ``claude`` on PATH: ``make agents``).

Exit codes: 0 the story ran as told; 1 it did not (the recipe's exit code and documents are
shown); 4 a tool it needs is missing (bash, git, claude for --provider claude).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import sysconfig
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loopkit import contract, git, proc, scaffold, workspace
from loopkit.decision import ledger
from loopkit.testing import ModelServer, claude_env, from_data, overlay

if TYPE_CHECKING:
    from loopkit.sections import Record, ScriptTurn, WorkerSettings

TASK_ID = "blank-line"
HEADERS = "src/parser/headers.py"
PACKAGE = Path(__file__).resolve().parents[1]

LOOP_LINE = "    for line in text.splitlines():\n"
# Attempt 1: a plausible guess that leaves the cause alone -- the blank line still reaches
# the split, so the check fails exactly as before.
WRONG_LINE = "        line = line.rstrip()  # stray whitespace breaks the split?\n"
# Attempt 2: the real cause -- a blank line ends the headers.
RIGHT_LINES = "        if not line.strip():\n            break  # a blank line ends the headers\n"


def fixture_dir() -> Path:
    """The example project: inside the installed package (wheel), else the source tree's
    examples/parser-project."""
    for candidate in (
        PACKAGE / "testing" / "fixtures" / "parser-project",
        PACKAGE.parent / "examples" / "parser-project",
    ):
        if (candidate / "loop.yaml").is_file():
            return candidate
    raise FileNotFoundError("the parser project is missing from this installation")


def contract_text(path: Path, python: str, worker: Mapping[str, Any]) -> str:
    """The example's loop contract (at ``path``) with the demo's check and worker.

    The example checks with pytest; the demo runs the same tests with this interpreter's
    unittest, so an installed wheel needs no test runner."""
    data = contract.read_file(path)
    check = f"PYTHONPATH=src {python} -m unittest discover -s tests/parser 2>&1"
    data["criteria"] = [{"name": "regression", "run": check, "timeout": 120}]
    data["worker"] = dict(worker)
    return (
        "# The loop contract of examples/parser-project, with the demo's check and worker"
        " (JSON is YAML too).\n" + json.dumps(data, indent=2) + "\n"
    )


# --- the scripted worker (the embedded command provider runs this) ---------------------------


def worker() -> int:
    """Read the handoff, look at the code, make the next fix of the story."""
    handoff = sys.stdin.read()
    path = Path(HEADERS)
    code = path.read_text(encoding="utf-8")
    if WRONG_LINE in code:
        if "hypothesis failed" not in handoff and "same" not in handoff:
            print("worker: expected feedback on the failed hypothesis", file=sys.stderr)
        path.write_text(code.replace(WRONG_LINE, RIGHT_LINES), encoding="utf-8")
        print("Stop at the blank line that ends the headers (the last fix left the cause alone).")
    elif "if not line.strip()" in code:
        print("Nothing left to fix.")
    else:
        path.write_text(code.replace(LOOP_LINE, LOOP_LINE + WRONG_LINE), encoding="utf-8")
        print("Strip whitespace before splitting. Fixed: all tests pass now.")
    return 0


# --- the claude variant: the same story as a model script ------------------------------------


def claude_turns() -> list[ScriptTurn]:
    """The model's side of the story. Attempt 2 resumes attempt 1's session, so its turns
    follow on (the server picks a turn by the assistant turns already in the conversation)."""
    path = "{{cwd}}/" + HEADERS
    return [
        {
            "text": "Let me read the parser.",
            "tools": [{"name": "Read", "input": {"file_path": path}}],
        },
        {
            "tools": [
                {
                    "name": "Edit",
                    "input": {
                        "file_path": path,
                        "old_string": LOOP_LINE,
                        "new_string": LOOP_LINE + WRONG_LINE,
                    },
                }
            ]
        },
        {"text": "Strip whitespace before splitting. Fixed: all tests pass now."},
        {
            "tools": [
                {
                    "name": "Edit",
                    "input": {
                        "file_path": path,
                        "old_string": WRONG_LINE,
                        "new_string": RIGHT_LINES,
                    },
                }
            ]
        },
        {"text": "Stop at the blank line that ends the headers."},
    ]


# --- running the story -----------------------------------------------------------------------


def recipes_dir() -> Path:
    """The recipes (``loopkit.scaffold.recipes_dir``)."""
    return scaffold.recipes_dir()


def _say(text: str = "") -> None:
    print(text, flush=True)


def _env(base: Mapping[str, str]) -> dict[str, str]:
    env = dict(base)
    scripts = [str(Path(sys.executable).parent), sysconfig.get_path("scripts")]
    env["PATH"] = os.pathsep.join([*dict.fromkeys(scripts), env.get("PATH", "")])
    for name in ("LOOPKIT_STATE_DIR", "RESET_PATHS", "MEMORY_FILE"):
        env.pop(name, None)
    # The demo's repository gets its own identity; nothing of the user's config is needed.
    env.update(
        {
            "GIT_AUTHOR_NAME": "loopkit demo",
            "GIT_AUTHOR_EMAIL": "demo@loopkit.invalid",
            "GIT_COMMITTER_NAME": "loopkit demo",
            "GIT_COMMITTER_EMAIL": "demo@loopkit.invalid",
        }
    )
    return env


def make_repo(root: Path, worker_spec: Mapping[str, Any]) -> Path:
    """A git repository holding the example project, its contract set up for the demo."""
    repo = root / "parser-project"
    shutil.copytree(
        fixture_dir(), repo, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache")
    )
    contract_path = repo / "loop.yaml"
    contract_path.write_text(contract_text(contract_path, sys.executable, worker_spec))
    (repo / "MEMORY.md").write_text("# Memory: lessons from parked tasks\n")
    (repo / ".gitignore").write_text("__pycache__/\n")
    git.new_repository(
        repo,
        name="loopkit demo",
        email="demo@loopkit.invalid",
        message="parser example: parse_headers fails on a blank line",
    )
    return repo


def _records(repo: Path) -> list[Record]:
    """The ledger's records (the demo's environment keeps the state in .loopkit/)."""
    records, _ = ledger.read(repo / workspace.DEFAULT_STATE / ledger.DEFAULT_NAME)
    return [record for _, record in records]


def _show(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> int | None:
    """Run ``argv`` and show its output (stdout and stderr) as it comes; its exit code."""
    # The recipes tell their story on stderr, and proc.spawn reads stdout: bash merges them.
    running = proc.spawn(["bash", "-c", 'exec "$@" 2>&1', "bash", *argv], cwd=cwd, env=env)
    try:
        for line in running.lines():
            sys.stdout.buffer.write(line)
            sys.stdout.buffer.flush()
    except BaseException:  # interrupted: the child runs in a session of its own
        running.stop("interrupted")
        running.wait()
        raise
    return running.wait().exit_code


def story_ok(records: Sequence[Mapping[str, Any]]) -> bool:
    """Reproduce (retry), the wrong fix (replan, same fingerprint), the right fix (complete)."""
    decided = [r["decision"] for r in records if r.get("type") == "attempt" and r.get("decision")]
    outcomes = [d.get("outcome") for d in decided]
    return outcomes[-2:] == ["replan", "complete"] and len(outcomes) >= 3


def print_ledger(records: Sequence[Mapping[str, Any]]) -> None:
    _say("The ledger (.loopkit/ledger.jsonl), one record per decided attempt:")
    for r in records:
        if r.get("type") != "attempt":
            continue
        d = r.get("decision") or {}
        evidence = r.get("evidence") or {}
        fp = evidence.get("fingerprint") or "-"
        reason = str(d.get("reason", "")).splitlines()[0][:90]
        _say(
            f"  #{r.get('attempt')}  {d.get('outcome', '?'):<9} {d.get('failure_class') or '-'!s:<21}"
            f" fingerprint {str(fp)[:12]:<12}  {reason}"
        )


def run(provider: str, workdir: Path) -> int:
    if shutil.which("bash") is None or shutil.which("git") is None:
        print("demo: bash and git are needed", file=sys.stderr)
        return 4
    recipes = recipes_dir()
    server: Any = None
    base: Mapping[str, str] = os.environ
    if provider == "claude":
        if shutil.which("claude") is None:
            print("demo: the claude CLI is not on PATH (make agents installs it)", file=sys.stderr)
            return 4
        server = ModelServer(from_data(claude_turns()), log=workdir / "model-requests.jsonl")
        server.start()
        # The real CLI, pointed at the scripted server: no key, no network.
        base = overlay(claude_env(server.url, workdir / "claude-home", retries=0))
        spec: WorkerSettings = {"provider": "claude", "max_turns": 10, "timeout": 180}
    else:
        spec = {
            "provider": "command",
            "command": f"{sys.executable} -m loopkit.testing.demo --worker",
            "timeout": 120,
        }
    try:
        repo = make_repo(workdir, spec)
        env = _env(base)
        _say(f"loopkit demo ({provider} worker) in {repo}")
        _say(f"The recipe: {recipes / 'loop.sh'}")
        _say("The bug: parse_headers raises ValueError on the blank line that ends the headers.")
        _say()
        start = workdir / "start.json"
        nxt = proc.capture(
            ["lk-plan", "next", "TASKS.md", "--contract", "loop.yaml"], cwd=repo, env=env
        )
        if nxt.exit_code != 0:
            print(nxt.stderr.decode("utf-8", "replace"), file=sys.stderr)
            return 1
        start.write_bytes(nxt.stdout)
        _say(f"$ lk-plan next TASKS.md --contract loop.yaml > start.json   # task {TASK_ID}")
        _say("$ recipes/loop.sh --tasks TASKS.md --reproduce start.json")
        loop_code = _show(
            ["bash", str(recipes / "loop.sh"), "--tasks", "TASKS.md", "--reproduce", str(start)],
            cwd=repo,
            env=env,
        )
        _say()
        records = _records(repo)
        print_ledger(records)
        _say()
        _say("git log --oneline:")
        for line in git.log_lines(repo):
            _say(f"  {line}")
        _say()
        _say("TASKS.md now:")
        for line in (repo / "TASKS.md").read_text().splitlines():
            if line.lstrip().startswith("- ["):
                _say(f"  {line}")
        _say()
        _say("$ lk report")
        _show(["lk", "report"], cwd=repo, env=env)
        ok = loop_code == 0 and story_ok(records)
        _say()
        if ok:
            _say(
                "The story held: reproduce -> a wrong fix, same fingerprint -> replan -> "
                "the right fix -> verified on the tree on disk -> committed -> marked done."
            )
        else:
            _say(
                f"The story did NOT hold (loop.sh exit {loop_code}); the documents of "
                f"every stage are in {repo / '.loopkit' / 'runs'}"
            )
        return 0 if ok else 1
    finally:
        if server is not None:
            server.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m loopkit.testing.demo",
        description="The parser story end to end: recipes/loop.sh in a temporary repository.",
    )
    parser.add_argument("--provider", choices=["command", "claude"], default="command")
    parser.add_argument(
        "--dir", help="Run in this (new or empty) folder instead of a temporary one."
    )
    parser.add_argument("--keep", action="store_true", help="Keep the temporary folder.")
    parser.add_argument("--recipes", action="store_true", help="Print the recipes folder and exit.")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker()
    if args.recipes:
        print(recipes_dir())
        return 0
    if args.dir:
        workdir = Path(args.dir).resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        return run(args.provider, workdir)
    tmp = Path(tempfile.mkdtemp(prefix="loopkit-demo-"))
    try:
        return run(args.provider, tmp)
    finally:
        if args.keep:
            print(f"(kept {tmp})")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
