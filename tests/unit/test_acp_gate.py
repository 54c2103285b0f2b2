"""The ACP gate: the contract's scope asked before a write, and files reached without
following a symlink."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from loopkit.worker.acp.gate import Escape, Gate, Room, changed_paths, window

SCOPE = {
    "writable": ["src/**", "README.md"],
    "protected": ["src/locked/**"],
    "add_only": ["tests/**"],
    "always_allowed": ["src/locked/notes.md"],
}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src" / "locked").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "tests" / "test_old.py").write_text("x\n")
    (root / "README.md").write_text("# r\n")
    return root


@pytest.mark.parametrize(
    ("path", "allowed", "rule"),
    [
        ("src/a.py", True, None),
        ("README.md", True, None),
        ("docs/a.md", False, "outside_writable"),
        ("src/locked/x.py", False, "protected"),
        ("src/locked/notes.md", True, None),  # always_allowed wins over protected
        ("tests/test_new.py", True, None),  # a new file under add_only
        ("tests/test_old.py", False, "add_only"),  # a file of the base under add_only
        (".git/config", False, "git_folder"),
        ("loop.yaml", False, "control_file"),
        ("../elsewhere.py", False, "outside_repository"),
        ("src/../../elsewhere.py", False, "outside_repository"),
        ("/etc/passwd", False, "outside_repository"),
    ],
)
def test_a_write_is_answered_from_the_scope(
    repo: Path, path: str, allowed: bool, rule: str | None
) -> None:
    gate = Gate(str(repo), SCOPE, control=["loop.yaml"])
    for spelled in (path, str(repo / path)):
        verdict = gate.write(spelled)
        assert (verdict.allowed, verdict.rule) == (allowed, rule), spelled


def test_a_symlink_out_of_the_repository_is_outside_it(repo: Path, tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (repo / "src" / "link").symlink_to(tmp_path / "out")
    gate = Gate(str(repo), SCOPE)
    assert gate.write(str(repo / "src" / "link" / "a.py")).rule == "outside_repository"
    assert gate.write("src/link/a.py").rule == "outside_repository"


def test_without_a_scope_only_the_fixed_rules_hold(repo: Path) -> None:
    gate = Gate(str(repo), None, control=["TASKS.md"])
    assert gate.write("anything/at/all.py").allowed
    assert gate.write("TASKS.md").rule == "control_file"
    assert gate.write(".git/hooks/pre-commit").rule == "git_folder"


def test_a_tool_call_is_judged_by_every_file_it_changes(repo: Path) -> None:
    gate = Gate(str(repo), SCOPE)
    edit = {
        "kind": "edit",
        "locations": [{"path": str(repo / "src" / "a.py")}],
        "content": [{"type": "diff", "path": str(repo / "docs" / "b.md"), "newText": "x"}],
    }
    verdict = gate.tool(edit)
    assert (verdict.allowed, verdict.rule, verdict.path) == (False, "outside_writable", "docs/b.md")
    assert gate.tool({"kind": "edit", "rawInput": {"file_path": str(repo / "src/a.py")}}).allowed
    # An unnamed kind carrying a diff is a write all the same.
    other = {"kind": "other", "content": [{"type": "diff", "path": "docs/c.md", "newText": ""}]}
    assert gate.tool(other).rule == "outside_writable"
    # Commands and reads run: the sandbox holds them, and lk-diff reads what they changed.
    assert gate.tool({"kind": "execute", "rawInput": {"command": "rm -rf docs"}}).allowed
    assert gate.tool({"kind": "read", "locations": [{"path": "/etc/hosts"}]}).allowed


def test_a_read_only_gate_refuses_writes_and_commands(repo: Path) -> None:
    gate = Gate(str(repo), SCOPE, read_only=True)
    assert gate.write("src/a.py").rule == "read_only"
    assert gate.tool({"kind": "execute", "rawInput": {"command": "ls"}}).rule == "read_only"
    assert gate.tool({"kind": "read", "locations": [{"path": "src/a.py"}]}).allowed


def test_changed_paths_reads_locations_diffs_and_raw_inputs() -> None:
    call = {
        "locations": [{"path": "a"}, {"path": "a"}],
        "content": [{"type": "diff", "path": "b"}, {"type": "content"}],
        "rawInput": {"file_path": "c", "edits": [{"path": "d"}]},
    }
    assert changed_paths(call) == ["a", "b", "c", "d"]


def test_the_room_writes_whole_files_and_makes_folders(repo: Path) -> None:
    room = Room(str(repo))
    room.write("src/new/deep/a.py", "A = 1\n")
    assert (repo / "src/new/deep/a.py").read_text() == "A = 1\n"
    assert room.read("src/new/deep/a.py") == "A = 1\n"
    assert [p.name for p in (repo / "src/new/deep").iterdir()] == ["a.py"]  # no temp left


def test_the_room_keeps_an_executable_bit(repo: Path) -> None:
    script = repo / "src" / "run.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    Room(str(repo)).write("src/run.sh", "#!/bin/sh\necho hi\n")
    assert os.stat(script).st_mode & 0o777 == 0o755


def test_the_room_never_follows_a_symlink(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "target.txt").write_text("keep\n")
    (repo / "src" / "away").symlink_to(outside)
    (repo / "src" / "file.txt").symlink_to(outside / "target.txt")
    room = Room(str(repo))
    with pytest.raises(Escape):
        room.write("src/away/x.txt", "x\n")
    with pytest.raises(Escape):
        room.read("src/away/target.txt")
    with pytest.raises(Escape):
        room.read("src/file.txt")
    # A symlink as the file itself is replaced by the file, never written through.
    room.write("src/file.txt", "new\n")
    assert (outside / "target.txt").read_text() == "keep\n"
    assert not (repo / "src" / "file.txt").is_symlink()
    assert not (outside / "x.txt").exists()


def test_a_folder_swapped_for_a_symlink_during_writes_never_leads_out(
    repo: Path, tmp_path: Path
) -> None:
    """A hostile agent swaps src/box between a folder and a symlink to the outside while
    loopkit writes into it: every write lands inside, or is refused."""
    outside = tmp_path / "outside"
    outside.mkdir()
    box, parked = repo / "src" / "box", repo / "src" / "box-real"
    box.mkdir()
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            try:
                os.rename(box, parked)
                os.symlink(outside, box)
                os.unlink(box)
                os.rename(parked, box)
            except OSError:
                pass

    swapper = threading.Thread(target=swap)
    swapper.start()
    room = Room(str(repo))
    try:
        for n in range(300):
            try:
                room.write(f"src/box/f{n}.txt", "x\n")
            except (Escape, FileNotFoundError, FileExistsError):
                pass
    finally:
        stop.set()
        swapper.join()
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize(
    ("line", "limit", "expected"),
    [(None, None, "a\nb\nc\n"), (2, None, "b\nc\n"), (2, 1, "b\n"), (None, 2, "a\nb\n")],
)
def test_a_read_takes_its_line_window(line: int | None, limit: int | None, expected: str) -> None:
    assert window("a\nb\nc\n", line, limit) == expected
