"""lk-diff: collect the change from git and check it against the contract's scope policy.

Usage:  lk-diff [--contract loop.yaml] [--base REF]
        ... | lk-diff | ...          (adds "diff" to the piped attempt document)

Input:  an attempt document on stdin when piped (optional). The contract is --contract,
        else the piped document's, else ./loop.yaml; without any, nothing is checked.
        The base is the piped attempt's recorded diff.base, else --base, else the commit
        the worker started from (run.base, so a worker's own commits still count), else HEAD.
        With the piped attempt's run.git_control (what lk-invoke recorded of .git before
        the worker), any change to hooks, config, info/, modules/, the contract cache,
        HEAD or its branch is a violation; so is a nested repository, always.
Output: one JSON line on stdout: the attempt document with "diff" added, or the diff
        section alone ({"kind": "loopkit/diff", ...}) when nothing is piped.
Exit codes: 0 within policy; 1 policy violated; 3 bad input; 4 not a git repository.
"""

from __future__ import annotations

import click

from loopkit.cli._entry import command, say
from loopkit.exitcodes import SHARED_HELP

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
    changed_files / changed_lines / changed_bytes budgets hold (changed_bytes: the new
    content's size, binary files included; default 5 MB). A nested repository (a new
    gitlink) is a violation wherever it is, and in a loop so is any change under .git that
    steers git or loopkit since lk-invoke recorded it (hooks, config, info/, modules/, the
    contract cache: git_control_changed; HEAD or its branch: head_moved)."""
    from loopkit import diff as core
    from loopkit import document, git
    from loopkit.workspace import Workspace

    doc = document.read_attempt()
    recorded = (doc or {}).get("diff") or {}
    started = ((doc or {}).get("run") or {}).get("base")  # HEAD before the worker ran
    asked = recorded.get("base") or base or started or "HEAD"
    ws = Workspace.open(contract_path=contract_path, document=doc)
    where = git.Located(root=ws.root, index=ws.index, base=None)
    terms = ws.contract
    started = ((doc or {}).get("run") or {}).get("git_control")  # .git before the worker
    from loopkit import statcache

    seed = statcache.seed(ws.state, ((doc or {}).get("run") or {}).get("state_seal"))
    result = core.assess(
        core.gather_at(
            where,
            asked,
            git_control=started,
            seed=seed,
            ignored_at_start=((doc or {}).get("run") or {}).get("ignored_at_start"),
        ),
        contract=terms,
        control=ws.control_files() if doc is not None else (),
        drift=ws.contract_drift,
        git_control=started,
    )
    if terms is None:
        say("lk-diff", "no contract: the scope policy was not checked")
    violations = result.body["violations"]
    for v in violations[:MAX_SHOWN]:  # paths are the worker's choice: say() cleans them
        say("lk-diff", f"{v['rule']}: {v['path']} ({v.get('detail', '')})")
    if len(violations) > MAX_SHOWN:
        say("lk-diff", f"... and {len(violations) - MAX_SHOWN} more violations")
    document.emit(document.attach(doc, "diff", result.body))
    return 0 if result.within_policy else 1
