"""Set-up errors are set-up errors: a checkout the worker cannot write (another user owns
it), a path the sandbox must mount that is missing, a worker program that is not there.
Each stops the loop before the worker starts: exit 4 (the README's environment error),
one line naming the path or the program, no traceback, no attempt spent and the task not
parked -- never a "crash" retried until the budget is gone.

Run as root, the worker in its sandbox holds no capability (``--cap-drop ALL``), so a
checkout another user owns is one it cannot write, though loopkit itself can: the test
gives the checkout to ``nobody`` (uid 65534) and runs the real recipe as root -- exactly
the person who runs loopkit as root on a colleague's clone.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from loopkit.boundary import sandbox
from tests.adversarial.helpers import loop
from tests.helpers.recipes import Project, fail_message, make_project

pytestmark = pytest.mark.skipif(not sandbox.probe().available, reason="no sandbox can start here")

FIX = 'Path("src/value.txt").write_text("good\\n")\n'
NOBODY = 65534


def chown_tree(root: Path, uid: int) -> None:
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            os.lchown(os.path.join(folder, name), uid, -1)
    os.lchown(root, uid, -1)


def blocked_before_the_worker(p: Project, proc: object, *names: str) -> None:
    """Exit 4, one line naming each of ``names``, the worker never started, nothing
    decided (no attempt spent, nothing parked)."""
    assert proc.returncode == 4, fail_message(proc)  # type: ignore[attr-defined]
    err: str = proc.stderr  # type: ignore[attr-defined]
    assert "Traceback" not in err
    assert any(all(n in line for n in names) for line in err.splitlines()), err
    assert p.worker_calls() == 0
    assert [r for r in p.ledger() if r.get("decision")] == []


@pytest.mark.skipif(os.geteuid() != 0, reason="giving the checkout to another user needs root")
def test_a_checkout_another_user_owns_blocks_before_the_worker(tmp_path: Path) -> None:
    p = make_project(tmp_path, FIX, files={"src/value.txt": "bad\n"}, writable=["src/**"])
    # git refuses a repository another user owns unless the person trusts it.
    with open(Path(os.environ["HOME"]) / ".gitconfig", "a") as f:
        f.write("[safe]\n\tdirectory = *\n")
    chown_tree(p.root, NOBODY)
    proc = loop(p)
    blocked_before_the_worker(p, proc, str(p.root), "cannot write")
    # The person fixes the ownership; the rerun spends the first attempt of the budget.
    chown_tree(p.root, os.geteuid())
    again = loop(p)
    assert again.returncode == 0, fail_message(again)
    decided = [r for r in p.ledger() if r.get("decision")]
    assert [r["inputs"]["history"]["spent_attempts"] for r in decided] == [0]
    assert p.git("show", "HEAD:src/value.txt") == "good\n"


def test_a_shown_path_that_is_missing_blocks_before_the_worker(tmp_path: Path) -> None:
    p = make_project(
        tmp_path,
        FIX,
        files={"src/value.txt": "bad\n"},
        writable=["src/**"],
        sandbox={"writable": [str(tmp_path / "worker")], "show": ["~/.no-such-cache"]},
    )
    proc = loop(p)
    blocked_before_the_worker(p, proc, "sandbox.show: ", ".no-such-cache does not exist")


@pytest.mark.parametrize(
    ("command", "named"),
    [
        ("loopkit-no-such-worker --go", "worker.command: loopkit-no-such-worker not found on PATH"),
        ("./bin/no-such-worker --go", "worker.command: ./bin/no-such-worker not found"),
    ],
)
def test_a_worker_program_that_is_missing_blocks_before_the_worker(
    tmp_path: Path, command: str, named: str
) -> None:
    p = make_project(tmp_path, FIX, files={"src/value.txt": "bad\n"}, writable=["src/**"])
    contract = json.loads((p.root / "loop.yaml").read_text())
    contract["worker"]["command"] = command
    (p.root / "loop.yaml").write_text(json.dumps(contract))
    p.git("commit", "-qam", "the worker is a program not installed here")
    proc = loop(p)
    blocked_before_the_worker(p, proc, named)


def test_a_sandbox_that_cannot_mount_is_not_the_workers_crash(tmp_path: Path) -> None:
    """bwrap itself fails to build the sandbox (here: a bwrap that adds a bind of a source
    that is not there, standing in for a mount this kernel refuses -- what no check of
    the paths beforehand can foresee): the worker never ran, so the loop stops with
    bwrap's own line, exit 4, no attempt spent."""
    real = sandbox.binary()
    assert real is not None
    broken = tmp_path / "bwrap"
    broken.write_text(
        "#!/bin/sh\n"
        f'case " $* " in *" -- true "*) exec {real} "$@" ;; esac  # the probe passes\n'
        f'exec {real} --ro-bind /loopkit-no-such-source /mnt "$@"\n'
    )
    broken.chmod(0o755)
    p = make_project(tmp_path, FIX, files={"src/value.txt": "bad\n"}, writable=["src/**"])
    proc = p.run(
        "loop.sh",
        *("--contract", "loop.yaml", "--task-id", "fix-value", "--task", "Fix"),
        env={"LOOPKIT_BWRAP": str(broken)},
    )
    blocked_before_the_worker(
        p, proc, "the worker's sandbox did not start", "/loopkit-no-such-source"
    )
    # The rerun, with a sandbox that starts, spends the budget's first attempt.
    again = loop(p)
    assert again.returncode == 0, fail_message(again)
    decided = [r for r in p.ledger() if r.get("decision")]
    assert [r["inputs"]["history"]["spent_attempts"] for r in decided] == [0]
