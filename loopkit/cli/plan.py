"""lk-plan: validate the loop contract and plans; pick the next task; mark tasks; render guidance.

Usage:
  lk-plan check FILE [--contract loop.yaml] [--type auto|contract|tasks]
  lk-plan next TASKS.md [--contract loop.yaml] [--task ID] [--except ID]...
  lk-plan mark TASKS.md --task ID --status done|parked|open [--reason TEXT]
  lk-plan draft ISSUE [--tasks TASKS.md] [--contract loop.yaml] [--repairs N]
                [--provider P] [--model M]
  lk-plan split TASKS.md --task ID [--over-estimate] [--commit] [--contract loop.yaml]
                [--repairs N] [--provider P] [--model M]
  lk-plan guidance [CONTRACT] [--output FILE]

Input:
  check     a loop contract (YAML/JSON) or a TASKS.md, told apart by extension, else by
            content; FILE '-' reads stdin. A TASKS.md is checked against --contract,
            else ./loop.yaml when there is one (the contract `next` would use).
  next      a TASKS.md and the contract (--contract, else ./loop.yaml). stdin is not read.
  guidance  a contract file; with no file (or '-') a piped attempt document, whose
            contract and task are rendered; else ./loop.yaml.

Output:
  check     one JSON document (schema problems.json): valid, every problem with its JSON
            path (and line for a TASKS.md), and the parsed tasks.
  next      one JSON attempt document (schema attempt.json): task and contract, with the
            task's scope and budget applied to the contract.
  mark      nothing on stdout; one line on stderr.
  draft     one JSON document (schema plan-draft.json): the outcome, every draft and its
  split     problems, the ids written (split: and the task split, its last estimate).
  guidance  Markdown on stdout, or the block written into --output (replacing an earlier
            block between loopkit's marker comments, else appended; other text kept).

Exit codes:
  check     0 valid, 1 invalid (every problem on stdout), 3 the file cannot be read.
  next      0 a task was printed, 1 nothing ready (a summary on stderr), 3 bad input
            (unreadable/garbled TASKS.md, invalid plan, invalid contract).
  mark      0 marked (or already so), 1 the task's line changed between read and write
            (nothing written: read and retry), 3 bad input (no such task id, bad file).
  guidance  0 rendered, 3 invalid contract or document.
  draft     0 a valid plan was appended, 1 no valid plan within --repairs (nothing
            written), 3 bad input, 4 environment (no repository, no provider CLI).
  split     0 the task's sub-slices were written, 1 no valid split within --repairs or
            TASKS.md changed meanwhile (nothing written), 3 bad input or a task that
            cannot be split (done, each:, holding slices, a sub-slice, one file as
            its scope, no plan; with
            --over-estimate: its last attempt was within its estimate), 4 environment.
"""

from __future__ import annotations

import importlib
import os
import sys

import click

from loopkit.cli._entry import CONTEXT, Group, say
from loopkit.exitcodes import SHARED_HELP

PLAN_HELP = """\b
Exit codes of lk-plan:
  0   valid / a task was printed / marked / rendered
  1   check: invalid (problems on stdout); next: nothing ready;
      mark: the line changed under it (nothing written);
      draft, split: no valid plan within the repairs (nothing written)
  3   bad input (see the one line on stderr); split: a task that cannot be split
  4   draft, split: environment (no repository, the provider's CLI missing)"""

#: subcommand -> (its module, holding ``<subcommand>_cmd``; the first paragraph of its
#: help). A subcommand's module is
#: loaded only when it runs (or its own --help is asked for): each needs different code,
#: and `lk-plan --help` lists them all from this table alone.
COMMANDS: dict[str, tuple[str, str]] = {
    "check": (
        "loopkit.cli.plan_check",
        "Validate a loop contract or a TASKS.md and list every problem.",
    ),
    "draft": (
        "loopkit.cli.plan_model",
        "Draft plan items for an issue (ISSUE: a file, or - for stdin) with a model run "
        "read-only, gate them with lk-plan check's checker, send the problems back for at "
        "most --repairs repairs, and append only a valid plan to TASKS.md.",
    ),
    "guidance": (
        "loopkit.cli.plan_guidance",
        "Render the agent guidance (objective, scope, required checks) as Markdown.",
    ),
    "mark": (
        "loopkit.cli.plan_mark",
        "Rewrite one task's line in TASKS.md: [x] done, [!] parked, [ ] open.",
    ),
    "next": (
        "loopkit.cli.plan_next",
        "Print the attempt document for the first ready task: open, its dependencies done.",
    ),
    "split": (
        "loopkit.cli.plan_model",
        "Re-split one task that over-ran its estimate: a model run read-only splits it into "
        "smaller slices, gated by lk-plan check's checker (at most --repairs repairs), written "
        "nested under it before its end line -- every other line kept, the task opened again "
        "if it was parked.",
    ),
}


def _terminal_width() -> int:
    """The help width shutil.get_terminal_size would give, without importing shutil
    (with its compression modules: ~5 ms of start-up for every --help)."""

    try:
        cols = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        cols = 0
    if cols <= 0:
        try:
            cols = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            cols = 80
    return max(min(cols, 100) - 2, 50)  # 100: CONTEXT["max_content_width"]


SETTINGS = {**CONTEXT, "terminal_width": _terminal_width()}


class LazyGroup(Group):
    """lk-plan's group: a subcommand's module is imported when it runs, not before."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        cmd: click.Command = getattr(importlib.import_module(entry[0]), f"{cmd_name}_cmd")
        return cmd

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The list click would print, each line shortened as click shortens a loaded
        command's help, from ``COMMANDS`` alone."""
        limit = formatter.width - 6 - max(map(len, COMMANDS))
        rows = [
            (name, click.Command(name, help=COMMANDS[name][1]).get_short_help_str(limit))
            for name in self.list_commands(ctx)
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings=SETTINGS, epilog=PLAN_HELP + "\n\n" + SHARED_HELP)
def main() -> None:
    """Validate the loop contract and TASKS.md plans; print the next ready task as an
    attempt document; mark tasks done or parked; render agent guidance (AGENTS.md)."""


def plan_say(message: str) -> None:
    """One line on stderr, as lk-plan."""
    say("lk-plan", message)
