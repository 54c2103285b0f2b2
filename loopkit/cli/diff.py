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

from typing import Any

from loopkit.cli import options
from loopkit.cli._entry import command, declared
from loopkit.exitcodes import SHARED_HELP

EPILOG = (
    """\b
Exit codes:
  0   the change is within the scope policy
  1   the policy is violated (each violation is listed with its rule and path)
"""
    + SHARED_HELP
)


@command(epilog=EPILOG)
@declared(options.DIFF)
def main(**kw: Any) -> int:
    """Collect the change (staged, unstaged and untracked, renames, deletions, binary files,
    modes, symlinks) against a base, hash the working tree, and check the scope policy:
    protected globs win over writable ones, always_allowed paths never violate, add_only
    globs take new files but never a change to one the base holds (add_only), and the
    changed_files / changed_lines / changed_bytes budgets hold (changed_bytes: the new
    content's size, binary files included; default 5 MB). A nested repository (a new
    gitlink) is a violation wherever it is, and in a loop so is any change under .git that
    steers git or loopkit since lk-invoke recorded it (hooks, config, info/, modules/, the
    contract cache: git_control_changed; HEAD or its branch: head_moved)."""
    from loopkit import stages  # not at the top: --help loads none of it

    return stages.diff(**kw)
