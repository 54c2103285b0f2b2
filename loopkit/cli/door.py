"""The console scripts' door: the calls made most often are answered without click.

Loading click is most of a command's start-up (about 80 ms of the ~145 ms ``lk
workspace`` took). So the ``lk`` console script answers two commands here:

- ``lk workspace [--contract FILE] [--json]``, what every recipe asks before its first
  round;
- ``lk attempt [--contract FILE] [--base REF] [--resume ID] [--keep PREFIX] [--shell]``,
  every round of a recipe: the stages run as loopkit.cli.stages' functions;

and the ``lk-verify`` console script answers ``lk-verify [--contract FILE] [--only NAME]...
[--fail-fast] [--clean-room | --in-place] [--summary]``, the commit hook's call.

Any other command, ``--help``, and any argument this door does not know go to click
(loopkit.cli.lk, loopkit.cli.verify), which gives the usage errors: nothing is parsed
twice that click would parse differently.
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
    "verify": (
        frozenset({"--contract", "--only"}),
        frozenset({"--fail-fast", "--clean-room", "--in-place", "--summary"}),
    ),
}
#: The options a command may be given more than once (each value kept, in order).
REPEATED = frozenset({("verify", "--only")})
#: Flags of which a call may give one at most (click lets the last win: its to parse).
EXCLUSIVE = {"verify": frozenset({"--clean-room", "--in-place"})}

Found = dict[str, "str | bool | list[str]"]


def plain_args(args: Sequence[str]) -> tuple[str, Found] | None:
    """``(command, {option: value, True, or the values of a repeated one})`` when ``args``
    is a call this door answers (each option at most once unless it repeats, every value
    present and not an option), else None."""
    if not args or args[0] not in PLAIN:
        return None
    command = args[0]
    takes_value, flags = PLAIN[command]
    found: Found = {}
    rest = list(args[1:])
    while rest:
        arg = rest.pop(0)
        name, eq, value = arg.partition("=")
        if arg in flags:
            name, value = arg, ""
        elif name in takes_value and eq and value:
            pass
        elif arg in takes_value and rest and not rest[0].startswith("-"):
            name, value = arg, rest.pop(0)
        else:
            return None  # click's to parse (or to refuse)
        if (command, name) in REPEATED:
            kept = found.setdefault(name, [])
            assert isinstance(kept, list)
            kept.append(value)
        elif name in found:
            return None
        else:
            found[name] = value if name in takes_value else True
    if len(EXCLUSIVE.get(command, frozenset()) & found.keys()) > 1:
        return None
    return command, found


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


def verify() -> None:
    """The ``lk-verify`` console script: a plain call runs without click."""
    found = plain_args(["verify", *sys.argv[1:]])
    if found is None:
        from loopkit.cli.verify import main as command

        command()
        return
    from loopkit.cli import stages
    from loopkit.cli._handle import handle

    options = found[1]
    contract = options.get("--contract")
    only = options.get("--only")
    clean_room = True if "--clean-room" in options else False if "--in-place" in options else None
    sys.exit(
        handle(
            lambda: stages.verify(
                contract_path=contract if isinstance(contract, str) else None,
                only=tuple(only) if isinstance(only, list) else (),
                fail_fast="--fail-fast" in options,
                clean_room=clean_room,
                summary="--summary" in options,
            ),
            "lk-verify",
        )
    )
