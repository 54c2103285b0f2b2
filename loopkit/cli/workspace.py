"""lk workspace: what every loopkit command would work with here, for scripts to ask.

Usage:  lk workspace [--contract loop.yaml] [--json]
        ... | lk workspace --json     (a piped attempt document: its contract and task)

Input:  an attempt document on stdin when piped (optional; a terminal is never read).
Output: with --json, one JSON line (schemas/workspace.json): the repository root, the
        state folder, the contract's source and sha256, the memory file, the task and the
        scope in force. Without --json, the same as NAME=VALUE lines a shell can read.
        The state folder is created and excluded from git, as any command would.
Exit codes: 0 answered; 3 bad input (an invalid contract or document); 4 not a git
        repository.
"""

from __future__ import annotations

from loopkit.cli import options
from loopkit.cli._entry import command, declared
from loopkit.exitcodes import SHARED_HELP


@command(epilog=SHARED_HELP)
@declared(options.WORKSPACE)
def main(contract: str | None, as_json: bool) -> int:
    """Print the workspace every command resolves here: root, state folder, contract
    (--contract > the piped document's > ./loop.yaml, the piped task applied), memory
    file. Recipes and loops in other languages ask this instead of re-deriving it."""
    from loopkit.workspace import report  # not at the top: --help loads none of it

    report(contract, as_json=as_json)
    return 0
