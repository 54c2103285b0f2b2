"""A landing's statement as the history grows: the repository's identity (its root
commits) from the last answer kept, against walking the whole history each time.

A repository of 20,000 commits is made with git fast-import. The full walk (``git rev-list
--max-parents=0``) and loopkit's answer for a commit on top of the last one answered
(``statement.repository``: one ``merge-base --is-ancestor`` and a walk of what is new) are
timed alternately; the figure is the median ratio, the target that the kept answer costs
at most a quarter of the walk. Signing one statement (``ssh-keygen -Y sign``) is timed too,
for information.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from loopkit import git  # noqa: E402
from loopkit.attest import envelope, statement  # noqa: E402

COMMITS = 20_000
ROUNDS = 7
TARGET = 0.25
IDENT = ["-c", "user.name=b", "-c", "user.email=b@example.invalid"]


def history(root: Path) -> None:
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    lines = []
    for i in range(1, COMMITS + 1):
        data = f"{i}\n"
        lines += [
            "commit refs/heads/main",
            f"mark :{i}",
            f"committer b <b@example.invalid> {1_600_000_000 + i} +0000",
            f"data {len(f'c{i}')}",
            f"c{i}",
            *([f"from :{i - 1}"] if i > 1 else []),
            "M 644 inline f.txt",
            f"data {len(data)}",
            data,
        ]
    subprocess.run(
        ["git", "fast-import", "--quiet"], cwd=root, input="\n".join(lines).encode(), check=True
    )
    subprocess.run(["git", "checkout", "-q", "-f", "main"], cwd=root, check=True)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="bench-attest-") as tmp:
        root = Path(tmp) / "repo"
        history(root)
        ratios, walks, kept = [], [], []
        for _ in range(ROUNDS):
            before = git.out(["rev-parse", "HEAD"], cwd=root)
            statement.repository(root, before)  # the answer kept at the tip
            subprocess.run(["git", *IDENT, "commit", "-q", "--allow-empty", "-m", "x"], cwd=root)
            tip = git.out(["rev-parse", "HEAD"], cwd=root)
            t = time.perf_counter()
            git.out(["rev-list", "--max-parents=0", tip], cwd=root)
            walk = time.perf_counter() - t
            t = time.perf_counter()
            statement.repository(root, tip)
            fast = time.perf_counter() - t
            walks.append(walk)
            kept.append(fast)
            ratios.append(fast / walk)
        who = envelope.repository_key(root, identity="bench")
        t = time.perf_counter()
        for _ in range(ROUNDS):
            envelope.seal(b'{"_type": "bench"}', who)
        sign = (time.perf_counter() - t) / ROUNDS
    ratio = statistics.median(ratios)
    print(f"roots of a {COMMITS}-commit history: walk {statistics.median(walks) * 1000:.0f} ms")
    print(f"roots from the kept answer: {statistics.median(kept) * 1000:.0f} ms")
    print(f"ratio kept/walk: {ratio:.3f} (target <= {TARGET})")
    print(f"ssh-keygen -Y sign, one statement: {sign * 1000:.0f} ms")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
