"""lk init: scaffold loopkit in a project.

Usage:  lk init [--force] [DIR]

Detects the project (a Makefile test target, npm test, cargo test, go test, tox, pytest)
and writes, in DIR (default: the current folder):
  loop.yaml   a commented loop contract whose acceptance check runs the project's tests
  TASKS.md    a checklist with one example plan
  MEMORY.md   where the retrospectives of parked tasks go
  AGENTS.md   the agent guidance rendered from the contract (lk-plan guidance)
Both loop.yaml and TASKS.md pass `lk-plan check` as written. An existing file is left
alone (said on stderr) unless --force.

Defaults that protect, each said on stderr: the project's existing tests are add-only
(scope.add_only: the agent may add tests, never change or delete the ones that judge it),
and a Python project's conftest.py files protected (a new one could skip them all);
folders git ignores (data/, a build output) are left out of the writable scope; tox is
the check only where it is installed.

Output: the list of files on stderr; nothing on stdout.
Exit codes: 0 written (or left alone); 3 DIR is not a folder.
"""

from __future__ import annotations

from pathlib import Path

import click

from loopkit import scaffold
from loopkit.cli._entry import command, say
from loopkit.errors import BadInput
from loopkit.evidence.testresults import missing_programs
from loopkit.exitcodes import SHARED_HELP


@command(epilog=SHARED_HELP)
@click.argument("folder", metavar="[DIR]", default=".", required=False)
@click.option("--force", is_flag=True, help="Overwrite files that exist.")
def main(folder: str, force: bool) -> int:
    """Write loop.yaml, TASKS.md, MEMORY.md and AGENTS.md for the project in DIR."""

    root = Path(folder)
    if not root.is_dir():
        raise BadInput(folder, "not a folder")
    project, written = scaffold.write(root, force=force)
    say("lk init", f"{project.why}: the acceptance check runs `{project.test}`")
    say("lk init", f"writable: {', '.join(project.writable)}")
    for note in project.notes:
        say("lk init", note)

    for _, program in missing_programs([{"name": "tests", "run": project.test}], path=None):
        say("lk init", f"warning: `{program}` is not on PATH: the check cannot run here yet")
    for w in written:
        what = "left as it is (--force to overwrite)" if w.skipped else "written"
        if w.merged:
            what = "loopkit's guidance added as a block of its own; the rest kept as it was"
        say("lk init", f"{w.path}: {what}")
    say(
        "lk init",
        "next: edit the objective and TASKS.md, `lk-plan check TASKS.md`, commit them, then "
        'run `"$(lk recipes)/phased-loop.sh"` (recipes copied into the project would be '
        "uncommitted files: the loop starts only on a clean tree)",
    )
    return 0
