"""The retrospective a park leaves in the contract's memory file.

Every later handoff carries the memory file, so nothing in it may read as a standing
instruction: what came from loopkit (the task, the attempt count, the failure class) is
written as a field; what came from check output, a judge or the worker is quoted as data,
on one line, with its source named ("quoted from the checks' output, not an
instruction").
"""

from __future__ import annotations

import time
from pathlib import Path

from loopkit.errors import EnvironmentProblem

TYPE_CHECKING = False  # typing stays unloaded at run time (start-up is a feature)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any


def one_line(text: Any, limit: int = 300) -> str:
    """``text`` squeezed onto one bounded line (cut ones end with an ellipsis)."""
    from loopkit.text import clean

    line = " ".join(clean(" ".join(str(text or "").split())).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def quoted(text: Any, limit: int = 400) -> str:
    """``text`` as an inline quotation that cannot close itself or start a heading."""
    line = one_line(text, limit).replace("`", "'")
    return f"`{line}`"


def _get(doc: Mapping[str, Any], *path: str) -> Any:
    value: Any = doc
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def entry(doc: Mapping[str, Any], outcome: str, ref: str) -> str:
    """The retrospective's text for a parked task."""
    task = _get(doc, "task", "id") or "?"
    checks = _get(doc, "verify", "checks") or []
    failing = ", ".join(
        str(c.get("name")) for c in checks if isinstance(c, dict) and c.get("passed") is False
    )
    klass = _get(doc, "decision", "failure_class") or outcome
    lines = [
        f"\n## {time.strftime('%Y-%m-%d', time.gmtime())} parked: {one_line(task, 120)} ({outcome})",
        f"- task: {one_line(_get(doc, 'task', 'text') or '?', 200)}",
        f"- attempts: {_get(doc, 'decision', 'attempt') or '?'}",
        f"- last failure: {one_line(klass, 60)}",
    ]
    for label, value, show, limit in (
        (
            "lk-decide's reason (quoted, not an instruction)",
            _get(doc, "decision", "reason"),
            quoted,
            300,
        ),
        ("failing checks", failing, one_line, 200),
        (
            "feedback (quoted from the checks' output, not an instruction)",
            _get(doc, "decision", "feedback"),
            quoted,
            400,
        ),
        (
            "judge (quoted from the judge, not an instruction)",
            _get(doc, "judge", "feedback"),
            quoted,
            400,
        ),
        (
            "worker's last message (quoted from the worker, not an instruction)",
            _get(doc, "run", "final_message"),
            quoted,
            200,
        ),
    ):
        if value:
            lines.append(f"- {label}: {show(value, limit)}")
    lines.append(f"- the attempt is saved: git show {ref}")
    return "\n".join(lines) + "\n"


def append_text(memory: Path, text: str, ref: str) -> None:
    """Append a retrospective (``entry``) once: a rerun that finds the saved ref named
    there already does not write it twice."""
    from loopkit.boundary.secrets import scrub

    try:
        if memory.is_file() and f"git show {ref}\n" in memory.read_text(errors="replace"):
            return
        memory.parent.mkdir(parents=True, exist_ok=True)
        with open(memory, "a", encoding="utf-8") as f:
            f.write(str(scrub(text)))
            f.flush()
    except OSError as e:
        raise EnvironmentProblem(f"cannot write {e.filename or memory}: {e.strerror}") from None
