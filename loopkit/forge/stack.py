"""The stack's record, kept in git: ``refs/loopkit/stack/NAME`` points at a commit whose
tree holds ``stack.json``; each write is a new commit on top of the last, moved by
compare-and-swap, so two writers never lose each other's change silently and the history
of the stack (every fork point it ever had) stays readable with ``git log``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, cast

from loopkit import git
from loopkit.errors import BadInput, LoopkitError
from loopkit.exitcodes import ExitCode

if TYPE_CHECKING:
    from loopkit.sections import Returned, SliceEvidence, StackRecord, Task


PREFIX = "refs/loopkit/stack/"
FILE = "stack.json"
FORGES = ("github", "gitlab", "plain")


class Refused(LoopkitError):
    """A push, a landing or a restack that did not happen: nothing moved (exit 40)."""

    code = ExitCode.NOT_LANDED


class Unverified(LoopkitError):
    """A slice's tree failed its checks (exit 1): it is not pushed or landed."""

    code = ExitCode.FAILED_CHECK


def _none() -> SliceEvidence:
    return {}


@dataclass
class Slice:
    id: str
    branch: str
    title: str
    fork: str  # the commit the slice was built on: its parent's head at the time
    head: str  # the slice's commit
    tree: str  # the tree its checks passed on (== head's tree)
    evidence: SliceEvidence = field(default_factory=_none)
    pushed: str = ""  # the commit last pushed to the remote branch ("" never)
    pr: int | None = None
    issue: int | None = None
    merged: str = ""  # the commit the forge landed it as
    closed: str = ""  # why it left the stack unlanded (its pull request closed on the forge)
    task: Task | None = None  # the task it was made for (lk stack address runs it again)
    addressed: list[str] = field(default_factory=list)  # the forge's remarks addressed (keys)


@dataclass
class Stack:
    name: str
    target: str = "main"
    remote: str = ""
    forge: str = "plain"
    repo: str = ""
    issue: int | None = None
    slices: list[Slice] = field(default_factory=list)
    pushed_meta: str = ""  # the record's commit last pushed (the lease on the remote's)
    #: landings and restacks refused: {"slice", "step", "why"} (the report's returns)
    returned: list[Returned] = field(default_factory=list)

    def live(self) -> list[Slice]:
        return [s for s in self.slices if not s.merged and not s.closed]

    def find(self, slice_id: str) -> Slice | None:
        return next((s for s in self.slices if s.id == slice_id), None)

    def to_json(self) -> StackRecord:
        return cast("StackRecord", {"kind": "loopkit/stack", "version": 1, **asdict(self)})

    @classmethod
    def from_json(cls, data: object, source: str) -> Stack:
        if not isinstance(data, dict) or data.get("kind") != "loopkit/stack":
            raise BadInput(source, "not a loopkit/stack record")
        try:
            slices = [Slice(**s) for s in data.get("slices") or []]
            body = {k: v for k, v in data.items() if k not in ("kind", "version", "slices")}
            return cls(**body, slices=slices)
        except TypeError as e:
            raise BadInput(source, f"unexpected field: {e}") from None


def ref(name: str) -> str:
    return PREFIX + git.ref_component(name)


#: A push under way: the record the local ref becomes once the remote took the push (its
#: parent, the record pushed); a push stopped before it ended is settled from it.
PUSHING = "refs/loopkit/stack-push/"


def pending(name: str) -> str:
    return PUSHING + git.ref_component(name)


def check_name(name: str) -> str:
    ok = name and all(c.isalnum() or c in "-_." for c in name) and not name.startswith(".")
    if not ok:
        raise BadInput("NAME", f"{name!r}: a stack's name is letters, digits, '-', '_', '.'")
    return name


def read(root: Path, name: str) -> tuple[Stack | None, str]:
    """The stack's record and the commit it is in ("" when there is none)."""
    commit = _resolve(root, ref(name))
    if not commit:
        return None, ""
    raw = git.out(["cat-file", "blob", f"{commit}:{FILE}"], cwd=root)
    return Stack.from_json(json.loads(raw), f"{ref(name)}:{FILE}"), commit


def record(root: Path, stack: Stack, old: str, *, message: str) -> str:
    """The record as a new commit on top of ``old``; no ref moves."""
    text = json.dumps(stack.to_json(), indent=2, sort_keys=True) + "\n"
    blob = git.out(["hash-object", "-w", "--stdin"], cwd=root, input=text.encode())
    tree = git.out(["mktree"], cwd=root, input=f"100644 blob {blob}\t{FILE}\n".encode())
    parents = ["-p", old] if old else []
    return git.out(["commit-tree", tree, *parents, "-m", f"loopkit stack: {message}"], cwd=root)


def write(root: Path, stack: Stack, old: str, *, message: str) -> str:
    """A new record commit on top of ``old``; the ref moves only if it still holds ``old``."""
    commit = record(root, stack, old, message=message)
    done = git.git(
        ["update-ref", "-m", f"loopkit stack: {message}", ref(stack.name), commit, old],
        cwd=root,
        check=False,
    )
    if done.exit_code != 0:
        raise Refused(f"stack {stack.name}: its record moved while this step ran; run it again")
    return commit


def read_all(root: Path) -> list[Stack]:
    """Every stack recorded in this repository (``lk report``'s pull-request panel)."""
    listed = git.out(["for-each-ref", "--format=%(refname)", PREFIX], cwd=root)
    out = []
    for name in listed.splitlines():
        if name:
            stack, _ = read(root, name[len(PREFIX) :])
            if stack is not None:
                out.append(stack)
    return out


def note_return(root: Path, name: str, slice_id: str, step: str, why: str) -> None:
    """Record a refused landing or restack in the stack's record (nothing else moves);
    a record that moved meanwhile is left as it is."""
    stack, old = read(root, name)
    if stack is None:
        return
    stack.returned.append({"slice": slice_id, "step": step, "why": why[:300]})
    try:
        write(root, stack, old, message=f"returned {slice_id} ({step})")
    except Refused:
        pass


def _resolve(root: Path, name: str) -> str:
    done = git.git(["rev-parse", "-q", "--verify", f"{name}^{{commit}}"], cwd=root, check=False)
    return done.stdout.decode().strip() if done.exit_code == 0 else ""


def resolve(root: Path, rev: str) -> str:
    got = _resolve(root, rev)
    if not got:
        raise BadInput("--head", f"{rev!r} is not a commit in this repository")
    return got


def tree_of(root: Path, commit: str) -> str:
    return git.out(["rev-parse", f"{commit}^{{tree}}"], cwd=root)
