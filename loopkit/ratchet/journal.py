"""The task's journal: what a loop that stops at any point leaves for the next start.

One JSON file in the work tree's own git folder (``<git-dir>/loopkit/task.json``, beside
the lock, out of every worker's reach under the sandbox), written whole or not at all and
flushed to disk before the step it announces begins. It holds where the task began and
the step in progress (``phase``):

``attempt``  the worker may be running or may have run: the rerun saves the tree under a
             ref and brings the work tree back to the start
``landing``  ``commit`` is the task's commit (made, perhaps not landed): the rerun lands
             it, brings the index and the work tree to it, marks the task and commits the
             mark
``marking``  the commit landed: the rerun marks the task done and commits the mark
``parking``  ``saved`` holds the attempt: the rerun reverts, resets, writes the
             retrospective (once), marks the task parked and commits the park record

A task's journal goes once its last step is done; ``end`` keeps it when the task is not.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from loopkit.errors import EnvironmentProblem
from loopkit.files import atomic_write

TYPE_CHECKING = False  # typing stays unloaded at run time (start-up is a feature)
if TYPE_CHECKING:
    from typing import Any

NAME = "task.json"
KIND = "loopkit/task-journal"


def path(folder: Path) -> Path:
    return folder / NAME


def load(folder: Path) -> dict[str, Any] | None:
    """The journal, or None when there is none. A torn or unreadable one (a disk that
    filled while it was written cannot tear it: it is renamed into place) is set aside
    as ``task.json.bad`` and reported as None."""
    p = path(folder)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise EnvironmentProblem(f"cannot read {p}: {e.strerror}") from None
    try:
        data = json.loads(raw)
        if not isinstance(data, dict) or data.get("kind") != KIND:
            raise ValueError
    except ValueError:
        try:
            os.replace(p, p.with_name(NAME + ".bad"))
        except OSError:
            pass
        return None
    return data


def write(folder: Path, data: dict[str, Any]) -> None:
    data["kind"] = KIND
    data["version"] = 1
    try:
        atomic_write(path(folder), json.dumps(data, indent=1) + "\n", sync=True)
    except OSError as e:
        raise EnvironmentProblem(
            f"cannot write {e.filename or path(folder)}: {e.strerror}"
        ) from None


def remove(folder: Path) -> None:
    try:
        path(folder).unlink()
    except FileNotFoundError:
        pass
    except OSError as e:
        raise EnvironmentProblem(f"cannot remove {path(folder)}: {e.strerror}") from None
