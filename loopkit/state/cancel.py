"""Cancellation intent, persisted in the state folder so a loop stops at the next boundary.

``lk cancel`` writes it; every later ``lk-decide`` answers cancelled (30) and a running
``lk-invoke`` stops its worker and a running ``lk-verify`` ends its check (its process
group; the checks after it do not run) as soon as they see it; ``lk cancel --clear`` lifts it.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, cast

from loopkit import loader
from loopkit.errors import EnvironmentProblem
from loopkit.files import atomic_write

if TYPE_CHECKING:
    from loopkit.sections import Intent

FILENAME = "cancel.json"


def _path(state: Path) -> Path:
    return state / FILENAME


def request(state: Path, *, reason: str | None = None) -> Intent:
    intent: Intent = {
        "reason": reason or "cancelled by a person",
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "pid": os.getpid(),
    }
    try:
        atomic_write(_path(state), json.dumps(intent) + "\n")
    except OSError as e:
        raise EnvironmentProblem(f"cannot write {_path(state)}: {e.strerror}") from None
    return intent


def clear(state: Path) -> bool:
    try:
        _path(state).unlink()
        return True
    except FileNotFoundError:
        return False


def requested(state: Path) -> Intent | None:
    """The persisted intent, or None. A damaged file still counts as a request to stop."""
    try:
        raw = _path(state).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        data = loader.json_loads(raw)
        return cast("Intent", data) if isinstance(data, dict) else {"reason": "cancelled"}
    except loader.LoadError:
        return {"reason": "cancelled (intent file unreadable)"}
