"""lib.sh's text helpers answer in bash itself where they can (no tr, sed or date started
per call): the answers must be those of the pipelines they stand for."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parents[2] / "recipes" / "lib.sh"

NAMES = [
    "fix-parser", "t1", "ok_1.2-3", "UPPER.case", "", ".hidden", "-dash", "..", "a..b",
    "x.lock", "a.lock.b", "a/b", "a b", "tab\there", "ünïcode", "x;rm -rf", "$(id)", "a\nb",
]  # fmt: skip

TEXTS = [
    "", "one line", "  leading", "trailing  ", "a\tb\rc\nd", "many     spaces",
    "\n\n\nstarts with newlines", "x" * 400, "ünï  cödé\t\tend", " \t \n ",
]  # fmt: skip


def bash(script: str, *args: str) -> str:
    done = subprocess.run(
        ["bash", "-c", f'. "{LIB}"; {script}', "-", *args],
        capture_output=True, text=True, check=True, env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"},
    )  # fmt: skip
    return done.stdout


@pytest.mark.parametrize("name", NAMES)
def test_safe_name_is_what_the_tr_sed_pipeline_gives(name: str) -> None:
    pipeline = bash(
        """n=$(printf '%s' "$1" | tr -c 'A-Za-z0-9._-' '-' | sed -e 's/^[.-]*//' -e 's/\\.\\.*/./g' -e 's/\\.lock$/-lock/'); printf '%s' "${n:-task}" """,
        name,
    )
    assert bash('lk_safe_name "$1"', name) == pipeline
    assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._-]*", pipeline) or pipeline == "task"


@pytest.mark.parametrize("text", TEXTS)
def test_one_line_is_what_the_tr_sed_pipeline_gives(text: str) -> None:
    pipeline = bash(
        """t=$(printf '%s' "$1" | tr '\\n\\r\\t' '   ' | sed -e 's/  */ /g' -e 's/^ //'); [ "${#t}" -gt 300 ] && t="${t:0:299}…"; printf '%s' "$t" """,
        text,
    )
    assert bash('lk_one_line "$1"', text) == pipeline


def test_one_line_stays_linear_on_a_long_text() -> None:
    # A decision's reason may quote hundreds of worker-chosen paths; squeezing it must not
    # take time in the square of its length (bash's ${x#*  } and ${x# } do).
    text = ("p/" + "x" * 60 + " ") * 16000  # 1 MB: no leading blank, never two in a row
    done = subprocess.run(
        ["bash", "-c", f'. "{LIB}"; lk_one_line "$(cat)" 300'],
        input=text, capture_output=True, text=True, check=True, timeout=20,
    )  # fmt: skip
    assert len(done.stdout) == 300 and done.stdout.endswith("…")


def test_the_clock_is_utc_in_the_format_asked() -> None:
    def utc() -> str:
        return subprocess.run(
            ["date", "-u", "+%Y-%m-%dT%H:%M:%SZ"], capture_output=True, text=True, check=True
        ).stdout.strip()

    before = utc()
    # The same from date(1), as on a bash older than 4.2 (LK_BASH_CLOCK=0).
    script = (
        "TZ=Asia/Tokyo; export TZ; lk_now a; lk_now b %Y%m%dT%H%M%SZ; "
        'LK_BASH_CLOCK=0; lk_now c; printf "%s %s %s" "$a" "$b" "$c"'
    )
    out = bash(script)
    after = utc()
    stamp, compact, from_date = out.split()
    assert before <= stamp <= after  # UTC, not the local (Tokyo) time
    assert before <= from_date <= after
    assert compact == stamp.replace("-", "").replace(":", "")


def test_a_repository_without_a_commit_is_refused_whatever_its_files_are_called(
    tmp_path: Path,
) -> None:
    # `git rev-parse 'HEAD^{commit}' 'HEAD^{tree}'` prints a file's name back when a file
    # of that name exists and there is no commit: that is no place to begin from.
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    for name in ("HEAD^{commit}", "HEAD^{tree}"):
        (repo / name).write_text("x\n")
    done = subprocess.run(
        ["bash", "-c", f'. "{LIB}"; lk_begin 0; echo "began at $LK_BASE"'],
        cwd=repo, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 4, done.stdout + done.stderr
    assert "no commit yet" in done.stderr and "began" not in done.stdout
