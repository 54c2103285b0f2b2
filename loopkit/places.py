"""Where loopkit keeps what lives outside the repository, in its user cache folder: every
repository's clean room (``$LOOPKIT_CLEANROOM``, else ``cleanroom/``), and beside it the
providers' private homes (boundary.containment). Below the rooms that use them: the
sandbox's policy hides these folders from the checks, the clean room syncs into them."""

from __future__ import annotations

import os
from pathlib import Path

from loopkit import git
from loopkit.digest import sha256

ROOM_ENV = "LOOPKIT_CLEANROOM"


def home_of(root: Path) -> Path:
    """Where the clean room of the repository at ``root`` lives (one per repository: its
    worktrees share it, one verification at a time)."""
    real = os.path.realpath(git.common_dir(root))
    key = sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    top = Path(real).parent if Path(real).name == ".git" else Path(real)
    name = f"{top.name or 'repo'}-{key}"
    return rooms() / name


def rooms() -> Path:
    """The folder every repository's clean room lives in: ``$LOOPKIT_CLEANROOM``, else
    ``cleanroom/`` in loopkit's user cache folder (``$XDG_CACHE_HOME/loopkit``, else
    ``~/.cache/loopkit``), beside the providers' private homes."""
    chosen = os.environ.get(ROOM_ENV)
    if chosen:
        return Path(chosen)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "loopkit" / "cleanroom"


def source_of(root: Path, name: str) -> Path:
    """Where the carried path ``name`` of the work tree at ``root`` is read from: the work
    tree's own, else -- in a linked worktree (``git worktree add``, parallel.sh's slices)
    that lacks it -- the main checkout's: the ignored dependencies a worktree never gets
    (``node_modules/``, ``.venv/``) are the ones the main checkout's checks see."""
    own = root / name
    if os.path.lexists(own):
        return own
    dirs = git.git_dirs(root) if (root / ".git").is_file() else None
    if dirs is None or dirs.common == dirs.own or dirs.common.name != ".git":
        return own
    main = dirs.common.parent / name
    return main if os.path.lexists(main) else own
