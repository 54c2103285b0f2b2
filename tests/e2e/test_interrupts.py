"""A person's Ctrl-C (or a CI runner's cancel) at any instant of a command ends it with one
line and exit 130, never a traceback: while a module is still loading, and a second
interrupt while the first is being wound down. The interrupts are sent from inside the
real console scripts at exact points (a ``sitecustomize`` on PYTHONPATH that signals the
process), so the test does not depend on timing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent

#: Loaded at start-up by the command's interpreter: SIGINT to itself while ``LK_AT`` loads,
#: and, with ``LK_AGAIN``, once more as the first interrupt's line is being written.
HOOK = """
import os, signal, sys

at = os.environ.get("LK_AT", "")


class _Finder:
    def find_spec(self, name, path=None, target=None):
        if name == at:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None


sys.meta_path.insert(0, _Finder())
if os.environ.get("LK_AGAIN"):
    write = sys.stderr.write

    def again(text, _fired=[]):
        if "interrupted" in text and not _fired:
            _fired.append(1)
            os.kill(os.getpid(), signal.SIGINT)
        return write(text)

    sys.stderr.write = again
"""


def run(
    tmp_path: Path, argv: list[str], at: str, *, again: bool = False
) -> subprocess.CompletedProcess[str]:
    hook = tmp_path / "hook"
    hook.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text(HOOK)
    env = {**os.environ, "PYTHONPATH": str(hook), "LK_AT": at}
    env.pop("LOOPKIT_DEBUG", None)
    if again:
        env["LK_AGAIN"] = "1"
    (tmp_path / "TASKS.md").write_text("- [ ] a task {#a}\n")
    return subprocess.run(
        [str(BIN / argv[0]), *argv[1:]], cwd=tmp_path, env=env, capture_output=True,
        text=True, stdin=subprocess.DEVNULL, timeout=60,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "at"),
    [
        (["lk-plan", "check", "TASKS.md"], "click"),  # the group's module loading
        (["lk-plan", "check", "TASKS.md"], "loopkit.plan.parsing"),  # the command's
        (["lk", "status"], "click"),
        (["lk", "workspace"], "loopkit.workspace"),
        (["lk-verify", "--help"], "click"),
        (["lk-decide", "--trigger", "manual"], "loopkit.stages"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else v,
)
def test_an_interrupt_while_a_module_loads_is_one_line_and_130(
    tmp_path: Path, argv: list[str], at: str
) -> None:
    done = run(tmp_path, argv, at)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 130, (done.returncode, done.stderr)
    assert done.stderr.strip().splitlines()[-1].endswith(": interrupted"), done.stderr


@pytest.mark.parametrize(
    "argv", [["lk-plan", "check", "TASKS.md"], ["lk", "workspace"], ["lk-decide", "--trigger", "manual"]],
    ids=lambda v: " ".join(v),
)  # fmt: skip
def test_a_second_interrupt_while_the_first_winds_down_is_one_line_and_130(
    tmp_path: Path, argv: list[str]
) -> None:
    at = {"lk-plan": "loopkit.plan.parsing", "lk": "loopkit.workspace"}.get(
        argv[0], "loopkit.stages"
    )
    done = run(tmp_path, argv, at, again=True)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 130, (done.returncode, done.stderr)
    assert done.returncode != -signal.SIGINT
