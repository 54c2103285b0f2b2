"""The one module that talks to git (through ``loopkit.proc``).

Plumbing commands only, never porcelain whose output may change with configuration.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from loopkit import proc
from loopkit.errors import EnvironmentProblem, LoopkitError

#: Keep git from reading a user's pager, editor or locale into our parsing.
_ENV_FIXES = {
    "GIT_PAGER": "cat",
    "GIT_TERMINAL_PROMPT": "0",
    "LC_ALL": "C",
    "GIT_OPTIONAL_LOCKS": "0",
}


class GitError(LoopkitError):
    """A git command failed where it should not have."""


def _env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(_ENV_FIXES)
    if extra:
        env.update(extra)
    return env


def git(
    args: Sequence[str],
    *,
    cwd: str | os.PathLike[str],
    env: Mapping[str, str] | None = None,
    input: bytes | None = None,
    check: bool = True,
) -> proc.Captured:
    done = proc.capture(["git", *args], cwd=cwd, env=_env(env), input=input)
    if done.exit_code == 127 and not done.stdout:
        raise EnvironmentProblem("git is not installed (or not on PATH)")
    if check and done.exit_code != 0:
        msg = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitError(f"git {args[0]} failed: {msg[-1] if msg else f'exit {done.exit_code}'}")
    return done


def out(args: Sequence[str], *, cwd: str | os.PathLike[str], **kw: object) -> str:
    return git(args, cwd=cwd, **kw).stdout.decode("utf-8", "surrogateescape").rstrip("\n")  # type: ignore[arg-type]


def toplevel(path: str | os.PathLike[str] = ".") -> Path:
    """The repository root containing ``path``; exit 4 when there is none."""
    done = git(["rev-parse", "--show-toplevel"], cwd=path, check=False)
    if done.exit_code != 0:
        raise EnvironmentProblem(f"{Path(path).resolve()}: not a git repository")
    return Path(done.stdout.decode("utf-8", "surrogateescape").strip())


def common_dir(root: str | os.PathLike[str]) -> Path:
    """The shared .git folder (the same for every worktree of a repository)."""
    p = Path(out(["rev-parse", "--git-common-dir"], cwd=root))
    return p if p.is_absolute() else (Path(root) / p).resolve()


def index_path(root: str | os.PathLike[str]) -> Path:
    """The index file git uses at ``root`` (honours ``GIT_INDEX_FILE``, worktrees)."""
    p = Path(out(["rev-parse", "--git-path", "index"], cwd=root))
    return p if p.is_absolute() else (Path(root) / p).resolve()


def tree_hash(root: Path) -> str:
    """A content hash of the working tree as it stands: a git tree id.

    Tracked files and untracked files git does not ignore, with their modes and symlink
    targets; ignored files (and loopkit's own state folder) are left out. Equal content
    gives an equal hash in any clone, whatever the timestamps. The real index is never
    touched: the work happens in a copy of it (the copy keeps git's stat cache, so only
    files that changed are read again).
    """
    import shutil
    import tempfile

    real = index_path(root)
    fd, tmp = tempfile.mkstemp(prefix="loopkit-index-", dir=real.parent)
    os.close(fd)
    try:
        try:
            # copy2 keeps the index's own mtime: entries that were "racily clean" stay so
            # and git compares their content instead of trusting the stat data.
            shutil.copy2(real, tmp)
        except FileNotFoundError:
            os.unlink(tmp)  # no index yet (fresh repository): git starts an empty one
        env = {"GIT_INDEX_FILE": tmp}
        quiet = ["-c", "advice.addEmbeddedRepo=false", "-c", "core.safecrlf=false"]
        git([*quiet, "add", "-A", "--", "."], cwd=root, env=env)
        return out(["write-tree"], cwd=root, env=env)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
