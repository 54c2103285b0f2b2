"""Scaffolding for a new project: ``lk init`` writes a loop contract, a TASKS.md and the
agent guidance that fit the project it finds.

The project's test command is detected from the files at its root, most specific first:
a ``Makefile`` with a ``test`` target, ``package.json`` with a ``test`` script,
``Cargo.toml``, ``go.mod``, ``tox.ini``, then Python (``pyproject.toml``, ``setup.py``,
``setup.cfg``, ``pytest.ini`` or a ``tests/`` folder) with pytest; tox only where it is
installed. The writable scope is the project's own top-level folders (not hidden ones, not
vendored dependencies, not what git ignores: a ``data/`` folder) and its code at the root
(``index.js``, ``module.py``: ``*.js``, ``*.py``), a root-level tool configuration
(``jest.config.js``) protected. The project's existing tests (its test folders, at the
top or deeper as in a monorepo's ``packages/*/test/``, its test files elsewhere) go under
``scope.add_only``: the agent may add tests, never weaken the ones that judge it; a Python
project's ``conftest.py`` files are protected outright (a new one can skip every test
beside it). What is written passes ``lk-plan check`` as it stands; nothing is ever
overwritten unless asked, but a project's own AGENTS.md gets loopkit's guidance as a
block of its own, the rest of it kept.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from loopkit import contract, git, guidance, shipped
from loopkit.errors import LoopkitError
from loopkit.evidence.cleanroom import carried
from loopkit.evidence.globs import matches
from loopkit.files import atomic_write

#: Top-level folders that are never the project's own source.
_NOT_SOURCE = {
    "node_modules",
    "vendor",
    "target",
    "build",
    "dist",
    "venv",
    "env",
    "__pycache__",
    "site-packages",
}

#: The extensions of code files: such files at the root are the project's own code.
_CODE = frozenset(
    [
        "py",
        "js",
        "mjs",
        "cjs",
        "jsx",
        "ts",
        "mts",
        "cts",
        "tsx",
        "go",
        "rs",
        "rb",
        "php",
        "c",
        "h",
        "cc",
        "cpp",
        "hpp",
        "java",
        "kt",
        "swift",
        "lua",
        "sh",
        "pl",
        "ex",
        "exs",
        "erl",
        "hs",
        "ml",
        "scala",
        "cs",
        "fs",
        "dart",
        "zig",
        "nim",
        "r",
        "jl",
    ]
)
#: Root-level files that configure a tool (its test runner's among them): code, but not
#: the agent's to change.
_CONFIG = re.compile(r"\.config\.|^\.|^(setup|noxfile|conftest|Gulpfile|Gruntfile)\.", re.I)

#: Of those, the ones that can change what the tests run (protected when writable).
_RUNNER = re.compile(r"\.config\.|^\.|^conftest\.", re.I)

#: Top-level folders that hold a project's tests.
_TEST_FOLDERS = ("tests", "test", "spec", "__tests__")
#: Test files wherever they lie (Python, Go, JavaScript and TypeScript conventions).
_TEST_FILES = (
    "**/test_*.py",
    "**/*_test.py",
    "**/*_test.go",
    "**/*.test.*",
    "**/*.spec.*",
    "**/__tests__/**",
)


@dataclass(repr=False, eq=False, match_args=False)
class Project:
    """What ``detect`` found: the kind, the test command, the writable folders, the tests
    kept as they are, and why each default was chosen (``notes``, for a person)."""

    kind: str
    test: str
    writable: list[str] = field(default_factory=list)
    why: str = ""
    add_only: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    carry: list[str] = field(default_factory=list)
    protected: list[str] = field(default_factory=list)


def detect(root: Path) -> Project:
    """The project at ``root``: its kind, test command and scope (see the module docstring)."""
    project = _kind(root)
    files, ignored = _seen(root)
    folders = [name for name in _folders(root) if name + "/" not in ignored]
    left_out = sorted(name for name in _folders(root) if name + "/" in ignored)
    tests = [name for name in folders if name in _TEST_FOLDERS and _holds_files(root / name)]
    add_only = [f"{name}/**" for name in tests]
    rest = [f for f in files if not any(f.startswith(name + "/") for name in tests)]
    # Test folders deeper down (a monorepo's packages/a/test/).
    add_only += [f"**/{name}/**" for name in _TEST_FOLDERS if any(f"/{name}/" in f for f in rest)]
    add_only += [g for g in _TEST_FILES if any(matches(f, (g,)) for f in rest)]
    at_root = [f for f in files if "/" not in f and "." in f]
    code = [f for f in at_root if f.rsplit(".", 1)[1] in _CODE]
    configs = sorted(f for f in code if _CONFIG.search(f))
    root_code = sorted({"*." + f.rsplit(".", 1)[1] for f in code if f not in configs})
    own = [f"{name}/**" for name in folders if name not in tests] + root_code
    # No code of its own yet: the usual folders (tests too, when there are none to keep).
    fallback = ["src/**"] if add_only else ["src/**", "tests/**"]
    project.writable = own or fallback
    project.add_only = add_only
    if project.kind == "python":
        # A new conftest.py can skip or deselect every test beside it: add-only is not
        # enough there.
        project.protected = ["**/conftest.py"]
    if root_code:  # *.js at the root reaches jest.config.js, a test runner's configuration
        project.protected += [
            c
            for c in configs
            if _RUNNER.search(c) and matches(c, root_code) and not matches(c, project.protected)
        ]
    found = carried(root, {"criteria": [{"run": project.test}]})
    project.carry = [c.name + "/" for c in found]
    if found:
        project.notes.append(
            "the checks see these ignored folders read-only, as they were before the agent "
            "ran (verify.carry): " + "; ".join(f"{c.name}/ ({c.why})" for c in found)
        )
    if left_out:
        project.notes.append(
            f"left out of the writable scope: {', '.join(n + '/' for n in left_out)} "
            "(git ignores it)"
        )
        unseen = [n + "/" for n in left_out if n + "/" not in project.carry]
        if unseen:
            project.notes.append(
                f"the checks do not see {', '.join(unseen)} (ignored): name what they need "
                "in verify.carry, or reset it with the recipes' --reset-path"
            )
    if add_only:
        project.notes.append(
            f"the existing tests ({', '.join(add_only)}) are add-only: the agent may add "
            "tests, never change or delete the ones that judge it (scope.add_only in "
            "loop.yaml)"
        )
    if root_code:
        project.notes.append(
            f"the code at the root is writable ({', '.join(root_code)})"
            + (f", its tool configuration not ({', '.join(configs)})" if configs else "")
        )
    if project.protected:
        project.notes.append(
            f"protected: {', '.join(project.protected)}: a conftest.py or a test runner's "
            "configuration can skip or deselect the tests that judge the agent "
            "(scope.protected)"
        )
    return project


def _kind(root: Path) -> Project:
    """The project's kind and test command."""
    writable: list[str] = []
    makefile = root / "Makefile"
    if makefile.is_file() and re.search(
        r"^test\s*:", makefile.read_text(encoding="utf-8", errors="replace"), re.M
    ):
        return Project("make", "make test", writable, "a Makefile with a test target")
    package = root / "package.json"
    if package.is_file():
        try:
            scripts = json.loads(package.read_text(encoding="utf-8")).get("scripts") or {}
        except (ValueError, AttributeError):
            scripts = {}
        if isinstance(scripts, dict) and scripts.get("test"):
            return Project("node", "npm test", writable, "package.json with a test script")
    if (root / "Cargo.toml").is_file():
        return Project("rust", "cargo test", writable, "Cargo.toml")
    if (root / "go.mod").is_file():
        return Project("go", "go test ./...", writable, "go.mod")
    tox = (root / "tox.ini").is_file()
    if tox and shutil.which("tox"):
        return Project("python", "tox -q", writable, "tox.ini")
    python = ("pyproject.toml", "setup.py", "setup.cfg", "pytest.ini")
    if tox or any((root / name).is_file() for name in python) or (root / "tests").is_dir():
        why = "tox.ini, but tox is not installed: pytest" if tox else "a Python project"
        return Project("python", "python -m pytest -q", writable, why)
    return Project("unknown", "make test", writable, "nothing recognised: edit the check")


def _folders(root: Path) -> list[str]:
    """The top-level folders that may be the project's own (not hidden, not vendored)."""
    return sorted(
        p.name
        for p in root.iterdir()
        if p.is_dir() and not p.name.startswith(".") and p.name not in _NOT_SOURCE
    )


def _holds_files(folder: Path) -> bool:
    return any(p.is_file() for p in folder.rglob("*"))


def _seen(root: Path) -> tuple[list[str], set[str]]:
    """The files git sees at ``root`` and which top-level folders it ignores (``name/``);
    outside a repository (or without git), nothing is known of either."""
    try:
        files = git.listed_files(root)
        ignored = set(git.ignored(root, [name + "/" for name in _folders(root)]))
    except (LoopkitError, OSError):
        return [], set()
    return files, ignored


#: The kinds whose test command loopkit reads test by test (pytest, go test, cargo test):
#: there ``lk init`` asks a fix to be proven by a test (``verify.prove_new_tests``).
PER_TEST = frozenset({"python", "go", "rust"})


def contract_text(project: Project) -> str:
    """A commented loop.yaml for ``project``."""
    writable = ", ".join(json.dumps(g) for g in project.writable)
    protected = ", ".join(json.dumps(g) for g in project.protected)
    add_only = (
        f"  add_only: [{', '.join(json.dumps(g) for g in project.add_only)}]"
        "   # the existing tests: new ones may be added, these never changed or deleted\n"
        if project.add_only
        else ""
    )
    carry = (
        f"  carry: [{', '.join(json.dumps(c) for c in project.carry)}]"
        "   # ignored folders they see read-only\n"
        if project.carry
        else ""
    )
    if project.kind in PER_TEST:
        carry += "  prove_new_tests: fixes   # a fix lands only with a test that fails without it\n"
    if carry:
        carry = (
            "\nverify:                    # the checks run in a clean room at the repository's path\n"
            + carry
        )
    return f"""\
# The loop contract: what the loop is for, what the agent may touch, what "done" means
# and what it may spend. Check it with `lk-plan check loop.yaml`; the full schema is
# `lk schema contract`. Detected: {project.why}.
version: 1
objective: Describe, in one sentence, what the agent should achieve.

scope:
  writable: [{writable}]   # what the agent may change
  protected: [{protected}]            # wins over writable (migrations/**, a lockfile, ...)
{add_only}
criteria:                  # the acceptance checks: "done" means every one passes
  - {{name: tests, run: {json.dumps(project.test)}, timeout: 600}}
{carry}
budgets:                   # across runs; exhaustion parks the task with a checkpoint
  attempts: 4
  changed_files: 10
  changed_lines: 400
  wall_seconds: 3600
  same_failure: 2          # the same failure again after a new attempt: replan, then park

worker:                    # claude, codex, or {{provider: command, command: "..."}}
  provider: claude
  max_turns: 30
  timeout: 900

sandbox:
  mode: auto               # the worker runs sandboxed where the OS allows (required / off)

memory: MEMORY.md          # short retrospectives of parked tasks, carried into every handoff
"""


TASKS_TEXT = """\
# Tasks

One item per task, in order. `- [ ]` open, `- [x]` done, `- [!]` parked; `GOAL:` at the
start makes a judged goal. The indented plan is checked (`lk-plan check TASKS.md`): its
size, its exact scope, what it depends on, and an `end` line.

- [ ] Describe the first task here {#first-task}
  budget: 40 lines / 2 files
  scope: {scope}
  end
"""


def recipes_dir() -> Path:
    """The recipes: inside the installed package (wheel), else the source tree's recipes/."""
    return shipped("recipes", "loop.sh", "recipes/loop.sh not found next to the loopkit package")


@dataclass(repr=False, eq=False, match_args=False)
class Written:
    path: Path
    skipped: bool  # it existed and --force was not given
    merged: bool = False  # the project's own file, loopkit's block added or renewed


def write(root: Path, *, force: bool = False) -> tuple[Project, list[Written]]:
    """Write loop.yaml, TASKS.md, MEMORY.md and AGENTS.md at ``root`` (never overwriting
    without ``force``); the project found and what was written."""
    project = detect(root)
    ctext = contract_text(project)
    data = contract.checked(contract.parse_text(ctext.encode(), "loop.yaml"), "loop.yaml")
    tasks = TASKS_TEXT.replace("{scope}", project.writable[0].removesuffix("**"))
    guidance_block = guidance.render(data)
    files = {
        "loop.yaml": ctext,
        "TASKS.md": tasks,
        "MEMORY.md": "# Memory\n\nRetrospectives of parked tasks are appended here.\n",
        "AGENTS.md": guidance.update(None, guidance_block),
    }
    out = []
    for name, text in files.items():
        path = root / name
        merged = name == "AGENTS.md" and path.is_file()
        if path.exists() and not force and not merged:
            out.append(Written(path, skipped=True))
            continue
        if merged:  # the project's own guidance kept: loopkit's is a block of its own
            text = guidance.update(path.read_text(encoding="utf-8"), guidance_block)
        atomic_write(path, text, keep_mode=True)
        out.append(Written(path, skipped=False, merged=merged))
    return project, out
