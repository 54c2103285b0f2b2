"""The ratchet's transactions: begin, save, land, park, cancel, end -- and recovery.

Each step announces itself in the journal (loopkit.ratchet.journal) before it changes
anything, and each of its parts can be done again: whatever point a step stops at, the
next ``begin`` (``recover``) finishes it the same way. A step returns its result document
and exit code; the command prints them (loopkit.cli.task).

Exit codes: 0 done; 40 a landing or a park refused (the branch moved since the task
began, the commit could not be made, the decided document names no tree its checks ran
on) -- nothing committed or reverted, the work tree saved under ``refs/loopkit/``;
3 bad input (not a decided document, a task id the checklist does not have); 4 the
environment (another loop holds the lock, a dirty tree without ``--allow-dirty``, an
unsafe reset path, a full disk, a path or ref that cannot be written).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from loopkit import git, gitstore
from loopkit.background import Background
from loopkit.errors import BadInput, EnvironmentProblem, LoopkitError
from loopkit.exitcodes import ExitCode
from loopkit.files import atomic_write, newest
from loopkit.ratchet import journal, lock, memory, trees

TYPE_CHECKING = False  # typing stays unloaded at run time (start-up is a feature)
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

KIND = "loopkit/task-step"

if TYPE_CHECKING:
    #: What a step says on stderr (a line for a person); the CLI sets it.
    Say = Callable[[str], None]


class Refused(LoopkitError):
    """A landing or a park that must not happen: nothing committed or reverted."""

    code = ExitCode.NOT_LANDED

    def __init__(self, message: str, result: dict[str, Any]) -> None:
        super().__init__(message)
        self.result = result


def _quiet(_: str) -> None:
    pass


class Context:
    """One work tree: where it is, its git folder's ``loopkit/`` folder, its lock."""

    def __init__(
        self,
        cwd: str | os.PathLike[str] = ".",
        *,
        say: Say = _quiet,
        attempt_in: str | os.PathLike[str] | None = None,
    ) -> None:
        self.root = git.locate(cwd).root
        self.own = git.git_dirs(self.root).own
        self.folder = self.own / "loopkit"
        self.say = say
        #: where the attempt ran when not here: another worktree of the repository (a
        #: loop that keeps each attempt out of the checkout); saves take its tree
        self.attempt_in = git.toplevel(attempt_in) if attempt_in is not None else None

    def source(self, j: Mapping[str, Any]) -> trees.Where:
        """The work tree the attempt's files are in."""
        if self.attempt_in is None:
            return self.where(j)
        return trees.Where(
            self.attempt_in,
            git.git_dirs(self.attempt_in).own,
            Path(str(j.get("state") or self.root / ".loopkit")),
            j.get("start_ignored") or (),
        )

    def where(self, j: Mapping[str, Any]) -> trees.Where:
        return trees.Where(
            self.root,
            self.own,
            Path(str(j.get("state") or self.root / ".loopkit")),
            j.get("start_ignored") or (),
        )


def _doc_get(doc: Mapping[str, Any], *path: str) -> Any:
    value: Any = doc
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _short(commit: str) -> str:
    return commit[:12] if commit else "none"


def _result(step: str, j: Mapping[str, Any] | None, **fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": KIND, "version": 1, "step": step}
    out["task"] = (j or {}).get("task")
    out.update(fields)
    return out


# ---------------------------------------------------------------------------------- begin


def begin(
    ctx: Context,
    *,
    owner: int,
    document: dict[str, Any] | None,
    outer: int | None = None,
    contract_path: str | None = None,
    allow_dirty: bool = False,
    tasks: str | None = None,
    reset_paths: Sequence[str] = (),
    memory_file: str | None = None,
) -> dict[str, Any]:
    """Take the lock, finish what a stopped loop left, and record where the task begins
    (with ``document``; without one, the lock and the recovery alone). ``outer``: the pid
    of the loop that started this one and holds the lock for it (``LK_LOCK_OWNER``).
    A begin that fails after taking the lock releases it."""
    from loopkit.workspace import Workspace

    ws = None
    early = None
    if document is not None:
        # The start check's walk (the longest part of a begin on a big tree) runs beside
        # the rest; its answer is taken only when it found the tree clean and no recovery
        # touched the tree since (_start walks again otherwise).
        here = trees.Where(ctx.root, ctx.own, ctx.root / ".loopkit")
        early = Background(lambda: trees.start_walk(here), name="loopkit-start-walk")
    if document is not None:  # a bad contract or document is refused before anything
        ws = Workspace.open(contract_path=contract_path, document=document, cwd=ctx.root)
    with lock.guard(ctx.folder):
        held = lock.take(ctx.folder, owner, ctx.root, outer=outer)
        if held.taken_over is not None:
            ctx.say(
                f"took over the lock of a loop that is gone (pid {held.taken_over or 'unknown'}): "
                f"{held.path}"
            )
        try:
            if early is not None:
                early.wait()  # it may refresh the index: done before a recovery writes it
            recovered = recover(ctx, owner=owner)
            result = _result(
                "begin",
                None,
                lock={"path": str(held.path), "owner": held.owner, "nested": held.nested},
                recovered=recovered,
            )
            if ws is None or document is None:
                return result
            finished = _finished(recovered, _doc_get(document, "task", "id"))
            if finished is not None:  # the stopped loop's task was this one: it is done now
                result.update(task=finished["task"], finished=finished["code"])
                return result
            walked = None
            if early is not None and not recovered:
                walked = early.result()
                walked = walked if not walked[0] else None
            j = _start(
                ctx, owner, document, ws, allow_dirty, tasks, reset_paths, memory_file, walked
            )
        except BaseException:
            if not held.nested:
                lock.release(ctx.folder, held.owner)
            raise
    result.update(
        task=j["task"],
        task_kind=_doc_get(document, "task", "kind") or "task",
        base=j["base"],
        branch=j["branch"] or None,
        diff_base=j["diff_base"],
        start_tree=j["start_tree"],
        start_index=j["start_index"] or None,
        user_start=j.get("user_start"),
        state=j["state"],
        run_dir=str(Path(j["start_doc"]).parent),
        start=j["start_doc"],
    )
    return result


def _start(
    ctx: Context,
    owner: int,
    document: dict[str, Any],
    ws: Any,
    allow_dirty: bool,
    tasks: str | None,
    reset_paths: Sequence[str],
    memory_file: str | None,
    walked: tuple[bool, list[str]] | None = None,
) -> journal.TaskJournal:
    task = _doc_get(document, "task", "id")
    if not isinstance(task, str) or not task:
        raise BadInput("<stdin>", "the document names no task (expected a string)", path="task.id")
    state = ws.state
    memory_path = Path(memory_file) if memory_file else ws.memory_file()
    if memory_path is not None and not memory_path.is_absolute():
        memory_path = ctx.root / memory_path
    resets, dirs = _reset_paths(ctx.root, state, reset_paths)
    w = trees.Where(ctx.root, ctx.own, state)
    base, start_tree, branch = trees.head_tree(w)
    if not base:
        raise EnvironmentProblem("the repository has no commit yet")
    is_dirty, ignored = walked if walked is not None else trees.start_walk(w)
    w.start_ignored = ignored
    j: journal.TaskJournal = {
        "task": task,
        "owner": owner,
        "phase": "attempt",
        "base": base,
        "branch": branch,
        "diff_base": base,
        "start_tree": start_tree,
        "start_index": "",
        "start_ignored": ignored,
        "state": str(state),
        "tasks": str(Path(tasks).resolve()) if tasks else "",
        "memory": str(memory_path) if memory_path else "",
        "reset_paths": resets,
        "reset_dirs": dirs,
    }
    if is_dirty:
        if not allow_dirty:
            raise EnvironmentProblem(
                "the work tree has uncommitted changes; commit or stash them first (a park "
                "would revert them, a commit would sweep them in), or pass --allow-dirty"
            )
        _record_dirty_start(ctx, w, j)
    j["start_doc"] = str(_keep_start(state, task, document, owner))
    journal.write(ctx.folder, j)
    return j


#: The exit code a finished step gives a loop: a landing is complete (0), a park the
#: decision's own code.
_PARK_CODES = {"blocked": 20, "failed": 21, "budget_exhausted": 22}


def _finished(recovered: Sequence[Mapping[str, Any]], task: Any) -> dict[str, Any] | None:
    for r in recovered:
        if r.get("task") == task and r.get("finished") in ("land", "park"):
            code = 0 if r["finished"] == "land" else _PARK_CODES.get(str(r.get("outcome")), 21)
            return {"task": task, "code": code}
    return None


def _keep_start(state: Path, task: str, document: Mapping[str, Any], owner: int) -> Path:
    """Keep the start document as ``<state>/runs/<task>/<run>/start.json`` (the run folder
    a loop keeps each round's documents in), before the journal that names it is written."""

    run = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{owner}"
    start = state / "runs" / git.ref_component(task) / run / "start.json"
    try:
        start.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(start, json.dumps(document, ensure_ascii=False) + "\n")
    except OSError as e:
        raise EnvironmentProblem(f"cannot write {e.filename or start}: {e.strerror}") from None
    return start


def note(ctx: Context, text: str) -> dict[str, Any]:
    """Add ``text`` to the task's notes in its start document."""

    j = _task_journal(ctx)
    start = Path(str(j.get("start_doc") or ""))
    try:
        doc = json.loads(start.read_text(encoding="utf-8"))
        doc.setdefault("task", {}).setdefault("notes", []).append(text)
        atomic_write(start, json.dumps(doc, ensure_ascii=False) + "\n")
    except OSError as e:
        raise EnvironmentProblem(f"cannot write {e.filename or start}: {e.strerror}") from None
    return _result("note", j, start=str(start))


def _record_dirty_start(ctx: Context, w: trees.Where, j: journal.TaskJournal) -> None:
    """--allow-dirty: the user's uncommitted state saved as ``user-start`` (the diff base,
    what a park restores) and what was staged as ``user-index``."""
    task, base = j["task"], j["base"]
    try:
        index_tree = trees.index_tree(w)
    except LoopkitError:
        raise EnvironmentProblem(
            "--allow-dirty: the index cannot be recorded (unmerged paths? finish or abort "
            "the merge first)"
        ) from None
    ref = trees.save(
        w,
        task,
        "user-start",
        f"loopkit: the work tree as {task} began (uncommitted changes, recorded by --allow-dirty)",
        base,
    )
    j["diff_base"] = w.out(["rev-parse", ref])
    j["start_tree"] = w.out(["rev-parse", f"{ref}^{{tree}}"])
    j["start_index"] = index_tree
    j["user_start"] = ref
    staged = ""
    if index_tree != w.out(["rev-parse", f"{base}^{{tree}}"]):
        commit = w.out(
            [
                "commit-tree",
                index_tree,
                "-p",
                base,
                "-m",
                f"loopkit: the index as {task} began (staged changes, recorded by --allow-dirty)",
            ]
        )
        staged = trees.keep_commit(w, task, "user-index", commit)
    ctx.say(
        f"--allow-dirty: your uncommitted changes are recorded as {ref}"
        + (f" (what was staged as {staged})" if staged else "")
        + "; the worker's change is measured from there, and a park brings them back"
    )


def _reset_paths(root: Path, state: Path, entries: Sequence[str]) -> tuple[list[str], list[str]]:
    """The reset paths, checked: refused (exit 4) when one could wipe something a revert
    must never touch. Returns the paths and those that are directories now."""
    paths: list[str] = []
    dirs: list[str] = []
    for p in entries:
        if not p:
            continue
        if (
            p.startswith(("/", "~"))
            or p in (".", "./", "..", ".git")
            or p.startswith(("../", ".git/"))
            or p.endswith("/..")
            or "/../" in p
        ):
            raise EnvironmentProblem(
                f"RESET_PATHS entry '{p}' is unsafe: use a path inside the repository"
            )
        stripped = p.rstrip("/")
        stripped = stripped[2:] if stripped.startswith("./") else stripped
        if not stripped:
            raise EnvironmentProblem(f"RESET_PATHS entry '{p}' is empty")
        target = root / stripped
        if (
            str(state.resolve()).startswith(str(target.resolve()) + os.sep)
            or state.resolve() == target.resolve()
        ):
            raise EnvironmentProblem(f"RESET_PATHS entry '{p}' holds loopkit's state folder")
        if target.is_symlink() or not _parent_inside(root, target):
            raise EnvironmentProblem(
                f"RESET_PATHS entry '{p}' is (or lies under) a symlink: name the real path "
                "inside the repository"
            )
        if git.out(["ls-files", "--", stripped], cwd=root):
            raise EnvironmentProblem(
                f"RESET_PATHS entry '{p}' holds tracked files: git reset restores those; "
                "name only ignored paths"
            )
        paths.append(stripped)
        if p.endswith("/") or (target.is_dir() and not target.is_symlink()):
            dirs.append(stripped)
    return paths, dirs


def _parent_inside(root: Path, target: Path) -> bool:
    parent = target.parent
    while not parent.is_dir():
        parent = parent.parent
    real, top = os.path.realpath(parent), os.path.realpath(root)
    return real == top or real.startswith(top + os.sep)


def _reset(ctx: Context, j: Mapping[str, Any]) -> None:
    """Wipe every reset path; a directory is recreated empty, never left missing."""

    for stripped in j.get("reset_paths") or ():
        target = ctx.root / stripped
        if not _parent_inside(ctx.root, target):
            ctx.say(
                f"RESET_PATHS entry {stripped} now lies outside the repository (a symlink?): left alone"
            )
            continue
        try:
            if target.is_symlink() or target.is_file():
                target.unlink()
            elif target.is_dir():
                shutil.rmtree(target)
                target.mkdir(parents=True)
            elif target.exists():
                target.unlink()
            if stripped in (j.get("reset_dirs") or ()):
                target.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise EnvironmentProblem(f"cannot reset {e.filename or target}: {e.strerror}") from None
        ctx.say(f"reset {stripped}")


# ----------------------------------------------------------------------------------- save


def _task_journal(ctx: Context) -> journal.TaskJournal:
    j = journal.load(ctx.folder)
    if j is None:
        raise EnvironmentProblem(
            f"no task has begun in this work tree ({ctx.root}): run `lk task begin` first"
        )
    return j


def _save_parent(w: trees.Where, j: Mapping[str, Any]) -> str | None:
    """The parent a saved tree gets: where the attempt began (the user's start under
    --allow-dirty), HEAD once the branch moved on from there, the start again when HEAD
    lost it: the task's start stays reachable from the saved ref."""
    head, _ = trees.head(w)
    base, diff_base = j.get("base") or "", j.get("diff_base") or j.get("base") or ""
    if not head:
        return None
    if not base:
        return head
    if head == base:
        return str(diff_base)
    if trees.is_ancestor(w, base, head):
        return head
    return str(diff_base)


def _save(ctx: Context, j: Mapping[str, Any], label: str, why: str) -> str:
    task = str(j["task"])
    ref = trees.save(
        ctx.source(j),
        task,
        label,
        f"loopkit: {task} attempt {label} ({why})",
        _save_parent(ctx.where(j), j),
    )
    ctx.say(f"saved the work tree of {task} attempt {label} as {ref}")
    return ref


def save(ctx: Context, *, label: str, why: str = "saved") -> dict[str, Any]:
    """Keep the work tree as it stands under ``refs/loopkit/<task>/<label>``."""
    j = _task_journal(ctx)
    return _result("save", j, ref=_save(ctx, j, label, why))


def cancel(ctx: Context, *, label: str) -> dict[str, Any]:
    """Cancelled: the tree saved and left as it is; the task is over (the journal goes)."""
    j = _task_journal(ctx)
    ref = _save(ctx, j, label, "cancelled")
    journal.remove(ctx.folder)
    ctx.say(
        f"{j['task']}: cancelled; the tree is left as it is (saved as {ref}); "
        "'lk cancel --clear' lifts the cancellation"
    )
    return _result("cancel", j, ref=ref)


# ----------------------------------------------------------------------- the branch check


def _branch_check(
    ctx: Context, j: journal.TaskJournal, what: str, ref: str | None, label: str
) -> tuple[str, str]:
    """Return HEAD's commit and branch when it is where the task began (on its branch);
    else save the tree (unless ``ref`` holds it), put back a branch rewound to an ancestor,
    drop the journal and refuse (40). Nothing is committed or reverted."""
    w = ctx.where(j)
    head, branch = trees.head(w)
    base, want = str(j["base"]), str(j.get("branch") or "")
    if head == base and branch == want:
        return head, branch
    task = str(j["task"])
    ref = ref or _save(ctx, j, label, "branch moved")
    where = (
        f"{want or 'HEAD (detached)'} was at {_short(base)}, now "
        f"{branch or 'HEAD (detached)'} is at {_short(head)}"
    )
    back = ""
    if head and branch == want and trees.is_ancestor(w, head, base):
        if w.ok(
            [
                "update-ref",
                "-m",
                f"loopkit: {task}: the branch back where the task began",
                "HEAD",
                base,
                head,
            ]
        ):
            back = (
                f" It had been rewound to an ancestor (its last commits dropped): it is back "
                f"at {_short(base)}, where the task began; the files and the index are as they were."
            )
        else:
            back = f" It had been rewound to an ancestor: to put it back, git reset --soft {base}."
    elif head and not trees.is_ancestor(w, base, head):
        back = f" The commit the task began from is no longer on it (it is kept: an ancestor of {ref})."
    journal.remove(ctx.folder)
    message = (
        f"{what} refused: the branch moved since {task} began ({where}: a commit made meanwhile, "
        "the worker's own commit or reset, or a checkout). Nothing is committed or reverted: the "
        f"work tree is left as it is and saved as {ref}; the task is NOT marked.{back}"
    )
    raise Refused(message, _result("refused", j, ref=ref, reason=message))


# ----------------------------------------------------------------------------------- land


def land(
    ctx: Context, document: Mapping[str, Any], *, label: str, fresh_stat: bool = False
) -> dict[str, Any]:
    """Commit exactly the tree a complete decision's checks ran on (``verify.tree``) on the
    commit the task began from -- ``commit-tree``, no hook -- and move the branch to it with
    a guarded ``update-ref``; then bring the index and the work tree to it (what changed on
    disk after the checks is saved first), mark the task done and commit the mark."""
    j = _task_journal(ctx)
    task = str(j["task"])
    if _doc_get(document, "decision", "outcome") != "complete":
        raise BadInput(
            "<stdin>",
            "not a complete decision: only a complete attempt lands",
            path="decision.outcome",
        )
    tree = _doc_get(document, "verify", "tree")
    # commit-tree takes nothing but a tree: only when it fails is git asked what it was.
    done, commit = None, None
    if isinstance(tree, str) and git.is_object_id(tree):
        parent, message = str(j["diff_base"]), _message(document, task, label)
        commit = gitstore.commit_object(ctx.root, tree, parent, message)
        if commit is None:
            done = git.git(
                ["commit-tree", tree, "-p", parent, "-m", message], cwd=ctx.root, check=False
            )
            commit = done.stdout.decode().strip() if done.exit_code == 0 else None
    if commit is None and (done is None or not _is_tree(ctx.root, tree)):
        ref = _save(ctx, j, label, "complete, no verified tree")
        journal.remove(ctx.folder)
        message = (
            f"the decided document names no tree its checks ran on (verify.tree "
            f"'{tree or ''}'): nothing committed; the work tree is left as it is and saved "
            f"as {ref}; the task is NOT marked done"
        )
        raise Refused(message, _result("refused", j, ref=ref, reason=message))
    at = None
    if ctx.attempt_in is None:
        at = _branch_check(ctx, j, f"the commit of {task}", None, label)
    if commit is None:
        ref = _save(ctx, j, label, "complete, commit failed")
        journal.remove(ctx.folder)
        text = (
            f"the commit of {task} failed (no user.name / user.email?): the loop stops; the "
            f"green tree is left on disk and saved as {ref}; the task is NOT marked done"
        )
        raise Refused(text, _result("refused", j, ref=ref, reason=text))
    if ctx.attempt_in is not None:
        _fast_forward_check(ctx, j, commit, label)
    _attest(ctx, j, document, commit, str(tree), label)
    j.update(
        {
            "phase": "landing",
            "commit": commit,
            "tree": tree,
            "label": label,
            "elsewhere": ctx.attempt_in is not None,
        }
    )
    twin = journal.write_before(ctx.folder, j)
    return _finish_landing(ctx, j, fresh_stat=fresh_stat, at=at, twin=twin)


def _is_tree(root: Path, oid: str) -> bool:
    kind = git.git(["cat-file", "-t", oid], cwd=root, check=False)
    return kind.exit_code == 0 and kind.stdout.strip() == b"tree"


def _message(document: Mapping[str, Any], task: str, label: str) -> str:
    """The landed commit's message: the task, why it is complete, and its trailers."""
    subject = memory.one_line(_doc_get(document, "task", "text") or task, 72)
    why = memory.one_line(_doc_get(document, "decision", "reason") or "complete", 300)
    attempt = _doc_get(document, "attempt_id") or label
    tree = _doc_get(document, "verify", "tree")
    return (
        f"loopkit: {task}: {subject}\n\n{why}\n\nLoopkit-Task: {task}\n"
        f"Loopkit-Attempt: {attempt}\nLoopkit-Tree: {tree}"
    )


def _attest(
    ctx: Context,
    j: journal.TaskJournal,
    document: Mapping[str, Any],
    commit: str,
    tree: str,
    label: str,
) -> None:
    """The landing's signed statement, the commit's note before the branch moves to it
    (loopkit.attest.landing); under ``loopkit.attest=require``, none refuses the landing."""
    from loopkit.attest import landing  # loaded when a landing signs, not for every step

    try:
        landing.record(
            ctx.root,
            document,
            commit=commit,
            tree=tree,
            base=str(j["diff_base"]),
            state=ctx.where(j).state,
            bookkeeping=[str(j.get("tasks") or ""), str(j.get("memory") or "")],
            say=ctx.say,
        )
    except LoopkitError as e:
        ref = _save(ctx, j, label, "complete, not attested")
        journal.remove(ctx.folder)
        text = f"{commit[:12]} is not attested ({e}); the tree is saved as {ref}; nothing landed"
        raise Refused(text, _result("refused", j, ref=ref, reason=text)) from None


def _fast_forward_check(ctx: Context, j: journal.TaskJournal, commit: str, label: str) -> None:
    """The checks ran in another worktree: the branch here takes the commit only as a
    fast-forward from where the task began. Else the green commit is kept under
    ``refs/loopkit/<task>/green-<label>`` and the landing refused (40)."""
    w = ctx.where(j)
    head, branch = trees.head(w)
    if head == j["base"] and branch == (j.get("branch") or "") and not trees.dirty(w):
        return
    task = str(j["task"])
    green = trees.keep_commit(w, task, f"green-{label}", commit)
    journal.remove(ctx.folder)
    message = (
        f"{(j.get('branch') or 'HEAD').removeprefix('refs/heads/')} could not fast-forward to "
        f"{_short(commit)} (it moved since the attempt began, from {_short(str(j['base']))} to "
        f"{_short(head)}, or your edits in the checkout are in the way); the green commit is "
        f"{green}; nothing marked"
    )
    raise Refused(message, _result("refused", j, ref=green, commit=commit, reason=message))


def _finish_landing(
    ctx: Context,
    j: journal.TaskJournal,
    *,
    fresh_stat: bool = False,
    at: tuple[str, str] | None = None,
    twin: str = "",
) -> dict[str, Any]:
    """The landing from its journal: the branch moved to the commit (by compare-and-swap),
    the index and work tree brought to it, the task marked. ``at``: HEAD's commit and
    branch as the landing just read them (a rerun reads them again); ``twin``: the
    journal's twin, moved in the branch's own transaction (``journal.write_before``)."""
    w = ctx.where(j)
    task, commit, base = str(j["task"]), str(j["commit"]), str(j["base"])
    head, branch = at or trees.head(w)
    after = None
    if j["phase"] == "landing":
        if head == base and branch == (j.get("branch") or ""):
            move = f"update HEAD {commit} {base or '0' * len(commit)}\n{twin}".encode()
            flags = list(git.FSYNC) if twin else []
            if w.ok(
                [*flags, "update-ref", "-m", f"loopkit: {task} complete", "--stdin"], input=move
            ):
                head = commit
            else:
                head, branch = trees.head(w)
                if head == base:  # not the branch: the ref store refused the write
                    raise EnvironmentProblem(_ref_problem(w, j))
        if head != commit:
            _branch_check(ctx, j, f"the commit of {task}", None, str(j.get("label") or "land"))
        ctx.say(f"committed {task} as {_short(commit)}: the tree its checks ran on")
        if j.get("elsewhere"):  # the files here are the start's: brought as a fast-forward
            w.out(["read-tree", "-u", "-m", str(j["start_tree"]), commit])
        else:
            after = _index_to_commit(ctx, w, j, fresh_stat=fresh_stat)
        if j.get("tasks"):  # with no checklist to mark, the journal goes next: no step between
            j["phase"] = "marking"
            journal.write(ctx.folder, j)
    _mark_and_commit(
        ctx, w, j, "done", None, [str(j.get("tasks") or "")], f"loopkit: mark {task} done"
    )
    journal.remove(ctx.folder)
    return _result(
        "land",
        j,
        commit=commit,
        tree=j.get("tree"),
        after_verify=after,
        marked=bool(j.get("tasks")),
    )


def _ref_problem(w: trees.Where, j: Mapping[str, Any]) -> str:
    branch = str(j.get("branch") or "HEAD")
    target = w.own / "HEAD" if branch == "HEAD" else git.git_dirs(w.root).common / branch
    return (
        f"cannot write {target} (a read-only ref, a full disk?): the commit "
        f"{_short(str(j.get('commit') or ''))} is made but not landed; once the cause is "
        "gone, the plain rerun lands it"
    )


def _index_to_commit(
    ctx: Context, w: trees.Where, j: Mapping[str, Any], *, fresh_stat: bool
) -> str | None:
    """The index and the work tree brought to the landed commit. The files are normally
    the commit's already: the index the tree was hashed in (from loopkit's stat cache when
    fresh) becomes the real one. What differs on disk is saved first."""
    tree = str(j["tree"])
    real = Path(git.index_path(w.root))
    seed = w.state / "stat-index" if fresh_stat else None
    keep = None if real.is_dir() else real
    live = trees.live_tree(w, seed=seed, keep=keep, expect=tree)
    if live == tree:
        if keep is None and not w.ok(["read-tree", "HEAD"]):
            message = (
                f"{j['task']} is committed, but the index could not be brought to the commit "
                f"({real} is not a file git can write); the task is NOT marked done: once "
                "it is, the plain rerun marks it"
            )
            raise Refused(message, _result("refused", j, commit=j["commit"], reason=message))
        if keep is None:
            w.ok(["update-index", "-q", "--refresh"])
        trees.checkout_converted(w, str(j["diff_base"]), str(j["commit"]), tree=tree)
        return None
    label = f"{j.get('label') or 'land'}-after-verify"
    ref = _save(ctx, j, label, "changed after verification")
    ctx.say(
        "the work tree changed after the checks ran (a process the worker left running?): the "
        f"commit holds the tree that was checked; what was on disk is saved as {ref}"
    )
    try:
        trees.sync_to(w, "HEAD")
    except LoopkitError:
        raise EnvironmentProblem(
            f"{j['task']} is committed, but the index could not be brought to the commit (what "
            f"was on disk is saved as {ref}); the plain rerun finishes the landing"
        ) from None
    if trees.dirty(w):
        ctx.say(
            "warning: the work tree still differs from the commit (is something still "
            "writing into it?): see git status"
        )
    return ref


def _mark_and_commit(
    ctx: Context,
    w: trees.Where,
    j: Mapping[str, Any],
    status: str,
    reason: str | None,
    paths: Sequence[str],
    message: str,
) -> None:
    tasks = str(j.get("tasks") or "")
    if tasks:
        from loopkit.plan.marking import commit_edit, prepare_mark

        edit = prepare_mark(tasks, str(j["task"]), status, reason=reason)
        if edit.changed:
            commit_edit(edit)
    commit_paths(w, [p for p in paths if p], message)


def commit_paths(w: trees.Where, paths: Sequence[str], message: str) -> str | None:
    """Commit just these files (the checklist, the memory file) on HEAD if they changed --
    a scratch index from HEAD, ``commit-tree``, a guarded ``update-ref``, no hook -- and
    bring the real index's entries for them along. Ignored paths and paths outside the
    work tree are skipped. Safe to run again: an unchanged file commits nothing."""
    entries: list[tuple[str, str, str]] = []
    for p in paths:
        full = Path(p)
        if not full.is_file():
            continue
        try:
            rel = full.resolve().relative_to(w.root.resolve()).as_posix()
        except ValueError:
            continue
        listed = w.out(
            ["ls-files", "--full-name", "--others", "--exclude-standard", "--cached", "--", rel]
        )
        if not listed:
            continue
        blob = w.out(["hash-object", "-w", "--", rel])
        mode = "100755" if os.access(full, os.X_OK) else "100644"
        entries.append((mode, blob, rel))
    if not entries:
        return None
    head, _ = trees.head(w)
    cache = [a for m, b, r in entries for a in ("--cacheinfo", f"{m},{b},{r}")]
    new = None
    with trees.scratch_index(w) as index:
        env = {"GIT_INDEX_FILE": str(index)}
        w.out(["read-tree", head], env=env)
        w.out(["update-index", "--add", *cache], env=env)
        tree = w.out(["write-tree"], env=env)
        if tree != w.out(["rev-parse", f"{head}^{{tree}}"]):
            new = w.out(["commit-tree", tree, "-p", head, "-m", message])
            if not w.ok(["update-ref", "-m", message, "HEAD", new, head]):
                raise EnvironmentProblem(_ref_problem(w, {"commit": new}))
    w.out(["update-index", "--add", *cache])
    return new


# ----------------------------------------------------------------------------------- park


def park(ctx: Context, document: Mapping[str, Any], *, label: str, outcome: str) -> dict[str, Any]:
    """Save the attempt, then bring the work tree and the index back to where the task
    began, reset the reset paths, append the retrospective to the memory file, mark the
    task parked and commit memory and checklist."""
    j = _task_journal(ctx)
    task = str(j["task"])
    ref = _save(ctx, j, label, outcome)
    _branch_check(ctx, j, f"the revert of {task}", ref, label)
    reason = memory.one_line(f"{outcome}: {_doc_get(document, 'decision', 'reason') or ''}", 200)
    j.update(
        {
            "phase": "parking",
            "saved": ref,
            "outcome": outcome,
            "reason": reason,
            "entry": memory.entry(document, outcome, ref),
        }
    )
    journal.write(ctx.folder, j)
    return _finish_parking(ctx, j)


def _finish_parking(ctx: Context, j: journal.TaskJournal) -> dict[str, Any]:
    w = ctx.where(j)
    task, ref = str(j["task"]), str(j["saved"])
    head, _ = trees.head(w)
    if not j.get("reverted") and head == j["base"]:
        try:
            trees.sync_to(w, str(j["start_tree"]), str(j.get("start_index") or "") or None)
        except LoopkitError as e:
            raise EnvironmentProblem(
                f"bringing the work tree back to where {task} began failed (the attempt is "
                f"saved as {ref}): {e}"
            ) from None
        if j.get("start_index"):
            ctx.say(
                f"your uncommitted changes are back as they were when {task} began (--allow-dirty)"
            )
        elif trees.dirty(w):
            ctx.say(
                "warning: files the attempt hid from git (its own ignore rules) are left on "
                "disk, not deleted: see git status"
            )
        _reset(ctx, j)
        j["reverted"] = True  # a rerun from here on does not revert again
        journal.write(ctx.folder, j)
    mem = str(j.get("memory") or "")
    if mem:
        memory.append_text(Path(mem), str(j["entry"]), ref)
    _mark_and_commit(
        ctx,
        w,
        j,
        "parked",
        str(j.get("reason") or ""),
        [mem, str(j.get("tasks") or "")],
        f"loopkit: park {task} ({j.get('outcome')})",
    )
    journal.remove(ctx.folder)
    ctx.say(f"parked {task} ({j.get('outcome')}); the attempt is saved as {ref}")
    return _result(
        "park",
        j,
        ref=ref,
        outcome=j.get("outcome"),
        marked=bool(j.get("tasks")),
        memory=mem or None,
    )


# ------------------------------------------------------------------------------------ end


def end(ctx: Context, *, owner: int, label: str = "stopped") -> dict[str, Any]:
    """Release the lock. A task still open (the loop stopped before it landed or parked)
    has its work tree saved under a ref, and its journal is kept: the next begin
    finishes it."""
    j = journal.load(ctx.folder)
    saved = None
    if j is not None and j.get("owner") == owner and j.get("phase") == "attempt":
        try:
            if trees.live_tree(ctx.where(j)) != j.get("start_tree") and not j.get("stopped"):
                saved = _save(ctx, j, label, "the loop stopped before a decision")
                j["stopped"] = saved
                journal.write(ctx.folder, j)
        except LoopkitError:
            # What stopped the loop (a full disk) stops this save too: the journal stays,
            # and the next begin saves the tree.
            pass
    with lock.guard(ctx.folder):
        released = lock.release(ctx.folder, owner)
    return _result(
        "end", j, released=released, saved=saved, open=journal.load(ctx.folder) is not None
    )


# ------------------------------------------------------------------------------- recovery


def recover(ctx: Context, *, owner: int) -> list[dict[str, Any]]:
    """Finish what a loop that stopped left in the journal (call with the lock held):
    a landing is landed and marked, a park reverted, recorded and marked, a mark
    committed; an attempt that never reached a decision has its tree saved under
    ``refs/loopkit/<task>/interrupted`` and the work tree brought back to where it
    began, and its admission settled in the ledger (once, and only when one is open)."""
    j = journal.load(ctx.folder)
    if j is None:
        if not journal.torn(ctx.folder):
            return []
        j = journal.twin(ctx.folder)
        if j is None:
            return [_rebuild(ctx)]
        ctx.say(
            f"the task journal {journal.path(ctx.folder)} was torn: read back from its twin "
            f"in git ({journal.REF})"
        )
    if j.get("owner") != owner and lock.alive(int(j.get("owner") or 0), ""):
        if int(j.get("owner") or 0) in lock.ancestors(owner):
            return []  # the loop above this one is in the middle of it
    phase = j.get("phase")
    task = str(j.get("task"))
    if phase in ("landing", "marking"):
        r = _finish_landing(ctx, j)
        ctx.say(
            f"finished the landing of {task} that a stopped loop left: {_short(str(r['commit']))}"
        )
        return [{"task": task, "finished": "land", "commit": r["commit"]}]
    if phase == "parking":
        r = _finish_parking(ctx, j)
        return [{"task": task, "finished": "park", "ref": r["ref"], "outcome": r["outcome"]}]
    return [_recover_attempt(ctx, j)]


def _recover_attempt(ctx: Context, j: journal.TaskJournal) -> dict[str, Any]:
    w = ctx.where(j)
    task, base = str(j["task"]), str(j["base"])
    head, _ = trees.head(w)
    out: dict[str, Any] = {"task": task, "finished": "interrupted", "ref": None}
    live = trees.live_tree(w)
    if live != j.get("start_tree"):
        stopped = str(j.get("stopped") or "")
        if stopped and w.out(["rev-parse", f"{stopped}^{{tree}}"]) == live:
            out["ref"] = stopped
        else:
            out["ref"] = trees.save(
                w,
                task,
                "interrupted",
                f"loopkit: {task} interrupted (the loop stopped before a decision), saved at the next start",
                _save_parent(w, j),
            )
    if head != base:
        ctx.say(
            f"an interrupted loop ({task}) left the branch at {_short(head)}, not where it began "
            f"({_short(base)}): nothing restored"
            + (f"; its tree is saved as {out['ref']}" if out["ref"] else "")
        )
    elif out["ref"]:
        trees.sync_to(w, str(j["start_tree"]), str(j.get("start_index") or "") or None)
        ctx.say(
            f"recovered an interrupted attempt of {task}: saved as {out['ref']}, the tree is back where it began"
        )
    else:
        ctx.say(f"an interrupted loop ({task}) left nothing to restore")
    start_doc = str(j.get("start_doc") or "")
    out["settled"] = settle_interrupted(
        Path(str(j.get("state") or "")), task, run_dir=Path(start_doc).parent if start_doc else None
    )
    journal.remove(ctx.folder)
    return out


def _rebuild(ctx: Context) -> dict[str, Any]:
    """The journal torn and its twin gone: the step in progress is finished or undone from
    what git and the disk hold. The work tree is saved under ``refs/loopkit/<task>/
    recovered`` when it differs from HEAD (nothing verified is left only on disk), the
    index and the work tree brought to HEAD -- the branch's commit, landed or not; when
    HEAD is the task's own landed commit (its ``Loopkit-Tree`` trailer names its tree) the
    task is marked done in its checklist and the mark committed -- and the attempt's open
    admission settled. The task is the last one a run began (its start document), else
    the one HEAD's commit names."""
    bad = journal.set_aside(ctx.folder)
    w = ctx.where({})
    head, _ = trees.head(w)
    started, run_dir, checklist = _last_start(w.state)
    named = ""
    if head:
        named = w.out(["log", "-1", "--format=%(trailers:key=Loopkit-Task,valueonly)", head])
    task = started or named.strip() or "unknown"
    out: dict[str, Any] = {"task": task, "finished": "rebuilt", "ref": None}
    if head:
        head_tree = w.out(["rev-parse", f"{head}^{{tree}}"])
        if trees.live_tree(w) != head_tree:
            out["ref"] = trees.save(
                w,
                task,
                "recovered",
                f"loopkit: {task}: the work tree a stopped loop left (its journal was torn)",
                head,
            )
        trees.sync_to(w, head_tree)
        landed = w.out(["log", "-1", "--format=%(trailers:key=Loopkit-Tree,valueonly)", head])
        if landed.strip() == head_tree and checklist and named.strip() == started:
            # HEAD is the task's landed commit, its mark not committed: the landing finished
            _mark_and_commit(ctx, w, {"task": task, "tasks": checklist}, "done", None,
                             [checklist], f"loopkit: mark {task} done")  # fmt: skip
            out.update(finished="land", commit=head)
    out["settled"] = settle_interrupted(w.state, task, run_dir=run_dir)
    ctx.say(
        f"the task journal was torn and its twin is gone (kept as {bad}): rebuilt from git "
        f"and the disk; the work tree is back at HEAD {_short(head)}"
        + (f", what was on disk is saved as {out['ref']}" if out["ref"] else "")
    )
    return out


def _last_start(state: Path) -> tuple[str, Path | None, str]:
    """The task, run folder and checklist (the task's ``source.file``) of the last start
    document a loop kept (``_keep_start``)."""
    start = newest(state.glob("runs/*/*/start.json"))
    if start is None:
        return "", None, ""
    try:
        doc = json.loads(start.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "", None, ""
    task, source = _doc_get(doc, "task", "id"), _doc_get(doc, "task", "source", "file")
    if not isinstance(task, str):
        return "", None, ""
    return (
        task,
        start.parent,
        source if isinstance(source, str) and Path(source).is_file() else "",
    )


def worker_ran(run_dir: Path | None) -> bool:
    """Whether the last admitted round in ``run_dir`` got as far as its worker's start
    (``N-worker``, which lk-invoke writes the moment before it starts the worker). Without
    the folder, or without a round, say yes: an attempt is never let off unproven."""
    if run_dir is None or not run_dir.is_dir():
        return True
    rounds = []
    for entry in run_dir.glob("*-admit.json"):
        head = entry.name.split("-", 1)[0]
        if head.isdigit():
            rounds.append(int(head))
    if not rounds:
        return True
    return (run_dir / f"{max(rounds)}-worker").exists()


def settle_interrupted(state: Path, task: str, *, run_dir: Path | None = None) -> bool:
    """Record an admitted attempt that never reached a decision as interrupted -- only
    when the ledger holds an admission not settled yet (one a decision did not close):
    no attempt is charged twice, none for a loop killed between a decision and the next
    admission, and none for one killed after its admission but before its worker ran
    (``worker_ran``: the record says ``ran: false`` and the budgets do not count it)."""
    from loopkit.decision import ledger as ledgers
    from loopkit.decision import records

    path = state / ledgers.DEFAULT_NAME
    if not path.is_file():
        return False
    with ledgers.Ledger(path).transaction() as txn:
        history = txn.history(task)
        if not history.get("reserved"):
            return False
        txn.append(
            records.interrupted_record(
                task,
                history,
                reason="the loop stopped before a decision; recovered at the next start",
                now=ledgers.now_iso(),
                ran=worker_ran(run_dir),
            )
        )
    return True
