"""recipes/phased-loop.sh over plan slices: the slices of an each: item land one by one,
each marked on its own line; a slice that over-runs its estimate is re-split (that slice
only) by the model, and its sub-slices land."""

from __future__ import annotations

import json

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


# "rows" is estimated at 4 lines and writes 12 (3x): over its estimate on every attempt.
# Its sub-slices stay inside theirs; so does "footer".
SPLIT_TASKS = """\
# Plan

- [ ] Grow the table {#grow}
  issue: #9
  - [ ] Rows {#rows}
    budget: 4 lines / 2 files
    scope: src/rows/
    files: +src/rows/a.txt, +src/rows/b.txt
    end
  - [ ] Footer {#footer}
    budget: 4 lines / 1 file
    scope: src/footer.txt
    files: +src/footer.txt
    end
  end
"""

SPLIT_WORKER = """
Path("src/rows").mkdir(parents=True, exist_ok=True)
if task == "rows":
    Path("src/rows/a.txt").write_text("".join(f"row {i}\\n" for i in range(12)))
elif task.startswith("rows-"):
    Path(f"src/rows/{task[5:]}.txt").write_text("row\\nrow\\nrow\\n")
else:
    Path("src/footer.txt").write_text("total\\n")
"""

SPLIT_ANSWER = """\
```markdown
- [ ] Rows of table a {#rows-a}
  budget: 6 lines / 1 file
  scope: src/rows/a.txt
  files: +src/rows/a.txt
  end
- [ ] Rows of table b {#rows-b}
  budget: 6 lines / 1 file
  scope: src/rows/b.txt
  files: +src/rows/b.txt
  end
```
"""


@pytest.mark.longest
def test_a_slice_over_its_estimate_is_re_split_alone_and_its_slices_land(tmp_path) -> None:
    from tests.helpers.agents import model_server
    from tests.helpers.judge import judge_env

    p = make_project(
        tmp_path,
        SPLIT_WORKER,
        tasks=SPLIT_TASKS,
        checks=[{"name": "ok", "run": "true", "timeout": 30}],
        judge={"provider": "claude"},
    )
    log = tmp_path / "requests.jsonl"
    answers = {"sessions": [[SPLIT_ANSWER]], "exhausted": "end"}
    with model_server(answers, log=log) as server:
        env = judge_env("claude", server, tmp_path)
        env["LOOPKIT_VALIDATE_OUTPUT"] = "0"
        proc = p.run("phased-loop.sh", env=env, timeout=600)
    assert proc.returncode == 0, fail_message(proc)
    # The split, as committed: the rows slice reopened, its sub-slices before its end, and
    # every other line -- the parent, the footer slice -- byte for byte as it was.
    sha = p.git("log", "--format=%H", "--grep", "loopkit: re-split rows").split()
    assert len(sha) == 1, p.git("log", "--pretty=%s")
    assert p.git("show", "--name-only", "--format=", sha[0]).split() == ["TASKS.md"]
    made = json.loads((p.state() / "runs" / "split-rows.json").read_text())
    assert (made["split"], made["commit"], made["tasks"]) == ("rows", sha[0], ["rows-a", "rows-b"])
    split = p.git("show", f"{sha[0]}:TASKS.md")
    parked = p.git("show", f"{sha[0]}~1:TASKS.md")
    assert "  - [!] Rows {#rows}" in parked
    before, after = parked.splitlines(), split.splitlines()
    at = before.index("    end")  # the rows slice's end
    assert after[:at] == [
        line.replace("[!] Rows {#rows} (parked", "[ ] Rows {#rows} (parked").split(" (parked")[0]
        if "{#rows}" in line
        else line
        for line in before[:at]
    ]
    assert after[at + 10 :] == before[at:]
    assert after[at] == "    - [ ] Rows of table a {#rows-a}"
    # The sub-slices landed in order, then the footer; the rows slice and the item are
    # done with their last slices.
    subjects = p.git("log", "--reverse", "--pretty=%s").splitlines()
    landed = [s for s in subjects if s.startswith(("loopkit: rows", "loopkit: footer"))]
    assert landed == [
        "loopkit: rows-a: Rows of table a",
        "loopkit: rows-b: Rows of table b",
        "loopkit: footer: Footer",
    ]
    for task in ("rows-a", "rows-b", "rows", "footer", "grow"):
        assert "[x]" in p.task_line(task), task
    assert (p.root / "src" / "rows" / "b.txt").read_text() == "row\nrow\nrow\n"
    # Every attempt's record carries the estimate beside the diff; the report shows both.
    ledger = p.ledger()
    rows = [r for r in ledger if r.get("task_id") == "rows" and r.get("estimate")]
    assert rows and all(r["estimate"]["within"] is False for r in rows)
    assert rows[0]["estimate"] == {
        "lines": 4,
        "files": 2,
        "actual_lines": 12,
        "actual_files": 1,
        "lines_ratio": 3.0,
        "files_ratio": 0.5,
        "within": False,
    }
    assert "estimates: 100% of 3 landed plan tasks within their estimate" in proc.stdout
    assert "1 re-split" in proc.stdout
    asked = [json.dumps(json.loads(line).get("body")) for line in log.read_text().splitlines()]
    assert any("the diff: 12 lines / 1 files" in a for a in asked)


@pytest.mark.longest
def test_parallel_re_splits_a_slice_over_its_estimate_and_lands_its_slices(tmp_path) -> None:
    from tests.helpers.agents import model_server
    from tests.helpers.judge import judge_env

    p = make_project(
        tmp_path,
        SPLIT_WORKER,
        tasks=SPLIT_TASKS,
        checks=[{"name": "ok", "run": "true", "timeout": 30}],
        judge={"provider": "claude"},
    )
    answers = {"sessions": [[SPLIT_ANSWER]], "exhausted": "end"}
    with model_server(answers) as server:
        env = judge_env("claude", server, tmp_path)
        env["LOOPKIT_VALIDATE_OUTPUT"] = "0"
        env["LK_WORKTREES"] = str(tmp_path / "worktrees")
        proc = p.run("parallel.sh", "--jobs", "1", env=env, timeout=600)
    assert proc.returncode == 0, fail_message(proc)
    assert "rows: over its estimate: re-split" in proc.stderr
    assert "landed, 1 re-split, 0 parked, 0 stopped" in proc.stderr  # not counted as landed
    subjects = p.git("log", "--reverse", "--pretty=%s").splitlines()
    assert "loopkit: re-split rows" in subjects
    for task in ("rows-a", "rows-b", "rows", "footer", "grow"):
        assert "[x]" in p.task_line(task), task
    assert (p.root / "src" / "rows" / "a.txt").read_text() == "row\nrow\nrow\n"
    rows = [r for r in p.ledger() if r.get("task_id") == "rows" and r.get("estimate")]
    assert len(rows) == 1 and rows[0]["estimate"]["within"] is False  # split at once
    assert p.git("status", "--porcelain") == ""
