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
    return subprocess.run(
        [str(BIN / "lk"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=recipe_env(),
        timeout=60,
    )


@pytest.mark.parametrize(
    ("files", "check"),
    [
        ({"Makefile": "test:\n\ttrue\n", "src/a.c": ""}, "make test"),
        ({"package.json": '{"scripts": {"test": "node t.js"}}', "lib/x.js": ""}, "npm test"),
        ({"Cargo.toml": "[package]\nname='x'\n", "src/main.rs": ""}, "cargo test"),
        ({"go.mod": "module x\n", "cmd/main.go": ""}, "go test ./..."),
        (
            {
                "pyproject.toml": "[project]\nname='x'\n",
                "mypkg/__init__.py": "",
                "tests/test_x.py": "",
            },
            "python -m pytest -q",
        ),
    ],
    ids=["make", "npm", "cargo", "go", "pytest"],
)
def test_init_writes_a_contract_and_plan_that_check(
    git_repo: Path, files: dict[str, str], check: str
) -> None:
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
    warnings = json.loads(contract.stdout).get("warnings") or []
    # No glob covers loop.yaml; the only warning may be a runner this machine lacks.
    import shutil

    program = check.split()[0]
    found = shutil.which(program, path=recipe_env()["PATH"])
    expected = [] if found else [f"`{program}` is not on PATH"]
    assert [w["message"].split(":")[0] for w in warnings] == expected, warnings
    assert (f"`{program}` is not on PATH" in done.stderr) == bool(expected)
    tasks = lk(git_repo, "plan", "check", "TASKS.md")
    assert tasks.returncode == 0, tasks.stdout + tasks.stderr
    assert f"run: {json.dumps(check)}" in (git_repo / "loop.yaml").read_text()
    assert "tests" in (git_repo / "AGENTS.md").read_text()


def test_init_protects_the_tests_and_leaves_ignored_folders_out(git_repo: Path) -> None:
    files = {
        "pyproject.toml": "[project]\nname='x'\n", "tox.ini": "[tox]\n",
        "src/pkg/__init__.py": "", "src/pkg/conftest.py": "", "tests/test_x.py": "",
        "data/big.csv": "1,2\n", ".gitignore": "data/\n",
    }  # fmt: skip
    for rel, text in files.items():
        (git_repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (git_repo / rel).write_text(text)
    env = recipe_env({"PATH": f"{BIN}{os.pathsep}/usr/bin:/bin"})  # no tox on this PATH
    done = subprocess.run([str(BIN / "lk"), "init"], cwd=git_repo, capture_output=True,
                          text=True, env=env, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    import yaml

    scope = yaml.safe_load((git_repo / "loop.yaml").read_text())["scope"]
    assert scope["writable"] == ["src/**"]  # not data/ (ignored), not the tests
    assert scope["add_only"] == ["tests/**"]
    assert scope["protected"] == ["**/conftest.py"]  # a new one could skip every test
    assert "protected: **/conftest.py, new ones too" in done.stderr
    assert "data/ (git ignores it)" in done.stderr
    assert "the checks do not see data/" in done.stderr and "verify.carry" in done.stderr
    verify = yaml.safe_load((git_repo / "loop.yaml").read_text())["verify"]
    assert "carry" not in verify  # nothing found
    assert verify["prove_new_tests"] == "fixes"  # pytest is read per test
    assert "add-only" in done.stderr and "tests/**" in done.stderr
    assert "tox is not installed" in done.stderr and "python -m pytest -q" in done.stderr
    assert "Add new files, never change or delete" in (git_repo / "AGENTS.md").read_text()
    assert '"$(lk recipes)/phased-loop.sh"' in done.stderr  # the README's next command
    assert lk(git_repo, "plan", "check", "loop.yaml").returncode == 0
    assert lk(git_repo, "plan", "check", "TASKS.md").returncode == 0


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
    header, first = text.stdout.splitlines()[1:3]
    assert header.split() == ["#", "decision", "(failure", "class)", "time", "cost", "reason"]
    assert first.split()[:3] == ["#1", "retry", "(crashed)"]
    assert first[header.index("time")] in "0123456789-"  # the columns line up
    assert "failed (no_progress)" in text.stdout
    assert "git cherry-pick --no-commit refs/loopkit/fix-value/" in text.stdout
    assert "parked: fix-value" in text.stdout  # the memory file's retrospective
    story = json.loads(lk(p.root, "show", "fix-value", "--json").stdout)
    ref = story["saved"][0]["ref"]
    # Later work lands after the park: another task's change to a file the saved tree
    # holds too, and its own new file.
    (p.root / "README.md").write_text("# project, later\n")
    (p.root / "later.txt").write_text("later\n")
    p.git("add", "-A")
    p.git("commit", "-qm", "a later task")
    memory = (p.root / "MEMORY.md").read_text()
    # The restore command brings back what the attempt changed, and only that.
    subprocess.run(story["saved"][0]["restore"], shell=True, cwd=p.root, check=True,
                   capture_output=True)  # fmt: skip
    assert (p.root / "src/value.txt").read_text() == "half\n"
    assert (p.root / "README.md").read_text() == "# project, later\n"
    assert (p.root / "MEMORY.md").read_text() == memory  # the park's retrospective kept
    assert p.git("diff", "--cached", "--name-only").split() == ["src/value.txt"]
    assert "later task" in p.git("log", "-1", "--format=%s")  # nothing committed
    assert ref.startswith("refs/loopkit/fix-value/")
    assert lk(p.root, "show", "nothing-like-it").returncode == 1


def test_a_source_checkout_runs_from_bin_without_installing(tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["PATH"] = f"{repo / 'bin'}{os.pathsep}{env['PATH']}"
    env["LK_PYTHON"] = str(BIN / "python")  # an interpreter with the dependencies
    for name in (
        "lk",
        "lk-plan",
        "lk-invoke",
        "lk-diff",
        "lk-verify",
        "lk-judge",
        "lk-decide",
        "lk-model-server",
    ):
        done = subprocess.run(
            [name, "--help"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
        )
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
        [
            str(Path(__file__).resolve().parents[2] / "recipes" / "loop.sh"),
            "--contract",
            "loop.yaml",
            "--task-id",
            "fix-value",
            "--task",
            "Fix",
        ],
        cwd=p.root,
        env=recipe_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
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
    after = lk(p.root, "status").stdout
    assert "None" not in after and "round 1, ended after decide" in after, after


def test_notify_runs_on_complete_and_park_with_the_document_on_stdin(tmp_path: Path) -> None:
    good = """
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("good\\n" if task == "good" else "bad\\n")
"""
    p = make_project(tmp_path, good, budgets={"attempts": 1})
    log = tmp_path / "notified.jsonl"
    notify = f'printf "%s " "$LK_EVENT" >> {log}; python3 -c "import json,sys; print(json.load(sys.stdin)[\\"decision\\"][\\"outcome\\"])" >> {log}'
    ok = p.run(
        "loop.sh", "--contract", "loop.yaml", "--task-id", "good", "--task", "g", "--notify", notify
    )
    assert ok.returncode == 0, fail_message(ok)
    bad = p.run(
        "loop.sh",
        "--contract",
        "loop.yaml",
        "--task-id",
        "bad",
        "--task",
        "b",
        env={"LK_NOTIFY": notify},
    )
    assert bad.returncode in (21, 22), fail_message(bad)
    lines = log.read_text().splitlines()
    assert lines[0] == "complete complete"
    assert lines[1].startswith("parked ")
    # A failing notify command never stops the loop.
    again = p.run(
        "loop.sh",
        "--contract",
        "loop.yaml",
        "--task-id",
        "good2",
        "--task",
        "g",
        "--notify",
        "exit 3",
    )
    assert "the notify command failed" in again.stderr
