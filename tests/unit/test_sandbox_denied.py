"""``sandbox.denied``: what the sandboxed worker may read or write, as it will meet it --
as root with every capability dropped, as anyone else with the user's own rights. The
loop's own view (root's ``os.access``) would say yes to a checkout another user owns."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from loopkit.boundary import sandbox

NOBODY = 65534
REPO = Path(__file__).resolve().parents[2]
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="owning files as another user needs root")


@pytest.fixture(name="shared")
def shared_fixture() -> Iterator[Path]:
    """A folder every user can reach (tmp_path's parents are private to their owner)."""
    folder = Path(tempfile.mkdtemp(prefix="loopkit-denied-", dir="/tmp"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def made(parent: Path, name: str, *, uid: int, mode: int) -> Path:
    path = parent / name
    path.mkdir()
    os.chown(path, uid, -1)
    path.chmod(mode)
    return path


@root_only
def test_root_is_judged_by_the_owner_and_mode_not_by_its_capabilities(shared: Path) -> None:
    theirs = made(shared, "theirs", uid=NOBODY, mode=0o755)
    why = sandbox.denied(theirs, os.W_OK)
    assert why is not None and "uid 65534" in why and "cannot write" in why
    assert sandbox.denied(theirs, os.R_OK) is None
    assert sandbox.denied(made(shared, "open", uid=NOBODY, mode=0o777), os.W_OK) is None
    assert sandbox.denied(made(shared, "mine", uid=0, mode=0o755), os.W_OK) is None
    # Root's own folder without its write bit: the capability-less worker cannot write it.
    assert sandbox.denied(made(shared, "sealed", uid=0, mode=0o555), os.W_OK) is not None
    assert sandbox.denied(made(shared, "private", uid=NOBODY, mode=0o700), os.R_OK) is not None
    assert sandbox.denied(shared / "missing", os.R_OK) is not None


@root_only
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv(1) is not installed")
def test_another_user_is_judged_by_its_own_rights(shared: Path) -> None:
    """As ``nobody``: root's folder is not writable, a folder open to all is."""
    made(shared, "roots", uid=0, mode=0o755)
    made(shared, "open", uid=0, mode=0o777)
    # loopkit where nobody can read it (the checkout's own parents may be private).
    source = shared / "source"
    shutil.copytree(
        REPO / "loopkit", source / "loopkit", ignore=shutil.ignore_patterns("__pycache__")
    )
    for folder, _, files in os.walk(source):
        os.chmod(folder, 0o755)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o644)
    code = (
        f"import os, sys; sys.path.insert(0, {str(source)!r})\n"
        "from loopkit.boundary.sandbox import denied\n"
        f"print(denied({str(shared / 'roots')!r}, os.W_OK))\n"
        f"print(denied({str(shared / 'open')!r}, os.W_OK))\n"
    )
    python = shutil.which("python3", path="/usr/bin:/bin")
    if python is None:
        pytest.skip("no system python3 that nobody can run")
    done = subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", python, "-I"],
        input=code,
        capture_output=True,
        text=True,
        cwd=shared,
        env={"PATH": "/usr/bin:/bin"},
    )
    if done.returncode != 0 and "No module named" in done.stderr:
        pytest.skip(f"loopkit is not importable by nobody here: {done.stderr.strip()[-200:]}")
    assert done.returncode == 0, done.stderr
    roots, opened = done.stdout.splitlines()
    assert "uid 65534 cannot write" in roots and "owned by uid 0" in roots
    assert opened == "None"
