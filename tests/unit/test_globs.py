"""The one glob engine: matching and overlap agree, because they read the same tokens."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopkit.evidence import globs


@pytest.mark.parametrize(
    ("a", "b", "overlap"),
    [
        ("src/a.py", "src/a.py", True),
        ("src/a.py", "src/b.py", False),
        ("src/**", "src/x/y/z.py", True),
        ("src/*.py", "src/x/y.py", False),
        ("src/*.py", "src/x.py", True),
        ("**/test_*.py", "test_x.py", True),
        ("**/test_*.py", "a/b/test_x.py", True),
        ("docs/a/**", "docs/**/*.md", True),
        ("docs/a/**", "docs/b/*.md", False),
        ("src/[ab].py", "src/c.py", False),
        ("src/[!ab].py", "src/c.py", True),
        ("src/[a-c].py", "src/b.py", True),
        ("src/[a-c].py", "src/[d-f].py", False),
        ("src/?.py", "src/ab.py", False),
        ("lib/**", "src/**", False),
        ("./src/a.py", "src/*.py", True),
        # a directory covers what is under it, on either side
        ("db/migrations", "db/migrations/0001.sql", True),
        ("db/migrations/", "db/migrations/0001.sql", True),
        ("src/a", "src/ab", False),
        ("src/a", "src/a/b/c.py", True),
        (r"src/\*.py", "src/x.py", False),
        (r"src/\*.py", "src/*.py", True),
    ],
)
def test_overlap_cases(a: str, b: str, overlap: bool) -> None:
    assert globs.overlap(a, b) is overlap
    assert globs.overlap(b, a) is overlap


@pytest.mark.parametrize(
    ("path", "glob", "covered"),
    [
        ("db/migrations/0001.sql", "db/migrations", True),
        ("db/migrations", "db/migrations/", False),  # the folder, not a file in it
        ("db/migrationsX", "db/migrations", False),
        ("src/a/b/test_c.py", "src/**/test_*.py", True),
        ("src/test_c.py", "src/**/test_*.py", True),
        (".env", "*", True),
        ("a/b", "a**b", True),
        ("src/x.py", "src/[!x].py", False),
        ("src/*.py", r"src/\*.py", True),
        ("src/a.py", r"src/\*.py", False),
    ],
)
def test_matches_cases(path: str, glob: str, covered: bool) -> None:
    assert globs.matches(path, [glob]) is covered


_part = st.sampled_from(["a", "b", "*", "**", "?.py", "x.py", "*.md", "y.*", "[ab]", "[!a]*"])
_globs = st.lists(_part, min_size=1, max_size=4).map("/".join)
_SEGMENTS = ["a", "b", "x.py", "y.md", "c"]
_PATHS = ["/".join(p) for n in (1, 2, 3, 4) for p in itertools.product(_SEGMENTS, repeat=n)]
_literal = st.lists(st.sampled_from(_SEGMENTS), min_size=1, max_size=4).map("/".join)


@settings(max_examples=300, deadline=None)
@given(_globs, _globs)
def test_a_witness_is_covered_by_both_globs_as_matches_sees_it(a: str, b: str) -> None:
    w = globs.witness(a, b)
    if w is not None:
        assert globs.matches(w, [a]) and globs.matches(w, [b]), (a, b, w)
    # and no path that both cover is missed
    if any(globs.matches(p, [a]) and globs.matches(p, [b]) for p in _PATHS):
        assert w is not None, (a, b)


@settings(max_examples=300, deadline=None)
@given(_globs, _literal)
def test_overlap_with_a_literal_path_is_matching(g: str, p: str) -> None:
    """For a literal path, overlap is matching: the path itself is covered, or (since a
    literal names a directory too) something beneath it is, and the witness shows which."""
    w = globs.witness(g, p)
    assert globs.overlap(g, p) == (w is not None)
    if globs.matches(p, [g]):
        assert globs.overlap(g, p)
    elif w is not None:
        assert w.startswith(p + "/") and globs.matches(w, [g])
    # when the glob covers nothing beneath the path, exactly the letter of the rule
    if globs.witness(g, p + "/**") is None:
        assert globs.overlap(g, p) == globs.matches(p, [g])


@settings(max_examples=150, deadline=None)
@given(st.one_of(_globs, _literal), st.one_of(_globs, _literal))
def test_overlap_is_the_automata_answer_either_way_round(a: str, b: str) -> None:
    # overlap answers a literal's own path by matching first: never otherwise than the
    # product of the automata would.
    expected = globs.normalize(a) == globs.normalize(b) or globs.witness(a, b) is not None
    assert globs.overlap(a, b) == expected == globs.overlap(b, a)


@pytest.mark.parametrize("glob", ["/etc/passwd", "../x", "a/../../b", "~/x", "C:/x"])
def test_escaping_globs_are_named(glob: str) -> None:
    assert globs.escape_reason(glob)


def test_plan_and_diff_agree_that_a_directory_covers_its_files() -> None:
    """The reproduction: writable db/migrations, a task scoped to a file under it."""
    from loopkit import plan
    from loopkit.evidence.scope import Policy

    tasks = plan.parse(b"- [ ] Add a migration\n  scope: db/migrations/0001.sql\n<!-- end -->\n")
    contract = {"scope": {"writable": ["db/migrations"], "protected": [], "always_allowed": []}}
    problems = plan.check(tasks, contract=contract)
    assert not [p for p in problems if "scope" in str(p)], problems
    policy = Policy.from_contract(contract)
    assert policy is not None and policy.in_scope("db/migrations/0001.sql")


@pytest.mark.parametrize(
    ("literal", "other", "shared"),
    [
        ("src/pkg/_caller.py", "**/conftest.py", False),  # a file holds no conftest.py
        ("README.md", "**/*.py", False),  # nor a README.md/x.py
        ("src/a.py", "src/**", True),
        ("src/a.py", "src", True),  # the folder covers it
        ("src/a.py", "src/a.py", True),
        ("src/a.py", "src/b.py", False),
    ],
)
def test_a_literal_that_names_a_file_shares_only_its_own_path(
    literal: str, other: str, shared: bool
) -> None:
    def is_file(path: str) -> bool:
        return path == literal

    assert globs.overlap(literal, other, is_file=is_file) is shared
    assert globs.overlap(other, literal, is_file=is_file) is shared
    # read as a folder it may hold what the other covers (the directory rule)
    assert globs.overlap(literal, other) is (shared or other.startswith("**/"))


@pytest.mark.parametrize(
    ("folder", "protected", "covered"),
    [
        ("tests", ["tests/**"], True),
        ("tests", ["tests/*"], True),
        ("tests", ["tests"], True),
        ("src", ["**/conftest.py"], False),
        ("tests", ["tests/*.py"], False),
        ("src/x", ["src/**"], True),
    ],
)
def test_covers_folder_is_the_folder_whole(
    folder: str, protected: list[str], covered: bool
) -> None:
    assert globs.covers_folder(folder, protected) is covered
