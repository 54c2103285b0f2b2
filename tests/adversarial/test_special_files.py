"""FIFOs, sockets and device nodes in the work tree. Git holds none of them: it skips an
untracked FIFO, fails on a tracked path that became one, and opens one named
`.gitignore` or `.gitattributes` -- a FIFO nobody writes blocks it for ever, and with it
every stage that lets git look at the tree. A worker that leaves one must not hang or
break any stage, nor the commit or the park: it is a `special_file` violation, and the
attempt after it (the file gone) lands."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tests.adversarial.helpers import loop_within, nothing_unverified_landed
from tests.helpers.recipes import fail_message, make_project

pytestmark = pytest.mark.slow

WORKER = """
import socket
Path("src/value.txt").write_text("good\\n")
if not Path("src/other.txt").exists() and not Path("src/other.txt").is_symlink():
    Path("src/other.txt").write_text("o\\n")  # put back what the attempt before replaced
if n == 1 or FOREVER:
    where = "WHERE"
    if Path(where).exists():
        Path(where).unlink()
    if "KIND" == "fifo":
        os.mkfifo(where)
    else:
        socket.socket(socket.AF_UNIX).bind(where)
"""

CASES = {
    "gitignore-fifo": ("src/.gitignore", "fifo"),
    "top-gitattributes-fifo": (".gitattributes", "fifo"),
    "tracked-file-fifo": ("src/other.txt", "fifo"),
    "tracked-file-socket": ("src/other.txt", "socket"),
    "untracked-fifo": ("src/pipe", "fifo"),
}


def _project(tmp_path: Path, case: str, *, forever: bool):
    where, kind = CASES[case]
    body = WORKER.replace("WHERE", where).replace("KIND", kind)
    return make_project(
        tmp_path,
        body.replace("FOREVER", str(forever)),
        files={"src/value.txt": "bad\n", "src/other.txt": "o\n"},
        writable=["src/**", ".gitattributes"],
        budgets={"attempts": 3, "same_failure": 1},
    )


@pytest.mark.parametrize("case", list(CASES))
def test_a_special_file_is_a_violation_and_the_next_attempt_lands(
    tmp_path: Path, case: str
) -> None:
    p = _project(tmp_path, case, forever=False)
    before = p.head()
    proc = loop_within(p, 90)
    assert proc.returncode == 0, fail_message(proc)
    first = p.docs("fix-value", "diff")[0]["diff"]
    rules = {(v["rule"], v["path"]) for v in first["violations"]}
    assert ("special_file", CASES[case][0]) in rules, first["violations"]
    assert "special_file" in p.handoff(2)
    assert p.git("show", "HEAD:src/value.txt") == "good\n"
    assert p.git("show", "HEAD:src/other.txt") == "o\n"
    assert nothing_unverified_landed(p, before, tmp_path)
    here = p.root / CASES[case][0]
    assert not here.exists() or stat.S_ISREG(here.lstat().st_mode)


@pytest.mark.parametrize("case", ["gitignore-fifo", "tracked-file-fifo"])
def test_a_worker_that_keeps_leaving_one_is_parked_without_a_hang(
    tmp_path: Path, case: str
) -> None:
    p = _project(tmp_path, case, forever=True)
    before = p.head()
    proc = loop_within(p, 90)
    assert proc.returncode == 21, fail_message(proc)
    assert p.git("diff", "--name-only", before, "HEAD").split() in ([], ["MEMORY.md"])
    assert p.loopkit_refs(), "the attempt's tree was not saved"
    assert p.git("show", "HEAD:src/other.txt") == "o\n"


def test_a_socket_there_before_the_worker_is_left_alone(tmp_path: Path) -> None:
    """A person's own socket in the tree (a dev server's) is no violation and stays."""
    import socket
    import time

    p = make_project(
        tmp_path, 'Path("src/value.txt").write_text("good\\n")\n', files={"src/value.txt": "bad\n"}
    )
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(p.root / "dev.sock"))
    # Older than the 0.1 s margin lk-invoke gives the kernel's coarse file clock (a loop
    # that starts its worker sooner than that after the socket was made would take it
    # for the worker's: docs/evidence.md).
    time.sleep(0.2)
    try:
        proc = loop_within(p, 90)
    finally:
        server.close()
    assert proc.returncode == 0, fail_message(proc)
    assert stat.S_ISSOCK((p.root / "dev.sock").lstat().st_mode)
    assert not p.docs("fix-value", "diff")[0]["diff"]["violations"]


@pytest.mark.parametrize("where", ["src/.gitignore", ".gitattributes", "src/value.txt"])
def test_a_check_that_leaves_a_fifo_does_not_hang_the_verification(
    tmp_path: Path, where: str
) -> None:
    """The checks run the worker's code: one that leaves a FIFO where git opens it (or in
    place of a tracked file) in the clean room must not block the hash after the check."""
    run = f"grep -qx good src/value.txt && rm -f {where} && mkfifo {where}"
    p = make_project(
        tmp_path,
        'Path("src/value.txt").write_text("good\\n")\n',
        files={"src/value.txt": "bad\n"},
        checks=[{"name": "value", "run": run, "timeout": 30}],
    )
    proc = loop_within(p, 90)
    assert "internal error" not in proc.stderr, fail_message(proc)
    verified = p.docs("fix-value", "verify")[0]["verify"]
    if where == "src/value.txt":  # the check deleted a file of the tree: not passed
        assert proc.returncode != 0 and not verified["passed"], fail_message(proc)
        assert "src/value.txt" in verified.get("changed_by_checks", []), verified
    else:
        assert proc.returncode == 0, fail_message(proc)
        assert p.git("show", "HEAD:src/value.txt") == "good\n"
    assert stat.S_ISREG((p.root / "src/value.txt").lstat().st_mode) or where != "src/value.txt"


def test_a_check_that_hides_fifos_by_setting_folder_times_back_does_not_hang(
    tmp_path: Path,
) -> None:
    """The clean room lists only the folders whose change time moved. A check that plants
    FIFOs where git opens them -- in a deep folder of the tree, and in a folder it made
    itself (each check starts from the verified tree: what the check before it made is
    gone) -- and sets those folders' modification times back must still have them found:
    a change time cannot be set back, and a folder made by a check is known from then on."""
    make_cache = "mkdir -p cache && echo x > cache/file && sleep 0.3"
    plant = (
        f"{make_cache} && grep -qx good src/value.txt && "
        "mkfifo cache/.gitignore src/deep/.gitignore && "
        "touch -m -d 2000-01-01 cache src/deep src"
    )
    p = make_project(
        tmp_path,
        'Path("src/value.txt").write_text("good\\n")\n',
        files={"src/value.txt": "bad\n", "src/deep/keep.txt": "keep\n"},
        checks=[
            {"name": "cache", "run": make_cache, "timeout": 30},
            {"name": "plant", "run": plant, "timeout": 30},
        ],
    )
    proc = loop_within(p, 90)
    assert proc.returncode == 0, fail_message(proc)
    verified = p.docs("fix-value", "verify")[0]["verify"]
    assert verified["passed"] and [c["passed"] for c in verified["checks"]] == [True, True]
    assert p.git("show", "HEAD:src/value.txt") == "good\n"
