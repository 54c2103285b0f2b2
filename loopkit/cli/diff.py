"""lk-diff: collect the change from git and check it against the contract's scope policy.

Usage:  lk-diff [--contract loop.yaml] [--base REF]
        ... | lk-diff | ...          (adds "diff" to the piped attempt document)

Input:  an attempt document on stdin when piped (optional). The contract is --contract,
        else the piped document's, else ./loop.yaml; without any, nothing is checked.
        The base is the piped attempt's recorded diff.base, else --base, else the commit
        the worker started from (run.base, so a worker's own commits still count), else HEAD.
Output: one JSON line on stdout: the attempt document with "diff" added, or the diff
        section alone ({"kind": "loopkit/diff", ...}) when nothing is piped.
Exit codes: 0 within policy; 1 policy violated; 3 bad input; 4 not a git repository.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from loopkit.cli._entry import command
from loopkit.exitcodes import SHARED_HELP

if TYPE_CHECKING:
    from loopkit.git import Located

#: Violations named on stderr (all of them are in the JSON document).
MAX_SHOWN = 20

EPILOG = (
    """\b
Exit codes:
  0   the change is within the scope policy
  1   the policy is violated (each violation is listed with its rule and path)
"""
    + SHARED_HELP
)


@command(epilog=EPILOG)
@click.option("--contract", "contract_path", metavar="FILE", help="The loop contract (loop.yaml).")
@click.option(
    "--base",
    metavar="REF",
    help="Compare against REF (default: the worker's starting commit, run.base, else HEAD). "
    "A piped attempt's recorded diff.base wins.",
)
def main(contract_path: str | None, base: str | None) -> int:
    """Collect the change (staged, unstaged and untracked, renames, deletions, binary files,
    modes, symlinks) against a base, hash the working tree, and check the scope policy:
    protected globs win over writable ones, always_allowed paths never violate, and the
    changed_files / changed_lines budgets hold."""
    import os

    from loopkit import diff as core
    from loopkit import document, git
    from loopkit.errors import EnvironmentProblem

    doc = document.read_attempt()
    recorded = (doc or {}).get("diff") or {}
    started = ((doc or {}).get("run") or {}).get("base")  # HEAD before the worker ran
    asked = recorded.get("base") or base or started or "HEAD"
    try:
        where = git.locate(os.getcwd())
    except EnvironmentProblem:
        if contract_path or (doc and doc.get("contract")):
            from loopkit import contract

            contract.resolve(contract_path, doc)  # a bad contract is reported first (exit 3)
        raise
    # git does the heavy lifting in a thread while the contract is read and validated.
    facts = _Background(lambda: core.gather_at(where, asked))
    try:
        terms = _contract(contract_path, doc, where)
    finally:
        facts.join()  # never leave git's scratch index behind, whatever went wrong
    result = core.assess(facts.result(), contract=terms)
    if terms is None:
        click.echo("lk-diff: no contract: the scope policy was not checked", err=True)
    violations = result.body["violations"]
    for v in violations[:MAX_SHOWN]:
        click.echo(f"lk-diff: {v['rule']}: {v['path']} ({v.get('detail', '')})", err=True)
    if len(violations) > MAX_SHOWN:
        click.echo(f"lk-diff: ... and {len(violations) - MAX_SHOWN} more violations", err=True)
    if doc is not None:
        doc["diff"] = result.body
        document.emit(doc)
    else:
        document.emit(document.section("diff", result.body))
    return 0 if result.within_policy else 1


def _contract(
    path: str | None, doc: dict[str, Any] | None, where: Located
) -> dict[str, Any] | None:
    """--contract, else the piped document's, else ./loop.yaml; None when there is none."""
    from loopkit import verify

    if not path and doc and isinstance(doc.get("contract"), dict):
        from loopkit import contract

        return contract.resolve(None, doc)  # in memory: nothing to cache
    if not path:
        from loopkit import contract

        if contract.find_default() is None:
            return None
    # A contract file: parsed and validated once per content (see lk-verify).
    state = verify.state_folder(where)
    return verify.load_contract(path, None, state=state)


class _Background:
    """Run ``work`` in a thread; ``result()`` joins it and re-raises what it raised."""

    def __init__(self, work: Callable[[], Any]) -> None:
        import threading

        self._value: Any = None
        self._error: BaseException | None = None

        def target() -> None:
            try:
                self._value = work()
            except BaseException as e:  # handed to the caller's thread
                self._error = e

        self._thread = threading.Thread(target=target, name="lk-diff-git", daemon=True)
        self._thread.start()

    def join(self) -> None:
        self._thread.join()

    def result(self) -> Any:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value
