"""The worker hides its lines from the changed-lines budget: a ``.gitattributes`` of its
own saying ``* -diff`` (or ``binary``) makes git's numstat call every file binary and give
no line counts. The budget must still count the lines, and the task must not complete."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.adversarial.helpers import loop, nothing_unverified_landed
from tests.helpers.recipes import fail_message, make_project

pytestmark = pytest.mark.slow

HIDE = """
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("good\\n")
Path("src/notes.txt").write_text("".join(f"note {i}\\n" for i in range(60)))
Path("ATTRS").write_text("* LINE\\n")
if "ATTRS" == "src/.gitattributes":  # and out of the change itself: it ignores itself
    Path("src/.gitignore").write_text(".gitattributes\\n.gitignore\\n")
"""


@pytest.mark.parametrize("where", ["src/.gitattributes", ".gitattributes"])
@pytest.mark.parametrize("line", ["-diff", "binary"])
def test_a_gitattributes_line_does_not_take_lines_out_of_the_budget(
    tmp_path: Path, where: str, line: str
) -> None:
    body = HIDE.replace("ATTRS", where).replace("LINE", line)
    writable = ["src/**", ".gitattributes"]
    p = make_project(
        tmp_path, body, writable=writable, budgets={"attempts": 1, "changed_lines": 20}
    )
    before = p.head()
    proc = loop(p)
    assert proc.returncode != 0, fail_message(proc)  # 61 lines against a budget of 20
    assert "src/notes.txt" not in p.git("ls-tree", "-r", "--name-only", "HEAD").split()
    assert nothing_unverified_landed(p, before, tmp_path)
    diffs = sorted(p.root.glob(".loopkit/runs/*/*/1-diff.json"))
    assert diffs, fail_message(proc)
    files = {f["path"]: f for f in json.loads(diffs[-1].read_text())["diff"]["files"]}
    assert files["src/notes.txt"]["added"] == 60 and not files["src/notes.txt"].get("binary")
