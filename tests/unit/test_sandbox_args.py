"""loopkit.boundary.sandbox's command line, read without starting it: what the checks' sandbox
binds where, and bwrap's own failure told from a command's."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopkit.boundary import sandbox


def _pairs(args: list[str], flag: str) -> list[tuple[str, str]]:
    return [(args[i + 1], args[i + 2]) for i, a in enumerate(args) if a == flag]


def test_the_room_is_bound_at_the_repository_path_with_its_git_folder_read_only(
    tmp_path: Path,
) -> None:
    repo, room, home = tmp_path / "repo", tmp_path / "room", tmp_path / "home"
    for p in (repo / ".git/objects", room / ".git", repo / "node_modules", home / ".ssh"):
        p.mkdir(parents=True)
    w = sandbox.wrap(
        ["true"],
        root=repo,
        source=room,
        git_dir=None,
        state_dir=None,
        env={"PATH": "/usr/bin"},
        bound=[(repo / ".git/objects", ".git/objects"), (repo / "node_modules", "node_modules")],
        home=home,
        hidden_extra=[repo / ".git", repo / ".git" / "worktrees"],
        bwrap="bwrap",
    )
    r = str(repo.resolve())
    assert (str(room.resolve()), r) in _pairs(w.argv, "--bind")
    ro = _pairs(w.argv, "--ro-bind")
    assert (str((room / ".git").resolve()), r + "/.git") in ro
    assert (str((repo / ".git/objects").resolve()), r + "/.git/objects") in ro
    assert (str((repo / "node_modules").resolve()), r + "/node_modules") in ro
    assert str(home.resolve()) in [w.argv[i + 1] for i, a in enumerate(w.argv) if a == "--tmpfs"]
    # The real .git is covered by the room's anyway: nothing of the real tree is hidden
    # over it (that would hide the room's own), and ~/.ssh is not shown, so not touched.
    assert r + "/.git" not in [w.argv[i + 1] for i, a in enumerate(w.argv) if a == "--tmpfs"]


def test_a_hidden_folder_inside_another_hidden_one_is_not_mounted_again(tmp_path: Path) -> None:
    repo, common = tmp_path / "wt", tmp_path / "main.git"
    (common / "worktrees/x").mkdir(parents=True)
    repo.mkdir()
    w = sandbox.wrap(
        ["true"],
        root=repo,
        git_dir=None,
        state_dir=None,
        env={},
        bwrap="bwrap",
        hidden_extra=[common, common / "worktrees/x"],
    )
    tmpfs = [w.argv[i + 1] for i, a in enumerate(w.argv) if a == "--tmpfs"]
    assert str(common.resolve()) in tmpfs and str((common / "worktrees/x").resolve()) not in tmpfs


def test_bwrap_refusing_to_start_is_told_from_a_failing_command() -> None:
    msg = b"bwrap: Can't mkdir parents for /x: Read-only file system\n"
    assert sandbox.failed_to_start(1, msg) == msg.decode().strip()
    assert sandbox.failed_to_start(1, b"FAILED test_x\n" + msg) is None
    assert sandbox.failed_to_start(2, msg) is None
    assert sandbox.failed_to_start(1, b"") is None


def test_probes_asked_at_once_start_one_sandbox_and_share_its_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # lk task begin probes in a thread while the round may ask too: one bwrap start,
    # one answer (a second probe would cost a sandbox start on the attempt's path).
    import threading

    real = sandbox.candidates()
    if not real:
        pytest.skip("no bwrap here")
    calls = tmp_path / "calls"
    fake = tmp_path / "bwrap"
    fake.write_text(f'#!/bin/sh\necho x >> "{calls}"\nsleep 0.3\nexec "{real[0]}" "$@"\n')
    fake.chmod(0o755)
    monkeypatch.setenv(sandbox.BWRAP_ENV, str(fake))
    monkeypatch.setattr(sandbox, "_PROBED", {})
    answers: list[sandbox.Probe] = []
    threads = [threading.Thread(target=lambda: answers.append(sandbox.probe())) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls.read_text().count("x") == 1
    assert len(answers) == 3 and len(set(answers)) == 1 and answers[0].available
