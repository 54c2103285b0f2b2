"""Per-attempt artifact folders under the state folder: transcripts, logs, diffs.

An attempt is named once (``attempt_id`` in the document) by the first command that
needs a folder; later commands in the same pipe reuse it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any


def new_attempt_id() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + os.urandom(3).hex()


def attempt_id(document: dict[str, Any] | None) -> str:
    """The document's attempt id, assigned (and stored in the document) if it has none."""
    if document is None:
        return new_attempt_id()
    if not document.get("attempt_id"):
        document["attempt_id"] = new_attempt_id()
    return str(document["attempt_id"])


def attempt_dir(state: Path, document: dict[str, Any] | None) -> Path:
    path = state / "artifacts" / attempt_id(document)
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
