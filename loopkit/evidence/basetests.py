"""The tree the base's tests are judged on: the base's test infrastructure, the attempt's
source.

``scope.add_only`` keeps the worker from editing the tests that judge it; it does not keep
a file the worker *adds* from changing how they run -- a ``conftest.py`` beside them, a
module that shadows the one they import, a ``sitecustomize.py`` on the import path, a
``__mocks__`` folder, a ``_test.go`` with an ``init()``, a ``build.rs``. So the existing
tests run on a tree made for them, by construction rather than from a list of names:

* **the code under test** is what the contract lets the worker write and does not call a
  test (``scope.writable``, less ``scope.add_only`` and ``scope.protected``). Of it,
  the attempt's version of each file the base held (changed or deleted), and of each
  file the worker added *that the code under test reaches by name*: its module's name
  (its name less its extension) is a word of such a file -- ``from .helpers import x``,
  ``require('./helpers')``, ``mod helpers;`` -- or its whole name or path is a word of a
  criterion's command (``grep -qx good src/value.txt``; ``jest`` names the runner, not
  ``jest.config.js``). A file nothing names is infrastructure whatever it is called: it
  can act on the tests only by being found by the runner or the interpreter (a
  ``conftest.py``, a ``sitecustomize.py``, a ``.pth``, a ``__mocks__`` folder, a
  ``jest.config.js``, a nested ``go.mod``, a ``test_*.py`` collected beside the source
  that patches it at import). Nor is an added file for a module the base already holds
  there, kept by the attempt (``src/calc.mjs``, ``src/calc``, ``src/calc/__init__.py``
  beside ``src/calc.js`` or ``src/calc.py``): the name reaches the base's file; the new
  one could only change which of them a runner resolves;
* **everything else is the base's**: the tests' folders and files, and every file outside
  the writable scope -- the runner's configuration (``pytest.ini``, ``pyproject.toml``,
  ``setup.cfg``, ``tox.ini``, ``package.json``, a jest or vitest config, ``Cargo.toml``,
  ``build.rs``, ``go.mod``) unless the contract makes it writable (``lk init`` never
  does: its writable scope is the project's folders).

A name in a comment does not reach a file: comments are taken out of the code under test
before its words are read (``#`` to the line's end in Python, shell, Ruby, YAML and TOML;
``//`` to the line's end and ``/* ... */`` in JavaScript, TypeScript, Rust, Go, C and
Java), so ``# tested with conftest`` beside a bug brings no ``conftest.py`` into the run.
A name in the code itself (an import, a string) does: what the code under test names is
part of what it does, and a plain import of it gets the same. Go compiles every file of a package without naming it: an added ``.go`` file
the changed source does not name is absent from the base's tests' run.

The worker's new tests run in a second run, on the whole tree (``verify.in_clean_room``).
When the two trees are the same (the worker changed only the code under test), there is
one run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from loopkit import git
from loopkit.evidence import globs

TYPE_CHECKING = False  # typing stays unloaded at run time (start-up is a feature)
if TYPE_CHECKING:
    from typing import Any

    from loopkit.sections import Proof


def source_scope(contract: Mapping[str, Any] | None) -> tuple[list[str], list[str]]:
    """The globs of the code under test: (what is in, what is taken out of it)."""
    scope = (contract or {}).get("scope") or {}
    writable = [str(g) for g in scope.get("writable") or []]
    out = [str(g) for g in (*(scope.get("add_only") or []), *(scope.get("protected") or []))]
    return writable, out


def tree(
    root: Path,
    base: str,
    attempt: str,
    contract: Mapping[str, Any] | None,
    *,
    named_by: Sequence[str] = (),
) -> str:
    """The tree the base's tests run on (see the module's text): ``attempt`` itself when
    every change it holds since ``base`` (a tree) is the code under test's. ``named_by``:
    texts that reach files by name as the code under test does (the criteria's commands:
    ``grep -qx good src/value.txt`` asks for that file)."""
    writable, out = source_scope(contract)
    if base == attempt or not writable:
        return attempt
    keep: list[git.Entry] = []  # the base's version, where the attempt's is not taken
    taken: list[git.Entry] = []  # the code under test the base held, as the attempt has it
    added: list[tuple[git.Entry, git.Entry]] = []  # (the base's: absent, the attempt's)
    changes = git.tree_diff(root, base, attempt)
    for status, was, now in changes:
        name = _name(now.path)
        if not globs.matches(name, writable) or globs.matches(name, out):
            keep.append(was)
        elif status == "A":
            added.append((was, now))
        elif now.mode != git.ABSENT:
            taken.append(now)
    # The files the code under test reaches by name, and those they reach in turn: by
    # their module's name in the code (`helpers`), by their whole name or path in the
    # criteria's commands (`src/value.txt`: `jest` names the runner, not jest.config.js).
    reached: list[bytes] = []  # read once an added file is left to ask about
    commands = [t.encode("utf-8", "surrogateescape") for t in named_by]
    patterns = _globs_named(named_by)  # `for f in src/*.txt` names every file it matches
    gone = {was.path for _, was, now in changes if now.mode == git.ABSENT}
    shadowing = _shadows(root, base, [now.path for _, now in added], gone)
    shadows = [pair for pair in added if pair[1].path in shadowing]
    keep += [was for was, _ in shadows]
    added = [pair for pair in added if pair not in shadows]
    if added:  # the code under test the attempt holds: one read for all of it
        reached = _codes(root, taken)
    while added:
        found = [
            (was, now)
            for was, now in added
            if _named(now.path, reached)
            or _named(now.path, commands, whole=True)
            or globs.matches(_name(now.path), patterns)
        ]
        if not found:
            break
        reached += _codes(root, [n for _, n in found])
        added = [pair for pair in added if pair not in found]
    keep += [was for was, _ in added]
    return git.tree_edited(root, attempt, keep) if keep else attempt


def _codes(root: Path, entries: Sequence[git.Entry]) -> list[bytes]:
    """``_code`` of each file among ``entries`` (not links, not submodules), read at once."""
    files = [e for e in entries if e.mode[:2] == "10"]
    return [
        _code(e.path, b)
        for e, b in zip(files, git.blobs(root, [e.oid for e in files]), strict=True)
    ]


def _globs_named(commands: Sequence[str]) -> list[str]:
    """The glob words of the criteria's commands (``src/*.txt``), relative to the
    repository: a command reaches each file such a word matches, as it reaches a file it
    names."""
    found = re.findall(r"[\w./\[\]*?{}-]*[*?\[][\w./\[\]*?{}-]*", " ".join(commands))
    return [w.removeprefix("./") for w in found if not w.startswith(("/", "-"))]


#: Comments by the file's extension: a line comment's opening, and whether ``/* */`` is one.
_HASH = (rb"#", False)
_SLASHES = (rb"//", True)
_COMMENTS = {
    **dict.fromkeys((b"py", b"pyi", b"sh", b"bash", b"rb", b"yaml", b"yml", b"toml"), _HASH),
    **dict.fromkeys(
        (b"js", b"mjs", b"cjs", b"jsx", b"ts", b"mts", b"cts", b"tsx", b"rs", b"go", b"c",
         b"h", b"cc", b"cpp", b"hpp", b"java", b"kt", b"swift", b"scala", b"cs"),
        _SLASHES,
    ),
}  # fmt: skip


#: The kinds of file code reaches by their module's name (``import helpers``,
#: ``require('./data')``, ``mod util;``); any other file it reaches only by its whole name
#: (``open("data.txt")``): a ``go.mod`` is not reached by the word ``go``.
_MODULES = {*_COMMENTS, b"json", b"node", b"so", b"pyd", b"wasm", b"pyx"} - {
    b"sh", b"bash", b"yaml", b"yml", b"toml",
}  # fmt: skip


def _code(path: bytes, text: bytes) -> bytes:
    """``text`` without its comments, by the extension of ``path``; a file of another kind
    as it is. A comment's opening inside a string ends the line's words early: at worst a
    name after it on that line reaches nothing (the base's file is then the one run)."""
    kind = _COMMENTS.get(path.rpartition(b"/")[2].rpartition(b".")[2])
    if kind is None:
        return text
    line, blocks = kind
    if blocks:
        text = re.sub(rb"/\*.*?\*/", b" ", text, flags=re.S)
    return re.sub(rb"(?m)(^|[\s;,(){}\[\]])" + re.escape(line) + rb".*$", rb"\1", text)


def _module(path: bytes) -> tuple[bytes, bytes]:
    """Where the file at ``path`` sits as a module, and the module's name: its name less
    its extension (``helpers`` of ``src/pkg/helpers.py``, ``jest.config`` of
    ``jest.config.js``), or for an index file its folder's (``utils`` of
    ``src/utils/index.js`` or ``src/utils/__init__.py``, sitting in ``src``). A hidden
    file's name is its whole name."""
    folder, _, base = path.rpartition(b"/")
    stem = base.rsplit(b".", 1)[0] if not base.startswith(b".") else base
    if stem in (b"index", b"__init__", b"mod", b"lib", b"main") and folder:
        folder, _, stem = folder.rpartition(b"/")
    return folder, stem


def _named(path: bytes, texts: Sequence[bytes], *, whole: bool = False) -> bool:
    """Whether the file at ``path`` is named, as a word, in one of ``texts``: its name
    (``a.txt``), or (unless ``whole``) its module's name (``_module``)."""
    base = path.rpartition(b"/")[2]
    stem = _module(path)[1]
    importable = base.rpartition(b".")[2] in _MODULES or b"." not in base
    names = [base] + ([stem] if len(stem) >= 2 and importable and not whole else [])
    words = [re.compile(rb"(?<![\w-])" + re.escape(n) + rb"(?![\w.-])") for n in names]
    return any(w.search(t) for w in words for t in texts)


def _shadows(root: Path, base: str, paths: Sequence[bytes], gone: set[bytes]) -> set[bytes]:
    """Of the added files at ``paths``, those that are another file for a module the base
    already holds there and the attempt keeps (``src/calc.mjs``, ``src/calc``,
    ``src/calc/index.js`` or ``src/calc/__init__.py`` beside ``src/calc.js``; ``calc.js``
    beside a folder ``calc``): a name in the code already reaches the base's file; the new
    one can only change which of them a runner resolves (vite takes ``.mjs`` first, node
    an extensionless file or ``calc.js`` before ``calc/``, Python a package). One
    ``git ls-tree`` of the folders they sit in."""
    modules = {p: _module(p) for p in paths}
    folders = sorted({_name(folder) + "/" if folder else "." for folder, _ in modules.values()})
    if not folders:
        return set()
    listed = git.git(
        ["ls-tree", "-z", "--name-only", base, "--", *folders],
        cwd=root,
        env={"GIT_LITERAL_PATHSPECS": "1"},
    )
    held: set[tuple[bytes, bytes]] = set()
    for name in listed.stdout.split(b"\0"):
        if name and name not in gone:
            folder, _, whole = name.rpartition(b"/")
            held |= {_module(name), (folder, whole)}  # calc.js: calc; a folder calc: calc
    return {p for p, (folder, stem) in modules.items() if stem and (folder, stem) in held}


def _name(path: bytes) -> str:
    return path.decode("utf-8", "surrogateescape")


#: The names of a task's own checks among the criteria (TASKS.md ``check:`` lines, added
#: by ``contract.apply_task``): task-1, task-2, ... They judge the attempt, never the base.
TASK_CHECK_PREFIX = "task-"


def is_task_check(name: object) -> bool:
    return (
        isinstance(name, str)
        and name.startswith(TASK_CHECK_PREFIX)
        and name[len(TASK_CHECK_PREFIX) :].isdigit()
    )


def plain(criteria: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The criteria that judge the base's tests: the contract's own, not a task's."""
    return [c for c in criteria if not is_task_check(c.get("name"))]


def without_fix(root: Path, base: str, attempt: str, contract: Mapping[str, Any] | None) -> str:
    """The attempt's tree with the code under test as at ``base``: the attempt's tests on
    the unfixed code (``verify.prove_new_tests``). Every path of the code under test the
    attempt changed or added is taken back to the base's (an added one: absent)."""
    writable, out = source_scope(contract)
    back = [
        was
        for _, was, now in git.tree_diff(root, base, attempt)
        if globs.matches(_name(now.path), writable) and not globs.matches(_name(now.path), out)
    ]
    return git.tree_edited(root, attempt, back)


def proving(contract: Mapping[str, Any] | None, task: Mapping[str, Any] | None) -> bool:
    """Whether this task's change must be proven by a test (``verify.prove_new_tests``:
    true, or ``fixes``: a task whose text says "fix")."""
    wanted = ((contract or {}).get("verify") or {}).get("prove_new_tests")
    if wanted == "fixes":
        return says_fix(task)
    return wanted is True


def says_fix(task: Mapping[str, Any] | None) -> bool:
    """Whether the task's text says it fixes something (fix, fixes, fixed, fixing, bug)."""
    words = str((task or {}).get("text") or "")
    return bool(re.search(r"\bfix(?:es|ed|ing)?\b|\bbugs?\b", words, re.I))


def proof(first: Mapping[str, Any], unfixed: Mapping[str, Any]) -> Proof:
    """The ``proof`` section: the tests that fail on the attempt's tests with the base's
    code under test (``unfixed``, a run on ``without_fix``) and pass on the attempt
    (``first``: the runs on the attempt's trees, by criterion), each with both results;
    ``proven`` when there is at least one. A test that passes on the unfixed code proves
    nothing about the change, and is not listed."""
    from loopkit.evidence import testresults

    after = {str(c["name"]): c for c in first["checks"]}
    for c in (first.get("whole_tree") or {}).get("checks") or []:
        after[str(c["name"]) + " (whole tree)"] = c
    tests: list[dict[str, str]] = []
    why: list[str] = []
    for c in unfixed["checks"]:
        name = str(c["name"])
        if c["passed"]:
            continue
        before = testresults.failed_ids(c.get("tests"))
        if before is None:
            why.append(f"{name}: no per-test results on the unfixed code")
            continue
        now: set[str] = set()
        for key in (name, name + " (whole tree)"):
            ran = after.get(key)
            if ran is None:
                continue
            ids = testresults.failed_ids(ran.get("tests")) if not ran["passed"] else frozenset()
            if ids is None:
                ids = before  # unreadable on the attempt: none of them counts as passing
            now |= ids
        tests += [
            {"check": name, "id": t, "without_fix": "failed", "attempt": "passed"}
            for t in sorted(before - now)
        ]
    out: Proof = {"proven": bool(tests), "tests": tests[: testresults.MAX_IDS]}
    if not tests:
        why.append(
            "no test fails on the unfixed code and passes with the change: a test that "
            "passes on the unfixed code is no evidence"
        )
    if why:
        out["why"] = why
    return out
