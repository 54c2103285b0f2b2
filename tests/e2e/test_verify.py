"""lk-verify over real temporary git repositories: checks, evidence, timeouts, the tree."""

from __future__ import annotations

import hashlib
import json
import os
import pty
import select
import subprocess
import time
from pathlib import Path

from loopkit import git as lkgit
from tests.helpers import git
from tests.helpers.evidence import BIN, attempt, one_json, run, script, write_contract
from tests.helpers.evidence import lk_run as _run
from tests.helpers.evidence import notes_project as _project
from tests.helpers.invoke import pids_with


def test_pass_and_fail_with_full_evidence(git_repo: Path) -> None:
    contract = write_contract(
        git_repo,
        criteria=[
            {"name": "lint", "run": "echo all clean"},
            {"name": "unit tests", "run": "echo 'FAILED test_x - assert 1 == 2' >&2; exit 3"},
        ],
        where=git_repo.parent,
    )
    done = run("lk-verify", "--contract", str(contract), cwd=git_repo)
    assert done.returncode == 1, done.stderr
    v = one_json(done.stdout, "verify")
    assert v["kind"] == "loopkit/verify" and v["passed"] is False
    assert v["tree"] == v["tree_after"] == lkgit.tree_hash(git_repo)
    assert v["tree_changed"] is False
    lint, unit = v["checks"]
    assert (lint["name"], lint["exit_code"], lint["passed"], lint["fingerprint"]) == (
        "lint",
        0,
        True,
        None,
    )
    assert lint["output_tail"] == "all clean"
    assert (unit["exit_code"], unit["passed"], unit["timed_out"]) == (3, False, False)
    assert "assert 1 == 2" in unit["output_tail"]  # stderr is captured with stdout
    assert unit["fingerprint"] and v["fingerprint"]
    assert unit["duration_s"] >= 0
    log = git_repo / unit["log"]
    assert log.is_file() and log.is_relative_to(git_repo / ".loopkit" / "artifacts")
    assert unit["output_sha256"] == hashlib.sha256(log.read_bytes()).hexdigest()
    assert f"unit tests failed (exit 3); fingerprint {unit['fingerprint']}" in done.stderr
    # The logs never make the tree dirty.
    assert git(git_repo, "status", "--porcelain") == ""

    contract = write_contract(
        git_repo, criteria=[{"name": "lint", "run": "true"}], where=git_repo.parent
    )
    done = run("lk-verify", "--contract", str(contract), cwd=git_repo)
    assert done.returncode == 0
    v = one_json(done.stdout)
    assert v["passed"] is True and v["fingerprint"] is None


def test_output_tail_is_bounded_and_the_log_is_whole(git_repo: Path) -> None:
    contract = write_contract(
        git_repo,
        criteria=[{"name": "noisy", "run": "seq 1 100000; echo the end; exit 1"}],
        where=git_repo.parent,
    )
    v = one_json(run("lk-verify", "--contract", str(contract), cwd=git_repo).stdout)
    (c,) = v["checks"]
    assert c["output_tail"].endswith("99999\n100000\nthe end")
    assert len(c["output_tail"].splitlines()) <= 40
    assert len(c["output_tail"].encode()) <= 4096
    log = (git_repo / c["log"]).read_text()
    assert log.startswith("1\n2\n3\n") and c["output_bytes"] == len(log.encode())


def test_timeout_kills_the_whole_group_grandchildren_included(
    git_repo: Path, tmp_path: Path
) -> None:
    # The check starts a detached-looking grandchild that would outlive it, then hangs. The
    # grandchild is found by its command line (a sleep no other process has): under load
    # the timeout may come before a pid file could be written.
    marker = f"300.{time.monotonic_ns() % 10**9:09d}"
    check = f"sh -c 'sleep {marker} & wait' & wait"
    contract = write_contract(
        git_repo, criteria=[{"name": "hangs", "run": check, "timeout": 1}], where=tmp_path
    )
    started = time.monotonic()
    done = run("lk-verify", "--contract", str(contract), cwd=git_repo)
    assert time.monotonic() - started < 30
    assert done.returncode == 1
    (c,) = one_json(done.stdout)["checks"]
    assert (c["timed_out"], c["exit_code"], c["passed"]) == (True, None, False)
    assert c["fingerprint"]
    assert "timed out" in done.stderr
    deadline = time.monotonic() + 5
    while pids_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pids_with(marker), f"the grandchild (sleep {marker}) outlived the timeout"


def test_a_check_that_changes_the_tree_is_flagged(git_repo: Path) -> None:
    contract = write_contract(
        git_repo,
        criteria=[
            {"name": "clean", "run": "true"},
            {"name": "writes", "run": "echo generated > generated.txt"},
            {"name": "after", "run": "true"},
        ],
        where=git_repo.parent,
    )
    before = lkgit.tree_hash(git_repo)
    done = run("lk-verify", "--contract", str(contract), cwd=git_repo)
    assert done.returncode == 0
    v = one_json(done.stdout)
    assert v["tree"] == before
    assert v["tree_changed"] is True and v["tree_after"] == lkgit.tree_hash(git_repo) != before
    flags = [c.get("changed_tree", False) for c in v["checks"]]
    assert flags == [False, True, False]
    assert "writes changed the working tree" in done.stderr


def test_a_check_that_writes_a_protected_file_does_not_complete(git_repo: Path) -> None:
    """The diff is taken before the checks; a check that then rewrites a protected file
    leaves that change on disk. Completion needs scope held on the tree on disk."""
    _project(git_repo, "mkdir -p notes; echo hi > notes/a.txt", wall_seconds=600, check_timeout=5)
    text = (git_repo / "loop.yaml").read_text()
    text = text.replace("scope: {writable: [\"notes/**\"]}",
                        "scope: {writable: [\"notes/**\"], protected: [\"conf/**\"]}")  # fmt: skip
    text = text.replace("run: \"test -f notes/a.txt\"",
                        "run: \"test -f notes/a.txt && mkdir -p conf debris && echo x > conf/db"
                        " && echo y > debris/cache\"")  # fmt: skip
    (git_repo / "loop.yaml").write_text(text)
    git(git_repo, "commit", "-qam", "protected conf")
    out = _run(["lk-plan", "next", "TASKS.md"], git_repo)
    for cmd in ("lk-invoke", "lk-diff"):
        out = _run([cmd], git_repo, out.stdout)
    # In the clean room a check's new files are its debris, never on disk nor committed.
    room = _run(["lk-verify"], git_repo, out.stdout)
    assert json.loads(room.stdout)["verify"]["debris"] == ["conf/db", "debris/cache"]
    assert not (git_repo / "conf").exists()
    # In place (a commit hook), the check's writes land in the working tree.
    for cmd in (["lk-verify", "--in-place"], ["lk-decide"]):
        out = _run(cmd, git_repo, out.stdout)
    doc = json.loads(out.stdout)
    assert doc["verify"]["changed_by_checks"] == ["conf/db", "debris/cache"]
    assert out.returncode == 10, out.stderr
    assert doc["decision"]["failure_class"] == "scope_violation"
    assert {"rule": "protected_changed_by_check", "path": "conf/db"} in doc["decision"][
        "violations"
    ]
    # Debris outside the protected scope (caches a check leaves) still lets it complete.
    (git_repo / "loop.yaml").write_text(text.replace("echo x > conf/db && ", ""))
    git(git_repo, "commit", "-qam", "no conf write")
    for path in ("conf/db", "debris/cache"):
        (git_repo / path).unlink()
    out = _run(["lk-plan", "next", "TASKS.md"], git_repo)
    for cmd in ("lk-diff", "lk-verify", "lk-decide"):
        out = _run([cmd], git_repo, out.stdout)
    assert out.returncode == 0, out.stderr


def test_only_and_no_stdin_at_all(git_repo: Path) -> None:
    contract = write_contract(
        git_repo,
        criteria=[{"name": "a", "run": "exit 1"}, {"name": "b", "run": "echo b"}],
        where=git_repo.parent,
    )
    # stdin closed outright, not merely empty: must neither block nor fail.
    done = subprocess.run(
        ["sh", "-c", f"exec {script('lk-verify')} --contract {contract} --only b <&-"],
        cwd=git_repo,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    v = one_json(done.stdout)
    assert [c["name"] for c in v["checks"]] == ["b"]
    done = run("lk-verify", "--contract", str(contract), "--only", "nope", cwd=git_repo)
    assert done.returncode == 3
    assert "no check named 'nope'" in done.stderr and done.stdout == ""


def test_evidence_from_lk_verify_only_does_not_complete(git_repo: Path) -> None:
    """`lk-verify --only lint` runs one check of two: a pass there is not "verification
    passed" -- the check that did not run may well fail."""
    _project(git_repo, "mkdir -p notes; echo hi > notes/a.txt", wall_seconds=600, check_timeout=5)
    text = (git_repo / "loop.yaml").read_text()
    text = text.replace("criteria: [", 'criteria: [{name: lint, run: "true"}, ')
    text = text.replace("test -f notes/a.txt", "grep -q bye notes/a.txt")  # will fail
    (git_repo / "loop.yaml").write_text(text)
    git(git_repo, "commit", "-qam", "two checks")
    planned = _run(["lk-plan", "next", "TASKS.md"], git_repo)
    invoked = _run(["lk-invoke"], git_repo, planned.stdout)
    diffed = _run(["lk-diff"], git_repo, invoked.stdout)
    assert diffed.returncode == 0, diffed.stderr
    partial = _run(["lk-verify", "--only", "lint"], git_repo, diffed.stdout)
    assert partial.returncode == 0, partial.stderr
    decided = _run(["lk-decide"], git_repo, partial.stdout)
    assert decided.returncode == 10, decided.stderr
    assert "notes did not run" in json.loads(decided.stdout)["decision"]["reason"]
    assert _run(["lk-decide", "--replay", ".loopkit/ledger.jsonl"], git_repo).returncode == 0


def test_fail_fast_skips_the_rest(git_repo: Path) -> None:
    contract = write_contract(
        git_repo,
        criteria=[{"name": "a", "run": "exit 1"}, {"name": "b", "run": "true"}],
        where=git_repo.parent,
    )
    v = one_json(run("lk-verify", "--contract", str(contract), "--fail-fast", cwd=git_repo).stdout)
    assert [c["name"] for c in v["checks"]] == ["a"] and v["skipped"] == ["b"]


def test_in_a_pipe_adds_verify_and_keeps_the_attempt_folder(git_repo: Path) -> None:
    contract = {
        "version": 1,
        "objective": "o",
        "scope": {"writable": ["**"]},
        "criteria": [
            {"name": "env", "run": 'test "$GREETING" = hello', "env": {"GREETING": "hello"}}
        ],
    }
    done = run("lk-verify", cwd=git_repo, stdin=attempt(contract=contract, attempt_id="att-7"))
    assert done.returncode == 0, done.stdout + done.stderr
    doc = one_json(done.stdout, "attempt")
    assert doc["attempt_id"] == "att-7" and doc["verify"]["passed"] is True
    assert doc["verify"]["checks"][0]["log"].startswith(".loopkit/artifacts/att-7/")


def test_checks_run_in_the_repository_root_from_a_subdirectory(git_repo: Path) -> None:
    (git_repo / "sub").mkdir()
    (git_repo / "sub" / "keep").write_text("")
    write_contract(git_repo, criteria=[{"name": "root", "run": "test -f README.md"}])
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "contract")
    contract = git_repo / "loop.yaml"
    done = run("lk-verify", "--contract", str(contract), cwd=git_repo / "sub")
    assert done.returncode == 0, done.stdout


def test_bad_contract_exits_3_and_outside_a_repository_exits_4(tmp_path: Path) -> None:
    bad = tmp_path / "loop.yaml"
    bad.write_text("version: 1\nobjective: x\nscope: {writable: [src]}\ncriteria: []\n")
    done = run("lk-verify", "--contract", str(bad), cwd=tmp_path)
    assert done.returncode == 3 and "criteria" in done.stderr and done.stdout == ""
    good = write_contract(tmp_path, name="good.yaml")
    done = run("lk-verify", "--contract", str(good), cwd=tmp_path)
    assert done.returncode == 4 and "not a git repository" in done.stderr


def test_a_live_ticker_on_a_terminal_plain_lines_elsewhere(git_repo: Path) -> None:
    contract = write_contract(
        git_repo, criteria=[{"name": "slowish", "run": "sleep 1.5"}], where=git_repo.parent
    )
    plain = run("lk-verify", "--contract", str(contract), cwd=git_repo)
    # Off a terminal (a log, a recipe): one plain line as the check starts and as it ends.
    assert plain.returncode == 0
    assert plain.stderr.splitlines() == [
        "lk-verify: [1/1] slowish ...",
        plain.stderr.splitlines()[1],
    ] and plain.stderr.splitlines()[1].startswith("lk-verify: [1/1] slowish: ok (1.")
    assert "\r" not in plain.stderr and "\x1b" not in plain.stderr

    master, slave = pty.openpty()
    env = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}")
    p = subprocess.Popen(
        [script("lk-verify"), "--contract", str(contract)],
        cwd=git_repo,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave,
        env=env,
    )
    os.close(slave)
    seen = b""
    out, _ = p.communicate(timeout=60)
    while True:
        ready, _, _ = select.select([master], [], [], 0.5)
        if not ready:
            break
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    assert p.returncode == 0
    text = seen.decode()
    assert "[1/1] slowish ..." in text and "slowish: ok" in text
    assert one_json(out.decode())["passed"] is True  # stdout stays pure JSON


def test_a_plain_lk_verify_never_loads_click_and_gives_the_same_evidence(git_repo: Path) -> None:
    # The commit hook's call: the console script answers it without click (a third of its
    # instructions); what the door does not know goes to click, which parses or refuses it.
    import sys

    contract = write_contract(
        git_repo,
        criteria=[{"name": "one", "run": "echo one"}, {"name": "two", "run": "exit 4"}],
        where=git_repo.parent,
    )
    probe = git_repo.parent / "probe.py"
    probe.write_text(
        "import runpy, sys\n"
        "import atexit\natexit.register(sys.stdout.flush)\n"  # an exit handler: door.leave exits normally
        f"sys.argv = [{str(BIN / 'lk-verify')!r}, *sys.argv[1:]]\n"
        "try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\nexcept SystemExit as e:\n"
        "    code = e.code\n"
        "sys.stderr.write(f'EXIT={code} CLICK={\"click\" in sys.modules}\\n')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "LOOPKIT_VALIDATE_OUTPUT"}

    def probed(*args: str) -> tuple[str, str]:
        done = subprocess.run(
            [sys.executable, str(probe), *args], cwd=git_repo, capture_output=True, text=True,
            env=env, stdin=subprocess.DEVNULL, check=False,
        )  # fmt: skip
        return done.stderr.strip().splitlines()[-1], done.stdout

    last, out = probed("--contract", str(contract), "--only", "one", "--only=two", "--in-place")
    assert last == "EXIT=1 CLICK=False", last
    v = one_json(out, "verify")
    assert [c["name"] for c in v["checks"]] == ["one", "two"] and v["passed"] is False
    last, out = probed("--contract", str(contract), "--only", "one", "--fail-fast", "--summary")
    assert last == "EXIT=0 CLICK=False", last
    assert "all checks passed" in out
    # The same evidence through click (an option only click knows: --help, a typo).
    assert probed("--contract", str(contract), "--bogus")[0] == "EXIT=2 CLICK=True"
    assert probed("--help")[0] == "EXIT=0 CLICK=True"
    assert probed("--clean-room", "--in-place", "--contract", str(contract))[0].endswith(
        "CLICK=True"
    )
    assert probed("--contract", "nope.yaml")[0] == "EXIT=3 CLICK=False"
