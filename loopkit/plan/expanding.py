"""The tree a plan is checked against, and the ``each:`` expansion: one slice per entity.

``tree_files`` lists the repository's files (tracked and untracked, ignored ones left out;
a plain folder is walked). ``expand`` turns every ``each: GLOB`` item into one slice per
matching file, sorted by path, with the id ``<id>-<stem>`` and the file as its scope:
the same tree gives the same slices, at ``lk-plan check`` and at ``lk-plan next`` alike.
The first mark of one of them writes the item's slices into the TASKS.md
(``loopkit.plan.marking.written_out``), and from then on they are the item's slices, each
marked on its own line, whatever files the tree gains later.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Collection
from pathlib import Path

from loopkit import git
from loopkit.evidence import globs
from loopkit.plan.parsing import Plan, PlanProblem, Task, slugify

#: A tree is listed up to this many files (a plan names files, it does not index a disk).
MAX_TREE_FILES = 200_000
#: An ``each:`` item expands to at most this many slices.
MAX_EACH = 500
_SKIP_DIRS = {".git", ".loopkit", "node_modules", ".venv", "__pycache__"}


def needs_tree(plan: Plan) -> bool:
    """Whether checking this plan looks at the tree (an ``each:`` or a ``files:`` list)."""
    return any(t.each is not None or t.files for t in plan.tasks)


def root_of(start: Path) -> Path:
    """The repository holding ``start`` (a folder), else ``start`` itself."""
    found = git.plain_root(start)
    return found if found is not None else start


def tree_files(root: Path) -> set[str]:
    """The repository-relative paths of the files under ``root`` (``/``-separated)."""
    if (root / ".git").exists():
        done = git.git(
            ["ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=root,
            check=False,
        )
        if done.exit_code == 0:
            names = done.stdout.decode("utf-8", "surrogateescape").split("\0")
            return {n for n in names[:MAX_TREE_FILES] if n and (root / n).is_file()}
    out: set[str] = set()
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
        for name in files:
            out.add(Path(folder, name).relative_to(root).as_posix())
            if len(out) >= MAX_TREE_FILES:
                return out
    return out


def expand(plan: Plan, tree: Collection[str]) -> None:
    """Give every ``each:`` item its slices, in place; problems go to ``plan.problems``."""
    if not any(t.each is not None for t in plan.tasks):
        return
    taken = {t.id for t in plan.tasks}
    ordered: list[Task] = []
    for t in plan.tasks:
        ordered.append(t)
        if t.each is None:
            continue

        def problem(message: str, task: Task = t) -> None:
            plan.problems.append(
                PlanProblem(f"$.tasks[{task.index}].each", message, task.each_line, task.id)
            )

        if t.parent is not None:
            problem("each: on a slice: slices do not nest, put each: on a top-level item")
            continue
        if t.slices:
            continue  # written out (at the first mark of a slice): those are the slices
        matched = sorted(p for p in tree if globs.matches(p, [t.each]))
        if not matched:
            problem(f"each {t.each!r} matches no file in the tree")
            continue
        if len(matched) > MAX_EACH:
            problem(f"each {t.each!r} matches {len(matched)} files; at most {MAX_EACH}")
            continue
        for path in matched:
            base = f"{t.id}-{slugify(Path(path).stem)}"
            sid, n = base, 1
            while sid in taken:
                n += 1
                sid = f"{base}-{n}"
            taken.add(sid)
            s = Task(
                text=f"{t.text} ({path})",
                kind=t.kind,
                status=t.status,
                line=t.line,
                indent=t.indent + 2,
            )
            s.id = sid
            s.scope = [path]
            s.files = [path]
            s.budget = dict(t.budget)
            s.issue, s.closes = t.issue, t.closes
            s.accept, s.checks = list(t.accept), list(t.checks)
            s.has_plan = s.ended = s.expanded = True
            s.parent = t
            t.slices.append(s)
            ordered.append(s)
    plan.tasks[:] = ordered
    for i, task in enumerate(ordered):
        task.index = i
    # The parse problems named indexes before the slices came in between: name them again.
    ids = plan.by_id()
    for p in plan.problems:
        if p.task in ids and p.path.startswith("$.tasks["):
            rest = p.path[p.path.index("]") + 1 :]
            p.path = f"$.tasks[{ids[p.task].index}]{rest}"


def prepare(plan: Plan, tasks_file: str) -> set[str] | None:
    """The tree of the repository ``tasks_file`` lives in (the current folder's for
    stdin), with the plan's ``each:`` items expanded; None when the plan needs no tree."""
    if not needs_tree(plan):
        return None
    folder = Path.cwd() if tasks_file in ("-", "<stdin>") else Path(tasks_file).resolve().parent
    tree = tree_files(root_of(folder))
    expand(plan, tree)
    return tree


def folders(start: Path) -> Callable[[str], bool]:
    """Which repository-relative paths are folders in the work tree of the repository
    holding ``start`` (a folder): how lk-plan reads a scope entry with no wildcard. The
    repository is looked up once, at the first question."""

    @functools.cache
    def root() -> Path:
        return root_of(start)

    def is_folder(path: str) -> bool:
        return (root() / path).is_dir()

    return is_folder


def folders_of(tasks_file: str) -> Callable[[str], bool]:
    """``folders`` for the repository a TASKS.md lives in (the current folder's for stdin)."""
    if tasks_file in ("-", "<stdin>"):
        return folders(Path.cwd())
    return folders(Path(tasks_file).resolve().parent)
