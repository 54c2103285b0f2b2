"""Per-attempt artifact folders under the state folder: transcripts, logs, diffs.

An attempt is named once (``attempt_id`` in the document) by the first command that
needs a folder; later commands in the same pipe reuse it. The id names a folder, so one
read from a document must be a plain name (``SAFE_ID``): never ``../..``, never a path.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from loopkit.errors import BadInput

TYPE_CHECKING = False  # typing stays unloaded at run time (start-up is a feature)
if TYPE_CHECKING:
    from loopkit.sections import Attempt, JSONObject

#: An attempt id: one folder name (schemas/common.json#/$defs/attempt_id), never a path.
SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def is_safe_id(value: object) -> bool:
    """Whether ``value`` may name a folder under ``<state>/artifacts/``."""
    return isinstance(value, str) and bool(SAFE_ID.fullmatch(value)) and ".." not in value


def new_attempt_id() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + os.urandom(3).hex()


def assign_attempt_id(document: Attempt | JSONObject) -> str:
    """Give ``document`` an attempt id if it has none (it is written into the document),
    and return the id. An id the document brings is checked before anything is named
    after it (exit 3)."""
    if not document.get("attempt_id"):
        document["attempt_id"] = new_attempt_id()
    value = document["attempt_id"]
    if not is_safe_id(value):
        shown = repr(value)[:80]
        raise BadInput(
            "<stdin>",
            f"expected a plain name (letters, digits, '.', '_', '-'; at most 128), got {shown}",
            path="$.attempt_id",
        )
    return str(value)


def attempt_dir(state: Path, attempt: str) -> Path:
    """The artifact folder of the attempt ``attempt`` (made if missing)."""
    if not is_safe_id(attempt):
        raise BadInput(
            "<stdin>", f"expected a plain name, got {attempt!r:.80}", path="$.attempt_id"
        )
    path = state / "artifacts" / attempt
    path.mkdir(parents=True, exist_ok=True)
    return path


def relative(path: Path, root: Path) -> str:
    """A path as recorded in documents: relative to the repository root when inside it."""
    try:
        return (
            Path(os.path.relpath(path, root)).as_posix() if path.is_absolute() else path.as_posix()
        )
    except ValueError:
        return str(path)
