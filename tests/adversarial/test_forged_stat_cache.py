"""A process outside the worker's tree (what `at now` would start) that, once lk-diff has
hashed the tree, changes a file and forges the index lk-diff left for lk-decide (that
file's entry given the new file's stat data, so a hash trusting it does not read it
again). lk-decide's hash of the tree on disk must still see the change: the index it
starts from is taken only while it holds the bytes loopkit wrote (statcache.Handoff).

Naive variant caught: starting from that index as it is found -- the attempt completes on
a tree no longer on disk, the recipe's own check after the commit starts from the same
forged stat data, and `git status` then shows a clean tree that is not the commit's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.recipes import fail_message, make_project

pytestmark = pytest.mark.slow

WORKER = """
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("good\\n")
if n == 1:
    (STATE / "armed").write_text("yes")
"""

# The forger: waits for lk-diff's index, then writes a value of the same size and gives
# its entry the file's new stat data (the index's checksum made good again, its mtime
# moved on so the entry is not "racily clean" and git trusts it).
FORGER = r"""
import glob, hashlib, os, struct, sys, time
from pathlib import Path
state, root = Path(sys.argv[1]), Path(sys.argv[2])
deadline = time.time() + 60
while time.time() < deadline:
    handed = glob.glob(str(root / ".loopkit/stat-index.diff-*"))
    if (state / "armed").exists() and handed:
        break
    time.sleep(0.002)
else:
    sys.exit(0)
index, target = Path(handed[0]), root / "src/value.txt"
target.write_text("evil\n")
st = os.stat(target)
data = bytearray(index.read_bytes())
count, off = struct.unpack(">I", data[8:12])[0], 12
for _ in range(count):
    length = struct.unpack(">H", data[off + 60 : off + 62])[0] & 0xFFF
    if bytes(data[off + 62 : off + 62 + length]) == b"src/value.txt":
        data[off : off + 24] = struct.pack(
            ">6I", int(st.st_ctime), st.st_ctime_ns % 10**9, int(st.st_mtime),
            st.st_mtime_ns % 10**9, st.st_dev & 0xFFFFFFFF, st.st_ino & 0xFFFFFFFF)
        data[off + 36 : off + 40] = struct.pack(">I", st.st_size)
        break
    off += (62 + length + 8) & ~7
data[-20:] = hashlib.sha1(bytes(data[:-20])).digest()
index.write_bytes(bytes(data))
later = st.st_mtime + 5
os.utime(index, (later, later))
(state / "forged").write_text("yes")
"""


def test_an_index_forged_after_lk_diff_does_not_hide_a_change_from_lk_decide(
    tmp_path: Path,
) -> None:
    p = make_project(
        tmp_path,
        WORKER,
        checks=[{"name": "value", "run": "sleep 1; grep -qx good src/value.txt", "timeout": 30}],
        budgets={"attempts": 3},
    )
    forger = p.scratch / "forger.py"
    forger.write_text(FORGER)
    later = subprocess.Popen([sys.executable, str(forger), str(p.scratch), str(p.root)])
    try:
        proc = p.run("loop.sh", "--contract", "loop.yaml", "--task-id", "fix-value",
                     "--task", "Fix")  # fmt: skip
        later.wait(timeout=60)
    finally:
        later.kill()
    assert (p.scratch / "forged").exists(), "the forger never acted"
    assert proc.returncode == 0, fail_message(proc)
    # The change was seen: the first attempt did not complete on a tree not on disk.
    assert p.decisions("fix-value")[0]["outcome"] != "complete"
    # And whatever landed, the disk is the commit, or git says it is not.
    on_disk = (p.root / "src/value.txt").read_text()
    committed = p.git("show", "HEAD:src/value.txt")
    assert on_disk == committed == "good\n" or p.git("status", "--porcelain"), (on_disk, committed)
