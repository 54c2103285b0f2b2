"""lk stack's bad input and refusals: one line naming what was wrong, the documented exit
code, no traceback, nothing written."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.helpers import git
from tests.helpers.evidence import BIN, write_contract


def _lk(repo: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "lk"), "stack", *args],
        cwd=repo,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _refs(repo: Path) -> str:
    return git(repo, "for-each-ref", "refs/loopkit/")


@pytest.mark.parametrize(
    ("args", "code", "said"),
    [
        (["show", "nope"], 3, "no stack 'nope' here"),
        (["add", "bad name", "s1"], 3, "a stack's name is letters"),
        (["add", "demo", "s/1"], 3, "a slice's id is letters"),
        (["add", "demo", "s1", "--head", "no-such-rev"], 3, "'no-such-rev' is not a commit"),
        (["add", "demo", "s1", "--forge", "github"], 3, "needs --repo OWNER/NAME"),
        (["add", "demo", "s1", "--doc", "missing.json"], 3, "missing.json: cannot read"),
        (["push", "demo"], 3, "no stack 'demo' here"),
        (["collect", "demo", "nowhere"], 3, "result.json: no such file"),
        (["fold", "nowhere.jsonl"], 3, "nowhere.jsonl: no such ledger file"),
        (["share", "loop.yaml", "--jobs", "0"], 3, "--jobs: 0: at least one job"),
        (["land", "demo", "--method", "cherry-pick"], 2, "Invalid value"),
        (["address", "demo", "s1"], 3, "no stack 'demo' here"),
        (["address", "demo", "s1", "--rounds", "0"], 2, "Invalid value"),
    ],
)
def test_bad_input_is_one_line_and_its_code(
    git_repo: Path, args: list[str], code: int, said: str
) -> None:
    write_contract(git_repo)
    done = _lk(git_repo, *args)
    assert done.returncode == code, done.stderr
    assert said in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert _refs(git_repo) == ""


def test_a_document_that_is_not_json_is_refused(git_repo: Path) -> None:
    write_contract(git_repo)
    done = _lk(git_repo, "add", "demo", "s1", "--doc", "-", stdin="{not json")
    assert done.returncode == 3 and "<stdin>" in done.stderr
    assert _refs(git_repo) == ""


def test_a_slice_whose_checks_fail_is_not_recorded(git_repo: Path, tmp_path: Path) -> None:
    contract = write_contract(
        git_repo, criteria=[{"name": "never", "run": "exit 1"}], where=tmp_path
    )
    done = _lk(git_repo, "add", "demo", "s1", "--contract", str(contract))
    assert done.returncode == 1
    assert "s1: its checks failed" in done.stderr and "never" in done.stderr
    assert _refs(git_repo) == ""


def test_add_show_and_a_plain_landing_leased_on_the_tip(git_repo: Path, tmp_path: Path) -> None:
    contract = write_contract(git_repo, where=tmp_path)
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(git_repo, "push", "-q", str(remote), "main")
    (git_repo / "a.txt").write_text("a\n")
    git(git_repo, "add", "a.txt")
    git(git_repo, "commit", "-q", "-m", "a")
    head = git(git_repo, "rev-parse", "HEAD").strip()
    done = _lk(git_repo, "add", "demo", "s1", "--remote", str(remote), "--contract", str(contract))
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)["stack"]
    assert record["forge"] == "plain" and record["slices"][0]["head"] == head
    # Not pushed yet: the landing is refused and nothing moves.
    done = _lk(git_repo, "land", "demo")
    assert done.returncode == 40 and "is not pushed" in done.stderr
    assert _lk(git_repo, "push", "demo").returncode == 0
    # Someone lands something else first: the slice was verified on another tip.
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(remote), str(other))
    git(other, "commit", "-q", "--allow-empty", "-m", "theirs")
    git(other, "push", "-q", "origin", "main")
    done = _lk(git_repo, "land", "demo")
    assert done.returncode == 40 and "restack" in done.stderr
    assert git(remote, "rev-parse", "main").strip() == git(other, "rev-parse", "HEAD").strip()
    assert _lk(git_repo, "restack", "demo", "--contract", str(contract)).returncode == 0
    assert _lk(git_repo, "push", "demo").returncode == 0
    done = _lk(git_repo, "land", "demo")
    assert done.returncode == 0, done.stderr
    landed = json.loads(done.stdout)["landed"]
    assert git(remote, "rev-parse", "main").strip() == landed
    assert git(remote, "rev-parse", f"{landed}^").strip() == git(other, "rev-parse", "HEAD").strip()
    # lk report reads the stack: one merged slice, one refused landing (returned).
    done = subprocess.run(
        [str(BIN / "lk"), "report", "--json"], cwd=git_repo, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    prs = json.loads(done.stdout)["health"]["pull_requests"]
    assert (prs["stacks"], prs["merged"], prs["landings"]) == (1, 1, 1)
    assert prs["returns"] == 2  # not pushed, then verified on another tip
    assert prs["queue"] == {"landed": 0, "returned": 0, "queued": 0}


def test_address_refuses_a_slice_it_cannot_read_a_review_for(git_repo: Path) -> None:
    """An unknown slice, and a stack on a plain remote (no pull requests, no review):
    one line, exit 3, the record as it was."""
    write_contract(git_repo)
    assert _lk(git_repo, "add", "demo", "s1").returncode == 0
    before = _refs(git_repo)
    for slice_id, said in (("s9", "no slice 's9' in stack demo"), ("s1", "read from GitHub")):
        done = _lk(git_repo, "address", "demo", slice_id)
        assert done.returncode == 3 and said in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and done.stdout == ""
    assert _refs(git_repo) == before
