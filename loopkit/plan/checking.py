"""Checking the plans of a TASKS.md: every problem, in document order.

The parse problems first, then what only the whole plan shows: plans missing where others
have them, budgets over the split threshold (and the slices that split them), dependencies
unknown or cyclic, scopes outside the contract's writable scope or on its protected paths.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from loopkit.contract import DEFAULTS
from loopkit.evidence import globs
from loopkit.plan.parsing import Plan, PlanProblem, Task
from loopkit.plan.readiness import all_depends


def threshold(contract: Mapping[str, Any] | None) -> tuple[int, int]:
    """(split_lines, split_files): the contract's, else the contract defaults."""
    plan = {**DEFAULTS["plan"], **((contract or {}).get("plan") or {})}
    return int(plan["split_lines"]), int(plan["split_files"])


def check(
    plan: Plan,
    *,
    contract: Mapping[str, Any] | None = None,
    tree: Collection[str] | None = None,
    is_folder: Callable[[str], bool] | None = None,
) -> list[PlanProblem]:
    """Every problem in a parsed plan (parse problems first), in document order.

    ``tree`` (the repository's files, ``expanding.tree_files``) checks each ``files:``
    entry of an open task against the disk: it exists, or it is declared new.
    ``is_folder`` (``expanding.folders``) tells which scope entries with no wildcard are
    folders in the work tree; every other one names a file (``src/a.py`` cannot hold a
    ``conftest.py``). Without it, the folders are those ``tree`` holds files in; without
    either, such an entry names a file unless it ends with ``/``.
    """
    if is_folder is None and tree is not None:
        is_folder = _folders_in(tree)
    split_lines_, split_files_ = threshold(contract)
    out = list(plan.problems)

    def is_file(path: str) -> bool:
        return is_folder is None or not is_folder(path)

    tasks = plan.tasks
    ids = plan.by_id()

    def problem(task: Task, where: str, message: str) -> None:
        out.append(PlanProblem(f"$.tasks[{task.index}]{where}", message, task.line, task.id))

    if not tasks:
        out.append(
            PlanProblem("$.tasks", "no tasks: expected checklist items such as '- [ ] Fix ...'")
        )
        return out
    planned = any(t.has_plan for t in tasks)
    for t in tasks:
        if planned and not t.has_plan and t.status == "open":
            problem(
                t,
                "",
                "no plan: other items carry plans, so this open item needs one too "
                "(budget:, scope:, end) -- or the file was cut short",
            )
        if t.has_plan and not t.slices:
            if not t.scope and t.each is None:  # each: makes the slices' scopes
                problem(t, ".scope", "plan has no scope: list the files or globs it may change")
            if not t.budget:
                problem(
                    t, ".budget", "plan has no budget: expected 'budget: <N> lines / <M> files'"
                )
        for dep in t.depends:
            if dep == t.id:
                problem(t, ".depends", "a task cannot depend on itself")
            elif t.parent is not None and dep == t.parent.id:
                problem(t, ".depends", "a slice cannot depend on its own parent")
            elif dep not in ids:
                problem(t, ".depends", f"depends on unknown task {dep!r}")
            elif t.parent is not None and ids[dep].parent is t.parent and ids[dep].index > t.index:
                problem(
                    t,
                    ".depends",
                    f"slices run in their written order: {t.id!r} cannot depend on the later "
                    f"slice {dep!r}",
                )
        if _over(t, split_lines_, split_files_) and not t.slices:
            est = _estimate(t)
            if t.parent is not None:
                problem(
                    t,
                    ".budget",
                    f"slice budget {est} is over the split threshold ({split_lines_} lines or "
                    f"{split_files_} files): make it smaller",
                )
            else:
                problem(
                    t,
                    ".budget",
                    f"budget {est} is over the split threshold ({split_lines_} lines or "
                    f"{split_files_} files): split it into slices (nested items with disjoint "
                    "scopes)",
                )
        if t.slices:
            _check_slices(t, problem, is_file)
    cycle = _find_cycle(tasks, ids)
    if cycle:
        first = ids[cycle[0]]
        problem(first, ".depends", "dependency cycle: " + " -> ".join([*cycle, cycle[0]]))
    if contract is not None:
        _check_against_contract(tasks, contract, problem, is_file)
    _check_files(tasks, contract, tree, out)
    out.sort(key=lambda p: p.line if p.line is not None else 10**9)
    return out


def _folders_in(tree: Collection[str]) -> Callable[[str], bool]:
    """Which paths are folders of ``tree`` (a set of files), listed at the first question."""
    found: set[str] = set()

    def is_folder(path: str) -> bool:
        if not found:
            for f in tree:
                parts = f.split("/")[:-1]
                for k in range(1, len(parts) + 1):
                    found.add("/".join(parts[:k]))
            found.add("")  # the root: listed, even when the tree is empty
        return path in found

    return is_folder


def _estimate(t: Task) -> str:
    parts = []
    if "lines" in t.budget:
        parts.append(f"{t.budget['lines']} lines")
    if "files" in t.budget:
        parts.append(f"{t.budget['files']} files")
    if len(t.scope) > t.budget.get("files", 0):
        parts.append(f"{len(t.scope)} scope entries")
    return " / ".join(parts)


def _over(t: Task, max_lines: int, max_files: int) -> bool:
    return (
        t.budget.get("lines", 0) > max_lines
        or t.budget.get("files", 0) > max_files
        or len(t.scope) > max_files
    )


def _check_slices(parent: Task, problem: Any, is_file: Callable[[str], bool]) -> None:
    for s in parent.slices:
        if parent.scope:
            for g in s.scope:
                if not any(globs.overlap(g, p, is_file=is_file) for p in parent.scope):
                    problem(s, ".scope", f"scope {g!r} is outside its parent's scope")
    for i, a in enumerate(parent.slices):
        for b in parent.slices[i + 1 :]:
            for ga in a.scope:
                for gb in b.scope:
                    if globs.overlap(ga, gb, is_file=is_file):
                        problem(
                            b,
                            ".scope",
                            f"slice scopes must be disjoint: {gb!r} overlaps {ga!r} of slice "
                            f"{a.id!r}",
                        )


def _check_against_contract(
    tasks: list[Task], contract: Mapping[str, Any], problem: Any, is_file: Callable[[str], bool]
) -> None:
    scope = contract.get("scope") or {}
    allowed = [
        *(scope.get("writable") or []),
        *(scope.get("always_allowed") or []),
        *(scope.get("add_only") or []),  # a task may add files there
    ]
    protected = list(scope.get("protected") or [])
    for t in tasks:
        for g in t.scope:
            if allowed and not any(globs.overlap(g, a, is_file=is_file) for a in allowed):
                problem(t, ".scope", f"scope {g!r} is outside the contract's writable scope")
            elif protected and _names_protected(g, protected, is_file):
                problem(t, ".scope", f"scope {g!r} is protected by the contract")


def _names_protected(scope: str, protected: list[str], is_file: Callable[[str], bool]) -> bool:
    """Whether a scope entry with no wildcard names a protected path: a protected file, or
    a folder the protected globs cover whole. A glob scope is never refused here (what it
    reaches beyond the protected paths is writable), nor a file or folder that merely
    could hold a protected one (``src/`` beside ``**/conftest.py``)."""
    path = globs.normalize(scope)
    if not globs.is_literal(scope):
        return False
    if globs.is_literal(path) and is_file(path):
        return globs.matches(path, protected)
    return globs.covers_folder(path.removesuffix("/**"), protected)


def _check_files(
    tasks: list[Task],
    contract: Mapping[str, Any] | None,
    tree: Collection[str] | None,
    out: list[PlanProblem],
) -> None:
    """Each exact file of an open task: inside its scope and the contract's writable
    scope, not protected, over no budget, and on disk unless declared new."""
    scope = (contract or {}).get("scope") or {}
    allowed = [
        *(scope.get("writable") or []),
        *(scope.get("always_allowed") or []),
        *(scope.get("add_only") or []),
    ]
    protected = list(scope.get("protected") or [])
    for t in tasks:
        # A parent's files are its slices' (a re-split task's slices land them one by one).
        if not t.files or t.status != "open" or t.expanded or t.slices:
            continue

        def problem(path: str, message: str, task: Task = t) -> None:
            out.append(
                PlanProblem(
                    f"$.tasks[{task.index}].files", message, task.file_lines.get(path), task.id
                )
            )

        for f in t.files:
            if t.scope and not globs.matches(f, t.scope):
                problem(f, f"file {f!r} is outside the task's scope ({', '.join(t.scope)})")
            if allowed and not globs.matches(f, allowed):
                problem(f, f"file {f!r} is outside the contract's writable scope")
            elif protected and globs.matches(f, protected):
                problem(f, f"file {f!r} is protected by the contract")
            if tree is None:
                continue
            if f in t.new_files:
                if f in tree:
                    problem(f, f"file {f!r} is declared new but exists in the tree")
            elif f not in tree:
                problem(
                    f,
                    f"file {f!r} does not exist in the tree: declare it new ('new: {f}' or '+{f}')",
                )
        limit = t.budget.get("files")
        if limit is not None and len(t.files) > limit:
            out.append(
                PlanProblem(
                    f"$.tasks[{t.index}].files",
                    f"files: lists {len(t.files)} files, over its budget of {limit} files",
                    t.line,
                    t.id,
                )
            )


def _find_cycle(tasks: list[Task], ids: dict[str, Task]) -> list[str] | None:
    """The first dependency cycle, depth first in document order; None when there is none.

    Iterative (an explicit stack of edge iterators): a chain of thousands of tasks is a
    plan like any other, not a RecursionError.
    """
    edges = {t.id: [d for d in all_depends(t) if d in ids] for t in tasks}
    state: dict[str, int] = {}  # 1: on the current path, 2: explored
    for t in tasks:
        if t.id in state:
            continue
        state[t.id] = 1
        path = [t.id]
        stack = [iter(edges.get(t.id, []))]
        while stack:
            for d in stack[-1]:
                if state.get(d) == 1:
                    return path[path.index(d) :]
                if d not in state:
                    state[d] = 1
                    path.append(d)
                    stack.append(iter(edges.get(d, [])))
                    break
            else:
                state[path.pop()] = 2
                stack.pop()
    return None


def warnings(plan: Plan, *, contract: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """What is valid but will not go as it seems: a GOAL item (decided by a judge) under a
    contract that names no judge -- lk-judge would refuse to run, and the goal could
    never complete."""
    judge = (contract or {}).get("judge")
    if contract is None or (isinstance(judge, Mapping) and judge.get("provider")):
        return []
    return [
        {
            "path": f"$.tasks[{t.index}]",
            "line": t.line,
            "message": f"{t.id} is a GOAL, decided by a judge, and the contract names none: "
            "set judge.provider (claude, codex, or command with judge.command)",
        }
        for t in plan.tasks
        if t.kind == "goal" and t.status == "open"
    ]
