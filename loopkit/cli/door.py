"""The console scripts' door: the calls made most often are answered without click.

Loading click is most of a command's start-up (about 80 ms of the ~145 ms ``lk
workspace`` took). So the ``lk`` console script answers two commands here:

- ``lk workspace [--contract FILE] [--json]``, what every recipe asks before its first
  round;
- ``lk attempt [--contract FILE] [--base REF] [--resume ID] [--keep PREFIX] [--shell]``,
  every round of a recipe (loopkit.cli.transactions.attempt, the stages run by
  loopkit.attempt);
- ``lk task VERB ...``, the ratchet's steps every loop takes around its rounds
  (loopkit.cli.transactions);

and the stage commands' console scripts (``lk-verify``, the commit hook's call; ``lk-diff``,
``lk-decide``, ``lk-invoke``, ``lk-judge``, as in a pipe or ``loop.mk``) answer a plain call
with the stage's function in loopkit.stages.

Any other command, ``--help``, and any argument this door does not know go to click
(loopkit.cli.lk, loopkit.cli.<stage>), which gives the usage errors: nothing is parsed
twice that click would parse differently.
"""

from __future__ import annotations

import atexit
import os
import sys
from collections.abc import Sequence

from loopkit.cli import options

TYPE_CHECKING = False  # typing stays unloaded at run time (start-up is a feature)
if TYPE_CHECKING:
    from typing import Any

    Spec = tuple[Any, ...]

#: command -> {option: how the door reads it}, from the one declaration of each command's
#: options (loopkit.cli.options, which the click commands are built from too): ("value",
#: kwarg) one value; ("repeat", kwarg) one value each time, all kept in order; ("flag",
#: kwarg, value); ("choice", kwarg, values) one of those values alone; ("positive", kwarg)
#: a finite number above 0; ("int", kwarg) a whole number above 0. Anything else -- a value
#: missing or starting with "-", an option twice, two flags setting one kwarg -- is
#: click's to parse or refuse.
PLAIN: dict[str, dict[str, Spec]] = {
    name: options.door_table(params)[1] for name, params in options.COMMANDS.items()
}

#: ``lk task VERB``: (the positional arguments' keywords, in order; the options as above).
TASK: dict[str, tuple[tuple[str, ...], dict[str, Spec]]] = {
    verb: options.door_table(params) for verb, params in options.TASK.items()
}


def task_args(args: Sequence[str]) -> tuple[str, dict[str, Any]] | None:
    """``(verb, keyword arguments)`` when ``args`` (after ``task``) is a plain call of an
    ``lk task`` step, else None (click's)."""
    if not args or args[0] not in TASK:
        return None
    positional, table = TASK[args[0]]
    found = plain_args(["task", *args[1:]], table=table, positional=positional)
    if found is None or (args[0] == "note" and "text" not in found[1]):
        return None
    return args[0], found[1]


def _taken(spec: Spec, value: str) -> Any:
    """What ``value`` is for an option of ``spec`` (None: not one the door takes)."""
    kind = spec[0]
    if kind == "choice":
        from loopkit.worker import providers

        allowed = spec[2] if spec[2] is not None else providers.names()
        return value if value in allowed else None
    if kind == "int":
        return int(value) if value.isdigit() and int(value) > 0 else None
    if kind == "positive":
        import math

        try:
            number = float(value)
        except ValueError:
            return None
        return number if math.isfinite(number) and number > 0 else None
    return value


def plain_args(
    args: Sequence[str],
    *,
    table: dict[str, Spec] | None = None,
    positional: tuple[str, ...] = (),
) -> tuple[str, dict[str, Any]] | None:
    """``(command, keyword arguments)`` when ``args`` is a call this door answers, else
    None (click's to parse or to refuse). ``table`` and ``positional``: a command's own
    (``lk task``'s steps), its arguments filling the positional keywords in order."""
    if not args or (table is None and args[0] not in PLAIN):
        return None
    command, table = args[0], table if table is not None else PLAIN[args[0]]
    kwargs: dict[str, Any] = {}
    rest = list(args[1:])
    free = list(positional)
    while rest:
        arg = rest.pop(0)
        if (arg == "-" or not arg.startswith("-")) and free:
            kwargs[free.pop(0)] = arg
            continue
        name, eq, value = arg.partition("=")
        spec = table.get(arg) or table.get(name)
        if spec is None:
            return None
        if spec[0] == "flag":
            if eq or spec[1] in kwargs:
                return None
            kwargs[spec[1]] = spec[2]
            continue
        if not eq:
            if not rest or rest[0].startswith("-"):
                return None
            value = rest.pop(0)
        elif not value:
            return None
        taken = _taken(spec, value)
        if taken is None:
            return None
        if spec[0] == "repeat":
            kwargs[spec[1]] = (*kwargs.get(spec[1], ()), taken)
        elif spec[1] in kwargs:
            return None
        else:
            kwargs[spec[1]] = taken
    return command, kwargs


def main() -> None:
    """The ``lk`` console script: a plain ``lk workspace`` or ``lk attempt`` without click."""
    quiet_interrupts("lk")
    try:
        _main()
    except KeyboardInterrupt:  # outside a command's own handler (click's, or handle's)
        _interrupted("lk")


def plan() -> None:
    """The ``lk-plan`` console script: its click group, with interrupts answered as every
    command's are (the group's import is most of its start-up)."""
    quiet_interrupts("lk-plan")
    try:
        from loopkit.cli.plan import main as group

        group()
    except KeyboardInterrupt:
        _interrupted("lk-plan")


def quiet_interrupts(prog: str) -> None:
    """From here to the process's last instruction, an interrupt that no handler catches
    -- one that comes while a module loads, a second one while the first is being wound
    down, one while the interpreter exits and waits for its threads -- ends the command
    with one line and exit 130, never a traceback. (Each command handles the interrupt it
    expects, ending what it started; this is the floor under all of them.)"""
    shown = sys.excepthook
    unraisable = sys.unraisablehook

    def uncaught(kind: type[BaseException], value: BaseException, tb: object) -> None:
        if not issubclass(kind, KeyboardInterrupt):
            shown(kind, value, tb)  # type: ignore[arg-type]
            return
        _last_line(prog)

    def ignored(what: Any) -> None:
        if isinstance(what.exc_value, KeyboardInterrupt):
            _last_line(prog)
        unraisable(what)

    sys.excepthook = uncaught
    sys.unraisablehook = ignored


def _last_line(prog: str) -> None:
    try:
        os.write(2, f"{prog}: interrupted\n".encode())
    finally:
        os._exit(130)  # ExitCode.INTERRUPTED, without loading anything more


def _interrupted(prog: str) -> None:
    """An interrupt no command caught: one line and 130, never a traceback."""
    from loopkit.exitcodes import ExitCode
    from loopkit.handling import say

    say(prog, "interrupted")
    leave(ExitCode.INTERRUPTED)


def _main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["task"] and (step := task_args(args[1:])) is not None:
        from loopkit.cli import transactions

        call = getattr(transactions, step[0])
        _answer(lambda: call(**step[1]), "lk")
    found = plain_args(args)
    if found is None:
        from loopkit.cli.lk import main as group

        group()
        return
    name, kwargs = found
    if name == "workspace":
        from loopkit.workspace import report

        _answer(lambda: report(kwargs.get("contract"), as_json=bool(kwargs.get("as_json"))), "lk")
    if name == "attempt":
        from loopkit.cli import transactions

        _answer(lambda: transactions.attempt(**kwargs), "lk")
    from loopkit import stages

    # a stage by its lk name (lk verify is lk-verify): its own function.
    run = getattr(stages, name)
    _answer(lambda: run(**kwargs), "lk")


def _stage(name: str) -> None:
    """The ``lk-<name>`` console script: a plain call runs the stage's function, anything
    else goes to its click command."""
    import importlib

    quiet_interrupts(f"lk-{name}")
    try:
        found = plain_args([name, *sys.argv[1:]])
        if found is None:
            importlib.import_module(f"loopkit.cli.{name}").main()
            return
        from loopkit import stages

        run = getattr(stages, name)
        _answer(lambda: run(**found[1]), f"lk-{name}")
    except KeyboardInterrupt:  # outside the stage's own handler
        _interrupted(f"lk-{name}")


def _answer(call: Any, prog: str) -> None:
    from loopkit.handling import handle

    leave(handle(call, prog))


def leave(code: int) -> None:
    """Exit with ``code`` once what the command wrote is out, without tearing the
    interpreter down (freeing every module and object one by one: ~15 ms of an attempt's
    end, for memory the process is about to give back whole). What needs a normal exit
    gets one: a thread of its own still running, an exit handler registered, an output
    that cannot be flushed (Python reports it as it always does)."""
    import threading

    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        sys.exit(code)
    main = threading.main_thread()
    if atexit._ncallbacks() or any(t is not main and not t.daemon for t in threading.enumerate()):
        sys.exit(code)
    os._exit(code)


def verify() -> None:
    _stage("verify")


def diff() -> None:
    _stage("diff")


def decide() -> None:
    _stage("decide")


def invoke() -> None:
    _stage("invoke")


def judge() -> None:
    _stage("judge")
