"""Run the contract's acceptance checks and record evidence bound to the tree.

Each check is a shell command run in the repository root with its timeout (the whole
process group is ended when it runs out). Its full output goes to a log under the
attempt's artifact folder; the evidence keeps the exit code, a bounded tail, the output's
sha256 and, for a failure, a fingerprint. The tree is hashed before the first check and
after each one: a check that changed the tree is flagged, since its evidence is not about
the tree it started from.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopkit import artifacts, fingerprint, git, proc
from loopkit.errors import BadInput

#: The output tail kept in the document: at most this many lines and bytes (from the end).
TAIL_LINES = 40
TAIL_BYTES = 4096
#: Bytes from the end of the output a fingerprint reads (a failure is told at the end).
FINGERPRINT_WINDOW = 256 * 1024
_CHUNK = 1 << 20

#: progress(event, index, total, name, finished-check-or-None)
Progress = Callable[[str, int, int, str, "dict[str, Any] | None"], None]


def select(criteria: Sequence[Mapping[str, Any]], only: Sequence[str]) -> list[Mapping[str, Any]]:
    """The criteria to run, in contract order; ``only`` names a subset (unknown names: exit 3)."""
    if not only:
        return list(criteria)
    names = [str(c["name"]) for c in criteria]
    unknown = [n for n in only if n not in names]
    if unknown:
        raise BadInput(
            "--only", f"no check named {unknown[0]!r}; the contract has: {', '.join(names)}"
        )
    return [c for c in criteria if c["name"] in only]


def tail(data: bytes, *, lines: int = TAIL_LINES, limit: int = TAIL_BYTES) -> str:
    """The end of an output: the last ``lines`` lines, at most ``limit`` bytes, colours removed."""
    chunk = data[-limit * 2 :] if len(data) > limit * 2 else data
    text = fingerprint.strip_ansi(chunk.decode("utf-8", "replace"))
    kept = text.splitlines()[-lines:]
    out = "\n".join(kept)
    encoded = out.encode("utf-8")
    if len(encoded) > limit:
        out = encoded[-limit:].decode("utf-8", "ignore")
        out = out.split("\n", 1)[1] if "\n" in out else out
    return out


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.")[:60] or "check"


def _sha256_file(path: Path) -> tuple[str, bytes]:
    """The file's sha256 and its last bytes (enough for the tail and the fingerprint)."""
    h = fingerprint.sha256()
    size = path.stat().st_size
    with open(path, "rb") as f:
        while block := f.read(_CHUNK):
            h.update(block)
        f.seek(max(0, size - FINGERPRINT_WINDOW))
        end = f.read()
    return h.hexdigest(), end


@dataclass
class Result:
    body: dict[str, Any]

    @property
    def passed(self) -> bool:
        return bool(self.body["passed"])


def run_checks(
    root: Path,
    criteria: Sequence[Mapping[str, Any]],
    *,
    log_dir: Path,
    fail_fast: bool = False,
    progress: Progress | None = None,
    env: Mapping[str, str] | None = None,
    index: Path | None = None,
) -> Result:
    """Run ``criteria`` in order in the repository at ``root``; the ``verify`` section.

    ``index`` (from ``git.locate``) spares a git call when the caller already knows it.
    """
    where = git.locate(root) if index is None else git.Located(root=root, index=index, base=None)
    with git.TreeWatch(where.root, index=where.index) as watch:
        return _run(where, watch, criteria, log_dir, fail_fast, progress, env)


def _run(
    where: git.Located,
    watch: git.TreeWatch,
    criteria: Sequence[Mapping[str, Any]],
    log_dir: Path,
    fail_fast: bool,
    progress: Progress | None,
    env: Mapping[str, str] | None,
) -> Result:
    before = watch.hash()
    current = before
    checks: list[dict[str, Any]] = []
    base_env = dict(os.environ if env is None else env)
    home = os.path.expanduser("~")
    total = len(criteria)
    for i, c in enumerate(criteria):
        name = str(c["name"])
        if progress:
            progress("start", i, total, name, None)
        log = log_dir / f"verify-{i + 1:02d}-{_slug(name)}.log"
        run_env = dict(base_env)
        run_env.update({str(k): str(v) for k, v in (c.get("env") or {}).items()})
        done = proc.run(
            str(c["run"]),
            shell=True,
            cwd=where.root,
            env=run_env,
            timeout=float(c["timeout"]) if c.get("timeout") else None,
            output=log,
        )
        digest, end = _sha256_file(log)
        passed = done.exit_code == 0 and not done.timed_out
        entry: dict[str, Any] = {
            "name": name,
            "command": str(c["run"]),
            "exit_code": done.exit_code,
            "passed": passed,
            "timed_out": done.timed_out,
            "duration_s": round(done.duration_s, 3),
            "output_tail": tail(end),
            "output_sha256": digest,
            "output_bytes": log.stat().st_size,
            "fingerprint": None
            if passed
            else fingerprint.of_output(
                end,
                exit_code=done.exit_code,
                timed_out=done.timed_out,
                roots=[str(where.root), os.path.realpath(where.root)],
                home=home,
            ),
            "log": artifacts.relative(log, where.root),
        }
        after = watch.hash()
        if after != current:
            entry["changed_tree"] = True
            entry["tree_after"] = after
        current = after
        checks.append(entry)
        if progress:
            progress("end", i, total, name, entry)
        if fail_fast and not passed:
            break
    passed_all = all(c["passed"] for c in checks) and len(checks) == total
    body: dict[str, Any] = {
        "tree": before,
        "tree_after": current,
        "tree_changed": current != before,
        "passed": passed_all,
        "fingerprint": fingerprint.combine((c["name"], c["fingerprint"]) for c in checks),
        "checks": checks,
        "skipped": [str(c["name"]) for c in criteria[len(checks) :]],
    }
    if current != before:
        # What the checks themselves changed: the diff, taken before them, never saw it.
        moved = git.git(
            ["diff-tree", "-r", "-z", "--name-only", "--no-renames", before, current],
            cwd=where.root,
            check=False,
        )
        if moved.exit_code == 0:
            names = moved.stdout.decode("utf-8", "surrogateescape").split("\0")
            body["changed_by_checks"] = sorted(n for n in names if n)
    return Result(body)
