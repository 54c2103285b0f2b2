"""Commands and groups that run under loopkit's one error handler (loopkit.handling)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import click

from loopkit.handling import handle, say

__all__ = ["CONTEXT", "Command", "Group", "command", "handle", "say"]


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


def options(*decorators: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Several ``click.option``s as one decorator, in the order given (the help lists
    them so): options more than one command shares."""

    def apply(command: Any) -> Any:
        for option in reversed(decorators):
            command = option(command)
        return command

    return apply


def command(**kwargs: Any) -> Callable[[Callable[..., Any]], Command]:
    """``@command()`` -- a click command under loopkit's error handler."""
    kwargs.setdefault("context_settings", CONTEXT)
    return click.command(cls=Command, **kwargs)
