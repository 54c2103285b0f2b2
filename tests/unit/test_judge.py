"""The judge's pure core: the goal, the prompt, grounding, and how a verdict is decided."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopkit import judge, schema
from loopkit.document import section as as_section
from loopkit.errors import BadInput
from loopkit.worker.providers.base import Outcome, RunState, ToolCall

TREE_A = "a" * 40
TREE_B = "b" * 40


# --------------------------------------------------------------------------- the goal


def test_goal_flag_wins() -> None:
    task = {"task": {"id": "x", "kind": "goal", "text": "GOAL: from the task"}}
    contract = {"judge": {"provider": "claude", "goal": "from the contract"}}
    g = judge.goal_for(goal="  from the flag ", document=task, contract=contract)
    assert (g.text, g.source) == ("from the flag", "--goal")


def test_goal_from_a_goal_task_drops_the_marker() -> None:
    doc = {"task": {"id": "x", "kind": "goal", "text": "GOAL: the route is documented"}}
    g = judge.goal_for(goal=None, document=doc, contract={"judge": {"goal": "other"}})
    assert (g.text, g.source) == ("the route is documented", "task")


def test_a_plain_task_is_not_a_goal() -> None:
    doc = {"task": {"id": "x", "kind": "task", "text": "fix the parser"}}
    g = judge.goal_for(goal=None, document=doc, contract={"judge": {"goal": "docs read clearly"}})
    assert (g.text, g.source) == ("docs read clearly", "contract")
    with pytest.raises(BadInput, match="no goal to judge"):
        judge.goal_for(goal=None, document=doc, contract=None)


@pytest.mark.parametrize(
    ("goal", "doc"),
    [("   ", None), (None, {"task": {"id": "x", "kind": "goal", "text": "GOAL:  "}})],
)
def test_empty_goals_are_bad_input(goal: str | None, doc: dict[str, Any] | None) -> None:
    with pytest.raises(BadInput):
        judge.goal_for(goal=goal, document=doc, contract=None)


# --------------------------------------------------------------------------- the prompt


DIFF = {
    "base": "abc123",
    "tree": TREE_A,
    "files": [
        {"path": "docs/api.md", "status": "M", "added": 7, "deleted": 1},
        {"path": "src/app.py", "status": "A", "added": 20, "deleted": 0},
    ],
    "totals": {"files": 2, "lines": 28},
    "violations": [{"rule": "protected", "path": "migrations/1.sql"}],
    "within_policy": False,
}
VERIFY = {
    "tree": TREE_A,
    "passed": False,
    "checks": [
        {
            "name": "unit",
            "command": "pytest -q",
            "exit_code": 0,
            "passed": True,
            "output_tail": "3 passed",
        },
        {
            "name": "lint",
            "command": "ruff check",
            "exit_code": 1,
            "passed": False,
            "output_tail": "x" * 5000 + "\nE501 line too long",
        },
    ],
}


def test_the_prompt_holds_goal_changes_checks_and_the_demand() -> None:
    text = judge.build_prompt(
        "the /health route is documented",
        root="/repo",
        objective="ship the API",
        diff=DIFF,
        verify=VERIFY,
    )
    assert "GOAL:\nthe /health route is documented" in text
    assert "repository at /repo" in text
    assert "ship the API" in text
    assert "WHAT CHANGED (since abc123):" in text
    assert "M docs/api.md (+7 -1)" in text and "A src/app.py (+20 -0)" in text
    assert "scope violation: protected migrations/1.sql" in text
    assert "PASS unit: pytest -q" in text and "FAIL lint: ruff check (exit 1)" in text
    assert "E501 line too long" in text
    assert "3 passed" not in text  # a passing check's output is noise
    assert text.rstrip().splitlines()[-3:-1] == ["VERDICT: MET", "VERDICT: NOT MET"]
    assert "Open and read the files" in text
    assert len(text) < 4000  # the 5000-character tail was cut


def test_checks_on_another_tree_are_marked_stale() -> None:
    assert "run by loopkit on this tree" in judge.build_prompt("g", verify=VERIFY, tree=TREE_A)
    stale = judge.build_prompt("g", verify=VERIFY, tree=TREE_B)
    assert "EARLIER state of the tree: stale" in stale


def test_the_prompt_without_evidence_says_so() -> None:
    text = judge.build_prompt("docs read clearly")
    assert "WHAT CHANGED: not recorded" in text
    assert "CHECKS" not in text


def test_the_prompt_lists_a_bounded_number_of_files() -> None:
    files = [{"path": f"f{i}.md", "status": "A", "added": 1, "deleted": 0} for i in range(500)]
    text = judge.build_prompt("g", diff={"files": files})
    assert f"and {500 - judge.MAX_PROMPT_FILES} more files" in text
    assert "f499.md" not in text


def test_an_empty_change_is_stated() -> None:
    text = judge.build_prompt("g", diff={"base": "HEAD", "files": []})
    assert "nothing: the working tree is the same as its base" in text


# --------------------------------------------------------------------------- grounding


def test_grounding_keeps_files_inside_the_repository(tmp_path: Any) -> None:
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    paths = [
        str(root / "docs" / "api.md"),
        "docs/api.md",  # the same file again
        "./src/../src/app.py",
        "/etc/passwd",  # outside the repository
        "../other/secret.md",  # escapes it
        ".git/config",  # git's own
        ".loopkit/artifacts/x/judge.jsonl",  # loopkit's state
        str(root),  # the root itself is not a file read
        "",
    ]
    assert judge.grounding(paths, root=root) == ["docs/api.md", "src/app.py"]


def test_grounding_without_a_root_keeps_what_it_can(tmp_path: Any) -> None:
    got = judge.grounding(["/x/y/docs/a.md", "docs/b.md", "../c.md"], root=None)
    assert got == ["/x/y/docs/a.md", "docs/b.md"]


def test_grounding_skips_a_custom_state_folder(tmp_path: Any) -> None:
    got = judge.grounding(["state/run.json", "docs/a.md"], root=tmp_path, state_dir="state")
    assert got == ["docs/a.md"]


# --------------------------------------------------------------------------- the verdict


def seen(**kw: Any) -> judge.Observed:
    base: dict[str, Any] = {
        "provider": "claude",
        "reply": "Documented in docs/api.md.\nVERDICT: MET",
        "files_read": ["docs/api.md"],
        "ended": True,
        "failed": False,
        "stop_reason": "completed",
        "tree_before": TREE_A,
        "tree_after": TREE_A,
    }
    base.update(kw)
    return judge.Observed(**base)


@pytest.mark.parametrize(
    ("kw", "reason"),
    [
        ({}, None),
        ({"reply": "Missing the 503 case.\nVERDICT: NOT MET"}, "not_met"),
        ({"files_read": []}, "ungrounded"),
        ({"reply": "Looks fine."}, "no_verdict"),
        ({"reply": "VERDICT: MET, mostly"}, "malformed_verdict"),
        ({"ended": False}, "truncated"),
        ({"failed": True, "stop_reason": "max_turns"}, "run_failed"),
        ({"tree_after": TREE_B}, "tree_changed"),
        ({"files_written": ["/tmp/x"]}, "not_read_only"),
        # refusals come first, whatever else went wrong
        ({"tree_after": TREE_B, "failed": True, "files_read": []}, "tree_changed"),
        ({"failed": True, "reply": None}, "run_failed"),
        ({"files_read": [], "reply": "VERDICT: NOT MET"}, "not_met"),
    ],
)
def test_decide(kw: dict[str, Any], reason: str | None) -> None:
    _, got = judge.decide(seen(**kw))
    assert got == reason
    assert got is None or got in judge.REASONS


def validate(body: dict[str, Any]) -> None:
    schema.validate(as_section("judge", body), "judge")


def test_a_grounded_met_is_trusted() -> None:
    body = judge.section(seen(), goal=judge.Goal("g", "--goal"), model="m")
    validate(body)
    assert (body["verdict"], body["grounded"], body["trusted"]) == ("MET", True, True)
    assert judge.passed(body)
    assert body["read_only"] == {
        "checked": True,
        "tree_before": TREE_A,
        "tree_after": TREE_A,
        "changed": False,
        "changes": [],
    }
    assert body["goal"] == "g" and body["model"] == "m"


def test_an_ungrounded_met_is_neither_grounded_nor_trusted() -> None:
    body = judge.section(seen(files_read=[]))
    validate(body)
    assert body["verdict"] == "NOT_MET" and body["said"] == "MET"
    assert (body["grounded"], body["trusted"], body["reason"]) == (False, False, "ungrounded")
    assert not judge.passed(body)


def test_a_changed_tree_refuses_and_reports() -> None:
    changes = [
        {"status": "modified", "path": "docs/api.md"},
        {"status": "added", "path": "notes.txt"},
    ]
    body = judge.section(seen(tree_after=TREE_B, changes=changes))
    validate(body)
    assert body["verdict"] == "NOT_MET" and body["trusted"] is False
    assert body["read_only"]["changed"] is True
    assert body["read_only"]["changes"] == changes
    assert "modified docs/api.md, added notes.txt" in body["feedback"]


def test_no_proof_without_tree_hashes() -> None:
    body = judge.section(seen(tree_before=None, tree_after=None))
    validate(body)
    assert body["read_only"]["checked"] is False
    assert body["verdict"] == "MET"


def test_feedback_carries_the_reasons_bounded() -> None:
    reasons = "The 503 case is missing. " + "detail " * 3000 + "Add it to docs/api.md."
    body = judge.section(seen(reply=reasons + "\nVERDICT: NOT MET"))
    validate(body)
    fb = body["feedback"]
    assert len(fb) <= judge.MAX_FEEDBACK_CHARS
    assert fb.startswith("The judge found the goal NOT met")
    assert "The 503 case is missing." in fb and fb.endswith("Add it to docs/api.md.")
    assert "VERDICT" not in fb


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        (
            {"failed": True, "stop_reason": "timeout", "error": "wall-clock timeout"},
            "run failed (timeout: wall-clock timeout)",
        ),
        ({"ended": False}, "cut short"),
        ({"reply": "fine"}, "no VERDICT line"),
        ({"reply": "VERDICT: sure"}, "'VERDICT: sure'"),
        ({"files_written": ["docs/a.md"]}, "wrote docs/a.md"),
    ],
)
def test_feedback_says_why(kw: dict[str, Any], needle: str) -> None:
    body = judge.section(seen(**kw))
    validate(body)
    assert needle in body["feedback"]


# --------------------------------------------------------------------------- settings


def test_settings_from_the_contract_and_flags() -> None:
    c = {"judge": {"provider": "codex", "model": "gpt-x", "timeout": 30, "max_turns": 5}}
    s = judge.Settings.resolve(c)
    assert (s.provider, s.model, s.timeout, s.max_turns) == ("codex", "gpt-x", 30.0, 5)
    # Another provider on the command line: the contract's model is not carried over.
    s = judge.Settings.resolve(c, provider="claude")
    assert (s.provider, s.model) == ("claude", None)
    s = judge.Settings.resolve(c, model="gpt-y")
    assert s.model == "gpt-y"
    with pytest.raises(BadInput, match=r"needs judge\.command"):
        judge.Settings.resolve(c, provider="command")
    with pytest.raises(BadInput, match="no judge provider"):
        judge.Settings.resolve({"worker": {"provider": "claude"}})


# --------------------------------------------------------------------------- observe


def test_observe_a_parsed_stream(tmp_path: Any) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    st = RunState(final_message="ok\nVERDICT: MET", result_seen=True)
    read = ToolCall(id="1", name="Read", input={}, files_read=[str(root / "docs/a.md")])
    st.add_tool(read)
    st.settle(read, ok=True)
    outside = ToolCall(id="2", name="Read", input={}, files_read=["/etc/hosts"])
    st.add_tool(outside)
    st.settle(outside, ok=True)
    failed = ToolCall(id="3", name="Read", input={}, files_read=[str(root / "b.md")])
    st.add_tool(failed)
    st.settle(failed, ok=False, error="no such file")
    write = ToolCall(id="4", name="shell", input={}, command="echo x > notes.txt")
    st.add_tool(write)
    st.settle(write, ok=False, error="exit 1: Read-only file system")
    st.permission_denials.append({"tool": "Edit", "input": {"file_path": "/r/docs/a.md"}})
    o = judge.observe("claude", st, Outcome("completed", False), root=root)
    assert o.files_read == ["docs/a.md"]  # failed reads and outside files do not count
    assert o.denied == [
        "Edit /r/docs/a.md",
        "echo x > notes.txt: exit 1: Read-only file system",
    ]
    assert (o.ended, o.failed, o.stop_reason) == (True, False, "completed")
    failed_run = judge.observe(
        "claude", st, Outcome("api_error", True, "HTTP 529: overloaded"), root=root
    )
    assert failed_run.failed and failed_run.error == "HTTP 529: overloaded"
    assert judge.decide(failed_run)[1] == "run_failed"


def test_a_long_reply_is_read_to_its_last_line(tmp_path: Any) -> None:
    """Providers clip their final message; the judge reads the full text for its verdict."""
    import json

    long = "Reasons. " + "The route is described in detail. " * 2000 + "\nVERDICT: MET"
    events = [
        {
            "type": "system",
            "subtype": "init",
            "cwd": "/r",
            "session_id": "s",
            "apiKeySource": "none",
        },
        {
            "type": "assistant",
            "message": {
                "id": "m1",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "t1",
                        "name": "Read",
                        "input": {"file_path": "/r/docs/api.md"},
                    }
                ],
            },
        },
        {
            "type": "user",
            "message": {
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "# API"}]
            },
        },
        {"type": "assistant", "message": {"id": "m2", "content": [{"type": "text", "text": long}]}},
        {"type": "result", "subtype": "success", "is_error": False, "result": long},
    ]
    path = tmp_path / "judge.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    observed, state = judge.from_transcript(path)
    assert state.final_message is not None and len(state.final_message) < len(long)
    assert observed.reply == long.strip()
    assert observed.files_read == ["docs/api.md"]  # relative to the announced cwd
    assert judge.decide(observed)[1] is None


segment = st.sampled_from(["docs", "a.md", "..", ".", ".git", ".loopkit", "src", "x y", ""])


@given(st.lists(st.lists(segment, min_size=1, max_size=5), max_size=8), st.booleans())
@settings(max_examples=200, deadline=None)
def test_grounding_never_leaves_the_repository(parts: list[list[str]], absolute: bool) -> None:
    root = PurePosixPath("/r/repo")
    paths = [(str(root) + "/" if absolute else "") + "/".join(p) for p in parts]
    for got in judge.grounding(paths, root=str(root)):
        assert not got.startswith("/")
        assert ".." not in PurePosixPath(got).parts
        assert PurePosixPath(got).parts[0] not in (".git", ".loopkit", ".")


def test_the_judges_words_carry_no_terminal_control_sequences() -> None:
    reply = "\x1b]0;owned\x07The 503\x9b2J case\x1b[1m is missing.\r\nVERDICT: NOT MET"
    body = judge.section(seen(reply=reply, failed=True, error="\x1b]52;c;eA==\x07boom"))
    validate(body)
    for field in ("feedback", "error", "verdict_line"):
        assert not any(c in str(body[field]) for c in "\x1b\x07\x9b\r"), field
    assert "The 503 case is missing." in body["feedback"]
