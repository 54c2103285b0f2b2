"""What the transactions write where a person reads it: ref and folder names made from a
task id, one-line texts, a refusal where no task can begin."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from loopkit import git
from loopkit.ratchet import memory
from tests.helpers.recipes import recipe_env

NAMES = [
    "fix-parser", "t1", "ok_1.2-3", "UPPER.case", "", ".hidden", "-dash", "..", "a..b",
    "x.lock", "a.lock.b", "a/b", "a b", "tab\there", "ünïcode", "x;rm -rf", "$(id)", "a\nb",
]  # fmt: skip

TEXTS = [
    "", "one line", "  leading", "trailing  ", "a\tb\rc\nd", "many     spaces",
    "\n\n\nstarts with newlines", "x" * 400, "ünï  cödé\t\tend", " \t \n ",
]  # fmt: skip


@pytest.mark.parametrize("name", NAMES)
def test_a_ref_name_is_what_the_tr_sed_pipeline_gives(name: str) -> None:
    # The name refs/loopkit/<task>/ and runs/<task>/ use: the rule the recipes always had
    # (character by character: the pipeline's bytes for an ASCII name), and a valid ref.
    pipeline = subprocess.run(
        ["bash", "-c", """n=$(printf '%s' "$1" | tr -c 'A-Za-z0-9._-' '-' | sed -e 's/^[.-]*//' -e 's/\\.\\.*/./g' -e 's/\\.lock$/-lock/'); printf '%s' "${n:-task}" """, "-", name],
        capture_output=True, text=True, check=True, env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"},
    ).stdout  # fmt: skip
    ours = git.ref_component(name)
    if name.isascii():
        assert ours == pipeline
    ok = subprocess.run(["git", "check-ref-format", f"refs/loopkit/{ours}/1"], check=False)
    assert ok.returncode == 0, ours


@pytest.mark.parametrize("text", TEXTS)
def test_one_line_is_one_bounded_line(text: str) -> None:
    line = memory.one_line(text, 300)
    assert "\n" not in line and "\r" not in line and "\t" not in line and "  " not in line
    assert len(line) <= 300 and line == line.strip()
    assert line.replace("…", "") in " ".join(text.split()) or line.endswith("…")


def test_one_line_stays_linear_on_a_long_text() -> None:
    # A decision's reason may quote hundreds of worker-chosen paths.
    text = ("p/" + "x" * 60 + " ") * 16000  # 1 MB
    line = memory.one_line(text, 300)  # how fast: bench/bench_stops.py
    assert len(line) == 300 and line.endswith("…")


def test_a_repository_without_a_commit_is_refused_whatever_its_files_are_called(
    tmp_path: Path,
) -> None:
    # `git rev-parse 'HEAD^{commit}'` prints a file's name back when a file of that name
    # exists and there is no commit: that is no place to begin from.
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    for name in ("HEAD^{commit}", "HEAD^{tree}"):
        (repo / name).write_text("x\n")
    done = subprocess.run(
        ["lk", "task", "begin", "--task-id", "t", "--shell"], cwd=repo, capture_output=True,
        text=True, env=recipe_env(),
    )  # fmt: skip
    assert done.returncode == 4, done.stdout + done.stderr
    assert "no commit yet" in done.stderr and "LK_BASE" not in done.stdout
    assert done.stderr.count("\n") == 1
