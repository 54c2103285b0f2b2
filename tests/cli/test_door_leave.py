"""door.leave: a command the console scripts answer exits once its output is out, without
tearing the interpreter down -- but never at the cost of what a normal exit would do."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = """
import atexit, sys, threading, time
from pathlib import Path
from loopkit.cli.door import leave
out = Path(sys.argv[2])
kind = sys.argv[1]
if kind == "thread":
    def late():
        time.sleep(0.3)
        out.write_text("the thread ended")
    threading.Thread(target=late).start()
elif kind == "atexit":
    atexit.register(lambda: out.write_text("the handler ran"))
elif kind == "daemon":
    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
sys.stdout.write("buffered, no newline")
sys.stderr.write("err, no newline")
leave(7)
print("never reached")
"""


def _leave(kind: str, tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path / f"{kind}.txt"
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, kind, str(out)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    return done, out


def test_leave_exits_with_its_code_and_everything_written_out(tmp_path: Path) -> None:
    # The fast exit skips the teardown, not the buffers: stdout (a pipe, block-buffered)
    # and stderr are flushed first. A daemon thread does not hold it back (nor would it
    # hold a normal exit back).
    for kind in ("plain", "daemon"):
        done, _ = _leave(kind, tmp_path)
        assert (done.returncode, done.stdout, done.stderr) == (
            7,
            "buffered, no newline",
            "err, no newline",
        ), kind


def test_leave_exits_normally_when_a_normal_exit_has_work_to_do(tmp_path: Path) -> None:
    # A thread of its own still running is waited for; an exit handler runs. A naive
    # os._exit would cut both.
    for kind, said in (("thread", "the thread ended"), ("atexit", "the handler ran")):
        done, out = _leave(kind, tmp_path)
        assert done.returncode == 7, done.stderr
        assert out.read_text() == said, kind
        assert done.stdout == "buffered, no newline"
