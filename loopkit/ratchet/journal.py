"""The task's journal: what a loop that stops at any point leaves for the next start.

One JSON file in the work tree's own git folder (``<git-dir>/loopkit/task.json``, beside
the lock, out of every worker's reach under the sandbox), written whole or not at all and
flushed to disk (the file, then its folder) before the step it announces begins. Its twin
in git, the same text as a blob under the work tree's own ref ``refs/worktree/loopkit/
task-journal``, is written just before it -- or, for a step whose first act is a ref
update (the landing's move of the branch), in that update's own transaction, so the twin
says the step began exactly when git shows it did: a file torn or emptied anyway (a power
loss, a disk that lied about its flush) is read back from its twin, and with neither the
rerun rebuilds what it needs from git and the disk (``steps.recover``). The twin's blob is
written without starting git (``gitstore.write_blob``), its ref by one ``update-ref``. It holds
where the task began and the step in progress (``phase``):

``attempt``  the worker may be running or may have run: the rerun saves the tree under a
             ref and brings the work tree back to the start
``landing``  ``commit`` is the task's commit (made, perhaps not landed): the rerun lands
             it, brings the index and the work tree to it, marks the task and commits the
             mark
``marking``  the commit landed: the rerun marks the task done and commits the mark
``parking``  ``saved`` holds the attempt: the rerun reverts, resets, writes the
             retrospective (once), marks the task parked and commits the park record

A task's journal goes once its last step is done; ``end`` keeps it when the task is not.
Its twin stays until the next task's first write replaces it: only a torn file sends a
rerun to the twin, and a task's first write writes the twin before the file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from loopkit import discovery, git, gitstore
from loopkit.errors import EnvironmentProblem
from loopkit.files import atomic_write, sync_folder

TYPE_CHECKING = False  # typing stays unloaded at run time (start-up is a feature)
if TYPE_CHECKING:
    from typing import Any, TypedDict

    class TaskJournal(TypedDict, total=False):
        """The journal's keys: ``begin`` writes the first block, each later step adds its own."""

        kind: str
        version: int
        task: str
        owner: int
        phase: str  # attempt | landing | marking | parking
        base: str  # the commit the task began on
        branch: str  # the branch HEAD named then ("" when detached)
        diff_base: str  # what the attempt's diff is taken against
        start_tree: str
        start_index: str  # the index's tree at a dirty start ("" when clean)
        start_ignored: list[str]
        user_start: str  # the ref keeping a dirty start
        state: str  # the state folder
        tasks: str  # the checklist to mark ("" for none)
        memory: str  # the memory file ("" for none)
        reset_paths: list[str]
        reset_dirs: list[str]
        start_doc: str  # the begin document kept in the state folder
        # landing
        commit: str
        tree: Any  # the verified tree as the document gave it
        label: str
        elsewhere: bool  # the attempt ran in a work tree of its own
        # parking
        saved: str  # the ref holding the attempt
        outcome: str
        reason: str
        entry: str  # the retrospective's text
        reverted: bool
        # end
        stopped: str  # the ref saving a tree the loop left without a decision


NAME = "task.json"
KIND = "loopkit/task-journal"
#: the journal's twin: per work tree (git keeps ``refs/worktree/`` in the own git folder)
REF = "refs/worktree/loopkit/task-journal"


def path(folder: Path) -> Path:
    return folder / NAME


def _parse(raw: bytes) -> TaskJournal | None:
    try:
        data: TaskJournal = json.loads(raw)  # a journal this module wrote: TaskJournal's keys
    except ValueError:
        return None
    return data if isinstance(data, dict) and data.get("kind") == KIND else None


def load(folder: Path) -> TaskJournal | None:
    """The journal, or None when there is none or it is torn (``torn`` tells which)."""
    p = path(folder)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise EnvironmentProblem(f"cannot read {p}: {e.strerror}") from None
    return _parse(raw)


def torn(folder: Path) -> bool:
    """Whether a journal file is there but not whole (torn, emptied, not a journal)."""
    try:
        return _parse(path(folder).read_bytes()) is None
    except OSError:
        return False


def twin(folder: Path) -> TaskJournal | None:
    """The journal as its twin in git holds it (None when there is none)."""
    done = git.git(["cat-file", "blob", REF], cwd=folder.parent, check=False)
    return _parse(done.stdout) if done.exit_code == 0 else None


def set_aside(folder: Path) -> Path:
    """Keep a torn journal as ``task.json.bad`` for a person; its twin goes."""
    bad = path(folder).with_name(NAME + ".bad")
    try:
        os.replace(path(folder), bad)
    except OSError:
        pass
    git.git(["update-ref", "-d", REF], cwd=folder.parent, check=False)
    return bad


def _text(data: TaskJournal) -> str:
    data["kind"] = KIND
    data["version"] = 1
    return json.dumps(data, indent=1) + "\n"


def write(folder: Path, data: TaskJournal) -> None:
    """The journal written: its twin first, then the file."""
    _written(folder, data, twin_now=True)


def write_before(folder: Path, data: TaskJournal) -> str:
    """The journal written for a step whose first act is a ref transaction: the file now,
    and the twin's line for that transaction (``update <ref> <blob>``), its blob written.
    Until the transaction commits, the twin still says the step before, as git does."""
    return f"update {REF} {_written(folder, data, twin_now=False)}\n"


def _written(folder: Path, data: TaskJournal, *, twin_now: bool) -> str:
    data["kind"] = KIND
    data["version"] = 1
    text = json.dumps(data, indent=1) + "\n"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        dirs = discovery.dirs_of(folder.parent)
        blob = gitstore.write_blob(folder.parent, text.encode(), durable=True, dirs=dirs)
        if twin_now and not gitstore.write_own_ref(dirs, REF, blob):
            git.git([*git.FSYNC, "update-ref", REF, blob], cwd=folder.parent)
        atomic_write(path(folder), text, sync=True)
    except OSError as e:
        raise EnvironmentProblem(
            f"cannot write {e.filename or path(folder)}: {e.strerror}"
        ) from None
    except git.GitError as e:
        raise EnvironmentProblem(f"cannot write the task journal's twin {REF}: {e}") from None
    return blob


def remove(folder: Path) -> None:
    try:
        path(folder).unlink()
        sync_folder(folder)
    except FileNotFoundError:
        pass
    except OSError as e:
        raise EnvironmentProblem(f"cannot remove {path(folder)}: {e.strerror}") from None
