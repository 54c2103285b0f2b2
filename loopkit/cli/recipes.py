"""lk recipes: where the ready-made loops are, or a copy of them.

Usage:  lk recipes                 print the folder that holds the recipes
        lk recipes --copy DIR      copy them into DIR (their run bits kept)

The recipes: loop.sh (one task, the ratchet), phased-loop.sh (a whole TASKS.md),
loop.mk, worktree.sh, log.sh (their logging), the pre-commit and CI examples, and loops
in Node.js and Python. They call the installed lk-* commands (the ratchet's steps are
`lk task`).

Exit codes: 0 printed or copied; 3 DIR exists and is not an empty folder.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import click

from loopkit.cli._entry import command, say
from loopkit.errors import BadInput
from loopkit.exitcodes import SHARED_HELP
from loopkit.scaffold import recipes_dir


@command(epilog=SHARED_HELP)
@click.option("--copy", "target", metavar="DIR", help="Copy the recipes into DIR.")
def main(target: str | None) -> int:
    """Print where the recipes are, or copy them (--copy DIR)."""

    source = str(recipes_dir())
    if target is None:
        click.echo(source)
        return 0

    dest = Path(target)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise BadInput(target, "exists and is not an empty folder")
    shutil.copytree(source, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    say("lk recipes", f"copied to {dest}: try {dest}/loop.sh --help")
    return 0
