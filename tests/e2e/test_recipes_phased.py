"""recipes/phased-loop.sh end to end over a TASKS.md: tasks in order, dependencies, parks,
the checklist only advancing past commits that landed, `lk report` at the end."""

from __future__ import annotations

import pytest

from tests.helpers.recipes import fail_message, make_project, user_commits_during

pytestmark = pytest.mark.slow

# Every src/*.txt must say "good" (an empty src/ fails: the glob stays literal).
CHECK = [
    {
        "name": "all-good",
        "run": 'for f in src/*.txt; do grep -qx good "$f" || exit 1; done',
        "timeout": 30,
    }
]

# Writes src/<task>.txt; the task "broken" always crashes (a park).
WORKER = """
if task == "broken":
    Path("src").mkdir(exist_ok=True)
    Path("src/broken.txt").write_text("half\\n")
    Path("src/debris.tmp").write_text("x\\n")
    sys.exit(4)
Path("src").mkdir(exist_ok=True)
Path(f"src/{task}.txt").write_text("good\\n")
print(f"wrote src/{task}.txt")
"""


def plan(id_: str, text: str, depends: str | None = None, mark: str = " ") -> str:
    dep = f"  depends: {depends}\n" if depends else ""
    return f"- [{mark}] {text} {{#{id_}}}\n  budget: 10 lines / 2 files\n  scope: src/{id_}.txt, src/debris.tmp\n{dep}  end\n"


def test_runs_every_ready_task_in_order_and_reports(tmp_path) -> None:
    tasks = "# Tasks\n\n" + plan("alpha", "First") + plan("beta", "Second", depends="alpha")
    p = make_project(tmp_path, WORKER, tasks=tasks, checks=CHECK)
    proc = p.run("phased-loop.sh")
    assert proc.returncode == 0, fail_message(proc)
    assert p.task_line("alpha").startswith("- [x]")
    assert p.task_line("beta").startswith("- [x]")
    assert {"src/alpha.txt", "src/beta.txt"} <= p.files()
    subjects = p.git("log", "--pretty=%s").splitlines()
    # Each task: its commit, then the commit of its mark -- the mark never comes first.
    assert subjects[:4] == [
        "loopkit: mark beta done",
        "loopkit: beta: Second",
        "loopkit: mark alpha done",
        "loopkit: alpha: First",
    ]
    assert p.git("status", "--porcelain") == ""
    # The run ends with lk report (a table naming both tasks).
    assert "alpha" in proc.stdout and "beta" in proc.stdout


def test_a_parked_task_blocks_its_dependents_and_others_go_on(tmp_path) -> None:
    tasks = (
        plan("broken", "Will crash")
        + plan("needs-broken", "Depends on the crash", depends="broken")
        + plan("gamma", "Independent")
    )
    p = make_project(tmp_path, WORKER, tasks=tasks, checks=CHECK)
    proc = p.run("phased-loop.sh", "TASKS.md")
    assert proc.returncode == 21, fail_message(proc)
    assert p.task_line("broken").startswith("- [!]")
    assert p.task_line("needs-broken").startswith("- [ ]")
    assert p.task_line("gamma").startswith("- [x]")
    assert p.run_dirs("needs-broken") == []  # never started
    # The park left nothing behind for gamma: no debris, no half-written file.
    assert not (p.root / "src" / "debris.tmp").exists()
    assert not (p.root / "src" / "broken.txt").exists()
    assert "src/gamma.txt" in p.files()
    assert any(r.startswith("refs/loopkit/broken/") for r in p.loopkit_refs())
    memory = (p.root / "MEMORY.md").read_text()
    assert "parked: broken" in memory
    # The park record (mark + retrospective) is committed, so the next revert keeps it.
    park_commit = p.git("log", "--pretty=%s", "--grep", "park broken").strip()
    assert park_commit == "loopkit: park broken (failed)"
    assert p.git("status", "--porcelain") == ""


def test_regression_6_the_checklist_never_advances_past_a_commit_that_did_not_land(
    tmp_path,
) -> None:
    # Naive variants caught: `git commit ... ; lk-plan mark ... done` (the mark does not
    # check that the commit worked), and a phased loop that goes on to the next task after
    # loop.sh failed to commit (the article's "five phases built fine and never got
    # committed; the checklist advanced anyway"). Here alpha's commit is refused: the user
    # committed on the branch while its checks ran.
    tasks = plan("alpha", "First") + plan("beta", "Second")
    p = make_project(tmp_path, WORKER, tasks=tasks, checks=CHECK)
    before = p.head()
    user = user_commits_during(p, task="alpha")
    try:
        proc = p.run("phased-loop.sh")
        user.wait(timeout=60)
    finally:
        user.kill()
    assert proc.returncode == 40, fail_message(proc)
    assert p.git("log", "-1", "--pretty=%s").strip() == "the user's commit"
    assert p.git("rev-parse", "HEAD~1").strip() == before
    assert p.task_line("alpha").startswith("- [ ]")
    assert p.task_line("beta").startswith("- [ ]")
    assert p.worker_calls() == 1  # beta never started
    assert p.run_dirs("beta") == []


@pytest.mark.longest
def test_with_the_lk_verify_hook_installed_parks_are_recorded_and_green_committed(
    tmp_path,
) -> None:
    # The pre-commit snippet and the ratchet together: the snippet guards the user's own
    # commits; the recipe's commits run no hook (a worker could plant one) -- the contract's
    # criteria, run on exactly the committed tree, are their gate. A hook must not block a
    # park's record either: at a park the checks are red by definition.
    import shutil
    import subprocess

    from tests.helpers.recipes import BIN, RECIPES, recipe_env

    tasks = plan("broken", "Will crash") + plan("gamma", "Independent")
    p = make_project(tmp_path, WORKER, tasks=tasks, checks=CHECK)
    shutil.copy(RECIPES / "pre-commit-config.yaml", p.root / ".pre-commit-config.yaml")
    p.git("add", ".pre-commit-config.yaml")
    p.git("commit", "-qm", "hooks", "--no-verify")
    env = {"PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")}
    subprocess.run(
        [str(BIN / "pre-commit"), "install"],
        cwd=p.root,
        env=recipe_env(env),
        check=True,
        capture_output=True,
    )
    proc = p.run("phased-loop.sh", env=env)
    assert proc.returncode == 21, fail_message(proc)  # one task parked
    assert p.task_line("broken").startswith("- [!]")
    assert p.task_line("gamma").startswith("- [x]")
    assert "loopkit acceptance checks" not in proc.stdout + proc.stderr  # no hook ran
    subjects = p.git("log", "--pretty=%s").splitlines()
    assert "loopkit: park broken (failed)" in subjects
    assert "loopkit: gamma: Independent" in subjects
    assert p.git("status", "--porcelain") == ""


def test_lk_cancel_stops_the_whole_run_at_the_next_boundary(tmp_path) -> None:
    # Naive variant caught: treating 30 as "park and go on to the next task".
    worker = """
import subprocess
Path("src").mkdir(exist_ok=True)
Path(f"src/{task}.txt").write_text("bad\\n")
subprocess.run(["lk", "cancel", "--reason", "going home"], check=True)
"""
    tasks = plan("alpha", "First") + plan("beta", "Second")
    # The worker stands in for a person who cancels meanwhile (no sandbox: in one it could
    # not reach the state folder).
    p = make_project(tmp_path, worker, tasks=tasks, checks=CHECK, sandbox={"mode": "off"})
    proc = p.run("phased-loop.sh")
    assert proc.returncode == 30, fail_message(proc)
    assert p.worker_calls() == 1
    assert p.task_line("alpha").startswith("- [ ]")  # neither done nor parked
    assert p.task_line("beta").startswith("- [ ]")
    assert (p.root / "src" / "alpha.txt").read_text() == "bad\n"  # left as it was
    assert "loop health" in proc.stdout  # the report still closes the run


def test_a_rerun_with_a_parked_task_left_is_not_done(tmp_path) -> None:
    # Nothing is ready on the rerun (the parked task is not open), yet the checklist is
    # not done: the rerun must say so as the first run did.
    tasks = plan("broken", "Will crash") + plan("gamma", "Independent")
    p = make_project(tmp_path, WORKER, tasks=tasks, checks=CHECK)
    first = p.run("phased-loop.sh")
    assert first.returncode == 21, fail_message(first)
    again = p.run("phased-loop.sh")
    assert again.returncode == 21, fail_message(again)
    assert "1 parked item(s) left" in again.stderr
    calls = p.worker_calls()
    assert p.run("phased-loop.sh").returncode == 21 and p.worker_calls() == calls


def test_a_parked_task_set_back_by_hand_gets_a_new_budget_epoch(tmp_path) -> None:
    # The README: reword the task, "set it back to `- [ ]`, and run the recipe again".
    # The worker gets it right only once the person has helped (a file in its scratch).
    worker = """
    Path("src").mkdir(exist_ok=True)
    helped = (Path(sys.argv[0]).parent / "helped").exists()
    Path("src/fix.txt").write_text("good\\n" if helped else "bad\\n")
    """
    tasks = "# Tasks\n\n" + plan("fix", "Fix it")
    p = make_project(tmp_path, worker, tasks=tasks, checks=CHECK, budgets={"attempts": 1})
    proc = p.run("phased-loop.sh")
    assert proc.returncode == 21, fail_message(proc)  # parked: the attempts are spent
    assert p.task_line("fix").startswith("- [!]")
    # the recipe's probe for a re-split is not the person's error
    assert "error:" not in proc.stderr, proc.stderr
    # The person helps, sets the line back by hand (no lk-plan mark) and commits.
    (p.scratch / "helped").write_text("")
    text = (p.root / "TASKS.md").read_text().replace("- [!] Fix it", "- [ ] Fix it")
    (p.root / "TASKS.md").write_text(text)
    p.git("commit", "-qam", "reopen fix")
    proc = p.run("phased-loop.sh")
    assert proc.returncode == 0, fail_message(proc)
    assert p.task_line("fix").startswith("- [x]")
    assert "set back to '- [ ]' after its park: a new budget epoch (1)" in proc.stderr
    import json

    ledger = [
        json.loads(x) for x in (p.root / ".loopkit" / "ledger.jsonl").read_text().splitlines()
    ]
    (reopen,) = [r for r in ledger if r.get("type") == "reopen"]
    assert reopen["trigger"]["source"] == "TASKS.md: set back to '- [ ]'"
    # Run again: the task is done, nothing is reopened twice.
    assert p.run("phased-loop.sh").returncode == 0
    ledger = (p.root / ".loopkit" / "ledger.jsonl").read_text()
    assert ledger.count('"type":"reopen"') + ledger.count('"type": "reopen"') == 1
