"""lk-invoke with the command worker, as an installed console script in real git repos."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path

from loopkit.state import cancel
from tests.helpers.evidence import lk_run as _run
from tests.helpers.evidence import notes_project as _project
from tests.helpers.invoke import lk_invoke, lk_invoke_bin, pids_with, write_contract


def attempt(task_id: str = "hello", **sections: object) -> str:
    doc = {
        "kind": "loopkit/attempt",
        "version": 1,
        "task": {"id": task_id, "text": "Write hello.py.", "kind": "task"},
        **sections,
    }
    return json.dumps(doc)


def test_handoff_on_stdin_and_in_a_file_and_the_record(git_repo: Path, tmp_path: Path) -> None:
    c = write_contract(
        tmp_path / "loop.yaml",
        worker={
            "provider": "command",
            "command": 'cat > "$LOOPKIT_REPO/../stdin.txt"; cp "$LOOPKIT_HANDOFF" ../file.txt; '
            "echo \"print('hello')\" > hello.py; echo task=$LOOPKIT_TASK_ID; echo wrote hello.py",
        },
        sandbox={"writable": [str(tmp_path)]},
    )
    r = lk_invoke(["--contract", str(c)], cwd=git_repo, stdin=attempt())
    assert r.returncode == 0, r.stderr
    run = r.run
    assert run["stop_reason"] == "completed" and run["claimed_complete"] is True
    assert run["final_message"] == "wrote hello.py" and run["exit_code"] == 0
    assert (git_repo / "hello.py").exists()
    stdin_text = (tmp_path / "stdin.txt").read_text()
    assert stdin_text == (tmp_path / "file.txt").read_text()
    assert "Write hello.py." in stdin_text and "Create hello.py that prints hello." in stdin_text
    assert "task=hello" in (git_repo / run["transcript"]).read_text()
    assert run["transcript"].startswith(".loopkit/artifacts/" + r.doc["attempt_id"])
    assert ".loopkit/" in (git_repo / ".git/info/exclude").read_text()


def test_environment_is_an_allow_list(git_repo: Path, tmp_path: Path) -> None:
    c = write_contract(
        tmp_path / "loop.yaml",
        worker={
            "provider": "command",
            "command": "env | sort > ../env.txt",
            "env_allow": ["MY_SETTING"],
        },
        sandbox={"writable": [str(tmp_path)]},
    )
    import os

    env = dict(
        os.environ,
        OPENAI_API_KEY="sk-secret",
        ANTHROPIC_API_KEY="a-secret",
        MY_SETTING="kept",
        LOOPKIT_ATTEMPT="3",
    )
    r = lk_invoke(["--contract", str(c)], cwd=git_repo, env=env)
    assert r.returncode == 0, r.stderr
    seen = dict(
        line.split("=", 1)
        for line in (tmp_path / "env.txt").read_text().splitlines()
        if "=" in line
    )
    assert "OPENAI_API_KEY" not in seen and "ANTHROPIC_API_KEY" not in seen
    assert seen["MY_SETTING"] == "kept" and seen["LOOPKIT_ATTEMPT"] == "3"
    assert "LOOPKIT_HANDOFF" in seen and "PATH" in seen


def test_previous_failure_is_fed_back(git_repo: Path, tmp_path: Path) -> None:
    c = write_contract(tmp_path / "loop.yaml", worker={"provider": "command", "command": "cat"})
    tail = "x\n" * 1_500 + "NameError: prnt\n"
    verify = {
        "tree": "a" * 40,
        "passed": False,
        "fingerprint": "f",
        "checks": [
            {
                "name": "runs",
                "command": "python3 hello.py",
                "exit_code": 1,
                "passed": False,
                "duration_s": 0.1,
                "output_tail": tail,
                "output_sha256": "0" * 64,
                "fingerprint": "f",
            }
        ],
    }
    decision = {
        "outcome": "retry",
        "reason": "check failed",
        "failure_class": "verification_failure",
        "attempt": 1,
        "feedback": "Fix the typo.",
    }
    r = lk_invoke(
        ["--contract", str(c)], cwd=git_repo, stdin=attempt(verify=verify, decision=decision)
    )
    assert r.returncode == 0, r.stderr
    handoff = (git_repo / r.run["handoff"]).read_text()
    assert "NameError: prnt" in handoff and "Fix the typo." in handoff
    assert len(handoff.encode()) <= 8192
    assert "verify" not in r.doc and "decision" not in r.doc  # a new attempt


def test_timeout_ends_the_whole_process_group(git_repo: Path, tmp_path: Path) -> None:
    marker = f"t-{uuid.uuid4().hex[:12]}"
    c = write_contract(
        tmp_path / "loop.yaml",
        worker={
            "provider": "command",
            "command": "sleep 300 & sleep 301 & (sleep 302; echo x) & wait",
        },
    )
    start = time.monotonic()
    r = lk_invoke(["--contract", str(c), "--timeout", "1"], cwd=git_repo, stdin=attempt(marker))
    assert time.monotonic() - start < 200  # the sleeps of 300 s were not waited out
    assert r.returncode == 1
    assert r.run["stop_reason"] == "timeout" and r.run["is_error"] is True
    assert r.run["exit_code"] is None
    assert pids_with(marker) == []


def test_an_admitted_run_gets_only_its_granted_share(git_repo: Path) -> None:
    """lk-plan next | lk-decide --admit | lk-invoke: the worker may not eat the time that
    admission kept back for verification (wall 8 s - reserve 5 s = 3 s granted, not 60)."""
    _project(git_repo, "sleep 20; mkdir -p notes; echo hi > notes/a.txt", wall_seconds=8,
             check_timeout=5)  # fmt: skip
    task = _run(["lk-plan", "next", "TASKS.md"], git_repo)
    assert task.returncode == 0, task.stderr
    admitted = _run(["lk-decide", "--admit"], git_repo, task.stdout)
    assert admitted.returncode == 0, admitted.stderr
    granted = json.loads(admitted.stdout)["admission"]["granted"]["timeout_s"]
    assert 0 < granted <= 3.5
    planned = _run(["lk-invoke", "--dry-run"], git_repo, admitted.stdout)
    assert json.loads(planned.stdout)["timeout_s"] == granted
    # Not piped through admission, or with an explicit --timeout, the worker's own limit holds.
    assert (
        json.loads(_run(["lk-invoke", "--dry-run"], git_repo, task.stdout).stdout)["timeout_s"]
        == 60
    )
    explicit = _run(["lk-invoke", "--dry-run", "--timeout", "7"], git_repo, admitted.stdout)
    assert json.loads(explicit.stdout)["timeout_s"] == 7
    ran = _run(["lk-invoke"], git_repo, admitted.stdout)
    run = json.loads(ran.stdout)["run"]
    assert ran.returncode == 1 and run["stop_reason"] == "timeout", ran.stderr
    assert run["duration_s"] < 15


def _sleeping_worker(git_repo: Path, tmp_path: Path, marker: str) -> subprocess.Popen[str]:
    """lk-invoke running a ``sleep 300`` worker, returned once the worker has started."""
    c = write_contract(
        tmp_path / "loop.yaml", worker={"provider": "command", "command": "sleep 300"}
    )
    (tmp_path / "doc.json").write_text(attempt(marker))
    with open(tmp_path / "doc.json") as stdin:
        proc = subprocess.Popen(
            [lk_invoke_bin(), "--contract", str(c)],
            cwd=git_repo,
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    deadline = time.monotonic() + 10
    while not [p for p in pids_with(marker) if p != proc.pid] and time.monotonic() < deadline:
        time.sleep(0.05)
    return proc


def test_cancellation_stops_a_running_worker(git_repo: Path, tmp_path: Path) -> None:
    marker = f"c-{uuid.uuid4().hex[:12]}"
    proc = _sleeping_worker(git_repo, tmp_path, marker)
    cancel.request(git_repo / ".loopkit", reason="test")
    out, _ = proc.communicate(timeout=15)
    assert proc.returncode == 1
    run = json.loads(out)["run"]
    assert run["stop_reason"] == "cancelled"
    assert pids_with(marker) == []


def test_a_worker_is_not_started_while_a_cancellation_is_in_force(git_repo: Path) -> None:
    """`lk cancel`, then the loop's next lk-invoke: the worker must not run at all (a quick
    command would otherwise finish its change before the watchdog's first look)."""
    marker = git_repo.parent / "worker-ran"
    _project(git_repo, f"touch {marker}", wall_seconds=600, check_timeout=5)
    assert _run(["lk", "cancel", "--reason", "night over"], git_repo).returncode == 0
    task = _run(["lk-plan", "next", "TASKS.md"], git_repo).stdout
    ran = _run(["lk-invoke"], git_repo, task)
    assert ran.returncode == 1, ran.stderr
    run = json.loads(ran.stdout)["run"]
    assert run["stop_reason"] == "cancelled" and run["exit_code"] is None
    assert not marker.exists()
    decided = _run(["lk-decide"], git_repo, ran.stdout)
    assert decided.returncode == 30
    assert _run(["lk", "cancel", "--clear"], git_repo).returncode == 0
    assert _run(["lk-invoke"], git_repo, task).returncode == 0 and marker.exists()


def test_not_a_git_repository_exits_4(tmp_path: Path) -> None:
    r = lk_invoke(["--command", "true"], cwd=tmp_path)
    assert r.returncode == 4 and "not a git repository" in r.stderr


def test_terminating_lk_invoke_ends_its_worker(git_repo: Path, tmp_path: Path) -> None:
    marker = f"k-{uuid.uuid4().hex[:12]}"
    proc = _sleeping_worker(git_repo, tmp_path, marker)
    proc.terminate()
    proc.communicate(timeout=15)
    assert proc.returncode == 130
    assert pids_with(marker) == []
    saved = list((git_repo / ".loopkit" / "artifacts").glob("*/handoff.md"))
    assert len(saved) == 1  # a killed run keeps its artifacts
