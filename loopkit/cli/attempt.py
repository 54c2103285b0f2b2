"""lk attempt: one whole attempt -- admission to decision -- in one process.

Usage:  lk attempt [--contract loop.yaml] [--base REF] [--resume ID] [--keep PREFIX] < doc.json

        The same as the pipe
          lk-decide --admit | lk-invoke | lk-diff --base REF | lk-verify [| lk-judge] | lk-decide
        stage for stage: each stage is that very command, run in this process on the
        document the stage before it printed, so Python and loopkit start once instead of
        five or six times. lk-judge runs when the task is a GOAL whose checks passed.

Input:  an attempt document on stdin: a task (lk-plan next) or a decided attempt to retry.
Output: the last stage's document on stdout (the decided attempt; the admission document
        when admission refused). With --keep PREFIX every stage's document is also kept
        as PREFIX-admit.json, PREFIX-invoke.json, PREFIX-diff.json, PREFIX-verify.json,
        PREFIX-judge.json, PREFIX-decide.json, and its stderr (shown as it comes) as
        PREFIX-<stage>.err: what the recipes keep under .loopkit/runs/. With --shell,
        instead of the document, the fields the recipes act on, as shell assignments
        (LK_DOC_OUTCOME='retry' ..., the same as recipes/lib.sh's lk_doc reads).
Exit codes: lk-decide's: 0 complete, 10 retry, 11 replan, 20 blocked, 21 failed, 22 budget
        exhausted, 30 cancelled -- admission's refusal (20, 22, 30) included, then nothing
        ran (no PREFIX-invoke.json). A stage that fails otherwise stops the attempt with
        its own code (2, 3, 4, 70, 130), the stage named on stderr.
"""

from __future__ import annotations

import io
import os
import sys
import threading
from pathlib import Path
from typing import IO, Any

import click

from loopkit.cli._entry import command, say
from loopkit.exitcodes import SHARED_HELP, ExitCode

EPILOG = (
    """\b
Exit codes (lk-decide's):
  0   complete           10  retry        11  replan
  20  blocked            21  failed       22  budget exhausted
  30  cancelled
  Admission refusing (20, 22, 30) runs nothing further.
  A stage failing otherwise stops the attempt with its own code.
"""
    + SHARED_HELP
)

#: stage -> the module whose command it is
_STAGES: dict[str, str] = {
    "admit": "loopkit.cli.decide",
    "invoke": "loopkit.cli.invoke",
    "diff": "loopkit.cli.diff",
    "verify": "loopkit.cli.verify",
    "judge": "loopkit.cli.judge",
    "decide": "loopkit.cli.decide",
}


@command(epilog=EPILOG)
@click.option("--contract", "contract_path", metavar="FILE", help="The loop contract (loop.yaml).")
@click.option("--base", metavar="REF", help="What lk-diff measures the change from (--base).")
@click.option("--resume", metavar="ID", help="Continue this worker session (lk-invoke --resume).")
@click.option(
    "--keep",
    metavar="PREFIX",
    help="Keep every stage's document as PREFIX-<stage>.json and its stderr as PREFIX-<stage>.err.",
)
@click.option(
    "--shell",
    "as_shell",
    is_flag=True,
    help="Print the last document's fields the recipes act on as shell assignments "
    "(LK_DOC_*=..., as lib.sh's lk_doc), not the document.",
)
def main(
    contract_path: str | None,
    base: str | None,
    resume: str | None,
    keep: str | None,
    as_shell: bool,
) -> int:
    """Run one attempt, admission to decision, each stage the published command itself on
    the document the stage before printed; exit with the decision's code."""
    from loopkit import document

    cargs = ["--contract", contract_path] if contract_path else []
    raw = sys.stdin.read() if document.stdin_has_data() else ""
    if document.parse_attempt(raw) is None:  # bad input: one line, exit 3, nothing run
        raise click.UsageError("lk attempt reads an attempt document on stdin (lk-plan next)")
    runner = _Runner(Path(keep) if keep else None)
    rc, text = runner.stage("admit", ["--admit", *cargs], raw, ok=(0, 20, 22, 30))
    if rc == 0:
        rc, text = runner.stage(
            "invoke", [*cargs, *(["--resume", resume] if resume else [])], text, ok=(0, 1)
        )
    if rc in (0, 1) and runner.going:
        rc, text = runner.stage(
            "diff", [*cargs, *(["--base", base] if base else [])], text, ok=(0, 1)
        )
    if rc in (0, 1) and runner.going:
        rc, text = runner.stage("verify", cargs, text, ok=(0, 1))
        if rc == 0 and runner.going and _kind(text) == "goal":
            rc, text = runner.stage("judge", cargs, text, ok=(0, 1))
    if rc in (0, 1) and runner.going:
        rc, text = runner.stage("decide", cargs, text, ok=(0, 10, 11, 20, 21, 22, 30))
    sys.stdout.write(_shell(text) if as_shell else text)
    sys.stdout.flush()
    return rc


#: The fields the recipes act on: LK_DOC_<name> -> where in the document. recipes/lib.sh's
#: lk_doc reads the same from a file (with jq); a test holds the two to the same answers.
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


def _shell(text: str) -> str:
    """``text`` (a document, or nothing) as LK_DOC_* assignments: empty for null, false or
    missing, true as ``true``, objects and lists as JSON; LK_DOC_FAILING names the
    failing checks. Nothing for no document."""
    import json
    import shlex

    if not text.strip():
        return ""
    doc = json.loads(text)

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
    checks = (doc.get("verify") or {}).get("checks") or []
    fields["FAILING"] = ", ".join(
        str(c.get("name")) for c in checks if isinstance(c, dict) and c.get("passed") is False
    )
    return "".join(f"LK_DOC_{name}={shlex.quote(value)}\n" for name, value in fields.items())


def _kind(text: str) -> str | None:
    import json

    try:
        task = json.loads(text).get("task") or {}
    except (ValueError, AttributeError):
        return None
    return task.get("kind") if isinstance(task, dict) else None


class _Runner:
    """Runs the stages one after another in this process, each with its own stdin, stdout
    and stderr, as the shell would give them."""

    def __init__(self, keep: Path | None) -> None:
        self.keep = keep
        #: False once a stage failed in a way that stops the attempt.
        self.going = True

    def stage(
        self, name: str, args: list[str], text: str, *, ok: tuple[int, ...]
    ) -> tuple[int, str]:
        import importlib

        cmd = importlib.import_module(_STAGES[name]).main
        prog = "lk-decide" if name == "admit" else f"lk-{name}"
        err = self.keep.with_name(f"{self.keep.name}-{name}.err") if self.keep else None
        kept = self.keep.with_name(f"{self.keep.name}-{name}.json") if self.keep else None
        if kept is not None:
            # Opened as the stage starts, empty until it printed (as a shell redirect
            # would): `lk status` reads the newest empty one as the stage in progress.
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_bytes(b"")
        out = io.StringIO()
        saved = sys.stdin, sys.stdout
        sys.stdin, sys.stdout = _Input(text), out
        try:
            with _tee_stderr(err):
                rc = int(cmd.main(args, prog_name=prog, standalone_mode=False))
        finally:
            sys.stdin, sys.stdout = saved
        printed = out.getvalue()
        if kept is not None:
            from loopkit.files import atomic_write

            atomic_write(kept, printed)
        if rc not in ok:
            self.going = False
            say("lk attempt", f"{prog} failed with exit {rc}; the attempt stops there")
        elif not printed.strip():
            # A verdict or a decision without its document is a bug, never a result.
            self.going = False
            say("lk attempt", f"{prog} exited {rc} but printed no document")
            rc = ExitCode.INTERNAL
        return rc, printed


class _Input(io.StringIO):
    """A stage's stdin: the document before it, read like a pipe (never a terminal)."""

    def isatty(self) -> bool:
        return False


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
