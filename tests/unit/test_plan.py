"""TASKS.md parsing, plan checks, readiness and marking (pure: bytes in, bytes out)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopkit import plan
from loopkit.errors import BadInput
from tests.helpers.plan import CONTRACT, TASKS_MD, chain, item, parsed, problems, small, write

# --------------------------------------------------------------------------- parsing


def test_statuses_kinds_and_texts() -> None:
    p = parsed(
        "- [ ] open one\n- [x] done one\n- [X] Done too\n- [!] parked one\n- [ ] GOAL: judged\n"
    )
    assert [(t.status, t.kind, t.text) for t in p.tasks] == [
        ("open", "task", "open one"),
        ("done", "task", "done one"),
        ("done", "task", "Done too"),
        ("parked", "task", "parked one"),
        ("open", "goal", "judged"),
    ]
    assert [t.id for t in p.tasks] == ["open-one", "done-one", "done-too", "parked-one", "judged"]


def test_other_bullets_and_not_items() -> None:
    p = parsed(
        "* [ ] star\n+ [x] plus\n- [ ]no space\n-[ ] no space either\nplain text\n- a list\n"
    )
    assert [t.text for t in p.tasks] == ["star", "plus"]


def test_unknown_status_mark_is_a_problem() -> None:
    msgs = problems("- [~] half done\n")
    assert any("unknown status mark [~]" in m for m in msgs)


def test_explicit_id_and_slug() -> None:
    p = parsed("- [ ] Fix the thing {#fix}\n- [ ] Ünïcödé — and punctuation!!\n- [ ] 日本語\n")
    assert [t.id for t in p.tasks] == ["fix", "unicode-and-punctuation", "task"]
    assert p.tasks[0].text == "Fix the thing"


def test_slug_is_bounded() -> None:
    t = parsed("- [ ] " + "word " * 40 + "\n").tasks[0]
    assert len(t.id) <= plan.MAX_SLUG and plan.ID_PATTERN.match(t.id)


def test_duplicate_slugs_get_suffixes_in_order_and_explicit_ids_are_reserved() -> None:
    p = parsed("- [ ] Same\n- [ ] same\n- [ ] Same!\n- [ ] other {#same-2}\n")
    assert [t.id for t in p.tasks] == ["same", "same-3", "same-4", "same-2"]
    assert plan.check(p) == []


def test_duplicate_explicit_id_is_a_problem() -> None:
    msgs = problems("- [ ] a {#x}\n- [ ] b {#x}\n")
    assert any("duplicate id {#x}" in m for m in msgs)


@pytest.mark.parametrize("bad", ["X", "-x", "a_b", "a.b", ""])
def test_bad_explicit_id_is_a_problem(bad: str) -> None:
    msgs = problems(f"- [ ] a {{#{bad}}}\n")
    assert any("expected lowercase letters" in m for m in msgs)


def test_ids_do_not_depend_on_line_numbers() -> None:
    before = [t.id for t in parsed(TASKS_MD).tasks]
    after = [t.id for t in parsed("# Notes\n\nSome prose.\n\n" + TASKS_MD).tasks]
    assert before == after
    assert [t.line for t in parsed(TASKS_MD).tasks] != [
        t.line for t in parsed("\n\n" + TASKS_MD).tasks
    ]


def test_plan_contract_lines() -> None:
    p = parsed(TASKS_MD)
    fix = p.find("fix-blank-line-handling-in-parse-headers")
    assert fix is not None
    assert fix.scope == ["src/parser/headers.py", "tests/test_headers.py"]
    assert fix.budget == {"lines": 40, "files": 2}
    assert fix.depends == ["setup"]
    assert fix.ended and fix.has_plan
    docs = p.find("docs")
    assert docs is not None and docs.kind == "goal"
    assert [s.id for s in docs.slices] == ["docs-ref", "docs-tutorial"]
    assert p.find("docs-tutorial").parent is docs  # type: ignore[union-attr]
    assert plan.check(p) == []


def test_scope_inline_and_indented_mixed_and_trailing_slash() -> None:
    t = parsed(
        item("x", plan_lines=("budget: 5 lines", "scope: a.py, `b.py`", "  - docs/", "  - a.py"))
    ).tasks[0]
    assert t.scope == ["a.py", "b.py", "docs/**"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("300 lines / 4 files", {"lines": 300, "files": 4}),
        ("300 lines, 4 files", {"lines": 300, "files": 4}),
        ("1 line / 1 file", {"lines": 1, "files": 1}),
        ("~120 lines", {"lines": 120}),
        ("3 Files", {"files": 3}),
    ],
)
def test_budget_forms(value: str, expected: dict[str, int]) -> None:
    t = parsed(item("x", plan_lines=(f"budget: {value}", "scope: a.py"))).tasks[0]
    assert t.budget == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("lots", "cannot read 'lots'"),
        ("0 lines", "lines must be >= 1"),
        ("-5 files", "files must be >= 1"),
        ("", "expected '<N> lines / <M> files'"),
        ("3 lines / 4 lines", "lines given twice"),
    ],
)
def test_budget_errors(value: str, message: str) -> None:
    msgs = problems(item("x", plan_lines=(f"budget: {value}", "scope: a.py")))
    assert any(message in m for m in msgs), msgs


def test_allow_empty_accept_and_notes() -> None:
    t = parsed(
        item(
            "x",
            plan_lines=(
                "budget: 5 lines",
                "scope: a.py",
                "allow-empty: yes",
                "accept: a blank line ends the headers",
                "note: see issue 12",
            ),
        )
    ).tasks[0]
    assert t.allow_empty is True
    assert t.accept == ["a blank line ends the headers"]
    assert t.notes == ["see issue 12"]
    assert t.as_dict()["allow_empty"] is True
    msgs = problems(item("x", plan_lines=("budget: 5 lines", "scope: a.py", "allow-empty: maybe")))
    assert any("allow-empty: expected yes or no" in m for m in msgs)


def test_truncated_plan_is_refused() -> None:
    text = "- [ ] x\n  budget: 5 lines\n  scope: a.py\n"
    msgs = problems(text)
    assert any("truncated plan" in m for m in msgs)
    assert problems(text + "  end\n") == []


def test_truncated_after_the_item_line_is_caught_in_a_planned_file() -> None:
    text = small("first") + "- [ ] second, cut off here\n"
    assert any("no plan" in m for m in problems(text))


def test_plain_checklist_without_plans_is_valid() -> None:
    assert problems("- [ ] one\n- [ ] two\n- [x] three\n") == []


def test_done_items_without_plan_are_fine_in_a_planned_file() -> None:
    assert problems("- [x] old history\n" + small("new")) == []


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (("budget: 5 lines", "scope: a.py", "owner: me"), "unknown plan key 'owner'"),
        (("budget: 5 lines", "scope: a.py", "just some prose"), "unrecognized plan line"),
        (("budget: 5 lines",), "plan has no scope"),
        (("scope: a.py",), "plan has no budget"),
        (("budget: 5 lines", "scope: /etc/passwd"), "is absolute"),
        (("budget: 5 lines", "scope: ../other/**"), "escapes the repository"),
        (("budget: 5 lines", "scope: a.py", "depends:"), "depends: expected one or more"),
        (("budget: 5 lines", "scope: a.py", "depends: nowhere"), "unknown task 'nowhere'"),
        (("budget: 5 lines", "scope: a.py", "depends: x"), "cannot depend on itself"),
    ],
)
def test_plan_problems(lines: tuple[str, ...], message: str) -> None:
    msgs = problems(item("x", plan_lines=lines))
    assert any(message in m for m in msgs), msgs


def test_line_after_end_is_a_problem() -> None:
    text = "- [ ] x\n  budget: 5 lines\n  scope: a.py\n  end\n  scope: b.py\n"
    assert any("after the 'end' marker" in m for m in problems(text))


def test_every_problem_is_listed_with_line_path_and_task() -> None:
    text = (
        "- [ ] a\n  budget: lots\n  end\n"  # no scope, bad budget
        "- [ ] b\n  budget: 5 lines\n  scope: a.py\n  depends: ghost\n"  # truncated, ghost
    )
    found = plan.check(parsed(text))
    assert len(found) >= 4
    assert {p.task for p in found} == {"a", "b"}
    assert all(p.line and p.path.startswith("$.tasks[") for p in found)
    assert [p.line for p in found] == sorted(p.line for p in found if p.line)


def test_fenced_code_is_not_parsed() -> None:
    text = "```\n- [ ] not a task\n  budget: nonsense\n```\n- [ ] real\n"
    p = parsed(text)
    assert [t.text for t in p.tasks] == ["real"]
    assert plan.check(p) == []


def test_no_tasks_is_invalid() -> None:
    assert any("no tasks" in m for m in problems("# Just a heading\n\nprose\n"))


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"", "empty file"),
        (b"  \n\n", "empty file"),
        (b"\x00\x01binary", "binary data"),
        (b"\xff\xfe- [ ] x", "not UTF-8"),
    ],
)
def test_undecodable_bytes_raise_bad_input(raw: bytes, message: str) -> None:
    with pytest.raises(BadInput, match=message):
        plan.parse(raw)


def test_crlf_and_bom() -> None:
    raw = "\ufeff- [ ] a {#a}\r\n  budget: 5 lines\r\n  scope: a.py\r\n  end\r\n".encode()
    p = plan.parse(raw)
    assert [t.id for t in p.tasks] == ["a"]
    assert plan.check(p) == []


def test_tabs_indent_plan_lines() -> None:
    p = parsed("- [ ] a\n\tbudget: 5 lines\n\tscope: a.py\n\tend\n")
    assert plan.check(p) == []


# --------------------------------------------------------------------------- split threshold


def test_over_threshold_needs_slices() -> None:
    msgs = problems(item("big", plan_lines=("budget: 900 lines / 3 files", "scope: src/**")))
    assert any("over the split threshold (600 lines or 8 files)" in m for m in msgs)
    msgs = problems(item("wide", plan_lines=("budget: 100 lines / 9 files", "scope: src/**")))
    assert any("split it into slices" in m for m in msgs)
    many = ", ".join(f"src/f{i}.py" for i in range(9))
    msgs = problems(item("many", plan_lines=("budget: 100 lines / 2 files", f"scope: {many}")))
    assert any("9 scope entries" in m for m in msgs)


def test_threshold_comes_from_the_contract() -> None:
    text = item("x", plan_lines=("budget: 100 lines / 2 files", "scope: src/a.py"))
    assert problems(text) == []
    tight = {**CONTRACT, "plan": {"split_lines": 50, "split_files": 8}}
    assert any("over the split threshold (50 lines" in m for m in problems(text, tight))


def test_a_slice_over_the_threshold_is_a_problem() -> None:
    text = (
        "- [ ] big\n"
        + item("part", plan_lines=("budget: 700 lines", "scope: src/a/**"), indent="  ")
        + "  end\n"
    )
    assert any("slice budget 700 lines" in m for m in problems(text))


def test_slices_must_be_disjoint() -> None:
    text = (
        "- [ ] big\n"
        + small("one", scope="src/**", indent="  ")
        + small("two", scope="src/b/*.py", indent="  ")
        + "  end\n"
    )
    assert any("slice scopes must be disjoint" in m for m in problems(text))


def test_slices_within_the_parent_scope() -> None:
    text = (
        "- [ ] big\n  scope: src/**\n"
        + small("one", scope="src/a.py", indent="  ")
        + small("two", scope="lib/b.py", indent="  ")
        + "  end\n"
    )
    msgs = problems(text)
    assert msgs == ["scope 'lib/b.py' is outside its parent's scope"]


def test_slices_run_in_order() -> None:
    text = (
        "- [ ] big\n"
        + item(
            "one",
            plan_lines=("budget: 5 lines", "scope: a.py", "depends: two"),
            indent="  ",
        )
        + small("two", scope="b.py", indent="  ")
        + "  end\n"
    )
    msgs = problems(text)
    assert any("slices run in their written order" in m for m in msgs)


def test_slices_nest_two_deep_at_most_and_need_the_parent_end() -> None:
    # A slice may hold sub-slices (a re-split writes them); a sub-slice may not.
    three = "- [ ] big\n  - [ ] mid\n    - [ ] deep\n"
    assert not any("slices do not nest" in m for m in problems(three))
    text = three + "      - [ ] deeper\n"
    msgs = problems(text)
    assert any("slices do not nest deeper" in m for m in msgs)
    assert any("truncated plan" in m for m in msgs)


def test_parent_keys_after_slices_are_a_problem() -> None:
    text = "- [ ] big\n" + small("one", indent="  ") + "  scope: x.py\n  end\n"
    assert any("before its first slice" in m for m in problems(text))


def test_dependency_cycle() -> None:
    text = item("a", plan_lines=("budget: 5 lines", "scope: a.py", "depends: b")) + item(
        "b", plan_lines=("budget: 5 lines", "scope: b.py", "depends: a")
    )
    assert any("dependency cycle: a -> b -> a" in m for m in problems(text))


@pytest.mark.parametrize("n", [1000, 5000])
def test_a_long_dependency_chain_is_walked_without_recursion(n: int) -> None:
    # Written backwards, so a depth-first walk goes all the way down from the first task.
    p = parsed(chain(n, backwards=True))
    assert plan.check(p) == []
    assert plan.next_task(p).id == f"t{n - 1}"  # type: ignore[union-attr]
    cyclic = parsed(chain(n, backwards=True, cycle=True))
    [found] = [m for m in problems(chain(n, backwards=True, cycle=True)) if "cycle" in m]
    assert found.startswith("dependency cycle: t0 -> t1 -> ") and found.endswith(f"t{n - 1} -> t0")
    assert plan.next_task(cyclic) is None


@pytest.mark.parametrize("n", [1000, 5000])
def test_a_parked_task_at_the_end_of_a_long_chain_is_named(n: int) -> None:
    p = parsed(chain(n, backwards=True, parked=n - 1))
    ids = p.by_id()
    assert plan.parked_upstream(ids["t0"], ids) == [f"t{n - 1}"]
    expected = f"nothing ready: 0 done, 1 parked (t{n - 1}), {n - 1} blocked"
    assert plan.summary(p).startswith(expected)


def test_deeply_nested_items_are_walked_without_recursion() -> None:
    text = "".join("  " * i + f"- [ ] level {i} {{#l{i}}}\n" for i in range(1200))
    p = parsed(text)
    ids = p.by_id()
    assert any("slices do not nest" in m for m in problems(text))
    assert plan.effective_status(ids["l0"]) == "open"
    assert plan.all_depends(ids["l1199"])[:1] == []  # first slices: nothing before them
    assert plan.next_task(p).id == "l1199"  # type: ignore[union-attr]
    marked = text.replace("- [ ] level 1199 ", "- [!] level 1199 ")
    assert plan.effective_status(parsed(marked).by_id()["l0"]) == "parked"


def test_a_budget_too_long_for_an_integer_is_a_problem() -> None:
    text = item("x", plan_lines=("budget: " + "9" * 5000 + " lines", "scope: src/a.py"))
    assert any("is too large" in m for m in problems(text))


def test_all_depends_lists_the_nearest_first_each_once() -> None:
    text = (
        item("a", plan_lines=("budget: 5 lines", "scope: a.py")) + item("b", plan_lines=("budget: 5 lines", "scope: b.py"))
        + "- [ ] big {#big}\n  depends: a, b\n"
        + small("one", scope="x.py", indent="  ")
        + item("two", plan_lines=("budget: 5 lines", "scope: y.py", "depends: b"), indent="  ")
        + "  end\n"
    )  # fmt: skip
    ids = parsed(text).by_id()
    assert plan.all_depends(ids["two"]) == ["b", "one", "a"]
    assert plan.all_depends(ids["one"]) == ["a", "b"]


def test_contract_scope_is_respected() -> None:
    text = small("x", scope="lib/a.py") + small("y", scope="migrations/0001.py")
    msgs = problems(text, CONTRACT)
    assert "scope 'lib/a.py' is outside the contract's writable scope" in msgs
    assert "scope 'migrations/0001.py' is outside the contract's writable scope" in msgs or (
        "scope 'migrations/0001.py' is protected by the contract" in msgs
    )
    assert problems(small("z", scope="src/**"), CONTRACT) == []


# --------------------------------------------------------------------------- readiness


def test_next_task_follows_dependencies_and_slices() -> None:
    p = parsed(TASKS_MD)
    assert plan.next_task(p).id == "fix-blank-line-handling-in-parse-headers"  # type: ignore[union-attr]
    text = TASKS_MD.replace("- [ ] Fix blank", "- [x] Fix blank")
    assert plan.next_task(parsed(text)).id == "docs-ref"  # type: ignore[union-attr]
    text = text.replace("- [ ] Reference", "- [x] Reference")
    assert plan.next_task(parsed(text)).id == "docs-tutorial"  # type: ignore[union-attr]
    text = text.replace("- [ ] Tutorial", "- [x] Tutorial")
    p = parsed(text)
    assert plan.next_task(p) is None
    assert plan.effective_status(p.find("docs")) == "done"  # type: ignore[arg-type]
    assert plan.summary(p) == "nothing ready: all 4 tasks are done"


def test_later_slice_waits_for_the_earlier_one() -> None:
    p = parsed(TASKS_MD.replace("- [ ] Fix blank", "- [x] Fix blank"))
    ids = p.by_id()
    assert plan.blocked_by(ids["docs-tutorial"], ids) == ["docs-ref"]
    assert not plan.is_ready(ids["docs-tutorial"], ids)


def test_parked_task_blocks_dependents_transitively() -> None:
    text = (
        item("a", mark="!", plan_lines=("budget: 5 lines", "scope: a.py"))
        + item("b", plan_lines=("budget: 5 lines", "scope: b.py", "depends: a"))
        + item("c", plan_lines=("budget: 5 lines", "scope: c.py", "depends: b"))
        + small("d", scope="d.py")
    )
    p = parsed(text)
    assert plan.next_task(p).id == "d"  # type: ignore[union-attr]
    p = parsed(text.replace("- [ ] d", "- [x] d"))
    assert plan.next_task(p) is None
    s = plan.summary(p)
    assert "1 parked (a)" in s and "b behind parked a" in s and "c behind parked a" in s


def test_parked_slice_parks_the_parent_and_blocks_its_dependents() -> None:
    text = TASKS_MD.replace("- [ ] Fix blank", "- [x] Fix blank").replace(
        "- [ ] Reference", "- [!] Reference"
    ) + small("after docs", scope="src/z.py").replace("  end\n", "  depends: docs\n  end\n")
    p = parsed(text)
    assert plan.effective_status(p.find("docs")) == "parked"  # type: ignore[arg-type]
    assert plan.next_task(p) is None


def test_parent_marked_by_hand_closes_its_slices() -> None:
    p = parsed(TASKS_MD.replace("- [ ] GOAL:", "- [!] GOAL:").replace("- [ ] Fix", "- [x] Fix"))
    assert plan.next_task(p) is None


def test_task_document_matches_schema() -> None:
    from loopkit import schema

    p = parsed(TASKS_MD)
    for t in p.tasks:
        schema.validate(t.as_dict(source="TASKS.md"), "task")
    d = p.find("docs-ref").as_dict()  # type: ignore[union-attr]
    assert d["parent"] == "docs"
    assert set(d) >= {"id", "text", "kind", "scope", "budget", "depends"}


# --------------------------------------------------------------------------- marking


@pytest.mark.parametrize(
    ("line", "status", "reason", "expected"),
    [
        (b"- [ ] Fix it\n", "done", None, b"- [x] Fix it\n"),
        (b"- [ ] Fix it\r\n", "parked", None, b"- [!] Fix it\r\n"),
        (b"- [ ] Fix it", "done", None, b"- [x] Fix it"),
        (b"  * [x] Fix {#f}  \n", "open", None, b"  * [ ] Fix {#f}  \n"),
        (
            b"- [ ] Fix it\n",
            "parked",
            "same failure (twice)\nagain",
            b"- [!] Fix it (parked: same failure [twice] again)\n",
        ),
        (b"- [!] Fix it (parked: old)\n", "done", None, b"- [x] Fix it\n"),
        (b"- [!] Fix it (parked: old)\n", "parked", None, b"- [!] Fix it (parked: old)\n"),
        (b"- [!] Fix it (parked: old)\n", "parked", "new", b"- [!] Fix it (parked: new)\n"),
        (b"- [ ] Fix it\n", "done", "in abc123", b"- [x] Fix it (done: in abc123)\n"),
        (b"\xef\xbb\xbf- [ ] Fix it\n", "done", None, b"\xef\xbb\xbf- [x] Fix it\n"),
        (b"-\t[ ]\tFix it\n", "parked", "r", b"-\t[!]\tFix it (parked: r)\n"),
        # a reason quoting worker output: no control sequence reaches TASKS.md
        (
            b"- [ ] Fix it\n",
            "parked",
            "\x1b]0;owned\x07stuck:\x1b[31m Bash\x9b2J\x1bPq\x1b\\ failed\r",
            b"- [!] Fix it (parked: stuck: Bash failed)\n",
        ),
    ],
)
def test_rewrite_line(line: bytes, status: str, reason: str | None, expected: bytes) -> None:
    assert plan.rewrite_line(line, status, reason) == expected


def test_mark_keeps_every_other_byte(tmp_path: Path) -> None:
    raw = TASKS_MD.replace("\n", "\r\n").encode() + b"trailing text without newline"
    path = write(tmp_path, "TASKS.md", raw)
    path.chmod(0o640)
    edit = plan.mark(path, "docs-ref", "parked", reason="timeout")
    new = path.read_bytes()
    old_lines, new_lines = plan.split_lines(raw), plan.split_lines(new)
    assert len(old_lines) == len(new_lines)
    diff = [i for i, (a, b) in enumerate(zip(old_lines, new_lines, strict=True)) if a != b]
    assert diff == [edit.index]
    assert new_lines[edit.index] == b"  - [!] Reference pages {#docs-ref} (parked: timeout)\r\n"
    assert path.stat().st_mode & 0o777 == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["TASKS.md"]  # no temp file left
    assert plan.parse(new).find("docs-ref").status == "parked"  # type: ignore[union-attr]


def test_mark_unknown_task_is_bad_input(tmp_path: Path) -> None:
    path = write(tmp_path, "TASKS.md", TASKS_MD)
    with pytest.raises(BadInput, match="no task with id 'nope'"):
        plan.mark(path, "nope", "done")
    assert path.read_text() == TASKS_MD


def test_mark_refuses_when_the_line_changed_under_it(tmp_path: Path) -> None:
    path = write(tmp_path, "TASKS.md", TASKS_MD)
    edit = plan.prepare_mark(path, "docs-ref", "done")
    changed = TASKS_MD.replace("Reference pages {#docs-ref}", "Reference pages, edited {#docs-ref}")
    path.write_text(changed)
    with pytest.raises(plan.Conflict, match="changed between read and write"):
        plan.commit_edit(edit)
    assert path.read_text() == changed
    assert plan.Conflict.code == 1


def test_mark_keeps_edits_to_other_lines_made_meanwhile(tmp_path: Path) -> None:
    path = write(tmp_path, "TASKS.md", TASKS_MD)
    edit = plan.prepare_mark(path, "docs-ref", "done")
    changed = "# A new heading someone added\n\n" + TASKS_MD
    path.write_text(changed)
    assert plan.commit_edit(edit) is True
    assert path.read_text() == changed.replace("- [ ] Reference", "- [x] Reference")


def test_mark_twice_is_a_no_op(tmp_path: Path) -> None:
    path = write(tmp_path, "TASKS.md", TASKS_MD)
    assert plan.mark(path, "setup", "done").changed is False
    assert path.read_text() == TASKS_MD


# --------------------------------------------------------------------------- property: mark


_texts = st.text(
    # anything but surrogates and the two line-ending characters: tabs, form feeds,
    # U+2028 and friends stay inside a line
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n\x00"),
    min_size=1,
    max_size=30,
).filter(lambda s: s.strip() != "")
_filler = st.sampled_from(["# Heading", "", "Some prose.", "- a plain bullet", "   ", "> quote"])


@st.composite
def _tasks_files(draw: st.DrawFn) -> bytes:
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 6))):
        lines.extend(draw(st.lists(_filler, max_size=2)))
        mark = draw(st.sampled_from([" ", "x", "X", "!"]))
        text = draw(_texts)
        if draw(st.booleans()):
            text += " {#" + draw(st.from_regex(r"[a-z0-9][a-z0-9-]{0,8}", fullmatch=True)) + "}"
        lines.append(f"{draw(st.sampled_from(['-', '*', '+']))} [{mark}] {text}")
        if draw(st.booleans()):
            lines += ["  budget: 10 lines / 1 files", "  scope: src/a.py", "  end"]
    eols = [draw(st.sampled_from(["\n", "\r\n"])) for _ in lines]
    body = "".join(line + eol for line, eol in zip(lines, eols, strict=True))
    if draw(st.booleans()):
        body = body.rstrip("\r\n")
    return body.encode("utf-8")


@settings(max_examples=150, deadline=None)
@given(_tasks_files(), st.data())
def test_parse_mark_parse_keeps_every_other_line(raw: bytes, data: st.DataObject) -> None:
    before = plan.parse(raw)
    task = data.draw(st.sampled_from(before.tasks))
    status = data.draw(st.sampled_from(["done", "parked", "open"]))
    reason = data.draw(st.one_of(st.none(), _texts))
    edit = plan.plan_edit(raw, Path("TASKS.md"), task.id, status, reason, source="TASKS.md")
    new = plan.apply_edit(edit, raw)
    old_lines, new_lines = plan.split_lines(raw), plan.split_lines(new)
    assert len(old_lines) == len(new_lines)
    for i, (a, b) in enumerate(zip(old_lines, new_lines, strict=True)):
        if i != task.line - 1:
            assert a == b
    after = plan.parse(new)
    assert [t.id for t in after.tasks] == [t.id for t in before.tasks]
    assert after.by_id()[task.id].status == status
    assert after.by_id()[task.id].text == task.text
    others = [(t.id, t.status, t.text, t.line) for t in after.tasks if t.id != task.id]
    assert others == [(t.id, t.status, t.text, t.line) for t in before.tasks if t.id != task.id]


_markdownish = st.lists(
    st.one_of(
        _texts,
        st.sampled_from(
            ["- [ ] a", "- [x] b {#b}", "  - [!] c", "  budget: 5 lines", "  scope: a.py",
             "  end", "```", "    - x.py", "  depends: b", "- [?] d", "  scope:", "GOAL:"]
        ),
    ),
    max_size=12,
).map("\n".join)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(st.one_of(_markdownish, st.binary(max_size=200).map(lambda b: b.decode("latin-1"))))
def test_parse_and_check_never_crash(text: str) -> None:
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    try:
        p = plan.parse(raw)
    except BadInput:
        return
    found = plan.check(p)
    for problem in found:
        assert problem.message and problem.path.startswith("$")
    ids = [t.id for t in p.tasks]
    assert len(ids) == len(set(ids)) or any("duplicate id" in x.message for x in found)
    assert all(plan.ID_PATTERN.match(i) for i in ids)
    plan.next_task(p)
    plan.summary(p)


def test_problems_name_the_task_they_belong_to() -> None:
    text = "- [ ] big\n" + small("one", indent="  ") + "  scope: x.py\n  end\n- [?] odd {#Odd}\n"
    found = {(p.line, p.task) for p in plan.check(parsed(text))}
    assert (6, "big") in found  # the parent's line after its slices, not the slice's
    assert (8, "odd") in found  # unknown mark and bad id both belong to the item itself


def test_mark_through_a_symlink_keeps_the_link(tmp_path: Path) -> None:
    real = write(tmp_path, "real.md", TASKS_MD)
    link = tmp_path / "TASKS.md"
    link.symlink_to(real.name)
    plan.mark(link, "docs-ref", "done")
    assert link.is_symlink()
    assert "- [x] Reference pages" in real.read_text()


# --------------------------------------------------------------------------- the package


def test_every_name_of_the_package_is_the_one_its_module_defines() -> None:
    import ast
    import importlib

    init = Path(plan.__file__)
    imported = {
        alias.name: node.module.rsplit(".", 1)[-1]
        for node in ast.walk(ast.parse(init.read_text()))
        if isinstance(node, ast.ImportFrom)
        and node.module
        and node.module.startswith(plan.__name__)
        for alias in node.names
    }
    assert imported == plan._HOMES  # what mypy sees is what __getattr__ loads
    for name, home in plan._HOMES.items():
        module = importlib.import_module(f"{plan.__name__}.{home}")
        assert getattr(plan, name) is getattr(module, name), name
    assert set(plan._HOMES) <= set(dir(plan))
    with pytest.raises(AttributeError):
        _ = plan.no_such_name


def test_check_lines_are_the_tasks_own_acceptance_commands() -> None:
    parsed = plan.parse(
        b"- [ ] Fix the parser {#fix}\n"
        b"  budget: 20 lines / 1 file\n"
        b"  scope: src/parser.py\n"
        b"  check: `pytest -q tests/test_parser.py`\n"
        b"  check: python -c 'import parser'\n"
        b"  end\n"
    )
    (task,) = parsed.tasks
    assert task.as_dict()["checks"] == [
        "pytest -q tests/test_parser.py",
        "python -c 'import parser'",
    ]
    assert not plan.check(parsed)
    from loopkit.contract import apply_task

    contract = {"criteria": [{"name": "suite", "run": "make test", "timeout": 300}]}
    applied = apply_task(contract, task.as_dict())
    assert [c["name"] for c in applied["criteria"]] == ["suite", "task-1", "task-2"]
    # applying twice (every stage applies the piped task) changes nothing more
    assert apply_task(applied, task.as_dict())["criteria"] == applied["criteria"]


def test_an_empty_check_line_is_a_problem() -> None:
    parsed = plan.parse(
        b"- [ ] T {#t}\n  budget: 5 lines / 1 file\n  scope: a.py\n  check:\n  end\n"
    )
    assert any(
        "check: expected a shell command" in str(p) for p in parsed.problems + plan.check(parsed)
    )


def test_a_goal_needs_a_judge_in_the_contract() -> None:
    parsed = plan.parse(
        b"- [ ] GOAL: the docs explain it {#docs}\n  budget: 5 lines / 1 file\n  scope: docs/a.md\n  end\n"
    )
    from loopkit.plan.checking import warnings

    bare = {"scope": {"writable": ["docs/**"]}}
    assert not plan.check(parsed, contract=bare)  # valid: a warning, not a problem
    (warned,) = warnings(parsed, contract=bare)
    assert "docs is a GOAL" in warned["message"] and warned["line"] == 1
    assert warnings(parsed, contract={**bare, "judge": {"provider": "codex"}}) == []


PYTHON_INIT = {
    **CONTRACT,
    "scope": {"writable": ["src/**"], "protected": ["**/conftest.py"], "add_only": ["tests/**"]},
}


def test_a_scope_naming_a_file_is_not_a_folder_that_could_hold_a_protected_one() -> None:
    # The README's own example scope, against what `lk init` writes for a Python project.
    text = small("x", scope="src/parser/headers.py, tests/parser/test_headers.py")
    assert problems(text, PYTHON_INIT) == []
    assert problems(small("y", scope="src/pkg/_caller.py"), PYTHON_INIT) == []
    assert problems(small("z", scope="src/pkg/conftest.py"), PYTHON_INIT) == [
        "scope 'src/pkg/conftest.py' is protected by the contract"
    ]
    # a file outside the writable scope is outside it, even where a folder of that name
    # could hold a writable file
    assert problems(
        small("r", scope="README.md"), {**CONTRACT, "scope": {"writable": ["**/*.py"]}}
    ) == ["scope 'README.md' is outside the contract's writable scope"]


def test_a_scope_naming_a_folder_is_read_as_the_folder() -> None:
    folders = {"src", "src/pkg", "migrations"}
    contract = {
        **CONTRACT,
        "scope": {"writable": ["src/pkg/**", "migrations/**"], "protected": ["migrations/**"]},
    }
    found = [
        p.message
        for p in plan.check(
            parsed(small("a", scope="src/pkg") + small("b", scope="migrations")),
            contract=contract,
            is_folder=folders.__contains__,
        )
    ]
    assert found == ["scope 'migrations' is protected by the contract"]
    # slices naming files in one folder are disjoint; a slice naming the folder is not
    text = (
        "- [ ] P {#p}\n  scope: src/**\n"
        + small("s1", scope="src/pkg/a.py", indent="  ")
        + small("s2", scope="src/pkg/b.py", indent="  ")
        + "  end\n"
    )
    assert [p.message for p in plan.check(parsed(text), is_folder=folders.__contains__)] == []


def test_every_plan_key_has_its_reader() -> None:
    """The plan keys TASKS.md documents and the readers the parser dispatches to are the
    same set: a key added to one and not the other fails here."""
    from loopkit.plan import parsing

    assert set(parsing._KEY_READERS) == set(parsing.PLAN_KEYS)
