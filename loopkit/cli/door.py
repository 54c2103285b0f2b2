"""The ``lk`` console script: the one door to every loopkit command.

``lk workspace [--contract FILE] [--json]`` -- what every recipe asks before its first
round -- is answered without loading click, which is most of a command's start-up (about
80 ms of the ~145 ms ``lk workspace`` took). Any other command, ``--help``, and any
argument this door does not know go to the click group (loopkit.cli.lk), which gives the
usage errors: nothing is parsed twice that click would parse differently.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def workspace_args(args: Sequence[str]) -> tuple[str | None, bool] | None:
    """``(contract, as_json)`` when ``args`` is a plain ``workspace`` call, else None."""
    if not args or args[0] != "workspace":
        return None
    contract: str | None = None
    as_json = False
    rest = list(args[1:])
    while rest:
        arg = rest.pop(0)
        if arg == "--json":
            as_json = True
        elif arg == "--contract" and rest and not rest[0].startswith("-"):
            contract = rest.pop(0)
        elif arg.startswith("--contract=") and len(arg) > len("--contract="):
            contract = arg[len("--contract=") :]
        else:
            return None  # click's to parse (or to refuse)
    return contract, as_json


def main() -> None:
    found = workspace_args(sys.argv[1:])
    if found is None:
        from loopkit.cli.lk import main as group

        group()
        return
    from loopkit.cli._handle import handle
    from loopkit.workspace import report

    contract, as_json = found
    sys.exit(handle(lambda: report(contract, as_json=as_json), "lk"))
