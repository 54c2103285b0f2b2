"""Commands and groups that run under loopkit's one error handler (loopkit.handling)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import click

from loopkit.cli.options import Arg, Opt
from loopkit.handling import handle, say

__all__ = ["CONTEXT", "Command", "Group", "command", "declared", "group", "handle", "say"]


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


def declared(params: Sequence[Opt | Arg], *, providers: Sequence[str] = ()) -> Callable[[Any], Any]:
    """A command's click parameters, built from their one declaration (loopkit.cli.options),
    in its order. ``providers``: the choices of a ``choice`` option that names none."""
    built: list[Callable[[Any], Any]] = []
    for p in params:
        if isinstance(p, Arg):
            built.append(click.argument(p.name, required=p.required, metavar=p.metavar))
            continue
        extra: dict[str, Any] = {"metavar": p.metavar, "help": p.help}
        if p.default is not None or p.kind == "switch":  # a switch given neither way: None
            extra["default"] = p.default
        if p.kind == "flag":
            extra["is_flag"] = True
        elif p.kind == "repeat":
            extra["multiple"] = True
        elif p.kind == "choice":
            extra["type"] = click.Choice(list(p.choices or providers))
        elif p.kind == "positive":
            extra["type"] = click.FloatRange(min=0, min_open=True)
        elif p.kind == "int":
            extra["type"] = int
        built.append(click.option(*p.names, p.kwarg, **extra))
    return options(*built)


def command(**kwargs: Any) -> Callable[[Callable[..., Any]], Command]:
    """``@command()`` -- a click command under loopkit's error handler."""
    kwargs.setdefault("context_settings", CONTEXT)
    return click.command(cls=Command, **kwargs)


def group(**kwargs: Any) -> Callable[[Callable[..., Any]], Group]:
    """``@group()`` -- a click group under loopkit's error handler."""
    kwargs.setdefault("context_settings", CONTEXT)
    return click.group(cls=Group, **kwargs)
