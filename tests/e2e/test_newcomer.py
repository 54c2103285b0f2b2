"""The newcomer's commands: lk init scaffolds a project that passes its own checks,
lk recipes finds or copies the loops, lk show tells one task's story."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.helpers.recipes import BIN, fail_message, make_project, recipe_env


def lk(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "lk"), *args], cwd=cwd, capture_output=True, text=True,
                          env=recipe_env(), timeout=60)


@pytest.mark.parametrize(
    ("files", "check"),
    [
        ({"Makefile": "test:\n\ttrue\n", "src/a.c": ""}, "make test"),
        ({"package.json": '{"scripts": {"test": "node t.js"}}', "lib/x.js": ""}, "npm test"),
        ({"Cargo.toml": "[package]\nname='x'\n", "src/main.rs": ""}, "cargo test"),
        ({"go.mod": "module x\n", "cmd/main.go": ""}, "go test ./..."),
        ({"pyproject.toml": "[project]\nname='x'\n", "mypkg/__init__.py": "",
          "tests/test_x.py": ""}, "python -m pytest -q"),
    ],
    ids=["make", "npm", "cargo", "go", "pytest"],
)
def test_init_writes_a_contract_and_plan_that_check(git_repo: Path, files: dict[str, str],
                                                    check: str) -> None:
    for rel, text in files.items():
        (git_repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (git_repo / rel).write_text(text)
    done = lk(git_repo, "init")
    assert done.returncode == 0, done.stderr
    assert check in done.stderr
    for name in ("loop.yaml", "TASKS.md", "MEMORY.md", "AGENTS.md"):
        assert (git_repo / name).is_file(), name
    contract = lk(git_repo, "plan", "check", "loop.yaml")
    assert contract.returncode == 0, contract.stdout + contract.stderr
    assert json.loads(contract.stdout).get("warnings") is None  # no glob covers loop.yaml
    tasks = lk(git_repo, "plan", "check", "TASKS.md")
    assert tasks.returncode == 0, tasks.stdout + tasks.stderr
    assert f"run: {json.dumps(check)}" in (git_repo / "loop.yaml").read_text()
    assert "tests" in (git_repo / "AGENTS.md").read_text()


def test_init_never_overwrites_without_force(git_repo: Path) -> None:
    (git_repo / "loop.yaml").write_text("mine\n")
    done = lk(git_repo, "init")
    assert done.returncode == 0
    assert (git_repo / "loop.yaml").read_text() == "mine\n"
    assert "left as it is" in done.stderr
    assert lk(git_repo, "init", "--force").returncode == 0
    assert (git_repo / "loop.yaml").read_text() != "mine\n"


def test_recipes_prints_the_folder_and_copies_it_with_run_bits(tmp_path: Path) -> None:
    where = Path(lk(tmp_path, "recipes").stdout.strip())
    assert (where / "loop.sh").is_file()
    done = lk(tmp_path, "recipes", "--copy", str(tmp_path / "mine"))
    assert done.returncode == 0, done.stderr
    assert os.access(tmp_path / "mine" / "loop.sh", os.X_OK)
    assert (tmp_path / "mine" / "log.sh").is_file()
    again = lk(tmp_path, "recipes", "--copy", str(tmp_path / "mine"))
    assert again.returncode == 3 and "not an empty folder" in again.stderr


CRASH = """
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("half\\n")
sys.exit(3)
"""


def test_show_tells_a_parked_tasks_story(tmp_path: Path) -> None:
    p = make_project(tmp_path, CRASH)
    proc = p.run("loop.sh", "--contract", "loop.yaml", "--task-id", "fix-value", "--task", "F")
    assert proc.returncode == 21, fail_message(proc)
    text = lk(p.root, "show", "fix-value")
    assert text.returncode == 0, text.stderr
    assert "#1 retry (crashed)" in text.stdout and "failed (no_progress)" in text.stdout
    assert "git checkout refs/loopkit/fix-value/" in text.stdout
    assert "parked: fix-value" in text.stdout  # the memory file's retrospective
    story = json.loads(lk(p.root, "show", "fix-value", "--json").stdout)
    ref = story["saved"][0]["ref"]
    # The restore command really brings the attempt back.
    subprocess.run(story["saved"][0]["restore"], shell=True, cwd=p.root, check=True)
    assert (p.root / "src/value.txt").read_text() == "half\n"
    assert ref.startswith("refs/loopkit/fix-value/")
    assert lk(p.root, "show", "nothing-like-it").returncode == 1


def test_a_source_checkout_runs_from_bin_without_installing(tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["PATH"] = f"{repo / 'bin'}{os.pathsep}{env['PATH']}"
    env["LK_PYTHON"] = str(BIN / "python")  # an interpreter with the dependencies
    for name in ("lk", "lk-plan", "lk-invoke", "lk-diff", "lk-verify", "lk-judge", "lk-decide",
                 "lk-model-server"):
        done = subprocess.run([name, "--help"], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, (name, done.stderr)
        assert f"Usage: {name}" in done.stdout, (name, done.stdout[:200])


def test_status_follows_a_running_loop_from_the_state_folder(tmp_path: Path) -> None:
    import time

    body = """
import time
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("good\\n")
(STATE / "started").write_text("1")
time.sleep(4)
"""
    p = make_project(tmp_path, body)
    assert lk(p.root, "status").returncode == 1  # nothing ran yet
    loop = subprocess.Popen(
        [str(Path(__file__).resolve().parents[2] / "recipes" / "loop.sh"), "--contract",
         "loop.yaml", "--task-id", "fix-value", "--task", "Fix"],
        cwd=p.root, env=recipe_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while not (p.scratch / "started").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        now = json.loads(lk(p.root, "status", "--json").stdout)
        assert now["task"] == "fix-value" and now["round"] == 1
        assert now["running"] is True and now["pid"]  # the loop's lock, its process alive
        assert now["last_document"] == "admit" and now["stage"] == "invoke"
        text = lk(p.root, "status").stdout
        assert text.startswith("fix-value:") and "round 1" in text
    finally:
        assert loop.wait(timeout=60) == 0
    done = json.loads(lk(p.root, "status", "--json").stdout)
    assert done["running"] is False and done["last_document"] == "decide"
    assert done["spent"]["attempts"] == 1


def test_notify_runs_on_complete_and_park_with_the_document_on_stdin(tmp_path: Path) -> None:
    good = """
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("good\\n" if task == "good" else "bad\\n")
"""
    p = make_project(tmp_path, good, budgets={"attempts": 1})
    log = tmp_path / "notified.jsonl"
    notify = f'printf "%s " "$LK_EVENT" >> {log}; python3 -c "import json,sys; print(json.load(sys.stdin)[\\"decision\\"][\\"outcome\\"])" >> {log}'
    ok = p.run("loop.sh", "--contract", "loop.yaml", "--task-id", "good", "--task", "g",
               "--notify", notify)
    assert ok.returncode == 0, fail_message(ok)
    bad = p.run("loop.sh", "--contract", "loop.yaml", "--task-id", "bad", "--task", "b",
                env={"LK_NOTIFY": notify})
    assert bad.returncode in (21, 22), fail_message(bad)
    lines = log.read_text().splitlines()
    assert lines[0] == "complete complete"
    assert lines[1].startswith("parked ")
    # A failing notify command never stops the loop.
    again = p.run("loop.sh", "--contract", "loop.yaml", "--task-id", "good2", "--task", "g",
                  "--notify", "exit 3")
    assert "the notify command failed" in again.stderr
