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

#: name -> (module, attribute, one-line help)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "plan": ("loopkit.cli.plan", "main", "Validate contracts and plans; pick and mark tasks."),
    "invoke": ("loopkit.cli.invoke", "main", "Run one bounded worker attempt."),
    "diff": ("loopkit.cli.diff", "main", "Collect the change from git; enforce scope."),
    "verify": ("loopkit.cli.verify", "main", "Run the acceptance checks on this tree."),
    "judge": ("loopkit.cli.judge", "main", "A read-only, grounded model judge for goals."),
    "decide": ("loopkit.cli.decide", "main", "Decide the next step; append to the ledger."),
    "attempt": (
        "loopkit.cli.attempt",
        "main",
        "One attempt, admission to decision, in one process.",
    ),
    "task": (
        "loopkit.cli.task",
        "main",
        "The ratchet's transactions: begin, save, land, park, cancel, end.",
    ),
    "queue": (
        "loopkit.cli.queue",
        "main",
        "The merge queue: each green attempt landed verified on the tip.",
    ),
    "attest": ("loopkit.cli.attest", "main", "Verify the signed statement of a landed commit."),
    "report": ("loopkit.cli.report", "main", "Summarize the ledger."),
    "stack": (
        "loopkit.cli.stack",
        "main",
        "A verified pull request per slice, stacked: add, restack, push, land, fold.",
    ),
    "cancel": ("loopkit.cli.cancel", "main", "Persist (or clear) the intent to cancel."),
    "schema": ("loopkit.cli.schema", "main", "Print a published JSON Schema."),
    "workspace": ("loopkit.cli.workspace", "main", "Print the root, contract and state folder."),
    "init": ("loopkit.cli.init", "main", "Scaffold loop.yaml, TASKS.md and AGENTS.md here."),
    "recipes": ("loopkit.cli.recipes", "main", "Where the ready-made loops are (--copy DIR)."),
    "show": ("loopkit.cli.show", "main", "One task's attempts, saved trees and memory."),
    "status": ("loopkit.cli.status", "main", "What is running now (--watch to follow it)."),
    "model-server": ("loopkit.testing.cli", "main", "Run the scripted model server."),
    "eval": (
        "loopkit.cli.eval",
        "main",
        "Compare agents and models on your tasks: trials, pass rates, a verdict.",
    ),
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
