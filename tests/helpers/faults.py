"""Faults at chosen git calls of a real run: a ``git`` first on PATH that counts every call
(from the recipes, loopkit's commands, its threads) and, at the one chosen, stops the loop
the way a person, a CI runner or the machine would.

Faults (``kind``):

``kill9``   SIGKILL to the loop's whole process group (the machine went away)
``term``    SIGTERM to the process group (a CI runner's cancel)
``int``     SIGINT to the process group (a person's Ctrl-C)
``disk``    this call and every later one that writes fails as on a full disk
``roref``   from this call on, every ref update fails as on a read-only ref store
``lock``    a stale ``index.lock`` (no process holds it) is left in this call's git folder

``after``: the fault comes once the chosen call has run (kill9, term, int), else before.
Calls are chosen by number (``at``) or as the first whose argv holds ``match``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

REAL_GIT = shutil.which("git") or "/usr/bin/git"

_SHIM = r"""#!/bin/bash
d=__DIR__
exec 9>>"$d/lock"
flock 9
n=$(( $(cat "$d/count" 2>/dev/null || echo 0) + 1 ))
echo "$n" >"$d/count"
printf '%s\t%s\n' "$n" "$*" >>"$d/calls"
fire=0
if [ -f "$d/armed" ] && [ ! -f "$d/fired" ]; then
    at=$(cat "$d/at" 2>/dev/null); match=$(cat "$d/match" 2>/dev/null)
    if { [ -n "$at" ] && [ "$n" -ge "$at" ]; } || { [ -n "$match" ] && [[ "$*" == *"$match"* ]]; }; then
        fire=1; echo "$n" >"$d/fired"
    fi
fi
flock -u 9
exec 9>&-
kind=$(cat "$d/kind" 2>/dev/null)
writes() { case " $* " in *" update-ref "*|*" commit-tree "*|*" write-tree "*|*" read-tree "*|*" add "*|*" hash-object "*|*" update-index "*|*" checkout-index "*|*" clean "*|*" rm "*|*" worktree "*) return 0 ;; esac; return 1; }
if [ -f "$d/fired" ] && [ -f "$d/armed" ]; then
    case $kind in
    disk) if writes "$@"; then echo "fatal: unable to write new index file: No space left on device" >&2; exit 128; fi ;;
    roref) case " $* " in *" update-ref "*) echo "error: cannot lock ref: Unable to create '$PWD/.git/refs/x.lock': Read-only file system" >&2; exit 128 ;; esac ;;
    esac
fi
if [ "$fire" = 1 ]; then
    case $kind in
    lock) gd=$(__GIT__ rev-parse --absolute-git-dir 2>/dev/null) && : >"$gd/index.lock" && touch -d '1 minute ago' "$gd/index.lock" ;;
    kill9 | term | int)
        if [ -f "$d/after" ]; then __GIT__ "$@"; rc=$?; else rc=0; fi
        sig=KILL; [ "$kind" = term ] && sig=TERM; [ "$kind" = int ] && sig=INT
        kill -s "$sig" -- "-$(cat "$d/pgid")"
        [ "$kind" != kill9 ] || sleep 30
        if [ -f "$d/after" ]; then exit "$rc"; fi ;;
    esac
fi
exec __GIT__ "$@"
"""


class Faults:
    """The shim's folder: put ``bin`` first on PATH, ``arm`` a fault, read ``calls``."""

    def __init__(self, folder: Path) -> None:
        self.dir = folder
        self.bin = folder / "bin"
        self.bin.mkdir(parents=True, exist_ok=True)
        shim = self.bin / "git"
        shim.write_text(_SHIM.replace("__DIR__", str(folder)).replace("__GIT__", REAL_GIT))
        shim.chmod(0o755)

    def env(self, base: dict[str, str]) -> dict[str, str]:
        return {**base, "PATH": f"{self.bin}{os.pathsep}{base.get('PATH', os.environ['PATH'])}"}

    def arm(
        self, kind: str, *, at: int | None = None, match: str = "", after: bool = False
    ) -> None:
        for name in ("fired", "count", "calls"):
            (self.dir / name).unlink(missing_ok=True)
        (self.dir / "kind").write_text(kind)
        (self.dir / "at").write_text(str(at) if at else "")
        (self.dir / "match").write_text(match)
        (self.dir / "after").unlink(missing_ok=True)
        if after:
            (self.dir / "after").write_text("1")
        (self.dir / "armed").write_text("1")

    def disarm(self) -> None:
        (self.dir / "armed").unlink(missing_ok=True)

    def count(self) -> int:
        p = self.dir / "count"
        return int(p.read_text()) if p.exists() else 0

    def fired(self) -> int:
        p = self.dir / "fired"
        return int(p.read_text()) if p.exists() else 0

    def calls(self) -> list[str]:
        p = self.dir / "calls"
        return p.read_text().splitlines() if p.exists() else []

    def run(
        self, argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float = 180
    ) -> subprocess.CompletedProcess[str]:
        """Run ARGV in a process group of its own (the group the faults signal); once it
        ends, whatever of that group is left is reported and ended."""
        loop = subprocess.Popen(
            argv, cwd=cwd, env=self.env(env), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        )  # fmt: skip
        (self.dir / "pgid").write_text(str(loop.pid))
        try:
            out, err = loop.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(loop.pid, signal.SIGKILL)
            out, err = loop.communicate()
        return subprocess.CompletedProcess(argv, loop.returncode, out, err)


def group_left(pgid: int) -> list[int]:
    """The processes of group ``pgid`` still alive (a moment given to those ending)."""
    for _ in range(50):
        left = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[0] != "Z" and int(fields[2]) == pgid:
                left.append(int(pid))
        if not left:
            return []
        time.sleep(0.1)
    return left
