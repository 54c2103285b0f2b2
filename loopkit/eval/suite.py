"""The eval's input: tasks, configurations, repeats (``lk eval run SUITE.yaml``).

```yaml
version: 1
repo: ./project            # a git repository (relative to this file)
base: main                 # pinned: resolved to one commit when the run starts
contract: loop.yaml        # the contract at the base (optional): scope, criteria, budgets
tasks:
  - id: fix-add
    text: Fix add() so that it adds.
    criteria: [{name: add, run: "python3 -m pytest -q test_add.py", timeout: 60}]
    scope: [calc.py]       # the task's writable scope (else the contract's)
    reference: fix-add.patch   # optional: a patch (relative to this file) or a commit
    repo: ./other          # optional: the task's own repository and base (else the suite's)
    base: v1.2
    hidden:                # optional: tests the agent never sees, written in only to score
      from: 1a2b3c4        #   a commit of the task's repository that holds them
      paths: [tests/test_add.py]
      criteria: [{name: fail_to_pass, run: "python3 -m pytest -q tests/test_add.py"}]
configs:
  - {name: claude-sonnet, provider: claude, model: claude-sonnet-4-5, worker: {max_turns: 20}}
  - {name: codex, provider: codex, model: gpt-5.5}
  - {name: script, provider: command, worker: {command: ./agent.sh}, env: {X: "1"}}
repeats: 3                 # trials per task and configuration
seed: 1                    # the interleaving and the bootstrap
attempts: 1                # lk attempt rounds per trial (a retry gets the feedback)
infra_retries: 2           # an infrastructure failure is retried whole, in a fresh tree
timeout: 900               # the worker's wall-clock limit per attempt
```

A configuration's ``env`` is laid over the environment of every trial it runs (a
provider's base URL, a rehearsal's scripted server). Every problem is listed at once.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopkit import loader
from loopkit.errors import BadInput
from loopkit.worker import providers

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
#: A task's id, as lk attempt takes it (schemas/attempt.json).
TASK_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
TOP_KEYS = {
    "version",
    "name",
    "repo",
    "base",
    "contract",
    "tasks",
    "configs",
    "repeats",
    "seed",
    "attempts",
    "infra_retries",
    "timeout",
    "margin",
}
TASK_KEYS = {"id", "text", "criteria", "scope", "reference", "repo", "base", "hidden"}
HIDDEN_KEYS = {"from", "paths", "criteria"}


@dataclass(frozen=True)
class Hidden:
    """Tests the agent never sees: ``paths`` as they are at the commit ``source`` of the
    task's repository, written over the trial's tree only to run ``criteria``, which
    score it."""

    source: str
    paths: list[str]
    criteria: list[dict[str, Any]]


CONFIG_KEYS = {"name", "provider", "model", "worker", "env"}


@dataclass(eq=False)
class Task:
    id: str
    text: str
    criteria: list[dict[str, Any]] | None
    scope: list[str] | None
    reference: str | None
    #: The task's own repository and base (else the suite's).
    repo: Path | None = None
    base: str | None = None
    hidden: Hidden | None = None


@dataclass(eq=False)
class Config:
    name: str
    provider: str
    model: str | None
    worker: dict[str, Any]
    env: dict[str, str]


@dataclass(eq=False)
class Suite:
    path: Path
    name: str
    repo: Path
    base: str
    contract: str | None
    tasks: list[Task]
    configs: list[Config]
    repeats: int
    seed: int
    attempts: int
    infra_retries: int
    timeout: float
    margin: float

    def config(self, name: str) -> Config:
        for c in self.configs:
            if c.name == name:
                return c
        raise BadInput(str(self.path), f"no configuration named {name!r}")


def load(path: Path) -> Suite:
    """The suite at ``path``, validated; BadInput listing every problem."""

    try:
        data = loader.yaml_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise BadInput(str(path), f"cannot read the eval suite: {e.strerror or e}") from None
    except ValueError as e:
        raise BadInput(str(path), str(e)) from None
    problems: list[str] = []
    if not isinstance(data, dict):
        raise BadInput(str(path), "expected a mapping (version, repo, tasks, configs)")
    for key in sorted(set(data) - TOP_KEYS):
        problems.append(f"$.{key}: unknown key")
    if data.get("version") != 1:
        problems.append("$.version: expected 1")

    def whole(key: str, default: int, low: int) -> int:
        v = data.get(key, default)
        if not isinstance(v, int) or isinstance(v, bool) or v < low:
            problems.append(f"$.{key}: expected an integer >= {low}, got {v!r}")
            return default
        return v

    repeats = whole("repeats", 3, 1)
    seed = whole("seed", 0, 0)
    attempts = whole("attempts", 1, 1)
    infra = whole("infra_retries", 2, 0)
    timeout = data.get("timeout", 900)
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
        problems.append(f"$.timeout: expected a number > 0, got {timeout!r}")
        timeout = 900
    margin = data.get("margin", 0.1)
    if not isinstance(margin, (int, float)) or not 0 < margin < 1:
        problems.append(f"$.margin: expected a number between 0 and 1, got {margin!r}")
        margin = 0.1
    repo_raw = data.get("repo", ".")
    repo = (path.parent / str(repo_raw)).resolve()
    if not isinstance(repo_raw, str) or not (repo / ".git").exists():
        problems.append(f"$.repo: {repo_raw!r} is not a git repository")
    base = data.get("base", "HEAD")
    if not isinstance(base, str) or not base:
        problems.append("$.base: expected a commit or a branch")
        base = "HEAD"
    contract = data.get("contract")
    if contract is not None and not isinstance(contract, str):
        problems.append("$.contract: expected a path inside the repository")
        contract = None
    tasks = _tasks(data.get("tasks"), path.parent, problems)
    configs = _configs(data.get("configs"), providers.names(), problems)
    if problems:
        raise BadInput(str(path), "; ".join(problems))
    return Suite(
        path=path.resolve(),
        name=str(data.get("name") or path.stem),
        repo=repo,
        base=base,
        contract=contract,
        tasks=tasks,
        configs=configs,
        repeats=repeats,
        seed=seed,
        attempts=attempts,
        infra_retries=infra,
        timeout=float(timeout),
        margin=float(margin),
    )


def _named(
    raw: Any,
    field: str,
    keys: set[str],
    name_key: str,
    problems: list[str],
    shape: tuple[re.Pattern[str], str] = (NAME, "letters, digits, . _ -"),
) -> Iterator[tuple[str, dict[str, Any], str]]:
    """Each entry of the suite's list ``field`` -- a mapping of ``keys`` with a plain,
    unique name under ``name_key`` -- as (its path, itself, its name); what is wrong with
    the rest goes to ``problems``."""
    if not isinstance(raw, list) or not raw:
        problems.append(f"$.{field}: expected a non-empty list")
        return
    seen: set[str] = set()
    for i, entry in enumerate(raw):
        where = f"$.{field}[{i}]"
        if not isinstance(entry, dict):
            problems.append(f"{where}: expected a mapping")
            continue
        for key in sorted(set(entry) - keys):
            problems.append(f"{where}.{key}: unknown key")
        name = entry.get(name_key)
        if not isinstance(name, str) or not shape[0].match(name):
            problems.append(f"{where}.{name_key}: expected a plain name ({shape[1]})")
            continue
        if name in seen:
            problems.append(f"{where}.{name_key}: {name!r} given twice")
        seen.add(name)
        yield where, entry, name


def _tasks(raw: Any, folder: Path, problems: list[str]) -> list[Task]:
    out: list[Task] = []
    shape = (TASK_ID, "lower-case letters, digits, -")
    for where, t, tid in _named(raw, "tasks", TASK_KEYS, "id", problems, shape):
        text = t.get("text")
        if not isinstance(text, str) or not text.strip():
            problems.append(f"{where}.text: expected the task's text")
            continue
        criteria = t.get("criteria")
        if criteria is not None and not _criteria_ok(criteria):
            problems.append(f"{where}.criteria: expected a list of {{name, run, timeout}}")
            criteria = None
        scope = t.get("scope")
        if scope is not None and (
            not isinstance(scope, list) or not all(isinstance(s, str) for s in scope)
        ):
            problems.append(f"{where}.scope: expected a list of globs")
            scope = None
        reference = t.get("reference")
        if reference is not None and not isinstance(reference, str):
            problems.append(f"{where}.reference: expected a patch file or a commit")
            reference = None
        repo: Path | None = None
        if "repo" in t:
            repo = (folder / str(t["repo"])).resolve()
            if not isinstance(t["repo"], str) or not (repo / ".git").exists():
                problems.append(f"{where}.repo: {t['repo']!r} is not a git repository")
        base = t.get("base")
        if base is not None and (not isinstance(base, str) or not base):
            problems.append(f"{where}.base: expected a commit or a branch")
            base = None
        hidden = _hidden(t.get("hidden"), where, problems) if "hidden" in t else None
        out.append(Task(tid, text, criteria, scope, reference, repo, base, hidden))
    return out


def _criteria_ok(criteria: Any) -> bool:
    return isinstance(criteria, list) and all(
        isinstance(c, dict) and c.get("name") and c.get("run") for c in criteria
    )


def _hidden(raw: Any, where: str, problems: list[str]) -> Hidden | None:
    where = f"{where}.hidden"
    if not isinstance(raw, dict):
        problems.append(f"{where}: expected {{from, paths, criteria}}")
        return None
    for key in sorted(set(raw) - HIDDEN_KEYS):
        problems.append(f"{where}.{key}: unknown key")
    source, paths, criteria = raw.get("from"), raw.get("paths"), raw.get("criteria")
    wrong = len(problems)
    if not isinstance(source, str) or not source:
        problems.append(f"{where}.from: expected the commit that holds the hidden tests")
    if not isinstance(paths, list) or not paths or not all(isinstance(p, str) for p in paths):
        problems.append(f"{where}.paths: expected a list of the hidden tests' paths")
    elif any(p.startswith("/") or ".." in p.split("/") for p in paths):
        problems.append(f"{where}.paths: expected paths inside the repository")
    if not _criteria_ok(criteria) or not criteria:
        problems.append(f"{where}.criteria: expected a list of {{name, run, timeout}}")
    if len(problems) > wrong or not isinstance(paths, list) or not isinstance(criteria, list):
        return None
    return Hidden(str(source), [str(p) for p in paths], list(criteria))


def _configs(raw: Any, known: list[str], problems: list[str]) -> list[Config]:
    out: list[Config] = []
    for where, c, name in _named(raw, "configs", CONFIG_KEYS, "name", problems):
        provider = c.get("provider")
        if provider not in known:
            problems.append(
                f"{where}.provider: expected one of {', '.join(known)}, got {provider!r}"
            )
            continue
        model = c.get("model")
        if model is not None and not isinstance(model, str):
            problems.append(f"{where}.model: expected a model name")
            model = None
        worker = c.get("worker") or {}
        if not isinstance(worker, dict):
            problems.append(f"{where}.worker: expected the contract's worker options")
            worker = {}
        env = c.get("env") or {}
        if not isinstance(env, dict) or not all(
            isinstance(k, str) and isinstance(v, (str, int, float)) for k, v in env.items()
        ):
            problems.append(f"{where}.env: expected NAME: value pairs")
            env = {}
        out.append(
            Config(name, str(provider), model, dict(worker), {k: str(v) for k, v in env.items()})
        )
    return out
