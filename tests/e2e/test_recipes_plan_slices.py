"""recipes/phased-loop.sh over plan slices: the slices of an each: item land one by one,
each marked on its own line; a slice that over-runs its estimate is re-split (that slice
only) by the model, and its sub-slices land."""

from __future__ import annotations

import pytest

from tests.helpers.recipes import fail_message, make_project

pytestmark = pytest.mark.slow

# The slice fix-<stem> makes src/h/<stem>.txt say good; its own check holds it to that.
EACH_TASKS = """\
# Plan

- [ ] Fix every handler {#fix}
  each: src/h/*.txt
  budget: 10 lines / 1 file
  check: grep -qx good "src/h/${LOOPKIT_TASK_ID#fix-}.txt"
  end
"""

EACH_WORKER = """
stem = task.removeprefix("fix-")
Path(f"src/h/{stem}.txt").write_text("good\\n")
print(f"fixed src/h/{stem}.txt")
"""

CHECK = [{"name": "none-broken", "run": "! grep -rqx broken src/h", "timeout": 30}]


def test_each_slices_land_in_order_each_marked(tmp_path) -> None:
    files = {f"src/h/{s}.txt": "todo\n" for s in ("a", "b", "c")}
    p = make_project(tmp_path, EACH_WORKER, tasks=EACH_TASKS, files=files, checks=CHECK)
    proc = p.run("phased-loop.sh")
    assert proc.returncode == 0, fail_message(proc)
    for s in ("a", "b", "c"):
        assert (p.root / "src" / "h" / f"{s}.txt").read_text() == "good\n"
        assert p.task_line(f"fix-{s}").startswith("  - [x] Fix every handler (src/h/")
    assert p.task_line("fix").startswith("- [x]")  # done once its last slice is
    subjects = p.git("log", "--pretty=%s").splitlines()
    assert subjects[:6] == [
        "loopkit: mark fix-c done",
        "loopkit: fix-c: Fix every handler (src/h/c.txt)",
        "loopkit: mark fix-b done",
        "loopkit: fix-b: Fix every handler (src/h/b.txt)",
        "loopkit: mark fix-a done",
        "loopkit: fix-a: Fix every handler (src/h/a.txt)",
    ]
    assert p.worker_calls() == 3  # each slice once: none handed out twice
    assert p.git("status", "--porcelain") == ""
    # The item's own lines are kept as written; the slices sit before its end.
    text = (p.root / "TASKS.md").read_text()
    assert text.startswith(EACH_TASKS.replace("- [ ] Fix", "- [x] Fix").rsplit("  end\n", 1)[0])
    assert text.endswith("    end\n  end\n")
