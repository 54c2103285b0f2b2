"""Live progress for a person: one line per meaningful event on stderr.

A 15-minute agent run must not be silent. While a worker runs, lk-invoke prints a line
for each tool call (with the file it touches or the command it runs), a retry of the
model's API, an error, and the end of the run -- each with the elapsed time and, when the
stream tells them, the tokens and cost so far. Lines are throttled (a burst of tool calls
is summarised), coloured only on a terminal and never when ``NO_COLOR`` is set; text the
worker chose is cleaned of terminal control sequences. ``--quiet`` turns it off.

stdout is never touched: it carries the JSON document.
"""

from __future__ import annotations

import os
import sys
import time
from typing import IO, Any

from loopkit.text import clean, clip

#: Seconds between two lines, at least; what happens meanwhile is counted, then said.
THROTTLE_S = 0.5
_COLORS = {"tool": "36", "retry": "33", "error": "31", "done": "32", "dim": "2"}


def wants_color(stream: IO[str]) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Progress:
    """Feeds on a worker's normalized events (``providers.base.Event``) and its state."""

    def __init__(
        self,
        prog: str,
        *,
        stream: IO[str] | None = None,
        color: bool | None = None,
        throttle_s: float = THROTTLE_S,
        clock: Any = time.monotonic,
    ) -> None:
        self.prog = prog
        self.stream = stream if stream is not None else sys.stderr
        self.color = wants_color(self.stream) if color is None else color
        self.throttle_s = throttle_s
        self.clock = clock
        self.started = clock()
        self._last = -1e9
        self._held = 0  # tool calls not shown because of the throttle

    def _paint(self, text: str, kind: str) -> str:
        return f"\x1b[{_COLORS[kind]}m{text}\x1b[0m" if self.color else text

    def _spend(self, state: Any) -> str:
        if state is None:
            return ""
        parts = []
        tokens = int(getattr(state, "input_tokens", 0) or 0) + int(
            getattr(state, "output_tokens", 0) or 0
        )
        if tokens:
            parts.append(f"{tokens / 1000:.1f}k tokens")
        cost = getattr(state, "cost_usd", None)
        if isinstance(cost, (int, float)) and cost:
            parts.append(f"${cost:.2f}")
        return (" · " + ", ".join(parts)) if parts else ""

    def line(self, text: str, kind: str = "dim", *, state: Any = None, force: bool = False) -> None:
        now = self.clock()
        if not force and now - self._last < self.throttle_s:
            self._held += 1
            return
        held = f" (+{self._held} more)" if self._held else ""
        self._held = 0
        self._last = now
        elapsed = f"[{now - self.started:5.0f}s]"
        body = clip(clean(text).replace("\n", " "), 160)
        self.stream.write(
            f"{self.prog}: {self._paint(elapsed, 'dim')} {self._paint(body, kind)}{held}"
            f"{self._spend(state)}\n"
        )
        self.stream.flush()

    def event(self, event: Any, state: Any = None) -> None:
        """One normalized event: a line when it means something to a person."""
        kind = getattr(event, "kind", "")
        tool = getattr(event, "tool", None)
        if kind == "tool_call" and tool is not None:
            what = tool.command or ", ".join(tool.files_written or tool.files_read) or ""
            self.line(f"{tool.name} {what}".strip(), "tool", state=state)
        elif kind == "retry":
            self.line(f"the model's API is retried: {event.text or ''}", "retry", state=state)
        elif kind == "error":
            self.line(f"error: {event.text or ''}", "error", state=state, force=True)

    def finished(self, stop_reason: str, state: Any = None) -> None:
        kind = "done" if stop_reason == "completed" else "error"
        self.line(f"the worker's run ended: {stop_reason}", kind, state=state, force=True)
