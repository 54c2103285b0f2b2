"""The worker replaces `.git/index` with a directory. The recipe's last step installs the
index its own hash built as the real one: a `mv` onto a directory would put it inside,
leave git unable to read any index, and report success all the same.

The commit of the verified tree lands, and the loop then says the index could not be
brought to it (exit 40, the task not marked done) rather than leave a broken repository
behind a success."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.adversarial.helpers import loop
from tests.helpers.recipes import fail_message, make_project

pytestmark = pytest.mark.slow

WORKER = """
import os
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("good\\n")
os.remove(".git/index")
os.mkdir(".git/index")
"""


def test_an_index_made_a_directory_is_never_covered_by_a_success(tmp_path: Path) -> None:
    p = make_project(tmp_path, WORKER, sandbox={"mode": "off"})
    proc = loop(p)
    assert proc.returncode in (0, 40), fail_message(proc)
    index = p.root / ".git" / "index"
    if proc.returncode == 0:
        # Success only with a working index: git reads it and the tree is clean.
        assert index.is_file() and not os.path.isdir(index), fail_message(proc)
        assert p.git("status", "--porcelain") == ""
    else:
        assert "index could not be brought to the commit" in proc.stderr, fail_message(proc)
    assert p.git("show", "HEAD:src/value.txt") == "good\n"
