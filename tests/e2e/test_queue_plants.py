"""Without a sandbox, what a worker wrote where it was not its to write: `lk queue sweep`
saves what appeared in the checkout and puts the checkout back; `lk queue add --worktree`
refuses an attempt whose worker ran when such a plant was written, or whose worktree
changed while its own worker was not running (real attempts, real git, sandbox off)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from loopkit import schema
from tests.helpers.queue import attempt, doc, lk, out
from tests.helpers.recipes import make_project

pytestmark = pytest.mark.slow

# The hostile task writes into the checkout (a new file, a changed one, a removed one)
# as well as its own change; the others only do their own.
WORKER = """
Path("src").mkdir(exist_ok=True)
if task == "hostile":
    checkout = Path(os.environ["PLANT_INTO"])
    (checkout / "src/planted.txt").write_text("planted\\n")
    (checkout / "src/keep.txt").write_text("changed\\n")
    (checkout / "README.md").unlink()
Path(f"src/{task}.txt").write_text(task + "\\n")
"""
CHECK = {"name": "ok", "run": "true", "timeout": 30}


def _project(tmp_path: Path):
    p = make_project(
        tmp_path,
        WORKER,
        files={"src/keep.txt": "keep\n"},
        checks=[CHECK],
        sandbox={"mode": "off"},
        worker={
            "provider": "command",
            "command": "",  # set below: the worker script make_project wrote
            "timeout": 60,
            "env_allow": ["PLANT_INTO"],
        },
    )
    contract = json.loads((p.root / "loop.yaml").read_text())
    contract["worker"]["command"] = f"python3 {p.scratch / 'worker.py'}"
    (p.root / "loop.yaml").write_text(json.dumps(contract, indent=2) + "\n")
    p.git("commit", "-qam", "the worker")
    return p


def test_a_plant_in_the_checkout_is_saved_put_back_and_its_attempt_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = _project(tmp_path)
    monkeypatch.setenv("PLANT_INTO", str(p.root))
    base = p.head()
    hostile = attempt(p, "hostile", base=base)
    assert doc(hostile)["decision"]["outcome"] == "complete"
    assert (p.root / "src/planted.txt").exists()  # no sandbox: the write got there
    swept = lk(p, "queue", "sweep")
    assert swept.returncode == 0, swept.stderr
    body = out(swept)
    schema.validate(body, "queue")
    planted = body["planted"]
    assert sorted(x["path"] for x in planted) == ["README.md", "src/keep.txt", "src/planted.txt"]
    (ref,) = {x["ref"] for x in planted}
    assert ref.startswith("refs/loopkit/planted/") and ref in swept.stderr
    # Nothing lost: the save holds what was there; the checkout is its commit again.
    assert p.git("show", f"{ref}:src/planted.txt") == "planted\n"
    assert p.git("show", f"{ref}:src/keep.txt") == "changed\n"
    assert "README.md" not in p.files(ref)
    assert p.git("status", "--porcelain") == ""
    assert (p.root / "README.md").read_text() == "# project\n"
    assert (p.root / "src/keep.txt").read_text() == "keep\n"
    # Swept again: nothing more.
    assert out(lk(p, "queue", "sweep"))["planted"] == []
    # Its attempt is refused (40), one line naming the plant; nothing queued.
    wt = p.root.parent / "wt-hostile-1"
    refused = lk(p, "queue", "add", str(hostile), "--worktree", str(wt))
    assert refused.returncode == 40, refused.stderr
    assert "src/planted.txt in the checkout" in refused.stderr and ref in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert out(lk(p, "queue", "status"))["entries"] == []
    # A later attempt, its worker after the plant, is queued.
    monkeypatch.delenv("PLANT_INTO")
    later = attempt(p, "later", base=base)
    queued = lk(p, "queue", "add", str(later), "--worktree", str(p.root.parent / "wt-later-1"))
    assert queued.returncode == 0, queued.stderr


def test_a_worktree_changed_while_its_worker_was_not_running_is_refused(
    tmp_path: Path,
) -> None:
    p = _project(tmp_path)
    own = attempt(p, "own")
    wt = p.root.parent / "wt-own-1"
    time.sleep(0.3)  # past the file clock's margin
    # A process not the worker's writes into its worktree after the worker ended.
    (wt / "src/foreign.txt").write_text("not mine\n")
    refused = lk(p, "queue", "add", str(own), "--worktree", str(wt))
    assert refused.returncode == 40, refused.stderr
    assert "src/foreign.txt in its worktree" in refused.stderr
    assert "src/own.txt" not in refused.stderr  # its own work is its own
    # The control: queued without --worktree, nothing looks.
    assert lk(p, "queue", "add", str(own)).returncode == 0


def test_bad_input_to_add_worktree(tmp_path: Path) -> None:
    p = _project(tmp_path)
    own = attempt(p, "own")
    moved = p.scratch / "moved-decide.json"
    moved.write_text(own.read_text())  # without the documents lk attempt --keep kept beside
    done = lk(p, "queue", "add", str(moved), "--worktree", str(p.root.parent / "wt-own-1"))
    assert done.returncode == 3, done.stderr
    assert str(moved) in done.stderr and "lk attempt --keep" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    piped = lk(p, "queue", "add", "--worktree", str(p.root))
    assert piped.returncode == 2 and "needs DOC" in piped.stderr
    assert not os.path.exists(p.root / ".git/loopkit/queue/entries") or not list(
        (p.root / ".git/loopkit/queue/entries").iterdir()
    )


def test_an_attempt_whose_worker_never_ran_owns_no_change(tmp_path: Path) -> None:
    p = _project(tmp_path)
    own = attempt(p, "own")
    (p.scratch / "p-own-1-worker").unlink()  # as if its worker never started
    refused = lk(p, "queue", "add", str(own), "--worktree", str(p.root.parent / "wt-own-1"))
    assert refused.returncode == 40, refused.stderr
    assert "src/own.txt in its worktree" in refused.stderr
