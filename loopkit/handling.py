"""The one error handler every loopkit entry point runs under.

A command's callback returns its exit code. Expected failures (``LoopkitError``) become
one line on stderr and their documented code; anything unexpected becomes exit 70 with
one line naming a log that holds the traceback -- a crash must never look like a verdict.

Nothing here loads click: ``lk workspace`` runs under this handler without it
(loopkit.cli.door); click's own exceptions can only come from a command that loaded it.
The click side (commands and groups that run under it) is loopkit.cli._entry.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

from loopkit.errors import LoopkitError
from loopkit.exitcodes import ExitCode

TYPE_CHECKING = False  # typing stays unloaded at run time (start-up is a feature)
if TYPE_CHECKING:
    from typing import Any


def _crash_log() -> str:
    """Where the traceback went -- or why it could not be written (a full disk, a
    read-only /tmp): the handler itself never fails."""
    import tempfile  # lazy: only a crash needs them (start-up is a feature)
    import traceback

    stamp = time.strftime("%Y%m%dT%H%M%S")
    try:
        fd, path = tempfile.mkstemp(prefix=f"loopkit-crash-{stamp}-", suffix=".log")
        with os.fdopen(fd, "w") as f:
            f.write(traceback.format_exc())
    except Exception as e:  # any failure here is reported, never raised
        return f"nowhere: the log could not be written ({type(e).__name__}: {e})"
    return path


#: OSError numbers that say the machine, not loopkit, is in the way: a full disk, a quota,
#: a read-only file system, a permission -- an environment error (4), the path named.
_ENVIRONMENT_ERRNOS = frozenset({28, 122, 30, 13, 1, 31, 27, 24, 23, 5})


def _environment(e: OSError) -> str | None:
    if e.errno not in _ENVIRONMENT_ERRNOS:
        return None
    where = e.filename if e.filename is not None else "a file"
    return f"cannot write {where}: {e.strerror or e}"


def say(prog: str, message: str) -> None:
    """One message on stderr. Messages quote paths, reasons and output a worker chose, so
    terminal control sequences are taken out first (see loopkit.text)."""
    from loopkit.text import clean  # lazy: --help never needs it

    _line(f"{prog}: {clean(message)}")


def _line(text: str) -> None:
    """One line on stderr, as click.echo writes it (flushed at once; nothing when there is
    no stderr at all, as when a command is started with it closed)."""
    if sys.stderr is None:
        return
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def _say(prog: str, message: str) -> None:
    from loopkit.text import clean

    message = clean(message)
    first = message.strip().splitlines()[0] if message.strip() else "error"
    try:
        _line(f"{prog}: {first}")
    except Exception:  # stderr gone: nothing more to do
        pass


def handle(call: Callable[[], Any], prog: str) -> int:
    try:
        rv = call()
        return int(rv) if isinstance(rv, int) else 0
    except KeyboardInterrupt:
        _say(prog, "interrupted")
        return ExitCode.INTERRUPTED
    except LoopkitError as e:
        _say(prog, f"error: {e.message}")
        return int(e.code)
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): not our failure to report.
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115
        except OSError:
            pass
        return ExitCode.FAILED_CHECK
    except Exception as e:
        clicks = sys.modules.get("click")  # raised by click: loaded by the command
        if clicks is not None and isinstance(e, clicks.exceptions.Exit):
            return int(e.exit_code)
        if clicks is not None and isinstance(e, clicks.ClickException):
            e.show()
            return int(e.exit_code)
        if clicks is not None and isinstance(e, clicks.Abort):
            _say(prog, "interrupted")
            return ExitCode.INTERRUPTED
        if isinstance(e, OSError) and (line := _environment(e)) is not None:
            _say(prog, f"error: {line}")
            return ExitCode.ENVIRONMENT
        if os.environ.get("LOOPKIT_DEBUG") == "1":
            raise
        log = _crash_log()
        _say(prog, f"internal error: {type(e).__name__}: {e} (traceback in {log})")
        return ExitCode.INTERNAL
