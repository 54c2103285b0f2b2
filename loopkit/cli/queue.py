"""lk queue: the merge queue -- green attempts land one at a time, each verified on top of
what landed before it.

Usage:  lk queue add [DOC] [--onto BRANCH] [--tasks TASKS.md] [--worktree DIR] [--shell]
        lk queue land [--contract loop.yaml] [--wait]
        lk queue status [--entry ID [--shell]]
        lk queue sweep

Input:  add: the decided attempt document (a file, or stdin when piped) of a complete
        attempt: its verify.tree and its run.base.
Output: one JSON line (schemas/queue.json): {"kind": "loopkit/queue", "version": 1,
        "step": "add" | "land" | "status", ...}.

add queues the attempt: its verified tree is kept as a commit on its base under
refs/loopkit/queue/<entry>; the branch does not move. land (one lander at a time: a lock
in the repository's git folder) takes every queued entry in order, rebuilds it on the
branch's tip (git merge-tree), verifies exactly that tree as lk-verify does (in the
clean room, the checks in their sandbox; a tree verified before is not run again) and
moves the branch by
compare-and-swap; with --tasks given to add, a commit marking the task done follows. A
conflicting or red entry is returned to its task, never landed: the document under
"returned" (decision retry, the failure as feedback) is the previous attempt its next
attempt reads. A lander stopped anywhere (kill -9 included) is finished by the plain
rerun. Without a sandbox (recipes/parallel.sh): sweep saves whatever appeared in the
checkout that no lander wrote under refs/loopkit/planted/ and brings the checkout back to
its commit; add --worktree refuses (40) an attempt whose worker ran when such a plant was
written, or whose worktree changed while its own worker was not running. See
docs/queue.md.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from loopkit import git
from loopkit.cli._entry import CONTEXT, Group, say
from loopkit.cli.transactions import _decided
from loopkit.document import emit
from loopkit.errors import BadInput, EnvironmentProblem, UsageProblem
from loopkit.exitcodes import SHARED_HELP
from loopkit.ratchet.queue import Queue
from loopkit.workspace import for_state_only

EPILOG = (
    "\b\nExit codes of lk queue:\n  0   done (land: every queued entry landed)\n"
    "  1   land: an entry was returned to its task (red or conflicting on the tip)\n"
    "  40  add: not a complete attempt with a verified tree, or (--worktree) written by a\n"
    "      process not its worker's; nothing queued; land: the branch's tip is a commit\n"
    "      the queue did not land and its checks fail (nothing lands on it)\n"
    "  3   bad input (not an attempt document)\n"
    "  4   another lander holds the queue's lock; the branch has no commit; lk-verify\n"
    "      could not run; a path or ref that cannot be written (named)\n\n" + SHARED_HELP
)


def _shell(**fields: object) -> None:
    for name, value in fields.items():
        sys.stdout.write(f"{name}={shlex.quote('' if value is None else str(value))}\n")
    sys.stdout.flush()


def _say(line: str) -> None:
    say("lk queue", line)


def _emit(body: dict[str, object]) -> None:
    emit({"kind": "loopkit/queue", "version": 1, **body}, schema_name="queue")


def _queue() -> Queue:
    return Queue(git.locate().root, say=_say)


@click.group(cls=Group, context_settings=CONTEXT, epilog=EPILOG)
def main() -> None:
    """The merge queue: queue green attempts; land each verified on the current tip."""


@main.command(epilog=EPILOG)
@click.argument("doc", required=False, metavar="[DOC]")
@click.option("--onto", metavar="BRANCH", help="The branch to land on (default: HEAD's).")
@click.option("--tasks", metavar="FILE", help="The checklist whose line is marked done on landing.")
@click.option("--shell", "as_shell", is_flag=True, help="LK_ENTRY=ID and LK_QUEUE_REF=REF lines.")
@click.option(
    "--worktree",
    metavar="DIR",
    help="The worktree the attempt ran in, DOC the decided document lk attempt --keep kept: "
    "refused (40) when written by a process not its worker's (docs/queue.md).",
)
def add(
    doc: str | None,
    onto: str | None,
    tasks: str | None,
    worktree: str | None = None,
    as_shell: bool = False,
) -> int:
    """Queue a complete attempt (its verified tree on its base); the branch does not move."""

    if worktree is not None and not doc:
        raise UsageProblem("lk queue add --worktree needs DOC, the file lk attempt --keep kept")
    document = _decided(doc)
    q = _queue()
    entry = q.add(
        document,
        onto=onto,
        tasks=tasks,
        source=doc or "<stdin>",
        worktree=Path(worktree).resolve() if worktree else None,
    )
    _say(f"{entry['task']}: queued as {entry['id']} ({entry['ref']})")
    if as_shell:
        _shell(LK_ENTRY=entry["id"], LK_QUEUE_REF=entry["ref"])
    else:
        _emit({"step": "add", "entries": [entry]})
    return 0


@main.command(epilog=EPILOG)
@click.option(
    "--contract", "contract_path", metavar="FILE", help="The loop contract (default ./loop.yaml)."
)
@click.option("--wait", is_flag=True, help="Wait while another lander runs, then land.")
def land(contract_path: str | None, wait: bool = False) -> int:
    """Land every queued entry in order, each verified on top of what landed before it."""

    q = _queue()
    contract = Path(contract_path) if contract_path else q.root / "loop.yaml"
    if not contract.is_file():
        raise EnvironmentProblem(f"{contract}: no such contract (pass --contract FILE)")
    from loopkit.stages import verify_tree  # the checks' code: only a landing runs them

    result = q.land(contract.resolve(), verify=verify_tree, wait=wait)
    _emit({"step": "land", **result})
    return 1 if result["returned"] else 0


@main.command(epilog=EPILOG)
def sweep() -> int:
    """Save and put back what appeared in this checkout that no lander wrote."""

    q = _queue()
    found = q.sweep(for_state_only().state)
    _emit({"step": "sweep", "planted": found})
    return 0


@main.command(epilog=EPILOG)
@click.option("--entry", "entry_id", metavar="ID", help="Only this entry (lk queue add's id).")
@click.option(
    "--shell",
    "as_shell",
    is_flag=True,
    help="With --entry: LK_ENTRY_STATUS (queued, landed, returned) and LK_ENTRY_DOCUMENT "
    "(the document a returned entry hands its task) lines.",
)
def status(entry_id: str | None, as_shell: bool = False) -> int:
    """Every entry of the queue: queued, landed or returned."""

    q = _queue()
    entries = q.entries()
    if entry_id is not None:
        entries = [e for e in entries if e["id"] == entry_id]
        if not entries:
            raise BadInput("--entry", f"no entry {entry_id!r} in the queue")
    if as_shell:
        if entry_id is None:
            raise UsageProblem("lk queue status --shell needs --entry ID")
        e = entries[0]
        returned = e.get("returned") or {}
        _shell(LK_ENTRY_STATUS=e["status"], LK_ENTRY_DOCUMENT=returned.get("document", ""))
        return 0
    for e in entries:
        sys.stderr.write(f"{e['id']}  {e['status']:<8}  {e['task']}\n")
    _emit({"step": "status", "entries": entries})
    return 0
