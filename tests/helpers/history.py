"""A small library with a real history for lk eval mine: textkit, grown commit by commit
the way a library grows -- a function and its tests in one commit, a bug fixed with the
test that shows it, and commits that are no task (docs alone, tests alone, a refactor
whose tests passed before it)."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import git

#: (module, function name, its code, its test) -- each one commit that adds both.
FEATURES = [
    (
        "strings",
        "slugify",
        "return '-'.join(''.join(c if c.isalnum() else ' ' for c in s.lower()).split())",
        "assert slugify('Hello, World!') == 'hello-world'",
    ),
    (
        "seqs",
        "chunked",
        "return [list(seq[i:i + n]) for i in range(0, len(seq), n)]",
        "assert chunked([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]",
    ),
    (
        "nums",
        "clamp",
        "return max(lo, min(hi, x))",
        "assert clamp(5, 0, 3) == 3 and clamp(-1, 0, 3) == 0",
    ),
    (
        "strings",
        "title_case",
        "return ' '.join(w[:1].upper() + w[1:] for w in s.split())",
        "assert title_case('the quick fox') == 'The Quick Fox'",
    ),
    (
        "seqs",
        "flatten",
        "return [x for part in seq for x in part]",
        "assert flatten([[1], [2, 3], []]) == [1, 2, 3]",
    ),
    (
        "seqs",
        "unique",
        "return list(dict.fromkeys(seq))",
        "assert unique([3, 1, 3, 2, 1]) == [3, 1, 2]",
    ),
    (
        "strings",
        "strip_prefix",
        "return s[len(p):] if s.startswith(p) else s",
        "assert strip_prefix('unhappy', 'un') == 'happy' and strip_prefix('x', 'un') == 'x'",
    ),
    (
        "nums",
        "mean",
        "return sum(xs) / len(xs) if xs else 0.0",
        "assert mean([1, 2, 3, 4]) == 2.5 and mean([]) == 0.0",
    ),
    (
        "seqs",
        "pairwise",
        "return list(zip(seq, seq[1:]))",
        "assert pairwise([1, 2, 3]) == [(1, 2), (2, 3)]",
    ),
    ("strings", "count_words", "return len(s.split())", "assert count_words('  a b  c ') == 3"),
    (
        "seqs",
        "rotate",
        "k = k % len(seq) if seq else 0\n    return list(seq[k:]) + list(seq[:k])",
        "assert rotate([1, 2, 3, 4], 1) == [2, 3, 4, 1] and rotate([], 3) == []",
    ),
    (
        "strings",
        "is_palindrome",
        "t = [c for c in s.lower() if c.isalnum()]\n    return t == t[::-1]",
        "assert is_palindrome('A man, a plan, a canal: Panama') and not is_palindrome('ab')",
    ),
]
ARGS = {
    "slugify": "s",
    "chunked": "seq, n",
    "clamp": "x, lo, hi",
    "title_case": "s",
    "flatten": "seq",
    "unique": "seq",
    "strip_prefix": "s, p",
    "mean": "xs",
    "pairwise": "seq",
    "count_words": "s",
    "rotate": "seq, k",
    "is_palindrome": "s",
}
#: A bug fixed with its test: clamp given its bounds the wrong way round.
CLAMP_FIX = "lo, hi = min(lo, hi), max(lo, hi)\n    return max(lo, min(hi, x))"
CLAMP_TEST = "assert clamp(-1, 3, 0) == 0"


def _module(funcs: dict[str, str]) -> str:
    return (
        "".join(
            f"def {name}({ARGS[name]}):\n    {body}\n\n\n" for name, body in funcs.items()
        ).rstrip()
        + "\n"
    )


def _tests(module: str, tests: dict[str, str]) -> str:
    head = f"from textkit.{module} import *  # noqa: F403\n\n\n"
    return (
        head
        + "".join(
            f"def test_{name}():\n    {body}  # noqa: F405\n\n\n" for name, body in tests.items()
        ).rstrip()
        + "\n"
    )


def make_history(root: Path) -> tuple[Path, dict[str, str]]:
    """textkit's repository; and its modules as they are at the end (what a correct agent
    writes)."""
    repo = root / "textkit"
    (repo / "textkit").mkdir(parents=True)
    (repo / "tests").mkdir()
    git(repo, "init", "-q")
    (repo / "textkit" / "__init__.py").write_text('"""Small text and sequence helpers."""\n')
    (repo / "README.md").write_text("# textkit\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "textkit: a package")
    funcs: dict[str, dict[str, str]] = {"strings": {}, "seqs": {}, "nums": {}}
    tests: dict[str, dict[str, str]] = {"strings": {}, "seqs": {}, "nums": {}}

    def commit(message: str, module: str, *, source: bool = True, test: bool = True) -> None:
        if source:
            (repo / "textkit" / f"{module}.py").write_text(_module(funcs[module]))
        if test:
            (repo / "tests" / f"test_{module}.py").write_text(_tests(module, tests[module]))
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", message)

    for i, (module, name, body, check) in enumerate(FEATURES):
        funcs[module][name] = body
        tests[module][name] = check
        commit(f"{module}: add {name}()\n\n{name}() is new in textkit.{module}.", module)
        if i == 3:  # documentation alone: no task
            (repo / "README.md").write_text("# textkit\n\nSmall helpers.\n")
            git(repo, "commit", "-q", "-am", "docs: say what textkit is")
        if i == 5:  # more tests of what already works: no source change, no task
            tests["seqs"]["unique_empty"] = "assert unique([]) == []"
            commit("tests: unique() of nothing", "seqs", source=False)
        if i == 7:  # a refactor whose test passed before it: no test fails first, no task
            funcs["nums"]["mean"] = "return (sum(xs) / len(xs)) if len(xs) else 0.0"
            tests["nums"]["mean_one"] = "assert mean([7]) == 7"
            commit("nums: mean() without truthiness", "nums")
    funcs["nums"]["clamp"] = CLAMP_FIX
    tests["nums"]["clamp_swapped"] = CLAMP_TEST
    commit("nums: clamp() takes its bounds in either order\n\nclamp(-1, 3, 0) gave 3.", "nums")
    final = {f"textkit/{m}.py": _module(f) for m, f in funcs.items()}
    return repo, final
