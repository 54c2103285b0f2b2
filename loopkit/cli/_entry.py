"""The one error handler every loopkit entry point runs under.

A command's callback returns its exit code. Expected failures (``LoopkitError``) become
one line on stderr and their documented code; anything unexpected becomes exit 70 with
one line naming a log that holds the traceback -- a crash must never look like a verdict.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import click

from loopkit.errors import LoopkitError
from loopkit.exitcodes import ExitCode


def _crash_log() -> str:
    import tempfile  # lazy: only a crash needs them (start-up is a feature)
    import traceback

    stamp = time.strftime("%Y%m%dT%H%M%S")
    fd, path = tempfile.mkstemp(prefix=f"loopkit-crash-{stamp}-", suffix=".log")
    with os.fdopen(fd, "w") as f:
        f.write(traceback.format_exc())
    return path


def say(prog: str, message: str) -> None:
    """One message on stderr. Messages quote paths, reasons and output a worker chose, so
    terminal control sequences are taken out first (see loopkit.text)."""
    from loopkit.text import clean  # lazy: --help never needs it

    click.echo(f"{prog}: {clean(message)}", err=True)


def _say(prog: str, message: str) -> None:
    from loopkit.text import clean

    message = clean(message)
    first = message.strip().splitlines()[0] if message.strip() else "error"
    try:
        click.echo(f"{prog}: {first}", err=True)
    except Exception:  # stderr gone: nothing more to do
        pass


def handle(call: Callable[[], Any], prog: str) -> int:
    try:
        rv = call()
        return int(rv) if isinstance(rv, int) else 0
    except click.exceptions.Exit as e:
        return int(e.exit_code)
    except click.ClickException as e:
        e.show()
        return int(e.exit_code)
    except (click.Abort, KeyboardInterrupt):
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
        if os.environ.get("LOOPKIT_DEBUG") == "1":
            raise
        log = _crash_log()
        _say(prog, f"internal error: {type(e).__name__}: {e} (traceback in {log})")
        return ExitCode.INTERNAL


class _Handled:
    """Mixin: run click's parsing and the callback under ``handle``."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        prog = prog_name or os.path.basename(sys.argv[0]) or "lk"
        parent_main = super().main  # type: ignore[misc]

        def call() -> Any:
            return parent_main(
                args=args,
                prog_name=prog_name,
                complete_var=complete_var,
                standalone_mode=False,
                **extra,
            )

        code = handle(call, prog)
        if standalone_mode:
            sys.exit(code)
        return code


class Command(_Handled, click.Command):
    pass


class Group(_Handled, click.Group):
    pass


CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def command(**kwargs: Any) -> Callable[[Callable[..., Any]], Command]:
    """``@command()`` -- a click command under loopkit's error handler."""
    kwargs.setdefault("context_settings", CONTEXT)
    return click.command(cls=Command, **kwargs)
