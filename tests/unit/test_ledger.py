"""The ledger: append and read, torn tails, the derived index, triggers, retention."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from loopkit import schema
from loopkit.decision import budget, checkpoint, decide, ledger
from loopkit.decision.records import attempt_record, replay
from loopkit.state import retention
from tests.helpers import decide as h
from tests.helpers.decide import TREE


def decided(ldg: ledger.Ledger, doc: dict[str, Any], *, tree: str = TREE) -> dict[str, Any]:
    """What lk-decide does under the lock: history, decision, record, append."""
    with ldg.transaction() as txn:
        history = txn.history(decide.task_id(doc))
        d = decide.decide(doc, history, tree_on_disk=tree)
        rec = attempt_record(
            doc,
            history,
            d,
            tree_on_disk=tree,
            cancel=None,
            trigger={"kind": "manual", "source": "default"},
            started_at=None,
            recorded_at="2026-01-01T00:00:00.000Z",
        )
        return txn.append(rec)


def failing(fp: str, task_id: str = "fix-parser") -> dict[str, Any]:
    return h.attempt(task_id=task_id, run=h.run(), diff=h.diff(), verify=h.verify(False, fp))


def test_records_are_json_lines_valid_against_the_schema(tmp_path: Path) -> None:
    ldg = ledger.Ledger(tmp_path / "ledger.jsonl")
    decided(ldg, failing("A"))
    decided(ldg, failing("A"))
    lines = (tmp_path / "ledger.jsonl").read_text().splitlines()
    assert len(lines) == 2
    recs = [json.loads(x) for x in lines]
    for rec in recs:
        schema.validate(rec, "ledger-record")
    assert [r["seq"] for r in recs] == [1, 2]
    assert [r["attempt"] for r in recs] == [1, 2]
    assert recs[1]["decision"]["outcome"] == "replan"  # same fingerprint as attempt 1
    assert recs[0]["run"]["effective_model"] == "scripted-model"
    assert recs[0]["usage"]["cost_usd"] == 0.25 and recs[0]["run"]["cost"]["source"] == "provider"
    assert recs[0]["diff"] == {
        "base": "HEAD",
        "tree": TREE,
        "files": 1,
        "lines": 4,
        "within_policy": True,
        "violations": 0,
    }


def test_index_holds_the_folded_history(tmp_path: Path) -> None:
    ldg = ledger.Ledger(tmp_path / "ledger.jsonl")
    decided(ldg, failing("A"))
    decided(ldg, failing("B", task_id="other"))
    decided(ldg, failing("A"))
    hist = ldg.history("fix-parser")
    assert hist["attempts"] == 2 and hist["same_failure"] == 1
    assert ldg.history("other")["attempts"] == 1
    assert ldg.history("never-seen") == budget.empty_history()


def test_a_torn_tail_is_reported_skipped_and_never_glued(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    ldg = ledger.Ledger(path)
    decided(ldg, failing("A"))
    whole = path.read_bytes()
    with open(path, "ab") as f:  # a crash mid-write: half a record, no newline
        f.write(whole[: len(whole) // 2])
    records, problems = ledger.read(path)
    assert len(records) == 1 and len(problems) == 1
    assert "torn" in problems[0].message and problems[0].line == 2

    ldg2 = ledger.Ledger(path)
    decided(ldg2, failing("A"))  # the next append starts on a fresh line
    assert any("torn" in p.message for p in ldg2.problems)
    records, problems = ledger.read(path)
    assert [r["attempt"] for _, r in records] == [1, 2]
    assert len(problems) == 1 and "not a whole ledger record" in problems[0].message


def test_the_index_catches_up_with_records_it_missed(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    ldg = ledger.Ledger(path)
    rec = decided(ldg, failing("A"))
    # Another writer crashed after its append but before it updated the index.
    rec2 = dict(rec, seq=2, attempt=2)
    with open(path, "a") as f:
        f.write(json.dumps(rec2) + "\n")
    assert ldg.history("fix-parser")["attempts"] == 2
    assert decided(ldg, failing("A"))["seq"] == 3


def test_the_index_is_rebuilt_when_lost_or_when_the_ledger_shrank(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    ldg = ledger.Ledger(path)
    for _ in range(3):
        decided(ldg, failing("A"))
    import shutil

    shutil.rmtree(ldg.index_dir)
    assert ledger.Ledger(path).history("fix-parser")["attempts"] == 3
    lines = path.read_text().splitlines(keepends=True)
    path.write_text(lines[0])
    assert ledger.Ledger(path).history("fix-parser")["attempts"] == 1


def test_a_task_file_ahead_of_meta_is_not_folded_twice(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    ldg = ledger.Ledger(path)
    decided(ldg, failing("A"))
    meta = ldg.index_dir / "meta.json"
    meta.write_text(json.dumps({"offset": 0, "seq": 0}))  # crash between task file and meta
    assert ldg.history("fix-parser")["attempts"] == 1


def test_damaged_lines_in_the_middle_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    ldg = ledger.Ledger(path)
    decided(ldg, failing("A"))
    with open(path, "a") as f:
        f.write("{not json\n")
        f.write(json.dumps({"kind": "something/else"}) + "\n")
    decided(ldg, failing("B"))
    records, problems = ledger.read(path)
    assert [line for line, _ in records] == [1, 4]
    assert [p.line for p in problems] == [2, 3]


def test_reading_a_missing_ledger_is_empty(tmp_path: Path) -> None:
    assert ledger.read(tmp_path / "nope.jsonl") == ([], [])


@pytest.mark.parametrize(
    ("option", "env", "kind"),
    [
        ("schedule", {"GITHUB_EVENT_NAME": "push"}, "schedule"),
        (None, {"GITHUB_EVENT_NAME": "schedule"}, "schedule"),
        (None, {"GITHUB_EVENT_NAME": "workflow_dispatch"}, "manual"),
        (None, {"GITHUB_EVENT_NAME": "pull_request"}, "event"),
        (None, {"CI_PIPELINE_SOURCE": "schedule"}, "schedule"),
        (None, {"CI_PIPELINE_SOURCE": "merge_request_event"}, "event"),
        (None, {"CI": "true"}, "event"),
        (None, {"LOOPKIT_TRIGGER": "schedule", "CI": "true"}, "schedule"),
        (None, {}, "manual"),
    ],
)
def test_trigger_detection(option: str | None, env: dict[str, str], kind: str) -> None:
    t = ledger.detect_trigger(option, env)
    assert t["kind"] == kind and t["source"]


def _artifacts(state: Path, attempt_id: str) -> Path:
    folder = state / "artifacts" / attempt_id
    folder.mkdir(parents=True)
    (folder / "transcript.jsonl").write_text("x" * 1000)
    (folder / "verify-regression.log").write_text("log")
    (folder / "summary.json").write_text("{}")
    return folder


def test_retention_prunes_completed_tasks_past_keep_and_keeps_the_rest(tmp_path: Path) -> None:
    settings = {"keep_completed": 1}
    old = _artifacts(tmp_path, "a1")
    parked = _artifacts(tmp_path, "p1")
    assert retention.on_complete(tmp_path, "t-old", ["a1"], settings, now=1000.0) == []
    new = _artifacts(tmp_path, "a2")
    pruned = retention.on_complete(tmp_path, "t-new", ["a2"], settings, now=2000.0)
    assert pruned == [str(old)]
    assert sorted(p.name for p in old.iterdir()) == ["PRUNED.txt", "summary.json"]
    assert "transcript.jsonl" in (old / "PRUNED.txt").read_text()
    assert (new / "transcript.jsonl").exists()  # the newest completed task is kept whole
    assert (parked / "transcript.jsonl").exists()  # never completed: never pruned


def test_retention_days_keep_recent_completed_tasks(tmp_path: Path) -> None:
    settings = {"keep_completed": 0, "retention_days": 1}
    folder = _artifacts(tmp_path, "a1")
    assert retention.on_complete(tmp_path, "t", ["a1"], settings, now=1000.0) == []
    assert (folder / "transcript.jsonl").exists()
    _artifacts(tmp_path, "a2")
    assert retention.on_complete(tmp_path, "t2", ["a2"], settings, now=1000.0 + 2 * 86400) == [
        str(folder)
    ]


def test_retention_ignores_unsafe_ids(tmp_path: Path) -> None:
    outside = tmp_path / "outside.log"
    outside.write_text("keep me")
    state = tmp_path / "state"
    state.mkdir()
    retention.on_complete(state, "t", ["../../outside.log", "/etc"], {"keep_completed": 0})
    assert outside.exists()
    assert os.path.exists("/etc")


def _tamper(rec: dict[str, Any], how: str) -> None:
    if how == "decision":
        rec["decision"]["outcome"] = "complete"
    elif how == "evidence":
        rec["inputs"]["document"]["verify"]["fingerprint"] = "fpZ"
    elif how == "history":
        rec["inputs"]["history"]["attempts"] = 0
    elif how == "cost":
        rec["usage"]["cost_usd"] = 0.01
    elif how == "tree":
        rec["inputs"]["tree_on_disk"] = "c" * 40


@pytest.mark.parametrize("how", ["decision", "evidence", "history", "cost", "tree"])
def test_replay_finds_exactly_the_tampered_record(tmp_path: Path, how: str) -> None:
    path = tmp_path / "ledger.jsonl"
    ldg = ledger.Ledger(path)
    for fp in ("A", "A", "B", "B"):
        decided(ldg, failing(fp))
    records, _ = ledger.read(path)
    assert replay(records) == []
    _tamper(records[1][1], how)
    found = replay(records)
    assert found, how
    assert {d["line"] for d in found} == {2}, found


def test_replay_finds_a_deleted_record_at_the_gap(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    ldg = ledger.Ledger(path)
    for fp in ("A", "B", "C", "D", "E"):
        decided(ldg, failing(fp))
    records, _ = ledger.read(path)
    del records[1]
    found = replay(records)
    assert {d["line"] for d in found} == {3}
    assert "inputs.history" in {d["field"] for d in found}


def test_catch_up_reads_in_chunks_without_losing_a_line(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    ldg = ledger.Ledger(path)
    for fp in "ABCDEFG":
        decided(ldg, failing(fp))
    with open(path, "ab") as f:
        f.write(b'{"kind":"loopkit/ledger-record","torn')
    size = path.stat().st_size
    for chunk in (7, 100, 1000, 1 << 20):
        got = list(ledger._scan(path, 0, size, chunk=chunk))
        assert [r["seq"] for _, _, r, _ in got if r] == list(range(1, 8)), chunk
        problems = [p for _, _, _, p in got if p]
        assert len(problems) == 1 and "torn" in problems[0].message
        ends = [end for _, end, r, _ in got if r]
        assert ends[-1] == len(path.read_bytes().rsplit(b"\n", 1)[0]) + 1


def test_an_unwritable_ledger_is_an_environment_problem(tmp_path: Path) -> None:
    from loopkit.errors import EnvironmentProblem

    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the ledger's folder should be")
    with pytest.raises(EnvironmentProblem, match="cannot open the ledger"):
        decided(ledger.Ledger(blocker / "ledger.jsonl"), failing("A"))


def test_a_damaged_index_entry_is_rebuilt_from_the_ledger(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    ldg = ledger.Ledger(path)
    decided(ldg, failing("A"))
    decided(ldg, failing("A", task_id="other"))
    decided(ldg, failing("A"))
    task_file = ldg.index_dir / "tasks" / "fix-parser.json"
    task_file.write_text('{"task_id": "fix-par')  # torn by a power loss
    fresh = ledger.Ledger(path)
    assert fresh.history("fix-parser")["attempts"] == 2
    assert fresh.history("fix-parser")["same_failure"] == 1
    assert any("rebuilt" in p.message for p in fresh.problems)
    assert decided(fresh, failing("A"))["attempt"] == 3


def test_task_ids_never_share_an_index_file(tmp_path: Path) -> None:
    ldg = ledger.Ledger(tmp_path / "ledger.jsonl")
    decided(ldg, failing("A", task_id="a/b"))
    decided(ldg, failing("A", task_id="a_b"))
    decided(ldg, failing("A", task_id="a_b"))
    assert ldg.history("a/b")["attempts"] == 1
    assert ldg.history("a_b")["attempts"] == 2


def test_a_line_with_a_non_finite_number_is_skipped_not_folded(tmp_path: Path) -> None:
    # A NaN cost folded into the history would make every cost comparison false: no limit.
    path = tmp_path / "ledger.jsonl"
    decided(ledger.Ledger(path), failing("A"))
    rec = json.loads(path.read_text().splitlines()[0])
    rec["seq"], rec["usage"]["cost_usd"] = 2, float("nan")
    with open(path, "a") as f:
        f.write(json.dumps(rec) + "\n")  # Python writes NaN unless told not to
    records, problems = ledger.read(path)
    assert [line for line, _ in records] == [1]
    assert len(problems) == 1 and "$.usage.cost_usd" in problems[0].message
    fresh = ledger.Ledger(path)
    history = fresh.history("fix-parser")
    assert history["attempts"] == 1 and fresh.problems
    assert all(v == v for v in history.values() if isinstance(v, float))


def test_a_record_with_a_non_finite_number_is_never_written(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    ldg = ledger.Ledger(path)
    with ldg.transaction() as txn, pytest.raises(ValueError):
        txn.append({"task_id": "t", "type": "attempt", "usage": {"cost_usd": float("inf")}})
    assert not path.exists() or path.read_bytes() == b""


@pytest.mark.parametrize("task_id", ["../../escaped", "/tmp/escaped", "..", "a/../../b"])
def test_a_task_id_never_names_a_path_outside_the_state_folder(
    tmp_path: Path, task_id: str
) -> None:
    state = tmp_path / "repo" / ".loopkit"
    ldg = ledger.Ledger(state / "ledger.jsonl")
    decided(ldg, failing("A", task_id=task_id))
    written_to = checkpoint.write(state, task_id, {"why": "budget"})
    assert written_to.parent == state / "checkpoints"
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert written and all(state in p.parents for p in written)
    assert ldg.history(task_id)["attempts"] == 1


def _append(state: Path, task: str) -> None:
    with ledger.Ledger(state / "ledger.jsonl").transaction() as tx:
        tx.append({"type": "attempt", "task_id": task, "attempt": 1})


def test_a_seal_for_a_task_lets_siblings_append_but_not_this_task(tmp_path: Path) -> None:
    # Slices side by side share one ledger: records of other tasks appended while this
    # task's worker ran are no tampering; one for this task, or any rewrite, is.
    state = tmp_path / "state"
    state.mkdir()
    _append(state, "mine")
    sealed = ledger.seal(state, stat_cache=False, task="mine")
    _append(state, "sibling")
    assert ledger.tampered(sealed, state) == []
    _append(state, "mine")
    assert ledger.tampered(sealed, state)  # a record about this task it did not write
    # Without a task the seal holds the ledger whole, as before.
    whole = ledger.seal(state, stat_cache=False)
    _append(state, "sibling")
    assert any("rewritten" in p for p in ledger.tampered(whole, state))
    # An edit of what was there is never a sibling's append.
    sealed = ledger.seal(state, stat_cache=False, task="mine")
    raw = (state / "ledger.jsonl").read_bytes()
    (state / "ledger.jsonl").write_bytes(raw.replace(b'"attempt":1', b'"attempt":2', 1))
    assert any("rewritten" in p for p in ledger.tampered(sealed, state))
