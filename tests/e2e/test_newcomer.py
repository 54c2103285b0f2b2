"""The newcomer's commands: lk init scaffolds a project that passes its own checks,
lk recipes finds or copies the loops, lk show tells one task's story."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers.recipes import BIN, fail_message, git, make_project, recipe_env


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
    assert "protected: **/conftest.py: a conftest.py" in done.stderr
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


# --- the contract `lk init` writes, on the shapes projects come in ------------------------

SHAPES = {
    # The README's own example scope, in a src-layout Python project.
    "src-layout": (
        {"pyproject.toml": "[project]\nname='p'\n", "src/parser/headers.py": "",
         "src/parser/_caller.py": "", "tests/parser/test_headers.py": ""},
        "src/parser/headers.py, tests/parser/test_headers.py, src/parser/_caller.py",
        "src/parser/conftest.py",
    ),
    "root-python": (
        {"pyproject.toml": "[project]\nname='m'\n", "module.py": "", "test_module.py": "",
         "setup.py": ""},
        "module.py",
        "conftest.py",
    ),
    "root-node": (
        {"package.json": '{"name": "x", "scripts": {"test": "node test/t.js"}}',
         "index.js": "", "test/t.js": "", "jest.config.js": ""},
        "index.js, test/t2.js",
        "jest.config.js",
    ),
    "monorepo": (
        {"package.json": '{"name": "x", "scripts": {"test": "npm -ws test"}}',
         "packages/a/index.js": "", "packages/a/test/a.js": "", "packages/b/lib/b.js": ""},
        "packages/b/lib/b.js, packages/a/index.js",
        None,
    ),
}  # fmt: skip


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_init_then_a_task_naming_files_checks(git_repo: Path, shape: str) -> None:
    files, scope, refused = SHAPES[shape]
    for rel, text in files.items():
        (git_repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (git_repo / rel).write_text(text)
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-qm", "the project")
    assert lk(git_repo, "init").returncode == 0
    task = "- [ ] Fix it {#fix}\n  budget: 40 lines / 2 files\n  scope: " + scope + "\n  end\n"
    (git_repo / "TASKS.md").write_text(task)
    checked = lk(git_repo, "plan", "check", "TASKS.md")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    if refused is not None:  # a file the contract protects is refused by name
        (git_repo / "TASKS.md").write_text(task.replace(scope, refused))
        checked = lk(git_repo, "plan", "check", "TASKS.md")
        assert checked.returncode == 1  # a verdict: invalid
        assert f"scope '{refused}' is protected by the contract" in checked.stderr


def test_init_makes_the_code_at_the_root_writable_and_its_runner_config_not(
    git_repo: Path,
) -> None:
    files = SHAPES["root-node"][0]
    for rel, text in files.items():
        (git_repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (git_repo / rel).write_text(text)
    assert lk(git_repo, "init").returncode == 0
    import yaml

    scope = yaml.safe_load((git_repo / "loop.yaml").read_text())["scope"]
    assert scope["writable"] == ["*.js"]
    assert scope["protected"] == ["jest.config.js"]
    assert scope["add_only"] == ["test/**"]


def test_init_adds_its_guidance_to_the_project_s_own_agents_md(git_repo: Path) -> None:
    (git_repo / "AGENTS.md").write_text("# Our rules\n\nUse tabs.\n")
    (git_repo / "src").mkdir()
    (git_repo / "src" / "a.py").write_text("")
    done = lk(git_repo, "init")
    assert done.returncode == 0, done.stderr
    text = (git_repo / "AGENTS.md").read_text()
    assert text.startswith("# Our rules\n\nUse tabs.\n")  # the project's own, kept
    assert "loopkit:guidance:begin" in text and "loopkit:guidance:end" in text
    assert "guidance added as a block of its own" in done.stderr
    again = lk(git_repo, "init")  # once: a second init renews the block, never doubles it
    assert again.returncode == 0
    assert (git_repo / "AGENTS.md").read_text().count("loopkit:guidance:begin") == 1


# --- the project's environment is the checks' environment ---------------------------------

ENV_CHECKS = """\
version: 1
objective: the checks run in the project's environment
scope: {writable: ["src/**"]}
criteria:
  - {name: which, run: "python -c 'import os, sys; assert sys.prefix == os.environ[\\"VIRTUAL_ENV\\"] == os.path.realpath(\\".venv\\"), sys.prefix'", timeout: 120}
  - {name: runner, run: "python -m pytest -q", timeout: 120}
  - {name: tool, run: "mytool", timeout: 120}
verify: {carry: [".venv/", "node_modules/"]}
budgets: {attempts: 2}
worker: {provider: command, command: "true"}
sandbox: {mode: %s}
"""


@pytest.mark.parametrize("mode", ["off", "auto"])
def test_the_checks_run_in_the_project_s_venv_and_name_the_interpreter(
    git_repo: Path, mode: str
) -> None:
    import sys

    (git_repo / ".gitignore").write_text(".venv/\nnode_modules/\n.loopkit/\n")
    (git_repo / "loop.yaml").write_text(ENV_CHECKS % mode)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(git_repo / ".venv")],
                   check=True, timeout=120)  # fmt: skip
    tool = git_repo / "node_modules" / ".bin" / "mytool"
    tool.parent.mkdir(parents=True)
    tool.write_text("#!/bin/sh\necho its own tool\n")
    tool.chmod(0o755)
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-qm", "a project with its own environment")
    # loopkit's own venv first on PATH, nothing activated: as after `pip install` into it
    env = recipe_env({"VIRTUAL_ENV": ""})
    done = subprocess.run([str(BIN / "lk-verify")], cwd=git_repo, capture_output=True,
                          text=True, env=env, timeout=300)  # fmt: skip
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    assert checks["which"]["passed"], done.stderr  # the project's python, VIRTUAL_ENV set
    assert checks["tool"]["passed"], done.stderr  # node_modules/.bin on PATH
    why = checks["runner"]["cannot_run"]  # the project's venv has no pytest: it says which
    assert "no `pytest` module" in why and f"{git_repo / '.venv' / 'bin' / 'python'}" in why


def test_plan_check_on_a_terminal_lists_lines_and_piped_prints_json(git_repo: Path) -> None:
    import pty

    (git_repo / "TASKS.md").write_text("- [ ] A {#a}\n  budget: 5 lines\n  end\n")
    primary, secondary = pty.openpty()
    try:
        done = subprocess.run([str(BIN / "lk-plan"), "check", "TASKS.md"], cwd=git_repo,
                              stdout=secondary, stderr=subprocess.PIPE, env=recipe_env(),
                              timeout=60)  # fmt: skip
        os.close(secondary)
        shown = b""
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(primary)
    assert done.returncode == 1
    text = shown.decode().replace("\r\n", "\n")
    assert text == "TASKS.md:1: plan has no scope: list the files or globs it may change\n"
    piped = lk(git_repo, "plan", "check", "TASKS.md")
    assert json.loads(piped.stdout)["valid"] is False
    forced = lk(git_repo, "plan", "check", "--json", "TASKS.md")
    assert forced.stdout == piped.stdout


@pytest.mark.parametrize("mode", ["off", "auto"])
def test_a_linked_worktree_s_checks_see_the_main_checkout_s_dependencies(
    git_repo: Path, tmp_path: Path, mode: str
) -> None:
    # parallel.sh runs each slice in `git worktree add`'s checkout, which never gets the
    # ignored node_modules/: its checks read the main checkout's, read-only.
    (git_repo / ".gitignore").write_text("node_modules/\n.loopkit/\n")
    tool = git_repo / "node_modules" / ".bin" / "lint"
    tool.parent.mkdir(parents=True)
    tool.write_text("#!/bin/sh\necho linted\n")
    tool.chmod(0o755)
    contract = (
        "version: 1\nobjective: o\nscope: {writable: ['src/**']}\n"
        "criteria:\n  - {name: lint, run: 'node_modules/.bin/lint', timeout: 60}\n"
        "  - {name: write, run: 'touch node_modules/x', timeout: 60}\n"
        "budgets: {attempts: 2}\nworker: {provider: command, command: 'true'}\n"
        f"sandbox: {{mode: {mode}}}\n"
    )
    (git_repo / "loop.yaml").write_text(contract)
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-qm", "a project with ignored dependencies")
    wt = tmp_path / "slice"
    git(git_repo, "worktree", "add", "-q", str(wt))
    assert not (wt / "node_modules").exists()
    done = subprocess.run([str(BIN / "lk-verify"), "--clean-room"], cwd=wt, capture_output=True, text=True,
                          env=recipe_env(), timeout=300)  # fmt: skip
    lint, write = json.loads(done.stdout)["checks"]
    assert lint["passed"], done.stderr  # the main checkout's tool, at the worktree's path
    if mode == "auto":  # read-only in the sandbox: the touch fails, nothing is written
        assert not write["passed"]
        assert not (git_repo / "node_modules" / "x").exists()


def test_a_check_tool_under_tmp_says_the_sandbox_hides_it(git_repo: Path) -> None:
    import tempfile

    tools = Path(tempfile.mkdtemp(prefix="lk-tools-", dir="/tmp"))
    try:
        (tools / "mylint").write_text("#!/bin/sh\necho ok\n")
        (tools / "mylint").chmod(0o755)
        (git_repo / ".gitignore").write_text(".loopkit/\n")
        (git_repo / "loop.yaml").write_text(
            "version: 1\nobjective: o\nscope: {writable: ['src/**']}\n"
            f"criteria:\n  - {{name: lint, run: {tools}/mylint, timeout: 60}}\n"
            "budgets: {attempts: 2}\nworker: {provider: command, command: 'true'}\n"
            "sandbox: {mode: required}\n"
        )
        git(git_repo, "add", "-A")
        git(git_repo, "commit", "-qm", "a check whose tool lives under /tmp")
        # named by its path (the tools on PATH the sandbox shows itself)
        done = subprocess.run([str(BIN / "lk-verify"), "--clean-room"], cwd=git_repo,
                              capture_output=True, text=True, env=recipe_env(), timeout=300)  # fmt: skip
        if "sandbox required" in done.stderr:
            pytest.skip("no sandbox can start here")
        (check,) = json.loads(done.stdout)["checks"]
        assert f"`{tools}/mylint` is {tools}/mylint, under /tmp" in check.get("cannot_run", ""), (
            done.stderr + json.dumps(check)
        )
        assert "private /tmp" in check["cannot_run"]
    finally:
        shutil.rmtree(tools, ignore_errors=True)
