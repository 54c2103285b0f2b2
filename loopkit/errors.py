"""One error base class; each subclass carries its exit code.

The core raises these; the single handler in ``loopkit.cli._entry`` turns them into one
line on stderr and the exit code. Nothing here prints.
"""

from __future__ import annotations

from loopkit.exitcodes import ExitCode


class LoopkitError(Exception):
    """An expected failure with a one-line message and a documented exit code."""

    code: ExitCode = ExitCode.INTERNAL

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class BadInput(LoopkitError):
    """Input that is not what the command accepts: names where and what was expected."""

    code = ExitCode.BAD_INPUT

    def __init__(self, source: str, message: str, *, path: str | None = None) -> None:
        where = f"{source}: {path}" if path else source
        super().__init__(f"{where}: {message}")
        self.source = source
        self.path = path


class UsageProblem(LoopkitError):
    """A command called the wrong way where click does not parse it (``lk attempt``
    through loopkit.cli.door): exit 2, as click's own usage errors."""

    code = ExitCode.USAGE


class EnvironmentProblem(LoopkitError):
    """The machine or repository is not in a state loopkit can work in."""

    code = ExitCode.ENVIRONMENT


class Interrupted(LoopkitError):
    code = ExitCode.INTERRUPTED
