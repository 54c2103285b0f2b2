"""Each option of a command the console scripts' door answers is declared once
(loopkit.cli.options): the click command that gives its --help and usage errors, and the
door that reads a plain call without click, are both built from that one declaration."""

from __future__ import annotations

import importlib

import click
import pytest

from loopkit.cli import door, options


def _declared(params: tuple[options.Opt | options.Arg, ...]) -> list[tuple[object, ...]]:
    """What click must show and take for each declared parameter, in order."""
    shown: list[tuple[object, ...]] = []
    for p in params:
        if isinstance(p, options.Arg):
            shown.append(("arg", p.name, p.required))
        else:
            names = tuple(n for name in p.names for n in name.split("/"))
            shown.append((names, p.kwarg, p.help, p.metavar, p.kind == "repeat"))
    return shown


def _clicks(command: click.Command) -> list[tuple[object, ...]]:
    shown: list[tuple[object, ...]] = []
    for p in command.params:
        if isinstance(p, click.Argument):
            shown.append(("arg", p.name, p.required))
        elif isinstance(p, click.Option) and "--help" not in p.opts:
            names = (*p.opts, *p.secondary_opts)
            shown.append((names, p.name, p.help or "", p.metavar, p.multiple))
    return shown


@pytest.mark.parametrize("name", sorted(options.COMMANDS))
def test_each_door_command_is_built_from_its_one_declaration(name: str) -> None:
    command = importlib.import_module(f"loopkit.cli.{name}").main
    assert _clicks(command) == _declared(options.COMMANDS[name])
    assert door.PLAIN[name] == options.door_table(options.COMMANDS[name])[1]


@pytest.mark.parametrize("verb", sorted(options.TASK))
def test_each_task_step_is_built_from_its_one_declaration(verb: str) -> None:
    from loopkit.cli.task import main

    assert _clicks(main.commands[verb]) == _declared(options.TASK[verb])
    assert door.TASK[verb] == options.door_table(options.TASK[verb])


def test_a_switch_is_two_flags_at_the_door_and_one_option_in_click() -> None:
    # --clean-room/--in-place: neither given is None (the stage picks by what is piped).
    from loopkit.cli.verify import main

    (switch,) = [p for p in main.params if p.name == "clean_room"]
    assert switch.default is None and switch.secondary_opts == ["--in-place"]
    table = door.PLAIN["verify"]
    assert table["--clean-room"] == ("flag", "clean_room", True)
    assert table["--in-place"] == ("flag", "clean_room", False)
