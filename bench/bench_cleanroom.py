"""The clean room's cost: syncing it to an attempt's tree on the 50,000-file repository.

An attempt changes one file. The clean room (loopkit.evidence.cleanroom) is synced to the new tree
with ``git read-tree -u --reset`` and ``git clean -ffdx``; the reference is what any
checkout of that tree costs: ``git checkout --detach`` of a commit holding it, in a
second worktree that was at the previous tree (the cheapest git can do the same job).
The first sync (a full checkout) is printed once, beside a raw ``git worktree add``.

Target: a one-file sync <= 3x the raw checkout of the same change (both are dominated by
git reading the index and stat'ing 50,000 files), on the median of paired runs. Printed
beside it: the sync of a *settled* clean room (the last checks changed none of its files:
``cleanroom.settle``), which reads only what differs between the two trees.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_diff import GIT_ENV, build, git

RUNS = 9
TARGET = 3.0


def main() -> int:
    os.environ.update(GIT_ENV)
    from loopkit import git as gits
    from loopkit.evidence import cleanroom

    repo = build()
    git(repo, "reset", "-q", "--hard")
    git(repo, "clean", "-fdq")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ[cleanroom.ROOM_ENV] = str(Path(tmp) / "rooms")
        head = git(repo, "rev-parse", "HEAD").strip()
        base_tree = git(repo, "rev-parse", "HEAD^{tree}").strip()
        start = time.perf_counter()
        room = cleanroom.prepare(repo, base_tree, head=head)
        first = time.perf_counter() - start
        raw_wt = Path(tmp) / "raw"
        start = time.perf_counter()
        git(repo, "worktree", "add", "-q", "--detach", str(raw_wt), head)
        raw_first = time.perf_counter() - start
        print(
            f"first sync (full checkout): clean room {first:.3f}s, git worktree add {raw_first:.3f}s"
        )

        target = repo / "pkg0000/mod_000.py"
        original = target.read_text()
        ratios, ours, raws, settled = [], [], [], []
        for n in range(2 * RUNS):
            target.write_text(original + f"edit_{n} = {n}\n")
            tree = gits.tree_hash(repo)
            commit = git(repo, "commit-tree", tree, "-p", head, "-m", "bench").strip()
            t0 = time.perf_counter()
            room = cleanroom.prepare(repo, tree, head=head)
            a = time.perf_counter() - t0
            if n >= RUNS:  # the second half: each sync after checks that changed nothing
                if n > RUNS:  # (the first of them follows an unsettled sync)
                    settled.append(a)
                cleanroom.settle(room, intact=True)
                continue
            t0 = time.perf_counter()
            subprocess.run(["git", "checkout", "-q", "--detach", commit], cwd=raw_wt, check=True)
            b = time.perf_counter() - t0
            ours.append(a)
            raws.append(b)
            ratios.append(a / b)
        target.write_text(original)
        git(repo, "worktree", "remove", "--force", str(raw_wt))
        del room
    med = statistics.median(ratios)
    print(
        f"one-file sync: clean room median {statistics.median(ours) * 1000:.0f} ms, "
        f"git checkout median {statistics.median(raws) * 1000:.0f} ms; "
        f"paired ratio median {med:.2f}x (target <= {TARGET}x)"
    )
    print(
        f"a settled clean room (the last checks changed nothing): median "
        f"{statistics.median(settled) * 1000:.0f} ms = "
        f"{statistics.median(settled) / statistics.median(raws):.2f}x the checkout"
    )
    return 0 if med <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
