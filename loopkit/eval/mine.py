"""``lk eval mine``: tasks from a repository's own history, the way the benchmarks build
them.

A commit that changed source and tests together is a task: its base is the commit's
parent (the source change not made yet), its text the commit's message, and its new or
changed test files are **hidden** -- never in the worker's tree, written over the
trial's tree only to score it. Each candidate is validated before it becomes a task:
its test files are run at the base (with the commit's tests written in) and at the
commit; FAIL_TO_PASS are the tests that pass with the real fix and not at the base,
PASS_TO_PASS those that pass at both; a commit with no FAIL_TO_PASS is no task. The
task's checks: FAIL_TO_PASS and PASS_TO_PASS by their ids, pytest's or unittest's
(hidden), and the changed source compiling (visible). ``lk eval run`` validates them again, through
lk-verify, before any trial.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import shutil
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from loopkit import git, proc

#: A path is a test's when its name or a folder matches one of these.
TEST_NAMES = ("test_*.py", "*_test.py", "conftest.py")
TEST_FOLDERS = ("tests", "test", "testing")
#: pytest's -rA summary: ``PASSED path::id`` / ``FAILED path::id - why``.
RESULT = re.compile(r"^(PASSED|FAILED|ERROR|XPASS|XFAIL|SKIPPED) (.+)$", re.M)
#: unittest's -v lines: ``test_x (pkg.mod.Case.test_x) ... ok`` (Python 3.11; before it
#: the parenthesis names the class alone), a docstring's first line between, maybe.
UNITTEST = re.compile(
    r"^(\w+) \(([\w.]+)\)(?:\n(?!\w+ \()[^\n]*?)? \.\.\. "
    r"(ok|FAIL|ERROR|skipped|expected failure|unexpected success)",
    re.M,
)
#: Seconds one test run of a candidate may take.
TEST_TIMEOUT = 600


@dataclass
class Candidate:
    commit: str
    parent: str
    message: str
    sources: list[str]
    tests: list[str]


@dataclass
class Mined:
    """A validated task."""

    id: str
    text: str
    base: str
    fix: str
    sources: list[str]
    tests: list[str]
    fail_to_pass: list[str] = field(default_factory=list)
    pass_to_pass: list[str] = field(default_factory=list)


def is_test(path: str) -> bool:
    parts = path.split("/")
    return any(fnmatch.fnmatch(parts[-1], p) for p in TEST_NAMES) or any(
        part in TEST_FOLDERS for part in parts[:-1]
    )


def candidates(repo: Path, rev: str, limit: int) -> Iterator[Candidate]:
    """Commits (no merges, newest first, at most ``limit`` looked at) that changed Python
    source and tests together."""
    out = git.out(
        [
            "log",
            "--no-merges",
            f"--max-count={limit}",
            "--format=%x00%H %P%x01%B%x01",
            "--name-only",
            "--no-renames",
            rev,
        ],
        cwd=repo,
    )
    for chunk in out.split("\0")[1:]:
        head, message, names = [*chunk.split("\x01"), "", ""][:3]
        shas = head.split()
        if len(shas) != 2:  # a root commit has no parent to revert to
            continue
        paths = [p for p in names.split("\n") if p.strip()]
        tests = [p for p in paths if is_test(p) and p.endswith(".py")]
        sources = [p for p in paths if p.endswith(".py") and not is_test(p)]
        if tests and sources:
            yield Candidate(shas[0], shas[1], message.strip(), sources, tests)


def is_unittest(command: list[str]) -> bool:
    """Whether the test command is unittest's (``python3 -m unittest``), not pytest's."""
    return "unittest" in command


def modules(tests: list[str]) -> list[str]:
    """unittest's names of test files: ``tests/test_x.py`` -> ``tests.test_x``."""
    return [t.removesuffix(".py").replace("/", ".") for t in tests]


def run_tests(tree: Path, command: list[str], tests: list[str]) -> tuple[set[str], set[str]]:
    """The ids of the tests that passed and of those that did not, in ``tests``."""
    if is_unittest(command):
        done = proc.run([*command, "-v", *modules(tests)], cwd=tree, timeout=TEST_TIMEOUT)
        ran: dict[str, str] = {}
        for name, where, status in UNITTEST.findall(done.output.decode(errors="replace")):
            ran[where if where.endswith("." + name) else f"{where}.{name}"] = status
        ok = {t for t, status in ran.items() if status in ("ok", "unexpected success")}
        return ok, set(ran) - ok
    done = proc.run(
        [*command, "-rA", "-q", "-p", "no:cacheprovider", *tests],
        cwd=tree,
        timeout=TEST_TIMEOUT,
    )
    passed: set[str] = set()
    failed: set[str] = set()
    for kind, rest in RESULT.findall(done.output.decode(errors="replace")):
        tid = rest.split(" - ")[0].strip() if kind != "PASSED" else rest.strip()
        (passed if kind in ("PASSED", "XPASS") else failed).add(tid)
    return passed, failed - passed


def validate(
    repo: Path, c: Candidate, command: list[str], scratch: Path
) -> tuple[list[str], list[str]]:
    """FAIL_TO_PASS and PASS_TO_PASS of a candidate: its tests run at the base with the
    commit's test files written in, and at the commit (both at once)."""
    tests = [t for t in c.tests if _exists(repo, c.commit, t)]
    if not tests:
        return [], []
    base, fix = scratch / f"{c.commit[:12]}-base", scratch / f"{c.commit[:12]}-fix"
    git.out(["worktree", "add", "--detach", "--quiet", str(base), c.parent], cwd=repo)
    try:
        git.out(["worktree", "add", "--detach", "--quiet", str(fix), c.commit], cwd=repo)
        try:
            write_hidden(repo, c.commit, tests, base)
            with ThreadPoolExecutor(max_workers=2) as pool:
                before, after = (
                    passed
                    for passed, _ in pool.map(
                        lambda tree: run_tests(tree, command, tests), [base, fix]
                    )
                )
        finally:
            git.out(["worktree", "remove", "--force", str(fix)], cwd=repo)
    finally:
        git.out(["worktree", "remove", "--force", str(base)], cwd=repo)
    return sorted(after - before), sorted(after & before)


def write_hidden(repo: Path, commit: str, paths: list[str], tree: Path) -> None:
    """The files ``paths`` as they are at ``commit``, written over ``tree`` (whatever the
    agent left there under those names)."""
    for rel in paths:
        body = git.git(["show", f"{commit}:{rel}"], cwd=repo, check=False)
        if body.exit_code != 0:
            continue
        dest = tree / rel
        if dest.is_symlink() or dest.is_dir():
            if dest.is_dir() and not dest.is_symlink():
                shutil.rmtree(dest)
            else:
                dest.unlink()
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(body.stdout)


def _exists(repo: Path, commit: str, path: str) -> bool:
    return git.git(["cat-file", "-e", f"{commit}:{path}"], cwd=repo, check=False).exit_code == 0


def slug(c: Candidate) -> str:
    words = re.sub(r"[^a-z0-9]+", "-", c.message.splitlines()[0].lower()).strip("-")
    return f"{c.commit[:8]}-{words[:40].rstrip('-')}" if words else c.commit[:8]


def mine(
    repo: Path,
    *,
    rev: str,
    look: int,
    want: int,
    command: list[str],
    say: Callable[[str], None],
) -> list[Mined]:
    """Up to ``want`` validated tasks from the last ``look`` commits before ``rev``."""
    found: list[Mined] = []
    with tempfile.TemporaryDirectory(prefix="loopkit-mine-") as tmp:
        for c in candidates(repo, rev, look):
            f2p, p2p = validate(repo, c, command, Path(tmp))
            if not f2p:
                say(f"{c.commit[:12]}: no test fails before it and passes after: not a task")
                continue
            say(f"{c.commit[:12]}: {len(f2p)} fail-to-pass, {len(p2p)} pass-to-pass")
            found.append(
                Mined(slug(c), c.message, c.parent, c.commit, c.sources, c.tests, f2p, p2p)
            )
            if len(found) >= want:
                break
    return found


def suite(
    repo: Path, out: Path, tasks: list[Mined], command: list[str], repos: list[Path] | None = None
) -> str:
    """The suite file's text: the mined tasks, each at its own base (and in its own
    repository, ``repos``, when they differ), and a configuration to edit."""
    entries = [as_task(m, command) for m in tasks]
    for entry, own in zip(entries, repos or [], strict=False):
        if own != repo:
            entry["repo"] = os.path.relpath(own, out.parent.resolve())
    doc = {
        "version": 1,
        "name": out.stem,
        "repo": os.path.relpath(repo, out.parent.resolve()),
        "tasks": entries,
        "configs": [{"name": "claude", "provider": "claude"}],
        "repeats": 3,
    }
    head = (
        f"# Tasks by lk eval mine from {repo.name}: each a source change to make again,\n"
        "# its tests hidden from the agent. Edit the configs.\n"
    )
    return head + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=100)


#: Where imported instances' commits are kept in their repository.
INSTANCE_REFS = "refs/loopkit/instances/"


def instance(raw: object, repos: Path, where: str) -> tuple[Path, Mined]:
    """One SWE-bench-style instance (``instance_id``, ``repo``, ``base_commit``,
    ``problem_statement``, ``patch``, ``test_patch``, ``FAIL_TO_PASS``, ``PASS_TO_PASS``)
    as a task of its local repository (``repos``/<name>, or <owner>__<name>): the fix and
    its tests made one commit on the base, kept under ``refs/loopkit/instances/``, so the
    task is like a mined one. ValueError naming what is wrong."""
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: expected an instance object")
    missing = [
        k
        for k in ("instance_id", "repo", "base_commit", "patch", "test_patch", "FAIL_TO_PASS")
        if not raw.get(k)
    ]
    if missing:
        raise ValueError(f"{where}: missing {', '.join(missing)}")
    owner_name = str(raw["repo"])
    candidates_ = [repos / owner_name.replace("/", "__"), repos / owner_name.split("/")[-1]]
    repo = next((c for c in candidates_ if (c / ".git").exists()), None)
    if repo is None:
        raise ValueError(f"{where}: no clone of {owner_name} in {repos}")

    def ids(value: object) -> list[str]:
        found = json.loads(value) if isinstance(value, str) else value
        if not isinstance(found, list):
            raise ValueError(f"{where}: expected a list of test ids")
        return [str(x) for x in found]

    tid = re.sub(r"[^a-z0-9]+", "-", str(raw["instance_id"]).lower()).strip("-")[:64] or "task"
    base = git.out(["rev-parse", "--verify", f"{raw['base_commit']}^{{commit}}"], cwd=repo)
    tests = sorted(set(re.findall(r"^\+\+\+ b/(\S+)", str(raw["test_patch"]), re.M)))
    fix = _commit(repo, base, [str(raw["patch"]), str(raw["test_patch"])], tid)
    git.out(["update-ref", INSTANCE_REFS + tid, fix], cwd=repo)
    sources = sorted(set(re.findall(r"^\+\+\+ b/(\S+\.py)", str(raw["patch"]), re.M)))
    text = str(raw.get("problem_statement") or raw["instance_id"])
    return repo, Mined(
        tid,
        text,
        base,
        fix,
        sources,
        tests,
        ids(raw["FAIL_TO_PASS"]),
        ids(raw.get("PASS_TO_PASS") or []),
    )


def instances(path: Path, repos: Path) -> tuple[list[Path], list[Mined]]:
    """The instances of a JSON-lines file, each with its repository."""
    where: list[Path] = []
    found: list[Mined] = []
    lines = [x for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    for i, line in enumerate(lines, 1):
        repo, task = instance(json.loads(line), repos, f"line {i}")
        where.append(repo.resolve())
        found.append(task)
    return where, found


def _commit(repo: Path, base: str, patches: list[str], name: str) -> str:
    """A commit on ``base`` with ``patches`` applied (made in a scratch worktree)."""
    with tempfile.TemporaryDirectory(prefix="loopkit-instance-") as tmp:
        tree = Path(tmp) / "tree"
        git.out(["worktree", "add", "--detach", "--quiet", str(tree), base], cwd=repo)
        try:
            for patch in patches:
                done = git.git(
                    ["apply", "--whitespace=nowarn", "-"],
                    cwd=tree,
                    input=patch.encode(),
                    check=False,
                )
                if done.exit_code != 0:
                    why = done.stderr.decode(errors="replace").strip()[:200]
                    raise ValueError(f"{name}: a patch does not apply at its base: {why}")
            git.out(["add", "-A"], cwd=tree)
            who = ["-c", "user.name=loopkit", "-c", "user.email=loopkit@localhost"]
            git.out([*who, "commit", "--quiet", "--no-verify", "-m", f"instance {name}"], cwd=tree)
            return git.out(["rev-parse", "HEAD"], cwd=tree)
        finally:
            git.out(["worktree", "remove", "--force", str(tree)], cwd=repo)


def as_task(m: Mined, command: list[str]) -> dict[str, object]:
    """The suite's entry for a mined task."""
    run = shlex.join(command) + ("" if is_unittest(command) else " -q -p no:cacheprovider")
    hidden = [{"name": "fail_to_pass", "run": f"{run} {shlex.join(m.fail_to_pass)}"}]
    if m.pass_to_pass:
        hidden.append({"name": "pass_to_pass", "run": f"{run} {shlex.join(m.pass_to_pass)}"})
    python = command[0] if command and "python" in Path(command[0]).name else "python3"
    return {
        "id": m.id,
        "text": m.text,
        "base": m.base,
        "reference": m.fix,
        "criteria": [
            {"name": "compiles", "run": f"{python} -m py_compile {shlex.join(m.sources)}"}
        ],
        "hidden": {"from": m.fix, "paths": m.tests, "criteria": hidden},
    }
