"""recipes/parallel.sh: ready slices side by side in worktrees, each landed through the
merge queue -- verified on top of what landed before it."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from loopkit.decision import budget
from tests.helpers.recipes import fail_message, make_project

pytestmark = pytest.mark.slow

# set-a and set-b each raise one number from 1 to 2: green alone, red together. Whichever
# the queue returns is told so in its handoff and writes a note instead. add-c is disjoint.
# Every call records when it ran, to show the slices overlapped.
WORKER = """
(STATE / f"span-{n}").write_text(f"{time.time()} ")
time.sleep(3.0)
if "on top of what landed" in handoff:
    Path(f"src/{task}-note.txt").write_text("left as it was: the other one landed first\\n")
elif task in ("set-a", "set-b"):
    Path(f"src/{task[-1]}.txt").write_text("2\\n")
elif task == "add-c":
    Path("src/c.txt").write_text("c\\n")
elif task == "after-c":
    assert Path("src/c.txt").exists(), "a dependent starts only after its dependency landed"
    Path("src/d.txt").write_text("d\\n")
with open(STATE / f"span-{n}", "a") as f:
    f.write(f"{time.time()}")
"""
SUM = {"name": "sum", "run": "test $(( $(cat src/a.txt) + $(cat src/b.txt) )) -le 3", "timeout": 30}
TASKS = """\
- [ ] set a {#set-a}
  budget: 2 lines / 2 files
  scope: src/a.txt, src/set-a-note.txt
  end
- [ ] set b {#set-b}
  budget: 2 lines / 2 files
  scope: src/b.txt, src/set-b-note.txt
  end
- [ ] add c {#add-c}
  budget: 1 lines / 1 files
  scope: src/c.txt
  end
- [ ] after c {#after-c}
  budget: 1 lines / 1 files
  scope: src/d.txt
  depends: add-c
  end
"""


def test_three_slices_at_once_each_landed_verified_on_the_tip(tmp_path: Path) -> None:
    p = make_project(
        tmp_path, WORKER, files={"src/a.txt": "1\n", "src/b.txt": "1\n"}, tasks=TASKS, checks=[SUM]
    )
    start = p.head()
    proc = p.run(
        "parallel.sh", "--jobs", "3", env={"LK_WORKTREES": str(tmp_path / "wts")}, timeout=300
    )
    assert proc.returncode == 0, fail_message(proc)
    for task in ("set-a", "set-b", "add-c", "after-c"):
        assert p.task_line(task).startswith("- [x]"), p.task_line(task)
    # The slices ran side by side: calls overlap (the load of a shared machine staggers
    # their starts, so not all three need to).
    spans = sorted(
        tuple(map(float, (p.scratch / f"span-{n}").read_text().split()))
        for n in range(1, p.worker_calls() + 1)
    )
    overlapping = [(a, b) for a, b in itertools.pairwise(spans) if b[0] < a[1]]
    assert len(overlapping) >= 2, spans
    # Exactly one of set-a and set-b was returned by the queue, with the feedback.
    told = [n for n in range(1, p.worker_calls() + 1) if "on top of what landed" in p.handoff(n)]
    assert len(told) == 1, told
    entries = [
        json.loads(e.read_text()) for e in sorted((p.root / ".git/loopkit/queue/entries").iterdir())
    ]
    assert sorted(e["status"] for e in entries) == ["landed"] * 4 + ["returned"]
    # Nothing red ever landed: every commit since the start passes the check.
    for commit in p.git("rev-list", f"{start}..HEAD").split():
        a = int(p.git("show", f"{commit}:src/a.txt"))
        b = int(p.git("show", f"{commit}:src/b.txt"))
        assert a + b <= 3, commit
    assert p.git("status", "--porcelain", "--untracked-files=no") == ""
    # Every worktree is gone, each after its work was saved under a ref.
    assert len(p.git("worktree", "list").splitlines()) == 1  # the checkout alone
    assert list((tmp_path / "wts").iterdir()) == []


@pytest.mark.parametrize("mode", ["required", "off"])
def test_a_worker_cannot_write_into_a_sibling_worktree_or_the_checkout(
    tmp_path: Path, mode: str
) -> None:
    # A hostile slice plants a file in the checkout and in every sibling worktree it can
    # find (waiting for the victim's to appear), on its first call. In its sandbox the
    # worktrees and the checkout are hidden or read-only: nothing it writes reaches them.
    # Without one the plant does reach the checkout (the control: the saved plant shows it
    # got there) and the victim's worktree; the run finds it by its change time, refuses
    # every attempt it could belong to, and puts the checkout back.
    wts = tmp_path / "wts"
    body = f"""
import glob
Path("src").mkdir(exist_ok=True)
if task == "hostile" and not (STATE / "tried").exists():
    sib = []
    for _ in range(60):
        sib = [w for w in glob.glob({str(wts)!r} + "/victim-*") if os.path.isdir(w + "/src")]
        if sib:
            break
        time.sleep(0.05)
    targets = [*(s + "/src/planted.txt" for s in sib), {str(tmp_path / "repo")!r} + "/src/planted.txt"]
    for target in targets:
        try:
            Path(target).parent.mkdir(parents=True, exist_ok=True)
            Path(target).write_text("planted\\n")
        except OSError:
            pass
    (STATE / "tried").write_text(repr(targets))
    Path("src/h.txt").write_text("h\\n")
elif task == "hostile":
    Path("src/h.txt").write_text("h\\n")
else:
    time.sleep(3)
    (STATE / "victim-saw").write_text(repr(Path("src/planted.txt").exists()))
    Path("src/v.txt").write_text("v\\n")
"""
    tasks = "- [ ] hostile {#hostile}\n- [ ] victim {#victim}\n"
    p = make_project(
        tmp_path,
        body,
        tasks=tasks,
        files={"src/keep.txt": "keep\n"},
        checks=[{"name": "ok", "run": "true", "timeout": 30}],
        sandbox={"mode": mode, "writable": [str(tmp_path / "worker")]},
    )
    proc = p.run("parallel.sh", "--jobs", "2", env={"LK_WORKTREES": str(wts)}, timeout=300)
    assert (p.scratch / "tried").exists(), fail_message(proc)
    assert proc.returncode == 0, fail_message(proc)
    assert not (p.root / "src/planted.txt").exists()
    assert p.git("status", "--porcelain") == ""
    assert {"src/h.txt", "src/v.txt"} <= p.files()
    on_branch = p.git("log", "main", "--name-only", "--pretty=format:").split()
    assert "src/planted.txt" not in on_branch
    saved = [r for r in p.loopkit_refs() if r.startswith("refs/loopkit/planted/")]
    if mode == "required":
        assert (p.scratch / "victim-saw").read_text() == "False"
        assert "src/planted.txt" not in p.all_committed_paths() and saved == []
        return
    # The control: without a sandbox the write reached the checkout -- saved, not lost.
    (ref,) = saved
    assert p.git("show", f"{ref}:src/planted.txt") == "planted\n"
    assert "src/planted.txt" in proc.stderr and ref in proc.stderr
    # The hostile's attempt was refused (saved, never queued) and ran again.
    assert "hostile: refused, written by a process not its worker's" in proc.stderr
    assert "refs/loopkit/hostile/1" in p.loopkit_refs()
    assert p.git("show", "refs/loopkit/hostile/1:src/h.txt") == "h\n"
    # The victim's worktree got the plant too (when the hostile found it in time): that
    # attempt was refused as well, and its saved tree shows the plant it would have carried.
    entries = [json.loads(e.read_text()) for e in (p.root / ".git/loopkit/queue/entries").iterdir()]
    for e in entries:
        assert "src/planted.txt" not in p.git("ls-tree", "-r", "--name-only", e["commit"])
    if "refs/loopkit/victim/1" in p.loopkit_refs():
        assert "victim: refused" in proc.stderr
        assert "src/planted.txt" in p.files("refs/loopkit/victim/1")


def test_a_worker_that_edits_the_plan_changes_nothing_but_its_own_slice(tmp_path: Path) -> None:
    # A hostile slice marks every task of TASKS.md done (its sibling's included) and adds
    # one of its own, then does its work. The plan is a control file: read-only in its
    # sandbox, a violation if written; only the lander's mark commits ever change it.
    body = """
Path("src").mkdir(exist_ok=True)
if task == "hostile" and not (STATE / "plan-tried").exists():
    (STATE / "plan-tried").write_text("yes")
    try:
        text = Path("TASKS.md").read_text().replace("- [ ]", "- [x]")
        Path("TASKS.md").write_text(text + "- [ ] injected {#injected}\\n")
        (STATE / "plan-written").write_text("yes")
    except OSError:
        pass
    Path("src/h.txt").write_text("h\\n")
elif task == "hostile":
    Path("src/h.txt").write_text("h\\n")
else:
    time.sleep(2)
    Path("src/v.txt").write_text("v\\n")
"""
    tasks = "- [ ] hostile {#hostile}\n- [ ] victim {#victim}\n"
    p = make_project(
        tmp_path,
        body,
        tasks=tasks,
        files={"src/keep.txt": "keep\n"},
        checks=[{"name": "ok", "run": "true", "timeout": 30}],
    )
    start = p.head()
    proc = p.run("parallel.sh", "--jobs", "2", env={"LK_WORKTREES": str(tmp_path / "wts")})
    assert proc.returncode == 0, fail_message(proc)
    text = (p.root / "TASKS.md").read_text()
    assert "injected" not in text
    assert text == "- [x] hostile {#hostile}\n- [x] victim {#victim}\n"
    assert p.worker_calls() == 3  # the victim ran: it was never marked done by the hostile
    # The refused attempt was saved, plan edit and all, before its worktree went.
    refs = p.loopkit_refs()
    assert "refs/loopkit/hostile/1" in refs, refs
    saved = "refs/loopkit/hostile/1"
    assert "injected" in p.git("show", f"{saved}:TASKS.md")
    # Every commit that touched the plan is one of the lander's marks.
    for commit in p.git("rev-list", f"{start}..HEAD", "--", "TASKS.md").split():
        assert p.git("log", "-1", "--format=%s", commit).startswith("loopkit: mark "), commit


# An issue, the plan a model drafts from it (its first draft invalid, repaired once), and
# that plan's three slices run side by side and landed through the queue.
ISSUE = "Greet, part and thank the user: three messages, each in its own file under src/.\n"
SLICES = (("greet", "hello"), ("part", "goodbye"), ("thank", "thank you"))


def _draft(*, broken: bool) -> str:
    items = "".join(
        f"- [ ] Say {word} {{#{task}}}\n"
        "  issue: #7\n"
        "  budget: 1 lines / 1 files\n"
        f"  scope: src/{task}.txt\n"
        f"  files: +src/{task}.txt\n" + ("" if broken and task == "thank" else "  end\n")
        for task, word in SLICES
    )
    return f"The plan:\n\n```markdown\n{items}```\n"


def test_an_issue_drafted_into_three_slices_each_landed_through_the_queue(
    tmp_path: Path,
) -> None:
    from tests.helpers.agents import model_server
    from tests.helpers.judge import judge_env

    words = dict(SLICES)
    body = f"""
words = {words!r}
Path("src").mkdir(exist_ok=True)
time.sleep(1.0)
Path(f"src/{{task}}.txt").write_text(words[task] + "\\n")
"""
    check = {"name": "messages", "run": "test -d src", "timeout": 30}
    p = make_project(tmp_path, body, files={"src/.keep": ""}, checks=[check])
    (p.root / "issue.md").write_text(ISSUE)
    p.git("add", "issue.md")
    p.git("commit", "-q", "-m", "the issue")
    sessions = {"sessions": [[_draft(broken=True)], [_draft(broken=False)]], "exhausted": "end"}
    with model_server(sessions) as server:
        env = judge_env("claude", server, tmp_path)
        drafted = p.execute(
            ["lk-plan", "draft", "issue.md", "--provider", "claude", "--tasks", "TASKS.md"],
            env=env,
            timeout=180,
        )
    assert drafted.returncode == 0, fail_message(drafted)
    doc = json.loads(drafted.stdout)
    assert (doc["outcome"], doc["repairs"], doc["tasks"]) == ("repaired", 1, list(words))
    p.git("add", "TASKS.md")
    p.git("commit", "-q", "-m", "plan: three slices of issue #7")
    start = p.head()
    proc = p.run(
        "parallel.sh", "--jobs", "3", env={"LK_WORKTREES": str(tmp_path / "wts")}, timeout=300
    )
    assert proc.returncode == 0, fail_message(proc)
    for task in words:
        assert p.task_line(task).startswith("- [x]"), p.task_line(task)
    # The branch: one commit per slice holding exactly its file (each followed by the
    # lander's mark of its task), each verified on the tip it landed on.
    work = [
        c
        for c in p.git("rev-list", "--reverse", f"{start}..HEAD").split()
        if not p.git("log", "-1", "--format=%s", c).startswith("loopkit: mark ")
    ]
    changed = [
        set(p.git("diff-tree", "--no-commit-id", "--name-only", "-r", c).split()) for c in work
    ]
    assert sorted(map(sorted, changed)) == [[f"src/{t}.txt"] for t in sorted(words)], changed
    for task, word in SLICES:
        assert p.git("show", f"HEAD:src/{task}.txt") == word + "\n"
    entries = [json.loads(e.read_text()) for e in (p.root / ".git/loopkit/queue/entries").iterdir()]
    assert sorted((e["task"], e["status"]) for e in entries) == [
        (t, "landed") for t in sorted(words)
    ]
    # The ledger: the draft's record, and each slice's complete attempt.
    records = p.ledger()
    drafts = [r for r in records if r["type"] == "draft"]
    assert len(drafts) == 1 and drafts[0]["draft"]["outcome"] == "repaired", drafts
    complete = sorted(
        r["task_id"]
        for r in records
        if r["type"] == "attempt" and r["decision"]["outcome"] == "complete"
    )
    assert complete == sorted(words), complete
    assert p.git("status", "--porcelain", "--untracked-files=no") == ""


# Each worker asks the model once through lk-invoke's meter (100000 input tokens: $0.30 at
# the test's price table, a trusted cost) and works two seconds. Its share of the run's
# pool is its cost share, worker.max_cost_usd 0.5; the pool, $1.40, covers two at once.
POOLED_WORKER = """
import urllib.request
(STATE / f"span-{n}").write_text(f"{time.time()} ")
body = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 10,
                   "messages": [{"role": "user", "content": task}]}).encode()
req = urllib.request.Request(
    os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages", data=body,
    headers={"content-type": "application/json", "anthropic-version": "2023-06-01",
             "x-api-key": os.environ["ANTHROPIC_API_KEY"]})
urllib.request.urlopen(req, timeout=30).read()
time.sleep(2.0)
Path("src").mkdir(exist_ok=True)
Path(f"src/{task}.txt").write_text(task + "\\n")
with open(STATE / f"span-{n}", "a") as f:
    f.write(f"{time.time()}")
"""


def test_four_workers_share_a_pool_that_covers_two(tmp_path: Path) -> None:
    import yaml

    from tests.helpers.agents import model_server

    tasks = "".join(
        f"- [ ] slice {t} {{#{t}}}\n  budget: 1 lines / 1 files\n  scope: src/{t}.txt\n  end\n"
        for t in "abcd"
    )
    p = make_project(
        tmp_path,
        POOLED_WORKER,
        tasks=tasks,
        files={"src/.keep": ""},
        checks=[{"name": "ok", "run": "true", "timeout": 30}],
        pool={"cost_usd": 1.4},
    )
    contract = json.loads((p.root / "loop.yaml").read_text())
    contract["worker"].update(env_allow=["ANTHROPIC_API_KEY"], max_cost_usd=0.5)
    (p.root / "loop.yaml").write_text(json.dumps(contract, indent=2) + "\n")
    p.git("commit", "-qam", "the workers ask the model")
    prices = tmp_path / "prices.yaml"
    entry = {"input": 3.0, "output": 15.0, "as_of": "2026-01-01", "source": "test table"}
    prices.write_text(
        yaml.safe_dump({"models": {"claude-sonnet-4-5": {**entry, "hosts": ["127.0.0.1"]}}})
    )
    turn = {"text": "ok", "usage": {"input_tokens": 100000, "output_tokens": 0}}
    with model_server({"turns": [turn], "exhausted": "repeat_last"}) as server:
        env = {
            "LK_WORKTREES": str(tmp_path / "wts"),
            "ANTHROPIC_API_KEY": "sk-ant-test-key",
            "ANTHROPIC_BASE_URL": server.url,
            "LOOPKIT_PRICES": str(prices),
        }
        proc = p.run("parallel.sh", "--jobs", "4", env=env, timeout=400)
        asked = len(server.model_requests("anthropic"))
    assert proc.returncode == 0, fail_message(proc)
    assert asked == 4 and p.worker_calls() == 4
    for t in "abcd":
        assert p.task_line(t).startswith("- [x]"), p.task_line(t)
    # Never more than two workers at once, though four were allowed: the rest waited for
    # the pool (their admissions say so), and ran after.
    spans = [tuple(map(float, (p.scratch / f"span-{n}").read_text().split())) for n in range(1, 5)]
    at_once = max(sum(1 for a, b in spans if a <= t < b) for t, _ in spans)
    assert at_once <= 2, spans
    assert "for the run's pool" in proc.stderr, fail_message(proc)
    # The ledger: four shares reserved and settled; at no point more reserved and spent
    # than the pool holds; what was spent is the metered cost of four requests.
    records = p.ledger()
    pooled = [r for r in records if r["type"] == "pool"]
    assert sorted(r["pool"]["event"] for r in pooled) == ["reserve"] * 4 + ["settle"] * 4
    history = budget.empty_history()
    for r in pooled:
        history = budget.fold(history, r)
        held = sum(float(x["cost_usd"]) for x in history["reserved"])
        assert history["cost_usd"] + held <= 1.4 + 1e-9, history
    assert history["cost_usd"] == pytest.approx(1.2) and history["reserved"] == []
    replay = p.execute(["lk-decide", "--replay", str(p.state() / "ledger.jsonl")])
    assert replay.returncode == 0, fail_message(replay)
