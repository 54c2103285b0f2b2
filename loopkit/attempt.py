"""One attempt, admission to decision, in one process: ``lk attempt`` and the rounds of
``lk task begin --attempt`` / ``--reproduce``.

The stages are the stage commands' own functions (loopkit.stages), run one after another,
each with its own stderr as the shell would give it; the document travels between them
as a value in one ``Attempt`` (each stage takes the one before's and leaves its own,
nothing printed and read back), beside the work a stage begins for a later one. The commands' layer (loopkit.cli.transactions) reads the first document,
prints the last and takes the ratchet's step for the decision.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from loopkit import stages, timing
from loopkit.document import dumps
from loopkit.exitcodes import ExitCode
from loopkit.files import atomic_write
from loopkit.handling import handle, say
from loopkit.stages import Attempt

TYPE_CHECKING = False  # typing stays unloaded at run time (start-up is a feature)
if TYPE_CHECKING:
    from typing import IO, Any

    from loopkit.sections import Attempt as Document  # the document; Attempt: the run


def run(
    doc: Document,
    *,
    contract_path: str | None = None,
    base: str | None = None,
    resume: str | None = None,
    keep: str | None = None,
) -> tuple[int, Document | None]:
    """One attempt on the document ``doc`` (validated by the caller): admission to
    decision, each stage the stage command's own function on the document the stage
    before it left. The decision's exit code (a failing stage's own) and the last
    document (None when the last stage that ran left none)."""
    # Threads here mostly start a git process and wait for it: one that has work to hand
    # git should not wait the interpreter's default 5 ms for its turn.
    sys.setswitchinterval(0.0005)
    carry = Attempt()
    here = {"contract_path": contract_path, "within": carry}
    runner = _Runner(Path(keep) if keep else None, carry)
    rc, text = runner.stage("admit", {**here, "admit": True}, doc, ok=(0, 20, 22, 30))
    if rc == 0:
        # The mark a recovery reads: this round's worker was about to start (its attempt
        # is charged); without it, a loop stopped before the worker is not.
        mark = runner.keep.with_name(f"{runner.keep.name}-worker") if runner.keep else None
        options = {**here, "resume": resume, "started_mark": str(mark) if mark else None}
        rc, text = runner.stage("invoke", options, text, ok=(0, 1))
    try:
        if rc in (0, 1) and runner.going:
            carry.early = True  # lk-diff begins later stages' work (_early_work)
            try:
                rc, text = runner.stage("diff", {**here, "base": base}, text, ok=(0, 1))
            finally:
                carry.early = False
        if rc in (0, 1) and runner.going:
            carry.early = True
            try:
                rc, text = runner.stage("verify", here, text, ok=(0, 1))
            finally:
                carry.early = False
                carry.drop_room()  # never left holding the clean room
            if rc == 0 and runner.going and (carry.review or _kind(text) == "goal"):
                carry.drop_tree()  # the judge comes between: the tree is hashed after it
                rc, text = runner.stage("judge", here, text, ok=(0, 1))
        if rc in (0, 1) and runner.going:
            rc, text = runner.stage("decide", here, text, ok=(0, 10, 11, 20, 21, 22, 30))
    finally:
        carry.close()  # never left running, nor handed to a later call
    return rc, text


def run_reproduce(
    doc: Document, *, contract_path: str | None, base: str, keep: str
) -> tuple[int, Document | None]:
    """Round 0 (``lk task begin --reproduce``): lk-diff and lk-verify on the untouched
    tree, no worker, then lk-decide when the checks fail -- the ledger holds the failure,
    so a first fix that fails the same way replans. ``(0, None)`` when the checks pass;
    a failing stage's own code and None; else the decision's code and document."""
    carry = Attempt()
    runner = _Runner(Path(keep), carry)
    here = {"contract_path": contract_path, "within": carry}
    try:
        rc, text = runner.stage("diff", {**here, "base": base}, doc, ok=(0, 1))
        if runner.going:
            rc, text = runner.stage("verify", here, text, ok=(0, 1))
            carry.drop_room()
        if not runner.going or rc == 0:
            return rc, None
        return runner.stage("decide", here, text, ok=(0, 10, 11, 20, 21, 22, 30))
    finally:
        carry.close()


#: The fields the recipes act on: LK_DOC_<name> -> where in the document. `lk task save
#: --doc FILE --shell` prints the same for a file (loop.mk); a test holds the two together.
SHELL_FIELDS = {
    "TASK_ID": "task.id",
    "TASK_TEXT": "task.text",
    "TASK_KIND": "task.kind",
    "ATTEMPT_ID": "attempt_id",
    "TREE": "verify.tree",
    "SESSION": "run.session_id",
    "MEMORY": "contract.memory",
    "OUTCOME": "decision.outcome",
    "ATTEMPT": "decision.attempt",
    "REASON": "decision.reason",
    "BACKOFF": "decision.backoff_s",
    "CLASS": "decision.failure_class",
    "FEEDBACK": "decision.feedback",
    "JUDGE": "judge.feedback",
}


def shell(doc: Document | None) -> str:
    """``doc`` (a document, or None) as LK_DOC_* assignments: empty for null, false or
    missing, true as ``true``, objects and lists as JSON; LK_DOC_FAILING names the
    failing checks. Nothing for no document."""
    if doc is None:
        return ""

    def get(path: str) -> str:
        value: Any = doc
        for key in path.split("."):
            value = value.get(key) if isinstance(value, dict) else None
        if value is None or value is False:
            return ""
        if value is True:
            return "true"
        if isinstance(value, (dict, list)):
            return json.dumps(value, separators=(",", ":"))
        return str(value)

    fields = {name: get(path) for name, path in SHELL_FIELDS.items()}
    verify: Mapping[str, Any] = doc.get("verify") or {}
    checks = verify.get("checks") or []
    fields["FAILING"] = ", ".join(
        str(c.get("name")) for c in checks if isinstance(c, dict) and c.get("passed") is False
    )
    return "".join(f"LK_DOC_{name}={shlex.quote(value)}\n" for name, value in fields.items())


def _kind(doc: Document | None) -> str | None:
    task = doc.get("task") if doc else None
    return task.get("kind") if isinstance(task, dict) else None


class _Runner:
    """Runs the stages one after another in this process, each with its own stderr, as
    the shell would give it, and the document the stage before it left (``carry.doc``),
    never validated again: the caller validated the first, each later one is a stage's
    own."""

    def __init__(self, keep: Path | None, carry: Attempt) -> None:
        self.keep = keep
        self.carry = carry
        #: False once a stage failed in a way that stops the attempt.
        self.going = True

    def stage(
        self,
        name: str,
        options: Mapping[str, object],
        doc: Document | None,
        *,
        ok: tuple[int, ...],
    ) -> tuple[int, Document | None]:
        run = STAGES[name]
        prog = "lk-decide" if name == "admit" else f"lk-{name}"
        err = self.keep.with_name(f"{self.keep.name}-{name}.err") if self.keep else None
        kept = self.keep.with_name(f"{self.keep.name}-{name}.json") if self.keep else None
        if kept is not None:
            # Opened as the stage starts, empty until it printed (as a shell redirect
            # would): `lk status` reads the newest empty one as the stage in progress.
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_bytes(b"")
        self.carry.doc, self.carry.out = doc, None
        timing.begin()
        try:
            with _tee_stderr(err):
                rc = handle(lambda: run(**options), prog)
        finally:
            self.carry.doc = None
        out, self.carry.out = self.carry.out, None
        if kept is not None and out is not None:
            atomic_write(kept, text(out))
        if rc not in ok:
            self.going = False
            say("lk attempt", f"{prog} failed with exit {rc}; the attempt stops there")
        elif out is None:
            # A verdict or a decision without its document is a bug, never a result.
            self.going = False
            say("lk attempt", f"{prog} exited {rc} but printed no document")
            rc = ExitCode.INTERNAL
        return rc, out


def text(doc: Mapping[str, Any] | None) -> str:
    """``doc`` as a stage command prints it: one line of JSON (nothing for None)."""
    return "" if doc is None else dumps(doc) + "\n"


class _tee_stderr:
    """While a stage runs, what reaches this process's stderr (its own lines and those of
    the programs it starts) is shown as it comes and kept in ``path``, like the shell's
    ``2> >(tee path >&2)``."""

    def __init__(self, path: Path | None) -> None:
        self.path = path

    def __enter__(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.file: IO[bytes] = open(self.path, "wb")
        sys.stderr.flush()
        self.saved = os.dup(2)
        read, write = os.pipe()
        os.dup2(write, 2)
        os.close(write)
        self.pump = threading.Thread(target=self._copy, args=(read,), daemon=True)
        self.pump.start()

    def _copy(self, read: int) -> None:
        # Drained to the end whatever fails on the way: a stage must never block on its
        # stderr because the terminal went away (`| head`) or the disk filled up.
        keep = show = True
        try:
            while block := os.read(read, 65536):
                if keep:
                    try:
                        self.file.write(block)
                    except (OSError, ValueError):
                        keep = False
                view = memoryview(block)
                while show and view:
                    try:
                        view = view[os.write(self.saved, view) :]
                    except OSError:
                        show = False
        except OSError:
            pass  # the stage is over and its stderr closed: what is left is not waited on
        finally:
            os.close(read)

    def __exit__(self, *_: Any) -> None:
        if self.path is None:
            return
        sys.stderr.flush()
        os.dup2(self.saved, 2)  # the pipe's last writer here is gone: the pump sees the end
        # A program the stage started and left holding the pipe is the stage's to end; the
        # attempt does not wait on it past a moment.
        self.pump.join(timeout=2.0)
        if self.pump.is_alive():
            return  # still copying: its descriptor and file stay open, never reused under it
        os.close(self.saved)
        self.file.close()


#: stage -> the function that is that command (a test plays a stage with a stand-in here)
STAGES: dict[str, Callable[..., int]] = {
    "admit": stages.decide,
    "invoke": stages.invoke,
    "diff": stages.diff,
    "verify": stages.verify,
    "judge": stages.judge,
    "decide": stages.decide,
}
