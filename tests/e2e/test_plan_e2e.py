"""lk-plan as installed console scripts: pipes, exit codes, concurrent marks."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from loopkit import plan
from tests.helpers.plan import CONTRACT_YAML, small

BIN = Path(sys.executable).parent
LK_PLAN = shutil.which("lk-plan", path=str(BIN)) or "lk-plan"


def sh(*args: str, cwd: Path, input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [LK_PLAN, *args], cwd=cwd, input=input, capture_output=True, timeout=60, check=False
    )


@pytest.fixture
def project(git_repo: Path) -> Path:
    (git_repo / "loop.yaml").write_text(CONTRACT_YAML)
    (git_repo / "TASKS.md").write_text(
        "".join(small(f"task {i}", scope=f"src/m{i}.py") for i in range(8))
    )
    return git_repo


def test_next_piped_into_guidance(project: Path) -> None:
    nxt = sh("next", "TASKS.md", cwd=project)
    assert nxt.returncode == 0, nxt.stderr
    doc = json.loads(nxt.stdout)
    assert doc["task"]["id"] == "task-0"
    out = sh("guidance", "-o", "AGENTS.md", cwd=project, input=nxt.stdout)
    assert out.returncode == 0, out.stderr
    text = (project / "AGENTS.md").read_text()
    assert "## Your task: `task-0`" in text and "`src/m0.py`" in text


def test_nothing_ready_exit_1_with_one_line(project: Path) -> None:
    for i in range(8):
        assert (
            sh(
                "mark", "TASKS.md", "--task", f"task-{i}", "--status", "done", cwd=project
            ).returncode
            == 0
        )
    r = sh("next", "TASKS.md", cwd=project)
    assert r.returncode == 1 and r.stdout == b""
    assert r.stderr == b"lk-plan: nothing ready: all 8 tasks are done\n"


def test_concurrent_marks_all_land(project: Path) -> None:
    """Eight processes mark eight tasks at once: the lock and re-read keep every mark."""
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(
            pool.map(
                lambda i: sh(
                    "mark", "TASKS.md", "--task", f"task-{i}", "--status", "parked", cwd=project
                ),
                range(8),
            )
        )
    assert [r.returncode for r in results] == [0] * 8, [r.stderr for r in results]
    parsed = plan.parse((project / "TASKS.md").read_bytes())
    assert [t.status for t in parsed.tasks] == ["parked"] * 8
    assert sorted(p.name for p in project.iterdir() if p.name.startswith(".TASKS")) == []


def test_bad_input_exit_3_one_line(project: Path) -> None:
    (project / "bin.md").write_bytes(b"\x00\xff" * 100)
    r = sh("next", "bin.md", cwd=project)
    assert r.returncode == 3
    assert r.stderr.count(b"\n") == 1 and b"Traceback" not in r.stderr
    r = subprocess.run(
        [LK_PLAN, "guidance"],
        cwd=project,
        input=b"\xff\xfe garbage",
        capture_output=True,
        timeout=60,
    )
    assert r.returncode == 3 and r.stderr.count(b"\n") == 1, r.stderr
