"""The ``lk`` console script: the one door to every loopkit command.

Two commands are answered here without loading click, which is most of a command's
start-up (about 80 ms of the ~145 ms ``lk workspace`` took):

- ``lk workspace [--contract FILE] [--json]``, what every recipe asks before its first
  round;
- ``lk attempt [--contract FILE] [--base REF] [--resume ID] [--keep PREFIX] [--shell]``,
  every round of a recipe: the stages run as loopkit.cli.stages' functions.

Any other command, ``--help``, and any argument this door does not know go to the click
group (loopkit.cli.lk), which gives the usage errors: nothing is parsed twice that click
would parse differently.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

#: command -> (its options that take a value, its flags), as loopkit.cli.<command> has them
PLAIN: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "workspace": (frozenset({"--contract"}), frozenset({"--json"})),
    "attempt": (
        frozenset({"--contract", "--base", "--resume", "--keep"}),
        frozenset({"--shell"}),
    ),
}


def plain_args(args: Sequence[str]) -> tuple[str, dict[str, str | bool]] | None:
    """``(command, {option: value or True})`` when ``args`` is a call this door answers
    (each option at most once, every value present and not an option), else None."""
    if not args or args[0] not in PLAIN:
        return None
    takes_value, flags = PLAIN[args[0]]
    found: dict[str, str | bool] = {}
    rest = list(args[1:])
    while rest:
        arg = rest.pop(0)
        name, eq, value = arg.partition("=")
        if name in found:
            return None  # click's to parse (or to refuse)
        if arg in flags:
            found[arg] = True
        elif name in takes_value and eq and value:
            found[name] = value
        elif arg in takes_value and rest and not rest[0].startswith("-"):
            found[arg] = rest.pop(0)
        else:
            return None
    return args[0], found


def main() -> None:
    found = plain_args(sys.argv[1:])
    if found is None:
        from loopkit.cli.lk import main as group

        group()
        return
    from loopkit.cli._handle import handle

    name, options = found

    def text(option: str) -> str | None:
        value = options.get(option)
        return value if isinstance(value, str) else None

    if name == "workspace":
        from loopkit.workspace import report

        sys.exit(
            handle(lambda: report(text("--contract"), as_json=bool(options.get("--json"))), "lk")
        )
    from loopkit.cli import stages

    sys.exit(
        handle(
            lambda: stages.attempt(
                contract_path=text("--contract"),
                base=text("--base"),
                resume=text("--resume"),
                keep=text("--keep"),
                as_shell=bool(options.get("--shell")),
            ),
            "lk",
        )
    )
