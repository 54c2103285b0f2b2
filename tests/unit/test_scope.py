"""Scope globs and the policy: pure functions, no git."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopkit.evidence.globs import matches
from loopkit.evidence.scope import Change, Policy, evaluate, symlink_escape


@pytest.mark.parametrize(
    ("path", "glob", "expected"),
    [
        ("src/a.py", "src/**", True),
        ("src/deep/er/a.py", "src/**", True),
        ("src", "src/**", False),
        ("srcx/a.py", "src/**", False),
        ("src/a.py", "src/*.py", True),
        ("src/sub/a.py", "src/*.py", False),
        ("src/a.pyc", "src/*.py", False),
        ("test_a.py", "**/test_*.py", True),
        ("x/y/test_a.py", "**/test_*.py", True),
        ("x/y/a_test.py", "**/test_*.py", False),
        ("a/c", "a/**/c", True),
        ("a/b/b/c", "a/**/c", True),
        ("a/bc", "a/**/c", False),
        ("migrations/0001.sql", "migrations", True),  # a directory covers its contents
        ("migrations/0001.sql", "migrations/", True),
        ("migrations_old/1.sql", "migrations", False),
        ("docs/readme.md", "./docs/**", True),
        (".env", "*", True),  # dotfiles are names like any other
        (".github/workflows/ci.yml", ".github/**", True),
        ("a1.txt", "a?.txt", True),
        ("a/1.txt", "a?.txt", False),
        ("b.txt", "[abc].txt", True),
        ("d.txt", "[!abc].txt", True),
        ("a.txt", "[!abc].txt", False),
        ("f[1].txt", "f[[]1].txt", True),
        ("f(1)+x.txt", "f(1)+x.txt", True),  # regex characters are literal
        ("anything/at/all", "**", True),
        ("pkg/mod.py", "pkg**.py", True),  # ** inside a segment crosses directories
    ],
)
def test_glob_matching(path: str, glob: str, expected: bool) -> None:
    assert matches(path, [glob]) is expected


def test_no_globs_match_nothing() -> None:
    assert matches("a", []) is False


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.text(alphabet="abcXYZ019_.-", min_size=1, max_size=8).filter(
            lambda s: s not in (".", "..")
        ),
        min_size=1,
        max_size=5,
    )
)
def test_literal_path_glob_and_double_star_always_match(parts: list[str]) -> None:
    path = "/".join(parts)
    assert matches(path, [path])
    assert matches(path, ["**"])
    assert matches(path, [parts[0] + "/**"]) is (len(parts) > 1)
    assert matches(path, [parts[0]])  # the first segment as a directory covers the rest


POLICY = Policy(
    writable=("src/**", "tests/**"),
    protected=("src/secrets/**", "migrations/**"),
    always_allowed=("tests/fixtures/**", "CHANGELOG.md"),
    changed_files=3,
    changed_lines=50,
)


def _rules(changes: list[Change], policy: Policy = POLICY) -> list[tuple[str, str]]:
    return [(v.rule, v.path) for v in evaluate(policy, changes, root="/repo")]


def test_protected_wins_over_writable_and_always_allowed_wins_over_both() -> None:
    assert POLICY.in_scope("src/a.py")
    assert not POLICY.in_scope("src/secrets/key")
    assert POLICY.in_scope("CHANGELOG.md")
    assert not POLICY.in_scope("README.md")
    allowed_and_protected = Policy(
        writable=("src/**",), protected=("src/**",), always_allowed=("src/ok.py",)
    )
    assert allowed_and_protected.in_scope("src/ok.py")
    assert not allowed_and_protected.in_scope("src/other.py")


def test_each_rule_is_named_with_its_path() -> None:
    changes = [
        Change("src/a.py", "modified", 1, 1),
        Change("src/secrets/key", "modified", 1, 0),
        Change("migrations/1.sql", "deleted", 0, 3),
        Change("README.md", "added", 2, 0),
        Change("CHANGELOG.md", "modified", 1, 0),
    ]
    assert _rules(changes) == [
        ("protected", "src/secrets/key"),
        ("protected_deleted", "migrations/1.sql"),
        ("outside_writable", "README.md"),
        ("changed_files", "*"),  # four counted files (CHANGELOG.md is always allowed)
    ]


def test_renames_count_both_ends() -> None:
    assert _rules([Change("src/b.py", "renamed", old_path="src/a.py")]) == []
    assert _rules([Change("lib/a.py", "renamed", old_path="src/a.py")]) == [
        ("rename_out_of_scope", "lib/a.py")
    ]
    assert _rules([Change("src/a.sql", "renamed", old_path="migrations/a.sql")]) == [
        ("rename_out_of_scope", "migrations/a.sql")
    ]
    assert _rules([Change("docs/x", "renamed", old_path="migrations/x")]) == [
        ("rename_out_of_scope", "migrations/x"),
        ("rename_out_of_scope", "docs/x"),
    ]


def test_symlinks() -> None:
    def link(target: str, path: str = "src/link") -> list[tuple[str, str]]:
        return _rules([Change(path, "added", 1, 0, symlink_target=target)])

    assert link("a.py") == []
    assert link("../tests/x.py") == []
    assert link("/repo/src/a.py") == []  # absolute, but inside the repository
    assert link("/etc/passwd") == [("symlink_outside_repo", "src/link")]
    assert link("../../outside") == [("symlink_outside_repo", "src/link")]
    assert link("/repository-elsewhere/x") == [("symlink_outside_repo", "src/link")]
    assert link("secrets/key") == [("symlink_into_protected", "src/link")]
    assert link("../migrations") == [("symlink_into_protected", "src/link")]
    assert _rules([Change("src/link", "deleted", 0, 1, symlink_target="/etc")]) == []


def test_symlink_escape_resolves_text_only() -> None:
    assert symlink_escape("a/b/link", "../c") == "a/c"
    assert symlink_escape("link", "./x/../y") == "y"
    assert symlink_escape("link", "..") is None
    assert symlink_escape("link", "/abs") is None
    assert symlink_escape("link", "/r/x", root="/r") == "x"
    assert symlink_escape("link", "/rx/y", root="/r") is None


def test_budgets_exclude_always_allowed_paths() -> None:
    small = [Change(f"src/{i}.py", "added", 10, 0) for i in range(3)]
    allowed = [Change(f"tests/fixtures/{i}.json", "added", 500, 0) for i in range(10)]
    assert _rules(small + allowed) == []
    over = [*small, Change("src/3.py", "added", 30, 0)]
    violations = evaluate(POLICY, over)
    assert [(v.rule, v.path) for v in violations] == [
        ("changed_files", "*"),
        ("changed_lines", "*"),
    ]
    assert violations[0].detail == "4 files changed; budget 3"
    assert violations[1].detail == "60 lines changed; budget 50"


def test_changed_bytes_counts_every_path_binary_and_always_allowed_too() -> None:
    policy = Policy(writable=("src/**",), always_allowed=("tests/**",), changed_bytes=1000)
    small = [Change("src/a.py", "modified", 1, 1, size=600)]
    assert evaluate(policy, small) == []
    big = [*small, Change("tests/data.bin", "added", 0, 0, size=401)]  # 0 lines: binary
    violations = evaluate(policy, big)
    assert [(v.rule, v.path, v.detail) for v in violations] == [
        ("changed_bytes", "*", "1001 bytes changed; budget 1000")
    ]
    assert evaluate(policy, [*big, Change("src/b.py", "deleted", 0, 90)])  # deleting adds 0
    assert evaluate(Policy(writable=("**",)), big) == []  # no budget, no limit
    p = Policy.from_contract({"scope": {"writable": ["a/**"]}, "budgets": {"changed_bytes": 7}})
    assert p is not None and p.changed_bytes == 7 and p.as_dict()["changed_bytes"] == 7


def test_no_contract_no_policy_nothing_is_a_violation() -> None:
    assert evaluate(None, [Change("anything", "deleted")]) == []
    assert Policy.from_contract(None) is None
    p = Policy.from_contract({"scope": {"writable": ["a/**"]}, "budgets": {"changed_lines": 9}})
    assert p == Policy(writable=("a/**",), changed_lines=9)
    assert p is not None and p.as_dict()["changed_files"] is None


ADD_ONLY = Policy(writable=("src/**",), add_only=("tests/**",), protected=("tests/fixtures/**",))


@pytest.mark.parametrize(
    ("change", "rules"),
    [
        (Change("tests/test_new.py", "added", 5), []),  # a new test: in scope, not writable
        (Change("tests/test_old.py", "modified", 1, 1), [("add_only", "tests/test_old.py")]),
        (Change("tests/test_old.py", "deleted", 0, 9), [("add_only", "tests/test_old.py")]),
        (Change("tests/test_old.py", "type_changed"), [("add_only", "tests/test_old.py")]),
        # renamed away: the base's file is gone, whichever side the new name lies
        (
            Change("tests/test_b.py", "renamed", old_path="tests/test_a.py"),
            [("rename_out_of_scope", "tests/test_a.py")],
        ),
        (
            Change("src/moved.py", "renamed", old_path="tests/test_a.py"),
            [("rename_out_of_scope", "tests/test_a.py")],
        ),
        # a source file renamed into the tests is a new file there
        (Change("tests/test_x.py", "renamed", old_path="src/x.py"), []),
        (Change("tests/test_copy.py", "copied", old_path="tests/test_a.py"), []),
        # protected wins over add_only: not even a new file
        (Change("tests/fixtures/new.json", "added", 1), [("protected", "tests/fixtures/new.json")]),
        (Change("docs/new.md", "added", 1), [("outside_writable", "docs/new.md")]),
    ],
    ids=[
        "new",
        "modified",
        "deleted",
        "retyped",
        "renamed-within",
        "renamed-out",
        "renamed-in",
        "copied",
        "protected-wins",
        "elsewhere",
    ],
)
def test_add_only_allows_new_files_and_never_a_change_to_the_base_s(
    change: Change, rules: list[tuple[str, str]]
) -> None:
    assert [(v.rule, v.path) for v in evaluate(ADD_ONLY, [change])] == rules


def test_always_allowed_wins_over_add_only_and_the_policy_shows_it() -> None:
    policy = ADD_ONLY.but(always_allowed=("tests/scratch/**",))
    assert evaluate(policy, [Change("tests/scratch/a.py", "modified", 1, 1)]) == []
    assert Policy.from_contract(
        {"scope": {"writable": ["src/**"], "add_only": ["tests/**"]}}
    ).as_dict()["add_only"] == ["tests/**"]  # type: ignore[union-attr]
