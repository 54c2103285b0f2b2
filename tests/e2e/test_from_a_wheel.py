"""loopkit as a new user gets it: built into a wheel, installed in a fresh venv, used on a
project of the user's own outside this repository (a tiny Python project tested with
plain ``python3 -m unittest``, no pytest).

The wheel is built and installed once per test session. Every command below comes from
that venv alone: the test runner's own venv is taken off PATH, so nothing of the source
tree (or its editable install) can stand in for what the wheel ships.

- ``lk init`` writes a contract and a plan that ``lk-plan check`` accepts as written;
- ``lk recipes --copy DIR`` gives runnable recipes;
- a park through the copied ``loop.sh``, then ``lk show`` tells the attempt and how to
  restore it;
- ``lk status --json`` sees a running loop and its task;
- the remote form of the hook (``repo:`` a checkout of this repository, ``rev:`` its
  commit) through the real ``pre-commit run``, in the venv pre-commit builds for the hook:
  a red tree is blocked with a short summary, the checks run with the user's python, a
  green tree passes.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.helpers import git

pytestmark = [pytest.mark.slow]

REPO_ROOT = Path(__file__).resolve().parents[2]
DEV_BIN = Path(sys.executable).parent  # the test runner's venv: pytest, build, pre-commit

CALC = "def add(a, b):\n    return a + b\n"
TESTS = """\
import unittest

import calc


class CalcTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(calc.add(2, 3), 5)

    def test_subtract(self):
        self.assertEqual(calc.subtract(5, 3), 2)
"""
GOOD = CALC + "\n\ndef subtract(a, b):\n    return a - b\n"
WRONG = CALC + "\n\ndef subtract(a, b):\n    return b - a\n"

TASKS = """\
# Tasks

- [ ] Add subtract() to calc {#subtract}
  budget: 10 lines / 1 file
  scope: calc/
  end
"""


@dataclass
class Installed:
    """The wheel and the fresh venv it was installed into."""

    wheel: Path
    venv: Path

    @property
    def bin(self) -> Path:
        return self.venv / "bin"

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """This process's environment with the wheel's venv first on PATH and the test
        runner's venv (where loopkit is installed from the source tree) off it."""
        env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
        dev = {str(DEV_BIN), os.path.realpath(DEV_BIN)}
        rest = [p for p in env.get("PATH", os.defpath).split(os.pathsep) if p and p not in dev]
        env["PATH"] = os.pathsep.join([str(self.bin), *rest])
        env["LOOPKIT_VALIDATE_OUTPUT"] = "0"  # each command's own tests validate its output
        env.pop("LOOPKIT_STATE_DIR", None)
        env.update(extra or {})
        return env


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """loopkit's wheel, built from this checkout, installed into a fresh venv (no system
    site-packages; its dependencies come from the package index). Built once a session:
    under pytest-xdist the first worker to need it builds it in the run's shared temporary
    folder, the others wait for it there and use the same one."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the run's folder, above each worker's own
    base = shared / "wheel"
    with open(shared / "wheel.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = base / "installed.json"
        if done.is_file():
            found = json.loads(done.read_text())
            return Installed(wheel=Path(found["wheel"]), venv=Path(found["venv"]))
        shutil.rmtree(base, ignore_errors=True)  # a build that failed half-way
        base.mkdir()
        built = _build_and_install(base)
        done.write_text(json.dumps({"wheel": str(built.wheel), "venv": str(built.venv)}))
        return built


def _build_and_install(base: Path) -> Installed:
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(base / "dist"), str(REPO_ROOT)],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    (wheel,) = (base / "dist").glob("loopkit_agents-*.whl")
    venv = base / "venv"
    # A venv without a pip of its own (ensurepip alone costs ~6 s of CPU): the test
    # runner's pip installs into it (`--python`), the same files a pip inside would.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
         str(wheel)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return Installed(wheel=wheel, venv=venv)


def run(
    installed: Installed,
    cwd: Path,
    *argv: str,
    env: dict[str, str] | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv),
        cwd=cwd,
        env=installed.env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def out(proc: subprocess.CompletedProcess[str]) -> str:
    return f"exit {proc.returncode}\n--- stdout ---\n{proc.stdout[-4000:]}\n--- stderr ---\n{proc.stderr[-6000:]}"


def user_project(root: Path) -> Path:
    """The user's project: a package, its unittest tests, a Makefile whose `test` target
    runs them. A git repository on main with one commit."""
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    files = {
        "README.md": "# calc\n",
        "calc/__init__.py": CALC,
        "tests/__init__.py": "",
        "tests/test_calc.py": TESTS,
        "Makefile": "test:\n\tpython3 -m unittest -q\n",
        ".gitignore": "__pycache__/\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "calc with a test for subtract")
    return root


@pytest.fixture
def project(installed: Installed, tmp_path: Path) -> Path:
    """The user's project after `lk init` and the first task written, committed."""
    root = user_project(tmp_path / "calc")
    done = run(installed, root, "lk", "init")
    assert done.returncode == 0, out(done)
    (root / "TASKS.md").write_text(TASKS)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "loopkit's contract and plan")
    return root


def use_worker(root: Path, script: Path, body: str, **budgets: int) -> None:
    """Point the contract at a `command` worker running ``body`` (Python, in the project),
    with ``budgets`` on top of what `lk init` wrote; committed."""
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(textwrap.dedent(body))
    data = yaml.safe_load((root / "loop.yaml").read_text())
    data["worker"] = {"provider": "command", "command": f"python3 {script}", "timeout": 60}
    data["budgets"].update(budgets)
    # The worker's script lives outside the repository: readable in its sandbox.
    data["sandbox"]["writable"] = [str(script.parent)]
    (root / "loop.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    git(root, "commit", "-qam", "a command worker")


def copy_recipes(installed: Installed, into: Path) -> Path:
    done = run(installed, into.parent, "lk", "recipes", "--copy", str(into))
    assert done.returncode == 0, out(done)
    return into


@pytest.mark.longest
def test_the_wheel_is_what_runs(installed: Installed, tmp_path: Path) -> None:
    where = run(
        installed,
        tmp_path,
        "python3",
        "-c",
        "import loopkit, sys; print(loopkit.__file__); print(sys.prefix)",
    )
    module, prefix = where.stdout.split()
    assert Path(prefix) == installed.venv
    assert Path(module).is_relative_to(installed.venv) and "site-packages" in module
    assert Path(run(installed, tmp_path, "sh", "-c", "command -v lk-verify").stdout.strip()) == (
        installed.bin / "lk-verify"
    )


def test_init_writes_files_that_check_as_written(installed: Installed, tmp_path: Path) -> None:
    root = user_project(tmp_path / "calc")
    done = run(installed, root, "lk", "init")
    assert done.returncode == 0, out(done)
    assert "make test" in done.stderr  # the Makefile's test target was found
    for name in ("loop.yaml", "TASKS.md", "MEMORY.md", "AGENTS.md"):
        assert (root / name).is_file(), name
    for name in ("loop.yaml", "TASKS.md"):
        checked = run(installed, root, "lk-plan", "check", name)
        assert checked.returncode == 0, out(checked)
    assert 'run: "make test"' in (root / "loop.yaml").read_text()
    # The check it wrote really runs the project's tests (red: subtract is still missing).
    tests = run(installed, root, "make", "test")
    assert tests.returncode != 0 and "subtract" in tests.stderr


def test_recipes_copy_gives_runnable_loops(installed: Installed, tmp_path: Path) -> None:
    where = run(installed, tmp_path, "lk", "recipes")
    assert where.returncode == 0, out(where)
    shipped = Path(where.stdout.strip())
    assert shipped.is_relative_to(installed.venv)  # inside the installed package
    mine = copy_recipes(installed, tmp_path / "recipes")
    for name in ("loop.sh", "phased-loop.sh", "worktree.sh"):
        assert os.access(mine / name, os.X_OK), name
    assert (mine / "log.sh").is_file()
    helped = run(installed, tmp_path, str(mine / "loop.sh"), "--help")
    assert helped.returncode == 0 and "--task-id" in helped.stdout, out(helped)


def test_a_park_then_lk_show_tells_the_attempt_and_how_to_restore_it(
    installed: Installed, project: Path, tmp_path: Path
) -> None:
    use_worker(
        project,
        tmp_path / "worker" / "wrong.py",
        f"""
        from pathlib import Path
        Path("calc/__init__.py").write_text({WRONG!r})
        print("added subtract")
        """,
        attempts=1,
    )
    recipes = copy_recipes(installed, tmp_path / "recipes")
    start = tmp_path / "next.json"
    nxt = run(installed, project, "lk-plan", "next", "TASKS.md", "--contract", "loop.yaml")
    assert nxt.returncode == 0, out(nxt)
    start.write_text(nxt.stdout)
    head = git(project, "rev-parse", "HEAD")
    loop = run(
        installed, project, str(recipes / "loop.sh"), "--tasks", "TASKS.md", str(start), timeout=120
    )
    assert loop.returncode == 22, out(loop)  # the one attempt allowed is spent: parked
    # Parked: the tree is back where the task began, the checklist and memory say so.
    assert (project / "calc/__init__.py").read_text() == CALC
    assert "- [!] Add subtract() to calc {#subtract}" in (project / "TASKS.md").read_text()
    assert git(project, "rev-parse", "HEAD^") == head  # only the park's own commit

    shown = run(installed, project, "lk", "show", "subtract")
    assert shown.returncode == 0, out(shown)
    assert "#1  budget_exhausted (budget)" in shown.stdout, shown.stdout
    assert "git cherry-pick --no-commit refs/loopkit/subtract/1" in shown.stdout
    assert "parked: subtract" in shown.stdout  # what the memory file says about it
    story = json.loads(run(installed, project, "lk", "show", "subtract", "--json").stdout)
    assert len(story["attempts"]) == 1
    (saved,) = story["saved"]
    # The restore command it prints brings the parked attempt back.
    subprocess.run(saved["restore"], shell=True, cwd=project, check=True)
    assert (project / "calc/__init__.py").read_text() == WRONG


def test_lk_status_sees_a_running_loop(installed: Installed, project: Path, tmp_path: Path) -> None:
    use_worker(
        project,
        tmp_path / "worker" / "slow.py",
        f"""
        import time
        from pathlib import Path
        time.sleep(4)
        Path("calc/__init__.py").write_text({GOOD!r})
        """,
    )
    recipes = copy_recipes(installed, tmp_path / "recipes")
    loop = subprocess.Popen(
        [
            str(recipes / "loop.sh"),
            "--contract",
            "loop.yaml",
            "--task-id",
            "subtract",
            "--task",
            "Add subtract() to calc",
        ],
        cwd=project,
        env=installed.env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        now: dict[str, object] = {}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and loop.poll() is None:
            seen = run(installed, project, "lk", "status", "--json")
            if seen.returncode == 0:
                now = json.loads(seen.stdout)
                if now.get("running") and now.get("stage") == "invoke":
                    break
            time.sleep(0.2)
        assert now.get("running") is True, now
        assert now["task"] == "subtract" and now["stage"] == "invoke", now
        text = run(installed, project, "lk", "status")
        assert text.stdout.startswith("subtract:"), out(text)
    finally:
        stdout, stderr = loop.communicate(timeout=90)
    assert loop.returncode == 0, f"exit {loop.returncode}\n{stdout}\n{stderr}"
    after = json.loads(run(installed, project, "lk", "status", "--json").stdout)
    assert after["running"] is False
    assert (project / "calc/__init__.py").read_text() == GOOD
    assert git(project, "status", "--porcelain") == ""


# --- the remote form of the pre-commit hook ------------------------------------------


@pytest.mark.longest
def test_the_pre_commit_hook_blocks_a_red_tree_and_passes_a_green_one(
    installed: Installed, project: Path, tmp_path: Path
) -> None:
    pre_commit = DEV_BIN / "pre-commit"
    if not pre_commit.exists():
        pytest.fail("pre-commit is not installed in the test venv (make install)")
    # A second check: the checks run with the user's python (their venv, first on PATH),
    # not the interpreter of the venv pre-commit built for the hook.
    data = yaml.safe_load((project / "loop.yaml").read_text())
    data["criteria"].append(
        {
            "name": "the user's python",
            "run": f"python3 -c \"import sys; sys.exit(sys.prefix != '{installed.venv}')\"",
            "timeout": 60,
        }
    )
    (project / "loop.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    git(project, "commit", "-qam", "check the interpreter")
    # The hook's repository is this checkout at its commit (an unpacked sdist has none),
    # named in the project's config as a user names loopkit's URL and a tag.
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True
    )
    if head.returncode != 0:
        pytest.skip("not a git checkout of loopkit: the hook's repository needs a commit")
    hooks = {
        "repos": [
            {
                "repo": str(REPO_ROOT),
                "rev": head.stdout.strip(),
                "hooks": [{"id": "lk-verify", "verbose": True}],
            }
        ]
    }
    (project / ".pre-commit-config.yaml").write_text(yaml.safe_dump(hooks, sort_keys=False))
    git(project, "add", ".pre-commit-config.yaml")
    git(project, "commit", "-qm", "the loopkit hook")
    store = tmp_path / "pre-commit-home"

    def hook_run() -> subprocess.CompletedProcess[str]:
        # Both runs share one store: the hook's venv is built once, where pre-commit keeps
        # it (a store lk-verify must recognise, and not take the checks' python from).
        return run(
            installed,
            project,
            str(pre_commit),
            "run",
            "--all-files",
            env={"PRE_COMMIT_HOME": str(store)},
            timeout=300,
        )

    red = hook_run()  # subtract is missing: the tests fail
    text = red.stdout + red.stderr
    assert red.returncode == 1, out(red)
    assert "Failed" in text and "a check failed: the commit is blocked" in text, out(red)
    assert "FAILED  tests" in text and "subtract" in text  # the failing check, its tail
    assert "ok  the user's python" in text, out(red)  # not the hook venv's python3
    hook = text[text.index("loopkit acceptance checks") :]
    assert len(hook.splitlines()) < 40, hook
    assert '{"kind"' not in text  # a person's summary; the document is in the state folder
    assert (project / ".loopkit" / "verify-last.json").is_file()

    (project / "calc/__init__.py").write_text(GOOD)
    green = hook_run()
    assert green.returncode == 0, out(green)
    assert "Passed" in green.stdout + green.stderr


# --- the README's first loop on a project of one's own ---------------------------------


def readme_next_command() -> str:
    """The command the README's first loop runs after `lk init` and the first commit."""
    from tests.cli.test_readme import first_loop

    return first_loop()[-1]


FIX_SUB = """
from pathlib import Path
p = Path({path!r})
p.write_text(p.read_text() + {code!r})
print("added sub")
"""


def first_loop(
    installed: Installed,
    root: Path,
    tmp_path: Path,
    worker: str,
    *,
    path_first: Path | None = None,
    tasks: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """`lk init`, the worker in the contract, the first commit, then the README's next
    command, as the README has them; asserts that what `lk init` wrote checks, and the
    task ``tasks`` (a TASKS.md of the person's own) after it."""
    env = installed.env()
    if path_first is not None:  # the project's own virtualenv, activated
        env["PATH"] = f"{path_first}{os.pathsep}{env['PATH']}"
    init = subprocess.run(["lk", "init"], cwd=root, env=env, capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert init.returncode == 0, out(init)
    assert "add-only" in init.stderr, out(init)
    if tasks is not None:
        (root / "TASKS.md").write_text(tasks)
    for name in ("loop.yaml", "TASKS.md"):
        checked = subprocess.run(["lk-plan", "check", name], cwd=root, env=env,
                                 capture_output=True, text=True)  # fmt: skip
        assert checked.returncode == 0, out(checked)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "loopkit: contract and tasks")
    use_worker(root, tmp_path / "worker" / "w.py", worker, attempts=1)  # commits it too
    return subprocess.run(["bash", "-c", readme_next_command()], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)  # fmt: skip


def python_project(root: Path) -> Path:
    """A src-layout package tested with pytest, installed editable in its own .venv
    (ignored), as a Python developer has it."""
    files = {
        "src/calc/__init__.py": CALC,
        "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
        "\n\ndef test_sub():\n    from calc import sub\n\n    assert sub(5, 3) == 2\n",
        "pyproject.toml": '[build-system]\nrequires = ["setuptools>=61"]\n'
        'build-backend = "setuptools.build_meta"\n\n[project]\nname = "calc"\nversion = "0.1"\n'
        '\n[tool.setuptools.packages.find]\nwhere = ["src"]\n',
        ".gitignore": ".venv/\n__pycache__/\n*.egg-info/\n",
    }
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    venv = root / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q"]
    for args in (["pytest", "setuptools"], ["--no-build-isolation", "-e", str(root)]):
        done = subprocess.run([*pip, *args], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
    git(root, "add", "-A")
    git(root, "commit", "-qm", "calc, its tests")
    return root


@pytest.mark.longest
def test_the_readme_s_first_loop_commits_a_fix_on_a_python_project(
    installed: Installed, tmp_path: Path
) -> None:
    root = python_project(tmp_path / "calc")
    fix = FIX_SUB.format(path="src/calc/__init__.py", code="\n\ndef sub(a, b):\n    return a - b\n")
    loop = first_loop(installed, root, tmp_path, fix, path_first=root / ".venv" / "bin")
    assert loop.returncode == 0, out(loop)
    contract = yaml.safe_load((root / "loop.yaml").read_text())
    assert contract["criteria"][0]["run"] == "python -m pytest -q"
    assert contract["scope"]["add_only"] == ["tests/**"]
    assert "def sub" in git(root, "show", "HEAD~1:src/calc/__init__.py")  # the task's commit
    assert "- [x]" in (root / "TASKS.md").read_text()
    verify = [json.loads(line) for line in (root / ".loopkit" / "ledger.jsonl").open()]
    attempts = [r for r in verify if r.get("type") == "attempt"]
    assert [r["decision"]["outcome"] for r in attempts] == ["complete"]  # the first attempt
    assert git(root, "status", "--porcelain") == ""


@pytest.mark.longest
def test_a_task_naming_a_file_runs_its_checks_in_the_project_s_venv_unactivated(
    installed: Installed, tmp_path: Path
) -> None:
    # No virtualenv activated: loopkit's own venv (the wheel's) is first on PATH, and its
    # python has no pytest. The checks must run the project's .venv, as its shell would.
    root = python_project(tmp_path / "calc")
    fix = FIX_SUB.format(path="src/calc/__init__.py", code="\n\ndef sub(a, b):\n    return a - b\n")
    tasks = (
        "# Tasks\n\n- [ ] Add sub() {#sub}\n  budget: 10 lines / 1 file\n"
        "  scope: src/calc/__init__.py\n  end\n"
    )
    loop = first_loop(installed, root, tmp_path, fix, tasks=tasks)
    assert loop.returncode == 0, out(loop)
    assert "def sub" in git(root, "show", "HEAD~1:src/calc/__init__.py")
    assert "- [x] Add sub()" in (root / "TASKS.md").read_text()
    ledger = [json.loads(line) for line in (root / ".loopkit" / "ledger.jsonl").open()]
    attempts = [r for r in ledger if r.get("type") == "attempt"]
    assert [r["decision"]["outcome"] for r in attempts] == ["complete"]  # the first attempt


NODE_TEST = """\
const check = require("tiny-check");
const { add, sub } = require("../lib/calc");
check(add(2, 3) === 5, "add");
check(typeof sub === "function" && sub(5, 3) === 2, "sub");
console.log("ok");
"""


def node_project(root: Path) -> Path:
    """A Node package whose `npm test` needs a dependency from node_modules (ignored)."""
    files = {
        "package.json": json.dumps({"name": "calc", "version": "1.0.0", "private": True,
                                    "scripts": {"test": "node test/calc.test.js"}}),
        "lib/calc.js": "exports.add = (a, b) => a + b;\n",
        "test/calc.test.js": NODE_TEST,
        ".gitignore": "node_modules/\n",
        "node_modules/tiny-check/package.json": '{"name": "tiny-check", "main": "index.js"}',
        "node_modules/tiny-check/index.js":
            "module.exports = (ok, what) => { if (!ok) { console.error('FAIL ' + what);"
            " process.exit(1); } };\n",
    }  # fmt: skip
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "calc, its test")
    return root


def test_the_readme_s_first_loop_commits_a_fix_on_a_node_project(
    installed: Installed, tmp_path: Path
) -> None:
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed")
    root = node_project(tmp_path / "calc")
    fix = FIX_SUB.format(path="lib/calc.js", code="exports.sub = (a, b) => a - b;\n")
    loop = first_loop(installed, root, tmp_path, fix)
    assert loop.returncode == 0, out(loop)
    contract = yaml.safe_load((root / "loop.yaml").read_text())
    assert contract["criteria"][0]["run"] == "npm test"
    assert contract["scope"]["writable"] == ["lib/**"]  # not node_modules, not the tests
    assert contract["scope"]["add_only"] == ["test/**"]
    assert contract["verify"]["carry"] == ["node_modules/"]  # lk init says what it found
    assert "exports.sub" in git(root, "show", "HEAD~1:lib/calc.js")
    assert "- [x]" in (root / "TASKS.md").read_text()


def test_the_readme_s_first_loop_refuses_an_edit_of_an_existing_test(
    installed: Installed, tmp_path: Path
) -> None:
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed")
    root = node_project(tmp_path / "calc")
    # Wrong code, and the check that would catch it taken out of the test.
    weaken = """
    from pathlib import Path
    Path("lib/calc.js").write_text("exports.add = (a, b) => a + b;\\nexports.sub = () => 0;\\n")
    t = Path("test/calc.test.js")
    t.write_text("\\n".join(l for l in t.read_text().splitlines() if '"sub"' not in l) + "\\n")
    """
    loop = first_loop(installed, root, tmp_path, weaken)
    assert loop.returncode == 21, out(loop)  # parked: some task did not complete
    assert "- [!]" in (root / "TASKS.md").read_text()
    assert (root / "test/calc.test.js").read_text() == NODE_TEST
    assert "sub = ()" not in (root / "lib/calc.js").read_text()
    ledger = [json.loads(line) for line in (root / ".loopkit" / "ledger.jsonl").open()]
    (attempt,) = [r for r in ledger if r.get("type") == "attempt"]
    assert "add_only" in json.dumps(attempt), attempt
