"""What every adversarial test asks after a hostile worker ran through a recipe: whatever
landed on the branch passes its own checks in a fresh clone (verified = committed)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.helpers.recipes import Project, recipe_env


def clone_passes_its_checks(p: Project, tmp: Path) -> bool:
    """Clone the branch and run every criterion of the committed loop.yaml there."""
    clone = tmp / "clone"
    subprocess.run(["git", "clone", "-q", str(p.root), str(clone)], check=True)
    contract = json.loads((clone / "loop.yaml").read_text())
    for check in contract["criteria"]:
        done = subprocess.run(
            check["run"], shell=True, cwd=clone, env=recipe_env(), capture_output=True, timeout=60
        )
        if done.returncode != 0:
            return False
    return True


#: Files a recipe commits for its own records (a park's retrospective, the checklist).
BOOKKEEPING = {"MEMORY.md", "TASKS.md"}


def nothing_unverified_landed(p: Project, before: str, tmp: Path) -> bool:
    """True when the branch holds no code change since ``before``, or when what it holds
    passes its own checks in a fresh clone."""
    changed = set(p.git("diff", "--name-only", before, "HEAD").split())
    return not (changed - BOOKKEEPING) or clone_passes_its_checks(p, tmp)


def loop(p: Project, *args: str, task: str = "fix-value"):
    return p.run("loop.sh", "--contract", "loop.yaml", "--task-id", task, "--task", "Fix", *args)


#: A process outside the worker's tree (what `at now` or `systemd-run --user` would start):
#: once the worker armed it (``armed`` in its scratch folder) and lk-decide's verdict is
#: written, it runs ACTION (Python; ``root`` and ``state`` are the repository and the
#: scratch folder) once, and leaves ``done-later`` in the scratch folder.
_LATER = """
import glob, os, sys, time
from pathlib import Path
state, root = Path(sys.argv[1]), Path(sys.argv[2])
deadline = time.time() + 60
while time.time() < deadline:
    decided = glob.glob(str(root / ".loopkit/runs/*/*/*-decide.json"))
    if (state / "armed").exists() and any(os.path.getsize(f) for f in decided):
        exec(sys.argv[3])
        (state / "done-later").write_text("yes")
        break
    time.sleep(0.002)
"""

#: Worker lines that arm the process outside (after writing the right value).
ARM = '\n(STATE / "armed").write_text("yes")\n'


def loop_with_a_later_process(p: Project, action: str) -> subprocess.CompletedProcess[str]:
    """Run the loop while the process outside waits for the verdict to do ``action``;
    asserts that it did."""
    import sys

    later = subprocess.Popen([sys.executable, "-c", _LATER, str(p.scratch), str(p.root), action])
    try:
        proc = loop(p)
        later.wait(timeout=60)
    finally:
        later.kill()
    assert (p.scratch / "done-later").exists(), "the process outside never acted"
    return proc


def loop_within(p: Project, seconds: float, *args: str) -> subprocess.CompletedProcess[str]:
    """``loop`` in a session of its own: when it has not ended after ``seconds``, every
    process it started is killed and the test fails -- a hang is a failure, never a test
    that waits for ever on a pipe a stuck grandchild holds open."""
    import os
    import signal

    from tests.helpers.recipes import RECIPES

    cmd = [str(RECIPES / "loop.sh"), "--contract", "loop.yaml", "--task-id", "fix-value"]
    proc = subprocess.Popen(
        [*cmd, "--task", "Fix", *args],
        cwd=p.root,
        env=recipe_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"the loop hung for {seconds:.0f}s\n{err[-4000:]}") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
