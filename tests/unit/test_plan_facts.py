"""The plan facts files:, new:, issue:, closes: and each:, checked against a real tree."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopkit.plan import drafting
from loopkit.plan.checking import check
from loopkit.plan.expanding import expand, prepare, tree_files
from loopkit.plan.parsing import parse
from tests.helpers import git

CONTRACT = {"scope": {"writable": ["src/**", "tests/**"], "protected": ["src/vendor/**"]}}


@pytest.fixture(name="tree_repo")
def tree_repo_fixture(git_repo: Path) -> Path:
    for name in ("src/a.py", "src/handlers/users.py", "src/handlers/orders.py", "src/vendor/x.py"):
        (git_repo / name).parent.mkdir(parents=True, exist_ok=True)
        (git_repo / name).write_text("")
    (git_repo / "src" / "handlers" / "README.md").write_text("")
    git(git_repo, "add", ".")
    git(git_repo, "commit", "-q", "-m", "tree")
    return git_repo


def _problems(text: str, repo: Path, contract: dict[str, object] | None = CONTRACT) -> list[str]:
    plan = parse(text.encode())
    tree = tree_files(repo)
    expand(plan, tree)
    return [str(p) for p in check(plan, contract=contract, tree=tree)]


def test_files_exist_or_are_declared_new(tree_repo: Path) -> None:
    ok = (
        "- [ ] A {#a}\n  budget: 20 lines / 3 files\n  scope: src/**, tests/**\n"
        "  files: src/a.py, +tests/test_a.py\n  new: src/b.py\n  end\n"
    )
    assert _problems(ok, tree_repo) == []
    plan = parse(ok.encode())
    d = plan.tasks[0].as_dict()
    assert d["files"] == ["src/a.py", "tests/test_a.py", "src/b.py"]
    assert d["new_files"] == ["tests/test_a.py", "src/b.py"]
    missing = (
        "- [ ] A {#a}\n  budget: 20 lines\n  scope: src/**\n  files:\n  - src/gone.py\n  end\n"
    )
    assert _problems(missing, tree_repo) == [
        "line 5: file 'src/gone.py' does not exist in the tree: declare it new "
        "('new: src/gone.py' or '+src/gone.py')"
    ]
    exists = "- [ ] A {#a}\n  budget: 20 lines\n  scope: src/**\n  files: +src/a.py\n  end\n"
    assert _problems(exists, tree_repo) == [
        "line 4: file 'src/a.py' is declared new but exists in the tree"
    ]


def test_files_stay_inside_the_scope_and_the_contract(tree_repo: Path) -> None:
    text = (
        "- [ ] A {#a}\n  budget: 20 lines / 4 files\n  scope: src/a.py, docs/**, src/vendor/**\n"
        "  files: src/a.py\n  files: +src/other.py, +docs/a.md, src/vendor/x.py\n  end\n"
    )
    got = _problems(text, tree_repo)
    assert "line 5: file 'src/other.py' is outside the task's scope" in got[-4] or any(
        "'src/other.py' is outside the task's scope" in p for p in got
    )
    assert any(p.startswith("line 5: file 'docs/a.md' is outside the contract's") for p in got)
    assert any(p.startswith("line 5: file 'src/vendor/x.py' is protected") for p in got)


def test_files_are_exact_paths_within_the_budget(tree_repo: Path) -> None:
    text = "- [ ] A {#a}\n  budget: 1 files\n  scope: src/**\n  files: src/*.py, src/a.py\n  end\n"
    got = _problems(text, tree_repo)
    assert got == [
        "line 4: file 'src/*.py' is not one path: files: lists exact paths, scope: takes globs"
    ]
    text = "- [ ] A {#a}\n  budget: 1 files\n  scope: src/**\n  files: src/a.py, +src/b.py\n  end\n"
    assert _problems(text, tree_repo) == [
        "line 1: files: lists 2 files, over its budget of 1 files"
    ]
    text = "- [ ] A {#a}\n  budget: 9 lines\n  scope: src/**\n  files: ../etc/passwd\n  end\n"
    assert "escapes the repository" in _problems(text, tree_repo)[0]


def test_done_tasks_are_not_held_to_the_tree(tree_repo: Path) -> None:
    text = "- [x] A {#a}\n  budget: 9 lines\n  scope: src/**\n  files: src/gone.py\n  end\n"
    assert _problems(text, tree_repo) == []


def test_issue_and_closes_are_carried(tree_repo: Path) -> None:
    text = (
        "- [ ] A {#a}\n  issue: #12\n  closes: https://example.invalid/issues/12\n"
        "  budget: 9 lines\n  scope: src/a.py\n  end\n"
    )
    plan = parse(text.encode())
    d = plan.tasks[0].as_dict()
    assert (d["issue"], d["closes"]) == ("#12", "https://example.invalid/issues/12")
    twice = "- [ ] A\n  issue: #1\n  issue: #2\n  budget: 9 lines\n  scope: src/a.py\n  end\n"
    assert [str(p) for p in parse(twice.encode()).problems] == ["line 3: issue given twice"]


def test_each_expands_one_slice_per_file_sorted_and_deterministic(tree_repo: Path) -> None:
    text = (
        "- [ ] Validate the handlers {#validate}\n  issue: #7\n  each: src/handlers/*.py\n"
        "  budget: 30 lines / 1 files\n  end\n- [ ] After {#after}\n  depends: validate\n"
        "  budget: 5 lines\n  scope: src/a.py\n  end\n"
    )
    runs = []
    for _ in range(2):
        plan = parse(text.encode())
        expand(plan, tree_files(tree_repo))
        runs.append([t.as_dict() for t in plan.tasks])
    assert runs[0] == runs[1]
    ids = [(t["id"], t["scope"], t.get("parent")) for t in runs[0]]
    assert ids == [
        ("validate", [], None),
        ("validate-orders", ["src/handlers/orders.py"], "validate"),
        ("validate-users", ["src/handlers/users.py"], "validate"),
        ("after", ["src/a.py"], None),
    ]
    orders = runs[0][1]
    assert orders["budget"] == {"lines": 30, "files": 1} and orders["issue"] == "#7"
    assert orders["expanded"] is True
    plan = parse(text.encode())
    assert check(plan, contract=CONTRACT, tree=prepare(plan, str(tree_repo / "TASKS.md"))) == []
    from loopkit.plan.readiness import ready_tasks

    assert [t.id for t in ready_tasks(plan)] == ["validate-orders"]


def test_each_problems(tree_repo: Path) -> None:
    none = "- [ ] V {#v}\n  each: lib/*.rs\n  budget: 5 lines\n  end\n"
    assert _problems(none, tree_repo) == ["line 2: each 'lib/*.rs' matches no file in the tree"]
    outside = "- [ ] V {#v}\n  each: src/vendor/*.py\n  budget: 5 lines\n  end\n"
    assert _problems(outside, tree_repo) == [
        "line 1: scope 'src/vendor/x.py' is protected by the contract"
    ]
    clash = "- [ ] V {#v}\n  each: src/a.py\n  budget: 5 lines\n  end\n- [ ] X {#v-a}\n  budget: 5 lines\n  scope: src/a.py\n  end\n"
    plan = parse(clash.encode())
    expand(plan, tree_files(tree_repo))
    assert [t.id for t in plan.tasks] == ["v", "v-a-2", "v-a"]


def test_extract_takes_the_fenced_items_only() -> None:
    reply = "Sure.\n\n```markdown\n- [ ] A {#a}\n  budget: 9 lines\n  end\n```\nThanks!"
    assert drafting.extract(reply) == "- [ ] A {#a}\n  budget: 9 lines\n  end\n"
    assert drafting.extract("no plan here") == ""
    bare = "Plan:\n- [ ] A\n  scope: x\n  end\nHope this helps."
    assert drafting.extract(bare) == "- [ ] A\n  scope: x\n  end\n"


def test_a_draft_must_not_nest_under_an_existing_item(tree_repo: Path) -> None:
    existing = b"- [ ] Old {#old}\n  budget: 9 lines\n  scope: src/a.py\n  end\n"
    draft = "  - [ ] Sneaky slice\n    budget: 9 lines\n    scope: src/a.py\n    end\n"
    problems, ids = drafting.validate(
        existing, draft, contract=CONTRACT, tree=tree_files(tree_repo), source="TASKS.md"
    )
    assert ids == [] and "top-level item" in problems[0].message
    whole, offset = drafting.joined(existing, "- [ ] New\n")
    assert whole.startswith(existing) and offset == 5
    assert whole.decode().splitlines()[offset] == "- [ ] New"


def test_append_plan_keeps_every_byte_and_refuses_a_changed_file(tmp_path: Path) -> None:
    from loopkit.plan.marking import Conflict, append_plan

    tasks = tmp_path / "TASKS.md"
    append_plan(tasks, b"", b"- [ ] New\n")  # made when missing
    assert tasks.read_bytes() == b"- [ ] New\n"
    original = tasks.read_bytes()
    tasks.write_bytes(original + b"- [ ] Someone else's\n")
    with pytest.raises(Conflict):
        append_plan(tasks, original, original + b"- [ ] Mine\n")
    assert tasks.read_bytes() == original + b"- [ ] Someone else's\n"
    with pytest.raises(ValueError):
        append_plan(tasks, b"other", b"rewritten")


def test_next_and_check_hand_out_the_expanded_slices(
    tree_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from click.testing import CliRunner

    from loopkit.cli.plan import main

    monkeypatch.chdir(tree_repo)
    (tree_repo / "loop.json").write_text(
        json.dumps(
            {
                "version": 1,
                "objective": "validated handlers",
                "criteria": [{"name": "t", "run": "true"}],
                "scope": {"writable": ["src/**"]},
            }
        )
    )
    (tree_repo / "TASKS.md").write_text(
        "- [ ] Validate {#validate}\n  each: src/handlers/*.py\n  budget: 30 lines / 1 file\n  end\n"
    )
    done = CliRunner().invoke(main, ["next", "TASKS.md", "--contract", "loop.json"])
    assert done.exit_code == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["task"]["id"] == "validate-orders"
    assert doc["contract"]["scope"]["writable"] == ["src/handlers/orders.py"]
    done = CliRunner().invoke(
        main, ["next", "TASKS.md", "--contract", "loop.json", "--except", "validate-orders"]
    )
    assert done.exit_code == 1  # the next slice waits for the first
    done = CliRunner().invoke(main, ["check", "TASKS.md", "--contract", "loop.json"])
    assert done.exit_code == 0, done.stdout
    ids = [t["id"] for t in json.loads(done.stdout)["tasks"]]
    assert ids == ["validate", "validate-orders", "validate-users"]


@pytest.mark.parametrize(
    ("existing", "whole"),
    [
        (b"", b"- [ ] N\n"),
        (b"\n\n", b"\n\n- [ ] N\n"),
        (b"  ", b"  \n- [ ] N\n"),
        (b"- [x] Old", b"- [x] Old\n\n- [ ] N\n"),
        (b"- [x] Old\r\n", b"- [x] Old\r\n\n- [ ] N\n"),
        (b"- [x] Old\n\n", b"- [x] Old\n\n- [ ] N\n"),
    ],
)
def test_a_draft_is_appended_after_every_existing_byte(existing: bytes, whole: bytes) -> None:
    got, offset = drafting.joined(existing, "- [ ] N\n")
    assert got == whole and got.startswith(existing)
    assert got.split(b"\n")[offset] == b"- [ ] N"


def test_problems_after_an_expansion_name_the_tasks_new_index(tree_repo: Path) -> None:
    text = (
        "- [ ] V {#v}\n  each: src/handlers/*.py\n  budget: 5 lines\n  end\n"
        "- [ ] W {#w}\n  budget: 5 lines\n  scope: src/a.py\n  bogus: 1\n  end\n"
    )
    plan = parse(text.encode())
    assert [p.path for p in plan.problems] == ["$.tasks[1]"]
    expand(plan, tree_files(tree_repo))
    assert plan.tasks[3].id == "w"
    assert [p.path for p in plan.problems] == ["$.tasks[3]"]


EACH = (
    "# Plan\n\n- [ ] Validate the handlers {#validate}\n  issue: #7\n"
    "  each: src/handlers/*.py\n  budget: 30 lines / 1 file\n  accept: rejects bad input\n"
    "  end\n- [ ] After {#after}\n  depends: validate\n  budget: 5 lines\n  scope: src/a.py\n"
    "  end\n"
)


def _next(tasks: Path) -> str | None:
    from loopkit.plan.readiness import next_task

    plan = parse(tasks.read_bytes())
    prepare(plan, str(tasks))
    found = next_task(plan)
    return found.id if found else None


def test_each_slices_are_marked_one_by_one_and_keep_their_ids(tree_repo: Path) -> None:
    from loopkit.plan.marking import mark

    tasks = tree_repo / "TASKS.md"
    tasks.write_text(EACH)
    plan = parse(tasks.read_bytes())
    prepare(plan, str(tasks))
    before = {t.id: t.as_dict() for t in plan.tasks if t.expanded}
    assert _next(tasks) == "validate-orders"
    edit = mark(tasks, "validate-orders", "done")
    assert edit.changed
    text = tasks.read_text()
    lines = text.splitlines()
    # The item's own lines and everything around it are kept byte for byte; the slices
    # are written in between, before the item's end.
    first = "  - [x] Validate the handlers (src/handlers/orders.py) {#validate-orders}"
    assert lines[:8] == [*EACH.splitlines()[:7], first]
    assert text.endswith(EACH[EACH.index("  end\n- [ ] After") :])
    assert lines[2] == "- [ ] Validate the handlers {#validate}"  # the item is not done
    assert edit.line == 8 and lines[edit.line - 1].startswith("  - [x]")
    assert _next(tasks) == "validate-users"
    # Re-read: the written slices carry the same task documents as the expansion did.
    plan = parse(tasks.read_bytes())
    assert check(plan, contract=CONTRACT, tree=prepare(plan, str(tasks))) == []
    after = {t.id: t.as_dict() for t in plan.tasks if t.parent is not None}
    for sid, doc in before.items():
        got = {k: v for k, v in after[sid].items() if k not in ("source", "status")}
        want = {k: v for k, v in doc.items() if k not in ("source", "status", "expanded")}
        assert got == want
    # A second mark is idempotent; a file added to the tree later reshuffles nothing,
    # though it sorts first and has the same stem as an id handed out.
    written = tasks.read_bytes()
    assert not mark(tasks, "validate-orders", "done").changed
    assert tasks.read_bytes() == written
    (tree_repo / "src" / "handlers" / "a").mkdir()
    (tree_repo / "src" / "handlers" / "a" / "users.py").write_text("")
    (tree_repo / "src" / "handlers" / "accounts.py").write_text("")
    assert _next(tasks) == "validate-users"
    plan = parse(tasks.read_bytes())
    prepare(plan, str(tasks))
    assert plan.find("validate-users").scope == ["src/handlers/users.py"]  # type: ignore[union-attr]
    assert [t.id for t in plan.tasks if t.parent] == ["validate-orders", "validate-users"]
    # The last slice done completes the item; reopening a slice reopens it.
    mark(tasks, "validate-users", "done")
    assert tasks.read_text().splitlines()[2] == "- [x] Validate the handlers {#validate}"
    assert _next(tasks) == "after"
    mark(tasks, "validate-users", "open")
    assert tasks.read_text().splitlines()[2] == "- [ ] Validate the handlers {#validate}"
    assert _next(tasks) == "validate-users"


def test_an_each_slice_parked_then_the_next_one(tree_repo: Path) -> None:
    from loopkit.plan.marking import mark

    tasks = tree_repo / "TASKS.md"
    tasks.write_text(EACH)
    mark(tasks, "validate-orders", "parked", reason="same failure twice")
    text = tasks.read_text()
    assert (
        "- [!] Validate the handlers (src/handlers/orders.py) {#validate-orders} "
        "(parked: same failure twice)" in text
    )
    assert _next(tasks) is None  # the next slice waits for the parked one
    mark(tasks, "validate-orders", "open")
    assert _next(tasks) == "validate-orders"


def test_marking_between_read_and_write_keeps_others_lines_or_refuses(
    tree_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from loopkit.plan.marking import Conflict, commit_edit, prepare_mark

    tasks = tree_repo / "TASKS.md"
    tasks.write_text(EACH)
    # Another writer changes an unrelated line between the read and the write: kept.
    edit = prepare_mark(tasks, "validate-orders", "done")
    tasks.write_text(EACH.replace("- [ ] After {#after}", "- [ ] After, renamed {#after}"))
    assert commit_edit(edit)
    text = tasks.read_text()
    assert "After, renamed" in text and "- [x] Validate the handlers (src/handlers/orders" in text
    # Another mark wrote the slices out meanwhile: this one's item changed, nothing written.
    tasks.write_text(EACH)
    mine = prepare_mark(tasks, "validate-users", "parked")
    other = prepare_mark(tasks, "validate-orders", "done")
    assert commit_edit(other)
    theirs = tasks.read_bytes()
    with pytest.raises(Conflict, match="changed between read and write"):
        commit_edit(mine)
    assert tasks.read_bytes() == theirs
    # A crash in the middle of the write (the rename never happens): the file is whole.
    tasks.write_text(EACH)
    edit = prepare_mark(tasks, "validate-orders", "done")
    import loopkit.files

    def crash(*_: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(loopkit.files.os, "replace", crash)
    with pytest.raises(OSError):
        commit_edit(edit)
    monkeypatch.undo()
    assert tasks.read_text() == EACH
    assert sorted(p.name for p in tree_repo.iterdir() if p.name.startswith(".TASKS")) == []
    assert _next(tasks) == "validate-orders"


SPLIT_BASE = (
    "- [ ] Grow {#grow}\n  - [!] Rows {#rows} (parked: failed)\n    budget: 4 lines / 2 files\n"
    "    scope: src/handlers/\n    end\n  - [ ] Footer {#footer}\n    budget: 4 lines\n"
    "    scope: src/a.py\n    end\n  end\n"
)

ONE = "- [ ] Users {#rows-u}\n  budget: 3 lines\n  scope: src/handlers/users.py\n  files: src/handlers/users.py\n  end\n"
TWO = ONE.replace("Users {#rows-u}", "Orders {#rows-o}").replace("users.py", "orders.py")


@pytest.mark.parametrize(
    ("answer", "needle"),
    [
        # An early end closes the task's plan: what follows would escape under the parent.
        (
            ONE + "end\n- [ ] Escaped {#evil}\n  budget: 1 line\n  scope: src/a.py\n  end\n",
            "after the 'end'",
        ),
        (ONE + TWO.replace("{#rows-o}", "{#footer}"), "duplicate id {#footer}"),
        (ONE, "a split makes at least 2"),
        (
            ONE
            + "  - [ ] Deeper {#d}\n    budget: 1 line\n    scope: src/handlers/users.py\n    end\n"
            + TWO,
            "do not nest deeper",
        ),
        (ONE + TWO.replace("src/handlers/orders.py", "src/a.py"), "outside its parent's scope"),
        (ONE + TWO.replace("- [ ]", "- [x]"), "is open"),
        (ONE + TWO.replace("  files: src/handlers/orders.py\n", ""), "no files: list"),
        (ONE + TWO.replace("orders.py", "users.py").replace("{#rows-o}", "{#rows-o}"), "disjoint"),
        ("Sure, here it is.", "no slices in the answer"),
    ],
)
def test_a_hostile_split_answer_is_refused(tree_repo: Path, answer: str, needle: str) -> None:
    from loopkit.plan import splitting

    tree = tree_files(tree_repo)
    raw = SPLIT_BASE.encode()
    plan = parse(raw)
    expand(plan, tree)
    task = plan.find("rows")
    assert task is not None and splitting.refusal(task) is None
    problems, _ = splitting.validate(
        raw, task, drafting.extract(answer), contract=CONTRACT, tree=tree, source="TASKS.md"
    )
    assert any(needle in p.message for p in problems), [str(p) for p in problems]
    ok, ids = splitting.validate(
        raw, task, ONE + TWO, contract=CONTRACT, tree=tree, source="TASKS.md"
    )
    assert (ok, ids) == ([], ["rows-u", "rows-o"])
    whole, at = splitting.insert(raw, task, ONE + TWO)
    lines = whole.decode().splitlines()
    assert lines[1] == "  - [ ] Rows {#rows}" and lines[at] == "    - [ ] Users {#rows-u}"
    assert lines[:1] + lines[2:at] == SPLIT_BASE.splitlines()[:1] + SPLIT_BASE.splitlines()[2:at]
    assert lines[at + 10 :] == SPLIT_BASE.splitlines()[at:]


def test_what_cannot_be_split_says_why(tree_repo: Path) -> None:
    from loopkit.plan import splitting

    text = EACH + SPLIT_BASE
    plan = parse(text.encode())
    expand(plan, tree_files(tree_repo))
    why = {t.id: splitting.refusal(t) for t in plan.tasks}
    assert "each: item" in str(why["validate"])
    assert "one file as its scope (src/handlers/orders.py)" in str(why["validate-orders"])
    assert "holds slices already" in str(why["grow"])
    assert "one file as its scope (src/a.py)" in str(why["footer"])
    assert why["rows"] is None


def test_reopening_a_slice_of_an_each_item_marked_done_by_hand(tree_repo: Path) -> None:
    from loopkit.plan.marking import mark

    tasks = tree_repo / "TASKS.md"
    tasks.write_text(EACH.replace("- [ ] Validate", "- [x] Validate"))
    assert _next(tasks) == "after"
    mark(tasks, "validate-users", "open")
    lines = tasks.read_text().splitlines()
    assert lines[2] == "- [ ] Validate the handlers {#validate}"
    assert [line[:7] for line in lines if "{#validate-" in line] == ["  - [x]", "  - [ ]"]
    assert _next(tasks) == "validate-users"


@given(
    n=st.integers(min_value=1, max_value=4),
    marks=st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=3), st.sampled_from(["done", "parked", "open"])
        ),
        max_size=8,
    ),
)
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_any_sequence_of_marks_on_each_slices_keeps_the_invariants(
    tree_repo: Path, n: int, marks: list[tuple[int, str]]
) -> None:
    from loopkit.plan.marking import mark

    folder = tree_repo / "src" / "many"
    folder.mkdir(exist_ok=True)
    for old in folder.iterdir():
        old.unlink()
    for i in range(n):
        (folder / f"m{i}.py").write_text("")
    item = "- [ ] Many {#many}\n  each: src/many/*.py\n  budget: 5 lines / 1 file\n  end\n"
    tail = "- [ ] Tail {#tail}\n  budget: 5 lines\n  scope: src/a.py\n  end\n"
    tasks = tree_repo / "TASKS.md"
    tasks.write_text(item + tail)
    want = {f"many-m{i}": "open" for i in range(n)}
    for index, status in marks:
        sid = f"many-m{index % n}"
        mark(tasks, sid, status)
        want[sid] = status
        again = tasks.read_bytes()
        mark(tasks, sid, status)
        assert tasks.read_bytes() == again  # a second mark changes nothing
        text = tasks.read_text()
        assert text.endswith("  end\n" + tail)  # what follows the item is kept
        assert text.splitlines()[1:3] == item.splitlines()[1:3]  # and its own plan lines
        plan = parse(tasks.read_bytes())
        assert check(plan, contract=CONTRACT, tree=prepare(plan, str(tasks))) == []
        got = {t.id: t.status for t in plan.tasks if t.parent is not None}
        assert got == want
        parent = plan.find("many")
        assert parent is not None
        assert (parent.status == "done") == all(s == "done" for s in want.values())


def test_a_split_answer_indented_as_it_will_stand_is_taken_as_is(tree_repo: Path) -> None:
    from loopkit.plan import splitting

    tree = tree_files(tree_repo)
    raw = SPLIT_BASE.encode()
    plan = parse(raw)
    expand(plan, tree)
    task = plan.find("rows")
    assert task is not None
    nested = "".join(f"    {line}\n" for line in (ONE + TWO).splitlines())
    problems, ids = splitting.validate(
        raw, task, nested, contract=CONTRACT, tree=tree, source="TASKS.md"
    )
    assert (problems, ids) == ([], ["rows-u", "rows-o"])
    assert splitting.insert(raw, task, nested) == splitting.insert(raw, task, ONE + TWO)


def test_a_split_is_not_written_over_a_file_that_moved_on(tmp_path: Path) -> None:
    from loopkit.plan.marking import Conflict, replace_plan

    tasks = tmp_path / "TASKS.md"
    tasks.write_bytes(SPLIT_BASE.encode())
    tasks.chmod(0o640)
    original = tasks.read_bytes()
    tasks.write_bytes(original.replace(b"- [ ] Footer", b"- [x] Footer"))  # landed meanwhile
    with pytest.raises(Conflict, match="changed while splitting; nothing written"):
        replace_plan(tasks, original, original + b"split\n")
    assert b"- [x] Footer" in tasks.read_bytes()
    replace_plan(tasks, tasks.read_bytes(), b"whole\n")
    assert tasks.read_bytes() == b"whole\n" and tasks.stat().st_mode & 0o777 == 0o640
