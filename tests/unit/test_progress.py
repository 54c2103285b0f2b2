"""Live progress lines: throttled, cleaned, coloured only when asked."""

from __future__ import annotations

import io
from types import SimpleNamespace

from loopkit.worker.progress import Progress, wants_color
from loopkit.worker.providers.base import Event, RunState, ToolCall


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _progress(color: bool = False) -> tuple[Progress, io.StringIO, Clock]:
    out, clock = io.StringIO(), Clock()
    return Progress("lk-invoke", stream=out, color=color, clock=clock), out, clock


def test_a_tool_call_is_one_line_with_its_command_and_spend() -> None:
    p, out, clock = _progress()
    clock.t = 12
    state = RunState(input_tokens=1500, output_tokens=500, cost_usd=0.125)
    p.event(Event("tool_call", tool=ToolCall(None, "Bash", {}, command="pytest -q")), state)
    line = out.getvalue()
    assert line.startswith("lk-invoke: [   12s] Bash pytest -q")
    assert "2.0k tokens" in line and "$0.12" in line


def test_a_burst_is_throttled_then_counted() -> None:
    p, out, clock = _progress()
    for i in range(5):
        p.event(Event("tool_call", tool=ToolCall(None, "Read", {}, files_read=[f"f{i}.py"])))
    clock.t = 1.0
    p.event(Event("tool_call", tool=ToolCall(None, "Edit", {}, files_written=["g.py"])))
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and "(+4 more)" in lines[1]


def test_errors_and_the_end_are_never_throttled() -> None:
    p, out, _ = _progress()
    p.event(Event("tool_call", tool=ToolCall(None, "Bash", {}, command="x")))
    p.event(Event("error", text="boom"))
    p.finished("timeout")
    assert len(out.getvalue().splitlines()) == 3


def test_worker_text_is_cleaned_and_colour_only_when_asked() -> None:
    p, out, _ = _progress(color=False)
    p.event(Event("tool_call", tool=ToolCall(None, "Bash", {}, command="echo \x1b]0;pwned\x07hi")))
    assert "\x1b" not in out.getvalue() and "hi" in out.getvalue()
    p, out, _ = _progress(color=True)
    p.finished("completed")
    assert "\x1b[32m" in out.getvalue()


def test_no_color_wins_over_a_terminal(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    tty = SimpleNamespace(isatty=lambda: True)
    assert wants_color(tty)  # type: ignore[arg-type]
    monkeypatch.setenv("NO_COLOR", "1")
    assert not wants_color(tty)  # type: ignore[arg-type]
