"""Where loopkit keeps its own state: ``.loopkit/`` at the repository root.

The folder is excluded through ``.git/info/exclude`` on first use, so no ``git add -A``,
``git reset --hard`` or ``git clean -fd`` can sweep up or wipe the ledger and artifacts
(``git clean -fdx`` still would: recipes never use -x on the whole tree).
"""

from __future__ import annotations

import os
from pathlib import Path

from loopkit import git

STATE_ENV = "LOOPKIT_STATE_DIR"
DEFAULT_NAME = ".loopkit"


def state_dir(root: str | os.PathLike[str] | None = None, *, configured: str | None = None) -> Path:
    """The state folder for the repository at ``root`` (created, and excluded from git)."""
    top = git.toplevel(root or ".")
    chosen = os.environ.get(STATE_ENV) or configured or DEFAULT_NAME
    path = Path(chosen) if os.path.isabs(chosen) else top / chosen
    path.mkdir(parents=True, exist_ok=True)
    try:
        rel = path.resolve().relative_to(top.resolve())
    except ValueError:
        return path  # outside the work tree: nothing to exclude
    ensure_excluded(top, "/" + rel.as_posix() + "/")
    return path


def configured_by_contract(start: str | os.PathLike[str] = ".") -> str | None:
    """The ``state_dir`` the loop contract in ``start`` (./loop.yaml) names, if any.

    For the commands that take no contract (lk cancel, lk report): they must find the
    state where lk-decide and lk-invoke keep it. A contract that cannot be read names
    none -- cancelling has to work with a broken contract too."""
    from loopkit import contract
    from loopkit.errors import LoopkitError

    found = contract.find_default(start)
    if found is None:
        return None
    try:
        value = contract.load(found).get("state_dir")
    except LoopkitError:
        return None
    return value if isinstance(value, str) and value else None


def ensure_excluded(root: Path, pattern: str) -> None:
    exclude = git.common_dir(root) / "info" / "exclude"
    try:
        current = exclude.read_text(encoding="utf-8")
    except FileNotFoundError:
        current = ""
    if pattern in current.splitlines():
        return
    exclude.parent.mkdir(parents=True, exist_ok=True)
    with open(exclude, "a", encoding="utf-8") as f:
        if current and not current.endswith("\n"):
            f.write("\n")
        f.write(f"# loopkit state: never committed, never reset\n{pattern}\n")
