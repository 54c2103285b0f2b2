"""lk: one door to every loopkit command.

Usage: lk COMMAND [ARGS]...   (lk plan ... is the same as lk-plan ...)

Subcommands load lazily, so `lk --help` imports nothing but click. The console script
enters through loopkit.cli.door, which answers a plain `lk workspace` without click.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

import click

from loopkit import __version__
from loopkit.cli._entry import CONTEXT, Group
from loopkit.exitcodes import SHARED_HELP

#: name -> one-line help; the command is ``main`` in ``loopkit.cli.<name>`` unless
#: ``_ELSEWHERE`` names its module.
_HELP = {
    "plan": "Validate contracts and plans; pick and mark tasks.",
    "invoke": "Run one bounded worker attempt.",
    "diff": "Collect the change from git; enforce scope.",
    "verify": "Run the acceptance checks on this tree.",
    "judge": "A read-only, grounded model judge for goals.",
    "decide": "Decide the next step; append to the ledger.",
    "attempt": "One attempt, admission to decision, in one process.",
    "task": "The ratchet's transactions: begin, save, land, park, cancel, end.",
    "queue": "The merge queue: each green attempt landed verified on the tip.",
    "attest": "Verify the signed statement of a landed commit.",
    "report": "Summarize the ledger.",
    "stack": "A verified pull request per slice, stacked: add, restack, push, land, fold.",
    "cancel": "Persist (or clear) the intent to cancel.",
    "schema": "Print a published JSON Schema.",
    "workspace": "Print the root, contract and state folder.",
    "init": "Scaffold loop.yaml, TASKS.md and AGENTS.md here.",
    "recipes": "Where the ready-made loops are (--copy DIR).",
    "show": "One task's attempts, saved trees and memory.",
    "status": "What is running now (--watch to follow it).",
    "model-server": "Run the scripted model server.",
    "eval": "Compare agents and models on your tasks: trials, pass rates, a verdict.",
}
_ELSEWHERE = {"model-server": "loopkit.testing.cli"}

#: name -> (module, attribute, one-line help)
COMMANDS: dict[str, tuple[str, str, str]] = {
    name: (_ELSEWHERE.get(name, f"loopkit.cli.{name}"), "main", text)
    for name, text in _HELP.items()
}


def _exists(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


class LazyGroup(Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return [n for n, (mod, _, _) in COMMANDS.items() if _exists(mod)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        try:
            module = importlib.import_module(entry[0])
        except ModuleNotFoundError:
            return None
        cmd: click.Command = getattr(module, entry[1])
        return cmd

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(n, COMMANDS[n][2]) for n in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings=CONTEXT, epilog=SHARED_HELP)
@click.version_option(__version__, prog_name="loopkit")
def main(**_: Any) -> None:
    """loopkit: supervise coding agents from outside their own loop.

    Each command reads an attempt document on stdin (when piped), adds its section and
    prints it on stdout; its exit status is the verdict. See `lk schema --list`.
    """
