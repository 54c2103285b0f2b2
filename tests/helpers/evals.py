"""A small task set for lk eval tests: a repository whose functions are each broken in
one way, one task per function, each with its own check and a reference patch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.helpers import git

#: name -> (the broken line, the fixed line). Each function is in a module of its own,
#: so a fix of one is in scope of its task alone.
FUNCS = {
    "add": ("return a - b", "return a + b", "add(2, 3) == 5"),
    "mul": ("return a + b", "return a * b", "mul(2, 3) == 6"),
    "sub": ("return a + b", "return a - b", "sub(5, 3) == 2"),
    "div": ("return a * b", "return a / b", "div(6, 3) == 2"),
    "mod": ("return a + b", "return a % b", "mod(7, 3) == 1"),
    "pow": ("return a * b", "return a ** b", "pow(2, 3) == 8"),
    "neg": ("return a", "return -a", "neg(2) == -2"),
    "inc": ("return a", "return a + 1", "inc(2) == 3"),
    "dec": ("return a", "return a - 1", "dec(2) == 1"),
    "dbl": ("return a", "return a * 2", "dbl(2) == 4"),
    "sq": ("return a", "return a * a", "sq(3) == 9"),
    "half": ("return a", "return a / 2", "half(4) == 2"),
}


def make_repo(root: Path, names: list[str]) -> Path:
    repo = root / "project"
    repo.mkdir()
    git(repo, "init", "-q")
    for name in names:
        broken, _, check = FUNCS[name]
        args = "a" if "(2)" in check or "(3)" in check or "(4)" in check else "a, b"
        (repo / f"{name}.py").write_text(f"def {name}({args}):\n    {broken}\n")
        (repo / f"test_{name}.py").write_text(
            f"from {name} import {name}\nassert {check}, '{name} is wrong'\nprint('ok')\n"
        )
    # The scripted agent lives in the repository: a worker's tree is all it sees of /tmp.
    (repo / "agent.py").write_text(f"FUNCS = {FUNCS!r}\n" + AGENT)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "broken functions")
    return repo


def reference_patches(root: Path, repo: Path, names: list[str]) -> dict[str, str]:
    """A patch per task (the fix), written beside the suite."""
    out = {}
    for name in names:
        broken, fixed, _ = FUNCS[name]
        path = repo / f"{name}.py"
        before = path.read_text()
        path.write_text(before.replace(broken, fixed))
        diff = subprocess.run(
            ["git", "diff"], cwd=repo, capture_output=True, text=True, check=True
        ).stdout
        path.write_text(before)
        patch = root / f"fix-{name}.patch"
        patch.write_text(diff)
        out[name] = patch.name
    return out


#: A command worker: fixes the functions named in FIX (comma-separated) when its task is
#: one of them, and says it is done in every case (a false claim on the others). Those in
#: FIRST_ONLY it fixes on the trial's first repeat only; on those in DOWN_FIRST its
#: provider is down (exit 75) on the first repeat. The repeat is in its tree's name.
AGENT = r"""
import os, sys, time
time.sleep(float(os.environ.get("SLEEP") or 0))
task = os.environ["LOOPKIT_TASK_ID"]
name = task.removeprefix("fix-")
first = os.path.basename(os.getcwd()).split("--")[2] == "0"
if name in os.environ.get("DOWN_FIRST", "").split(",") and first:
    print("API error: 503 upstream unavailable")
    sys.exit(75)
if name in os.environ.get("FIRST_ONLY", "").split(",") and not first:
    print("Done: fixed " + name)
    sys.exit(0)
fix = {n: (b, f) for n, (b, f, _) in FUNCS.items()}
late = os.environ.get("FIX_ON_RETRY") and not os.environ.get("LOOPKIT_ATTEMPT", "1") > "1"
if name in os.environ.get("FIX", "").split(",") and not late:
    path = name + ".py"
    text = open(path).read()
    open(path, "w").write(text.replace(fix[name][0], fix[name][1]))
print("Done: fixed " + name)
"""


def write_suite(
    root: Path,
    repo: Path,
    names: list[str],
    configs: list[dict[str, Any]],
    *,
    repeats: int = 1,
    references: dict[str, str] | None = None,
    **extra: Any,
) -> Path:
    tasks = []
    for name in names:
        task: dict[str, Any] = {
            "id": f"fix-{name}",
            "text": f"Fix {name}() in {name}.py so that test_{name}.py passes.",
            "criteria": [{"name": name, "run": f"{sys.executable} test_{name}.py", "timeout": 60}],
            "scope": [f"{name}.py"],
        }
        if references and name in references:
            task["reference"] = references[name]
        tasks.append(task)
    suite = {
        "version": 1,
        "name": "calc",
        "repo": os.path.relpath(repo, root),
        "base": "main",
        "tasks": tasks,
        "configs": configs,
        "repeats": repeats,
        "seed": 7,
        "timeout": 120,
        **extra,
    }
    path = root / "suite.yaml"
    path.write_text(yaml.safe_dump(suite, sort_keys=False))
    return path


def command_config(name: str, fix: list[str]) -> dict[str, Any]:
    return {
        "name": name,
        "provider": "command",
        "worker": {
            "command": f"{sys.executable} agent.py",
            "env_allow": ["FIX", "SLEEP", "FIX_ON_RETRY", "FIRST_ONLY", "DOWN_FIRST"],
        },
        "env": {"FIX": ",".join(fix)},
    }


def lk(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 600) -> Any:
    """``lk ARGS`` in ``cwd``, its output validated against its schema."""
    full = {**os.environ, **(env or {}), "LOOPKIT_VALIDATE_OUTPUT": "1"}
    return subprocess.run(
        ["lk", *args], cwd=cwd, env=full, capture_output=True, text=True, timeout=timeout
    )


def results(root: Path) -> list[dict[str, Any]]:
    path = root / ".loopkit" / "eval" / "calc" / "trials.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]
