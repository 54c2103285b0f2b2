"""A park brings the work tree back to where the task began -- and must not take the
user's ignored files with it. The worker empties `.gitignore`: under its rules the user's
local database and notes are untracked debris. The park cleans under both sets of rules --
the attempt's and the start's, whose `.gitignore` it writes back first -- so they stay on
disk, byte for byte. So do files a new `.gitignore` of the worker's un-ignores while
ignoring itself (the start's `git status --ignored` names them). A file the worker hid by
adding a line to the tracked `.gitignore` (never saved, since the save follows the
attempt's rules) stays too. The shell loop and the Node loop alike."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.adversarial.helpers import loop
from tests.helpers.recipes import RECIPES, fail_message, make_project

pytestmark = pytest.mark.slow

WORKER = """
Path(".gitignore").write_text("# nothing ignored\\n")
Path("src/value.txt").write_text("still bad\\n")
"""

HIDER = """
with open(".gitignore", "a") as f:
    f.write("junk.bin\\n")
Path("junk.bin").write_bytes(b"the worker's own scratch")
Path("src/value.txt").write_text("still bad\\n")
"""


def _user_files(p) -> dict[Path, bytes]:  # type: ignore[no-untyped-def]
    files = {
        p.root / "local.db": b"\x00the user's database\n",
        p.root / "notes" / "todo.txt": b"call the bank\n",
    }
    for path, data in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return files


SELF_HIDING = """
Path("data").mkdir(exist_ok=True)
Path("data/.gitignore").write_text("!local.db\\n.gitignore\\n")
Path("src/value.txt").write_text("still bad\\n")
"""


def _park(p, recipe: str):  # type: ignore[no-untyped-def]
    if recipe == "loop.sh":
        return loop(p)
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not installed (make agents)")
    script = RECIPES / "other-languages" / "loop.mjs"
    return p.execute([node, str(script), "--contract", "loop.yaml", "--task-id", "fix-value",
                      "--task", "Fix"], timeout=180)  # fmt: skip


@pytest.mark.parametrize("recipe", ["loop.sh", "loop.mjs"])
@pytest.mark.parametrize("worker", ["emptied", "self-hiding"])
def test_a_park_keeps_the_files_the_start_ignored(tmp_path: Path, worker: str, recipe: str) -> None:
    body = WORKER if worker == "emptied" else SELF_HIDING
    p = make_project(tmp_path, body, files={"src/value.txt": "bad\n"}, gitignore="*.db\nnotes/\n")
    kept = _user_files(p)
    (p.root / "data").mkdir()
    (p.root / "data" / "local.db").write_bytes(b"the user's other database\n")
    kept[p.root / "data" / "local.db"] = b"the user's other database\n"
    assert p.git("status", "--porcelain") == ""
    proc = _park(p, recipe)
    assert proc.returncode in (20, 21, 22), fail_message(proc)
    for path, data in kept.items():
        assert path.read_bytes() == data, (path, fail_message(proc))
    names = {str(path.relative_to(p.root)) for path in kept}
    assert p.loopkit_refs(), fail_message(proc)
    for ref in p.loopkit_refs():  # nor saved: what the start ignored is in no saved tree
        saved = set(p.git("ls-tree", "-r", "--name-only", ref).split())
        assert not saved & names, (ref, saved & names)
    assert (p.root / ".gitignore").read_text() == "*.db\nnotes/\n"
    assert (p.root / "src/value.txt").read_text() == "bad\n"


def test_a_park_keeps_a_file_the_attempt_hid(tmp_path: Path) -> None:
    p = make_project(tmp_path, HIDER, files={"src/value.txt": "bad\n"}, gitignore="*.db\n")
    proc = loop(p)
    assert proc.returncode in (20, 21, 22), fail_message(proc)
    assert (p.root / "junk.bin").read_bytes() == b"the worker's own scratch"
    assert (p.root / ".gitignore").read_text() == "*.db\n"
    assert (p.root / "src/value.txt").read_text() == "bad\n"
