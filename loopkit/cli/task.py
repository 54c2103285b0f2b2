"""lk task: the ratchet's transactions, for loops in any language.

Usage:  lk task begin [DOC | --task-id ID --task TEXT [--goal]] [--tasks TASKS.md]
                      [--allow-dirty] [--reset-path PATH]... [--owner PID]
        lk task save LABEL            lk task land [DOC] [--label N] [--stat-cache]
        lk task park [DOC] [--label N] [--outcome O]     lk task cancel [DOC] [--label N]
        lk task end [--owner PID]     lk task note TEXT

Input:  DOC (a file, or stdin when piped): the start document (begin: lk-plan next's) or
        the decided attempt document (land, park, cancel).
Output: one JSON line (schemas/task-step.json): {"kind": "loopkit/task-step",
        "version": 1, "step": ..., "task": ..., ...}; with --shell, LK_NAME=VALUE lines a
        shell can eval instead.

begin takes the work tree's one-loop lock (in its git folder, whatever the state folder;
a lock whose owner is gone is taken over), finishes whatever a loop that stopped left
half done (a landing, a park, a mark; an interrupted attempt is saved under
refs/loopkit/<task>/interrupted and the tree brought back), and records where the task
begins. Without a document it does the first two only (a loop over many tasks). land
commits exactly verify.tree on the task's start (commit-tree, no hook, a guarded
update-ref), brings index and work tree to it, marks the task done and commits the mark.
park saves the tree, reverts, resets the reset paths, writes the retrospective, marks the
task parked and commits both. end releases the lock; a task still open has its tree saved
and is finished by the next begin. Every step can be stopped at any point (kill -9
included): the next begin finishes it.

Exit codes: 0 done; 40 a landing or a park refused (the branch moved since the task
began, the commit failed, no verified tree): nothing committed or reverted, the tree saved
under refs/loopkit/ (the ref is in the output); 3 bad input (not a decided document);
4 environment (another loop holds the lock, uncommitted changes without --allow-dirty,
an unsafe reset path, no task begun, a full disk, a path or ref that cannot be written:
one line names it; the plain rerun finishes once the cause is gone).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from typing import Any

import click

from loopkit.cli._entry import CONTEXT, Group, say
from loopkit.exitcodes import SHARED_HELP

EPILOG = (
    "\b\nExit codes of lk task:\n  0   done\n"
    "  40  a landing or a park refused (the branch moved, the commit failed): nothing\n"
    "      committed or reverted, the work tree saved under refs/loopkit/\n"
    "  3   bad input (not a decided document)\n"
    "  4   another loop holds the lock; uncommitted changes (without --allow-dirty); an\n"
    "      unsafe reset path; a full disk or an unwritable path or ref (named)\n\n" + SHARED_HELP
)

_owner = click.option(
    "--owner", type=int, metavar="PID",
    help="The loop's process id (default: this command's parent). Pass your loop's own.",
)
_shell = click.option("--shell", "as_shell", is_flag=True, help="LK_NAME=VALUE lines, not JSON.")
_label = click.option("--label", default="", metavar="NAME", help="The attempt (the ref's name).")
_in = click.option(
    "--in", "attempt_in", metavar="DIR",
    help="The attempt ran in DIR, another worktree of this repository: its tree is saved, "
    "and land fast-forwards this checkout to the commit.",
)

#: --shell: the result's fields a loop reads, by their variable's name.
_SHELL = {
    "LK_TASK_ID": "task", "LK_BASE": "base", "LK_DIFF_BASE": "diff_base",
    "LK_RUN_DIR": "run_dir", "LK_START": "start", "LK_STATE": "state", "LK_REF": "ref",
    "LK_COMMIT": "commit", "LK_TASK_KIND": "task_kind", "LK_FINISHED": "finished",
}


def _say(line: str) -> None:
    say("lk task", line)


def _run(step: Callable[[], dict[str, Any]], as_shell: bool = False) -> int:
    """Run one step with SIGINT, SIGTERM and SIGHUP held until it is done (a stop in the
    middle is what the journal is for, but there is no need to cause one), then print its
    result."""
    from loopkit.ratchet.steps import Refused

    held: list[int] = []
    signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    old = {s: signal.signal(s, lambda n, _f: held.append(n)) for s in signals}
    try:
        try:
            result, code = step(), 0
        except Refused as e:
            _say(f"error: {e.message}")
            result, code = e.result, int(e.code)
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
    _print(result, as_shell)
    return code


def _print(result: dict[str, Any], as_shell: bool) -> None:
    if as_shell:
        import shlex

        for name, key in _SHELL.items():  # only what this step answers: nothing else is reset
            if key in result:
                value = result[key]
                sys.stdout.write(f"{name}={shlex.quote('' if value is None else str(value))}\n")
        sys.stdout.flush()
        return
    from loopkit.document import emit

    emit(result, schema_name="task-step")


def _doc(path: str | None, *, checked: bool = False) -> dict[str, Any] | None:
    """The document in ``path`` (its last line), or the piped one. ``checked``: only its
    kind is held to the schema here -- the step checks each field it acts on itself, so a
    decided document naming no tree is refused as such (40), not as bad input."""
    from loopkit.document import parse_attempt, stdin_has_data
    from loopkit.errors import BadInput

    source = path if path and path != "-" else "<stdin>"
    try:
        if source != "<stdin>":
            with open(source, "rb") as f:
                raw = f.read()
        else:
            raw = sys.stdin.buffer.read() if stdin_has_data() else b""
    except OSError as e:
        raise BadInput(source, f"cannot read: {e.strerror}") from None
    lines = raw.strip().splitlines()
    return parse_attempt(lines[-1] if lines else b"", source=source, checked=checked)


def _decided(path: str | None) -> dict[str, Any]:
    from loopkit.errors import BadInput

    doc = _doc(path, checked=True)
    if doc is None:
        raise BadInput(path or "<stdin>", "no document: expected the decided attempt document")
    return doc


def _ctx(attempt_in: str | None = None) -> Any:
    from loopkit.ratchet.steps import Context

    return Context(say=_say, attempt_in=attempt_in)


def _label_of(doc: dict[str, Any], label: str) -> str:
    attempt = (doc.get("decision") or {}).get("attempt")
    return label or (str(attempt) if attempt else "attempt")


@click.group(cls=Group, context_settings=CONTEXT, epilog=EPILOG)
def main() -> None:
    """The ratchet's transactions: begin a task, save a tree, land or park an attempt, end."""


@main.command(epilog=EPILOG)
@click.argument("doc", required=False, metavar="[DOC]")
@click.option("--task-id", metavar="ID", help="Begin a task given here instead of a document.")
@click.option("--task", "task_text", metavar="TEXT", help="The task's text (with --task-id).")
@click.option("--goal", is_flag=True, help="The task is a GOAL (judged after its checks pass).")
@click.option("--contract", "contract_path", metavar="FILE", help="The loop contract.")
@click.option("--tasks", metavar="FILE", help="The TASKS.md to mark done or parked.")
@click.option("--allow-dirty", is_flag=True,
              help="Begin on uncommitted changes: saved as refs/loopkit/<task>/user-start.")
@click.option("--reset-path", "reset_paths", multiple=True, metavar="PATH",
              help="An ignored path a park resets (repeatable; adds to $RESET_PATHS).")
@click.option("--memory", metavar="FILE", help="The memory file (default: the contract's).")
@_owner
@_shell
def begin(
    doc: str | None, task_id: str | None, task_text: str | None, goal: bool,
    contract_path: str | None, tasks: str | None, allow_dirty: bool,
    reset_paths: tuple[str, ...], memory: str | None, owner: int | None, as_shell: bool,
) -> int:
    """Take the lock, finish what a stopped loop left, record where the task begins.

    The start document is kept as <state>/runs/<task>/<run>/start.json (run_dir, start).
    Reset paths come from --reset-path and $RESET_PATHS (split on blanks, never globbed).
    A loop that starts loops of its own exports LK_LOCK_OWNER=its pid: they work under its
    lock.
    """
    from loopkit.ratchet import steps

    if task_id:
        document: dict[str, Any] | None = {
            "kind": "loopkit/attempt", "version": 1,
            "task": {"id": task_id, "text": task_text or task_id, "kind": "goal" if goal else "task"},
        }
    else:
        document = _doc(doc)
    resets = [*os.environ.get("RESET_PATHS", "").split(), *reset_paths]
    pid = owner or os.getppid()
    ctx = _ctx()

    def step() -> dict[str, Any]:
        result = steps.begin(
            ctx, owner=pid, document=document, contract_path=contract_path,
            outer=int(os.environ.get("LK_LOCK_OWNER") or 0) or None,
            allow_dirty=allow_dirty, tasks=tasks, reset_paths=resets,
            memory_file=memory or os.environ.get("MEMORY_FILE") or None,
        )
        if document is not None and "finished" not in result:
            result.update(steps.keep_start(ctx, result, document, pid))
        return result

    return _run(step, as_shell)


@main.command(epilog=EPILOG)
@click.argument("label", required=False)
@click.option("--why", default="", metavar="TEXT", help="Said in the saved commit's message.")
@click.option("--doc", metavar="FILE",
              help="The decided document: the label is its attempt; --shell adds its LK_DOC_* fields.")
@_in
@_shell
def save(label: str | None, why: str, doc: str | None, attempt_in: str | None, as_shell: bool) -> int:
    """Save the work tree as it stands under refs/loopkit/<task>/<LABEL>[-N].

    With --doc and --shell, the decision's fields a loop acts on follow (LK_DOC_OUTCOME,
    LK_DOC_ATTEMPT, LK_DOC_REASON, LK_DOC_BACKOFF, LK_DOC_SESSION, ...: as lk attempt
    --shell prints them)."""
    from loopkit.errors import UsageProblem
    from loopkit.ratchet import steps

    document = _decided(doc) if doc else None
    if not label and document is None:
        raise UsageProblem("lk task save needs a LABEL (or --doc, whose attempt names it)")
    name = label or _label_of(document or {}, "")
    outcome = str(((document or {}).get("decision") or {}).get("outcome") or "")
    code = _run(lambda: steps.save(_ctx(attempt_in), label=name, why=why or outcome or "saved"), as_shell)
    if as_shell and document is not None:
        import json

        from loopkit.cli.stages import _shell as fields

        sys.stdout.write(fields(json.dumps(document)))
        sys.stdout.flush()
    return code


@main.command(epilog=EPILOG)
@click.argument("doc", required=False, metavar="[DOC]")
@_label
@click.option("--stat-cache", is_flag=True,
              help="lk-decide's stat cache is fresh (no worker ran since): start from it.")
@_in
@_shell
def land(
    doc: str | None, label: str, stat_cache: bool, attempt_in: str | None, as_shell: bool
) -> int:
    """Commit exactly the tree a complete decision's checks ran on; mark the task done."""
    from loopkit.ratchet import steps

    document = _decided(doc)
    return _run(
        lambda: steps.land(_ctx(attempt_in), document, label=_label_of(document, label), fresh_stat=stat_cache),
        as_shell,
    )


@main.command(epilog=EPILOG)
@click.argument("doc", required=False, metavar="[DOC]")
@_label
@click.option("--outcome", default="", metavar="NAME", help="Default: the decision's outcome.")
@_in
@_shell
def park(doc: str | None, label: str, outcome: str, attempt_in: str | None, as_shell: bool) -> int:
    """Save, revert, reset, write the retrospective, mark parked, commit the record."""
    from loopkit.ratchet import steps

    document = _decided(doc)
    why = outcome or str((document.get("decision") or {}).get("outcome") or "failed")
    return _run(
        lambda: steps.park(_ctx(attempt_in), document, label=_label_of(document, label), outcome=why), as_shell
    )


@main.command(epilog=EPILOG)
@click.argument("doc", required=False, metavar="[DOC]")
@_label
@_in
@_shell
def cancel(doc: str | None, label: str, attempt_in: str | None, as_shell: bool) -> int:
    """Save the tree under refs/loopkit/<task>/cancelled and leave it as it is."""
    from loopkit.ratchet import steps

    _doc(doc)  # read (and checked) when given: the decision that cancelled
    return _run(lambda: steps.cancel(_ctx(attempt_in), label=label or "cancelled"), as_shell)


@main.command(epilog=EPILOG)
@click.argument("text")
def note(text: str) -> int:
    """Add TEXT to the task's notes in its start document (the handoff carries it)."""
    from loopkit.ratchet import steps

    return _run(lambda: steps.note(_ctx(), text))


@main.command(epilog=EPILOG)
@_owner
@_label
def end(owner: int | None, label: str) -> int:
    """Release the lock; a task still open is saved and kept for the next begin."""
    from loopkit.ratchet import steps

    pid = owner or os.getppid()
    return _run(lambda: steps.end(_ctx(), owner=pid, label=label or "stopped"))

