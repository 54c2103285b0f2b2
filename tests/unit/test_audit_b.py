"""Audit regressions (pure): the handoff keeps the project's memory under heavy feedback."""

from __future__ import annotations

from loopkit import handoff

CONTRACT = {
    "objective": "Fix blank-line handling in parse_headers.",
    "scope": {"writable": ["src/parser/**"]},
    "criteria": [{"name": f"check{i}", "run": f"pytest tests/{i} -q"} for i in range(4)],
}
TASK = {"id": "fix-headers", "text": "Blank lines end the header block. " * 40, "kind": "task"}


def test_a_heavy_retry_still_carries_the_newest_memory() -> None:
    tail = "FAILED tests/test_x.py::test_y - AssertionError: " + "z" * 120 + "\n"
    previous = {
        "verify": {
            "passed": False,
            "checks": [
                {"name": f"check{i}", "passed": False, "exit_code": 1, "output_tail": tail * 40}
                for i in range(4)
            ],
        },
        "diff": {
            "violations": [
                {"rule": "protected", "path": f"migrations/{i:04}.sql"} for i in range(40)
            ]
        },
        "judge": {"verdict": "NOT_MET", "feedback": "The docs do not say how headers end. " * 60},
        "decision": {"outcome": "retry", "feedback": "Look at the blank line handling. " * 60},
    }
    memory = "# Memory\n" + "".join(
        f"\n## 2026-01-{i:02} parked: task-{i} (failed)\n- last failure: no_progress\n"
        for i in range(1, 30)
    )
    text = handoff.build(task=TASK, contract=CONTRACT, previous=previous, memory=memory)
    assert len(text.encode()) <= handoff.MAX_BYTES
    assert "## Lessons from earlier attempts (memory)" in text
    assert "parked: task-29 (failed)" in text  # the newest retrospective
    assert "### Check `check0` failed" in text


def test_common_package_installs_are_side_effects() -> None:
    from loopkit.providers.shell import side_effects

    for command in ("npm i left-pad", "pnpm i", "uv add httpx", "cargo add serde", "go get x/y"):
        assert side_effects(command) == ["package_install"], command
