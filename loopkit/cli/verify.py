"""lk-verify: run the acceptance checks and record evidence bound to the working tree.

Usage:  lk-verify [--contract loop.yaml] [--only NAME ...] [--fail-fast] [--in-place]
                  [--summary]      (a commit hook: a summary for a person, the document
                                    into the state folder)
        ... | lk-verify | ...        (adds "verify" to the piped attempt document)

        With a piped attempt (a loop) the checks run in a clean room: a checkout of
        exactly the tree lk-diff checked (diff.tree; without one, the working tree's)
        outside the repository, where no ignored file takes part (docs/evidence.md).
        Alone (a commit hook) they run in place.

Input:  an attempt document on stdin when piped (optional; a terminal is never read).
        The contract is --contract, else the piped document's, else ./loop.yaml.
Output: one JSON line on stdout: the attempt document with "verify" added, or the verify
        section alone ({"kind": "loopkit/verify", ...}) when nothing is piped. Each
        check's full output is in the log named by checks[].log (under .loopkit/).
        Progress goes to stderr: a live line on a terminal, else a line as each check
        starts and ends.
Exit codes: 0 every check passed; 1 a check failed (or timed out); 3 bad input;
        4 not a git repository.
"""

from __future__ import annotations

from typing import Any

import click

from loopkit.cli._entry import command, say
from loopkit.exitcodes import SHARED_HELP

EPILOG = (
    """\b
Exit codes:
  0   every check passed
  1   a check failed or timed out (the evidence is still printed)
"""
    + SHARED_HELP
)


@command(epilog=EPILOG)
@click.option("--contract", "contract_path", metavar="FILE", help="The loop contract (loop.yaml).")
@click.option("--only", multiple=True, metavar="NAME", help="Run only the check NAME (repeatable).")
@click.option("--fail-fast", is_flag=True, help="Stop at the first failing check.")
@click.option(
    "--clean-room/--in-place",
    "clean_room",
    default=None,
    help="Run the checks in a clean checkout of exactly the working tree's tree (the "
    "default when an attempt document is piped: what a recipe commits), or in the working "
    "tree itself (the default alone, e.g. in a commit hook).",
)
@click.option(
    "--summary",
    is_flag=True,
    help="For a person (a commit hook): a short summary on stdout -- each check, and the "
    "tail of a failing one -- and the JSON document into the state folder (verify-last.json).",
)
def main(
    contract_path: str | None,
    only: tuple[str, ...],
    fail_fast: bool,
    clean_room: bool | None,
    summary: bool,
) -> int:
    """Run the contract's acceptance checks in order, each in the repository root with its
    timeout, and record per check its exit code, duration, output tail, output sha256 and
    failure fingerprint, with the tree hash before and after the checks."""
    from loopkit import artifacts, document, proc
    from loopkit import verify as core
    from loopkit.workspace import Workspace

    doc = document.read_attempt()
    ws = Workspace.open(contract_path=contract_path, document=doc, require_contract=True)
    terms = ws.contract or {}
    chosen = core.select(terms["criteria"], only)
    attempt = artifacts.assign_attempt_id(doc if doc is not None else {})
    log_dir = artifacts.attempt_dir(ws.state, attempt)
    proc.guard()  # nothing a check starts outlives it, nor this command
    env = _check_env(terms, doc)
    ticker = _Ticker() if _stderr_is_terminal() else None
    lines = None if ticker or summary else _lines
    try:
        if clean_room if clean_room is not None else doc is not None:
            run = (doc or {}).get("run") or {}
            settings = terms.get("verify") or {}
            result = core.in_clean_room(
                ws.root,
                chosen,
                index=ws.index,
                head=run.get("base"),
                carry=list(settings.get("carry") or []),
                carry_before=run.get("carry"),
                log_dir=log_dir,
                fail_fast=fail_fast,
                progress=ticker.update if ticker else lines,
                env=env,
                tree=_checked_tree(doc),
            )
            if run.get("base") and not only and not result.passed:
                # Never worse than the base: the criteria's results on the untouched tree.
                # Asked only when a check failed: when every check passes, nothing can be
                # worse than the base, and the tree is not checked out and run twice.
                base = core.baseline(
                    ws.root,
                    ws.state,
                    str(run["base"]),
                    chosen,
                    log_dir=log_dir,
                    env=env,
                    carry=list(settings.get("carry") or []),
                    sealed=(run.get("state_seal") or {}).get("baseline"),
                )
                core.ratchet(result.body, base)
        else:
            result = core.run_checks(
                ws.root,
                chosen,
                index=ws.index,
                log_dir=log_dir,
                fail_fast=fail_fast,
                progress=ticker.update if ticker else lines,
                env=env,
            )
    finally:
        if ticker:
            ticker.close()
    for c in result.body["checks"]:
        if not c["passed"]:
            why = "timed out" if c.get("timed_out") else f"exit {c['exit_code']}"
            say(
                "lk-verify",
                f"{c['name']} failed ({why}); fingerprint {c['fingerprint']}; log: {c['log']}",
            )
        if c.get("changed_tree"):
            say("lk-verify", f"{c['name']} changed the working tree")
    # The evidence as recorded: lk-decide refuses a verify section that differs from it.
    from loopkit.files import atomic_write

    atomic_write(log_dir / core.RECORD_NAME, document.dumps(result.body))
    for problem in result.body.get("problems") or []:
        say("lk-verify", f"not verified: {problem}")
    out = document.attach(doc, "verify", result.body, attempt_id=attempt)
    if summary:
        atomic_write(ws.state / "verify-last.json", document.dumps(out) + "\n")
        click.echo(_summary(result.body, ws.state / "verify-last.json", ws.root), nl=False)
    else:
        document.emit(out)
    return 0 if result.passed else 1


def _summary(body: dict[str, Any], saved: Any, root: Any) -> str:
    """The checks for a person: one line each, the tail of a failing one under it."""
    import os

    from loopkit.text import clean

    lines = []
    for c in body["checks"]:
        mark = "ok" if c["passed"] else ("TIMED OUT" if c.get("timed_out") else "FAILED")
        lines.append(f"{mark:>9}  {c['name']}  ({c['duration_s']:.1f}s)  {c['command']}")
        if not c["passed"]:
            tail = clean(c.get("output_tail") or "").splitlines()[-15:]
            lines.extend("           | " + t for t in tail)
    verdict = "all checks passed" if body["passed"] else "a check failed: the commit is blocked"
    lines.append(f"lk-verify: {verdict} (the evidence: {os.path.relpath(saved, root)})")
    return "\n".join(lines) + "\n"


def _check_env(terms: dict[str, Any], doc: dict[str, Any] | None) -> dict[str, str]:
    """The checks' environment: the allow-list (loopkit.secrets) plus the contract's
    ``verify.env_allow``, and LOOPKIT_TASK_ID when a task is piped."""
    import os

    from loopkit import secrets

    names = [*secrets.CHECK_ENV, *((terms.get("verify") or {}).get("env_allow") or [])]
    env = secrets.outside_hook_env(secrets.allowed_env(os.environ, names))
    task = (doc or {}).get("task")
    if isinstance(task, dict) and task.get("id"):
        env["LOOPKIT_TASK_ID"] = str(task["id"])
    return env


def _lines(event: str, index: int, total: int, name: str, check: Any) -> None:
    """Progress off a terminal (a log, a recipe): one line as each check starts and ends."""
    if event == "start":
        say("lk-verify", f"[{index + 1}/{total}] {name} ...")
    else:
        mark = "ok" if check and check.get("passed") else "FAILED"
        secs = check.get("duration_s", 0.0) if check else 0.0
        say("lk-verify", f"[{index + 1}/{total}] {name}: {mark} ({secs:.1f}s)")


def _stderr_is_terminal() -> bool:
    import sys

    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


class _Ticker:
    """One status line on a terminal's stderr: which check runs and for how long."""

    def __init__(self) -> None:
        import threading

        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._line: tuple[int, int, str, float] | None = None
        self._thread = threading.Thread(target=self._run, name="lk-verify-progress", daemon=True)
        self._thread.start()

    def update(self, event: str, index: int, total: int, name: str, check: Any) -> None:
        import time

        with self._lock:
            if event == "start":
                self._line = (index, total, name, time.monotonic())
                self._draw()
            else:
                self._line = None
                mark = "ok" if check and check.get("passed") else "FAILED"
                secs = check.get("duration_s", 0.0) if check else 0.0
                from loopkit.text import clean

                shown = clean(name)  # the line's own control codes only
                click.echo(f"\r\x1b[K[{index + 1}/{total}] {shown}: {mark} ({secs:.1f}s)", err=True)

    def _draw(self) -> None:
        import time

        if self._line is None:
            return
        index, total, name, started = self._line
        elapsed = time.monotonic() - started
        from loopkit.text import clean

        shown = clean(name)
        click.echo(f"\r\x1b[K[{index + 1}/{total}] {shown} ... {elapsed:.0f}s", err=True, nl=False)

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            with self._lock:
                self._draw()

    def close(self) -> None:
        self._stop.set()


def _checked_tree(doc: dict[str, Any] | None) -> str | None:
    """The tree lk-diff checked (diff.tree): the one to verify, so the scope policy and the
    checks judge the same tree. None without one: the working tree is hashed instead."""
    tree = ((doc or {}).get("diff") or {}).get("tree")
    return tree if isinstance(tree, str) and tree else None
