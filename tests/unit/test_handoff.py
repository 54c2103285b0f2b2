"""The handoff prompt: what it says, and that it stays small whatever the evidence."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from loopkit import handoff

CONTRACT = {
    "objective": "Fix blank-line handling in parse_headers.",
    "scope": {
        "writable": ["src/parser/**"],
        "protected": ["migrations/**"],
        "always_allowed": ["tests/**"],
    },
    "criteria": [{"name": "regression", "run": "pytest tests/parser -q"}],
}
TASK = {"id": "fix-headers", "text": "Blank lines end the header block.", "kind": "task"}

#: Four checks and a long task: a retry whose feedback alone would fill the handoff.
HEAVY_CONTRACT = {
    "objective": "Fix blank-line handling in parse_headers.",
    "scope": {"writable": ["src/parser/**"]},
    "criteria": [{"name": f"check{i}", "run": f"pytest tests/{i} -q"} for i in range(4)],
}
HEAVY_TASK = {
    "id": "fix-headers",
    "text": "Blank lines end the header block. " * 40,
    "kind": "task",
}


def test_task_contract_and_checks_are_all_there() -> None:
    text = handoff.build(task=TASK, contract=CONTRACT)
    assert "# Task (fix-headers)" in text and "Blank lines end the header block." in text
    assert "Fix blank-line handling" in text
    assert "`src/parser/**`" in text and "Never touch: `migrations/**`" in text
    assert "regression: `pytest tests/parser -q`" in text
    assert "Feedback" not in text


def test_task_scope_replaces_the_writable_globs() -> None:
    text = handoff.build(task={**TASK, "scope": ["src/only.py"]}, contract=CONTRACT)
    assert "You may change: `src/only.py`" in text and "src/parser/**`," not in text


def test_previous_failures_become_feedback_with_tails_only() -> None:
    huge = "noise line\n" * 25_000 + "E   AssertionError: expected 2 headers, got 3\n"
    assert len(huge) > 268_000
    previous = {
        "verify": {
            "checks": [
                {"name": "regression", "passed": False, "exit_code": 1, "output_tail": huge},
                {"name": "lint", "passed": True, "exit_code": 0, "output_tail": "ok"},
            ]
        },
        "diff": {"violations": [{"rule": "protected", "path": "migrations/001.sql"}]},
        "judge": {"verdict": "NOT_MET", "grounded": True, "feedback": "No test covers CRLF."},
        "decision": {"outcome": "retry", "feedback": "Add a regression test first."},
        "run": {
            "stop_reason": "stuck",
            "stuck": {"tool": "Edit", "repeats": 3, "error": "String to replace not found"},
        },
    }
    text = handoff.build(task=TASK, contract=CONTRACT, previous=previous)
    assert len(text.encode()) <= handoff.MAX_BYTES
    assert "expected 2 headers, got 3" in text  # the tail survives
    assert text.count("noise line") < 100
    assert "Check `regression` failed (exit 1)" in text and "`lint`" not in text
    assert "migrations/001.sql: protected" in text
    assert "No test covers CRLF." in text and "Add a regression test first." in text
    assert "repeating a failing `Edit` call 3 times" in text


def test_memory_is_carried_newest_last_and_bounded(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_text("old lesson\n" * 2000 + "NEWEST: run migrations first\n")
    memory = handoff.read_memory(tmp_path, "MEMORY.md")
    text = handoff.build(task=TASK, contract=CONTRACT, memory=memory)
    assert "NEWEST: run migrations first" in text
    assert len(text.encode()) <= handoff.MAX_BYTES
    assert handoff.read_memory(tmp_path, "missing.md") is None
    assert handoff.read_memory(tmp_path, None) is None


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
    text = handoff.build(task=HEAVY_TASK, contract=HEAVY_CONTRACT, previous=previous, memory=memory)
    assert len(text.encode()) <= handoff.MAX_BYTES
    assert "## Lessons from earlier attempts (memory)" in text
    assert "parked: task-29 (failed)" in text  # the newest retrospective
    assert "### Check `check0` failed" in text


def test_previous_attempt_is_found_only_when_sections_exist() -> None:
    assert handoff.previous_attempt({"kind": "loopkit/attempt", "task": TASK}) is None
    found = handoff.previous_attempt({"task": TASK, "verify": {"checks": []}})
    assert found == {"verify": {"checks": []}}


@settings(max_examples=60, deadline=None)
@given(
    text=st.text(min_size=0, max_size=20_000),
    tail=st.text(min_size=0, max_size=20_000),
    memory=st.text(min_size=0, max_size=20_000),
)
def test_never_over_the_limit(text: str, tail: str, memory: str) -> None:
    previous = {
        "verify": {"checks": [{"name": "c", "passed": False, "output_tail": tail}] * 6},
        "decision": {"feedback": text},
    }
    out = handoff.build(
        task={**TASK, "text": text},
        contract={**CONTRACT, "objective": text or "x"},
        previous=previous,
        memory=memory,
    )
    assert len(out.encode("utf-8")) <= handoff.MAX_BYTES


#: What a hostile worker or check prints: a retitle, a clipboard write, a C1 CSI, a DCS.
ESCAPES = "\x1b]0;owned\x07\x1b]52;c;cm0gLXJmIH4=\x1b\\\x9b2J\x1bPq#0\x1b\\"


def test_no_terminal_control_sequence_reaches_the_handoff() -> None:
    previous = {
        "verify": {
            "checks": [
                {"name": "t", "passed": False, "exit_code": 1, "output_tail": ESCAPES + "E boom"}
            ]
        },
        "judge": {"verdict": "NOT_MET", "feedback": ESCAPES + "no test"},
        "decision": {"feedback": ESCAPES + "try again\r"},
        "run": {"stuck": {"tool": "Bash", "repeats": 3, "error": ESCAPES + "denied"}},
    }
    text = handoff.build(task=TASK, contract=CONTRACT, previous=previous, memory=ESCAPES + "lesson")
    assert "E boom" in text and "no test" in text and "try again" in text and "lesson" in text
    assert not any((ord(c) < 0x20 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F for c in text)


def test_the_tasks_own_failures_come_first_and_the_bases_are_marked_once() -> None:
    from loopkit.decision import decide

    verify = {
        "passed": False,
        "required": ["suite"],
        "checks": [
            {"name": "lint", "passed": False, "exit_code": 1, "output_tail": "E501 long line"},
            {
                "name": "suite",
                "passed": False,
                "exit_code": 1,
                "output_tail": "FAILED t::test_other\nFAILED t::test_mine",
                "blocking_tests": ["t::test_mine"],
                "regressions": ["t::test_mine"],
            },
        ],
        "known_failures": [
            {"name": "lint", "fingerprint": "f1"},
            {"name": "suite-old", "fingerprint": "f2", "tests": ["t::test_other"]},
        ],
    }
    feedback = decide._failure_text(verify)
    text = handoff.build(task=TASK, previous={"verify": verify, "decision": {"feedback": feedback}})
    mine = text.index("### Check `suite` failed")
    base = text.index("### Already failing before this task started")
    assert mine < base
    assert "- `t::test_mine` (passed before your change)" in text
    assert "E501 long line" not in text  # a failure of the base: named, its output not shown
    assert "- check `lint`" in text[base:]
    assert (
        text.count("FAILED t::test_other") == 1
    )  # the decision's copy of the tail is not repeated
    assert "tests t::test_mine" in text


def test_writes_refused_at_the_protocol_become_feedback() -> None:
    """An ACP agent's refused writes (run.refused) are told to the next attempt."""
    refused = [
        {"via": "permission", "tool": "Write a.txt", "path": "a.txt", "rule": "outside_writable"},
        {"via": "fs/write_text_file", "path": "loop.yaml", "rule": "control_file"},
    ]
    text = handoff.build(task=TASK, previous={"run": {"provider": "acp", "refused": refused}})
    assert "### Writes refused before they happened (outside the scope)" in text
    assert "- a.txt: outside_writable" in text and "- loop.yaml: control_file" in text
    assert "Writes refused" not in handoff.build(task=TASK, previous={"run": {"refused": []}})
