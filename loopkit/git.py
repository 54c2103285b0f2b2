"""The one module that talks to git (through ``loopkit.proc``).

Plumbing commands only, never porcelain whose output may change with configuration.
"""

from __future__ import annotations

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
