"""A small project of each test runner loopkit reads per test, its bug in place: ``add``
subtracts, and the project's own test shows it.

``runner(name)`` gives the project's files, its check and its scope (the whole tree
writable but the runner's own configuration, the tests add-only: the widest scope a
contract gives, where every file a runner or an interpreter finds by itself may be
added); ``runner_project`` makes the repository with a worker that writes the files it
is given. jest and vitest come from ``.cache/runners`` (``make runners``) or PATH; node,
cargo and go from PATH.
"""

from __future__ import annotations

import os
import pwd
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers import require_tool
from tests.helpers.agents import REPO_ROOT
from tests.helpers.recipes import Project, make_project

#: Where ``make runners`` installs jest and vitest.
RUNNERS_BIN = REPO_ROOT / ".cache" / "runners" / "node_modules" / ".bin"


@dataclass(frozen=True)
class Runner:
    """A project of one runner: ``files`` at the base (``source`` holds the bug),
    ``check`` its test command, ``add_only`` and ``protected`` its scope, ``fix`` the
    source fixed, ``failing`` the id of the base's test that shows the bug, and
    ``new_test`` an honest new test file (path, text) that passes once it is fixed;
    ``env`` what the recipe's environment needs for it."""

    name: str
    files: dict[str, str]
    check: str
    source: str
    fix: str
    failing: str
    new_test: tuple[str, str]
    add_only: list[str] = field(default_factory=lambda: ["tests/**"])
    protected: list[str] = field(default_factory=list)
    tools: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)

    @property
    def bug(self) -> str:
        return self.files[self.source]


def _js_env(name: str) -> dict[str, str]:
    """The recipe's environment for the JavaScript runner ``name``: ``make runners``' folder
    first on PATH, as a project's ``node_modules/.bin`` would be (the checks' sandbox shows
    a PATH entry's node_modules where it sits under its private /tmp, as in a checkout
    cloned there); else the one on PATH."""
    if (RUNNERS_BIN / name).exists():
        return {"PATH": f"{RUNNERS_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    require_tool(name)
    return {}


#: A pytest hook that reports every test as passed.
ALL_PASS = (
    "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\n"
    "def pytest_runtest_makereport(item, call):\n"
    "    out = yield\n    out.get_result().outcome = 'passed'\n"
)
PY_BUG = "def add(a, b):\n    return a - b\n"
PY_FIX = "def add(a, b):\n    return a + b\n"
UNITTEST = (
    "import unittest\n\nfrom calc import add\n\n\nclass Calc(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(add(2, 2), 4)\n\n"
    "    def test_zero(self):\n        self.assertEqual(add(0, 0), 0)\n"
)
JS_TEST = (
    "test('test_add', () => { expect(add(2, 2)).toBe(4); });\n"
    "test('zero', () => { expect(add(0, 0)).toBe(0); });\n"
)
CJS_BUG = "exports.add = (a, b) => a - b;\n"
CJS_FIX = "exports.add = (a, b) => a + b;\n"
ESM_BUG = "export const add = (a, b) => a - b;\n"
RS_BUG = "pub fn add(a: i64, b: i64) -> i64 {\n    a - b\n}\n"
RS_FIX = "pub fn add(a: i64, b: i64) -> i64 {\n    a + b\n}\n"
GO_BUG = "package calc\n\nfunc Add(a, b int) int {\n\treturn a - b\n}\n"
GO_FIX = "package calc\n\nfunc Add(a, b int) int {\n\treturn a + b\n}\n"


def _pytest() -> Runner:
    return Runner(
        name="pytest",
        files={
            "pytest.ini": "[pytest]\npythonpath = src\ntestpaths = tests\n",
            "src/calc.py": PY_BUG,
            "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n"
            "    assert add(2, 2) == 4\n\n\ndef test_zero():\n    assert add(0, 0) == 0\n",
        },
        check=f"{sys.executable} -m pytest -q -p no:cacheprovider",
        source="src/calc.py",
        fix=PY_FIX,
        failing="test_add",
        new_test=(
            "tests/test_more.py",
            "from calc import add\n\n\ndef test_more():\n    assert add(1, 2) == 3\n",
        ),
        protected=["pytest.ini"],
    )


def _unittest() -> Runner:
    return Runner(
        name="unittest",
        files={"src/calc.py": PY_BUG, "tests/test_calc.py": UNITTEST},
        check=f"PYTHONPATH=src {sys.executable} -m unittest discover -s tests -v",
        source="src/calc.py",
        fix=PY_FIX,
        failing="test_add",
        new_test=(
            "tests/test_more.py",
            "import unittest\n\nfrom calc import add\n\n\nclass More(unittest.TestCase):\n"
            "    def test_more(self):\n        self.assertEqual(add(1, 2), 3)\n",
        ),
    )


def _jest() -> Runner:
    return Runner(
        name="jest",
        files={
            "package.json": '{"name": "calc", "private": true}\n',
            "src/calc.js": CJS_BUG,
            "tests/calc.test.js": "const { add } = require('../src/calc');\n" + JS_TEST,
        },
        check="jest --ci --no-cache tests",
        source="src/calc.js",
        fix=CJS_FIX,
        failing="test_add",
        new_test=(
            "tests/more.test.js",
            "const { add } = require('../src/calc');\n"
            "test('more', () => { expect(add(1, 2)).toBe(3); });\n",
        ),
        protected=["package.json"],
        env=_js_env("jest"),
    )


def _vitest() -> Runner:
    return Runner(
        name="vitest",
        files={
            "package.json": '{"name": "calc", "private": true, "type": "module"}\n',
            "src/calc.js": ESM_BUG,
            "tests/calc.test.js": "import { add } from '../src/calc';\n" + JS_TEST,
        },
        check="vitest run --globals tests",
        source="src/calc.js",
        fix="export const add = (a, b) => a + b;\n",
        failing="test_add",
        new_test=(
            "tests/more.test.js",
            "import { add } from '../src/calc';\n"
            "test('more', () => { expect(add(1, 2)).toBe(3); });\n",
        ),
        protected=["package.json"],
        env=_js_env("vitest"),
    )


def _node() -> Runner:
    return Runner(
        name="node",
        files={
            "src/calc.js": CJS_BUG,
            "tests/calc.test.js": "const test = require('node:test');\n"
            "const assert = require('node:assert');\nconst { add } = require('../src/calc');\n"
            "test('test_add', () => { assert.strictEqual(add(2, 2), 4); });\n"
            "test('zero', () => { assert.strictEqual(add(0, 0), 0); });\n",
        },
        check="node --test --test-reporter=tap tests/",
        source="src/calc.js",
        fix=CJS_FIX,
        failing="test_add",
        new_test=(
            "tests/more.test.js",
            "const test = require('node:test');\nconst assert = require('node:assert');\n"
            "const { add } = require('../src/calc');\n"
            "test('more', () => { assert.strictEqual(add(1, 2), 3); });\n",
        ),
        tools=("node",),
    )


def _cargo() -> Runner:
    return Runner(
        name="cargo",
        files={
            "Cargo.toml": '[package]\nname = "calc"\nversion = "0.1.0"\nedition = "2021"\n',
            "src/lib.rs": RS_BUG,
            "tests/calc.rs": "use calc::add;\n\n#[test]\nfn test_add() {\n"
            "    assert_eq!(add(2, 2), 4);\n}\n\n#[test]\nfn zero() {\n"
            "    assert_eq!(add(0, 0), 0);\n}\n",
        },
        check="cargo test --offline -q 2>&1",
        source="src/lib.rs",
        fix=RS_FIX,
        failing="test_add",
        new_test=(
            "tests/more.rs",
            "use calc::add;\n\n#[test]\nfn more() {\n    assert_eq!(add(1, 2), 3);\n}\n",
        ),
        protected=["Cargo.toml", "Cargo.lock"],
        tools=("cargo",),
        # rustup finds its toolchain in its home, the user's (the tests' HOME is not)
        env={
            k: os.environ.get(k) or str(Path(pwd.getpwuid(os.getuid()).pw_dir) / d)
            for k, d in (("RUSTUP_HOME", ".rustup"), ("CARGO_HOME", ".cargo"))
        },
    )


def _go() -> Runner:
    return Runner(
        name="go",
        files={
            "go.mod": "module example.com/calc\n\ngo 1.19\n",
            "calc/calc.go": GO_BUG,
            "calc/calc_test.go": 'package calc\n\nimport "testing"\n\n'
            "func TestAdd(t *testing.T) {\n\tif Add(2, 2) != 4 {\n\t\tt.Fatal(Add(2, 2))\n\t}\n}\n\n"
            "func TestZero(t *testing.T) {\n\tif Add(0, 0) != 0 {\n\t\tt.Fatal(Add(0, 0))\n\t}\n}\n",
        },
        check='GOCACHE="$PWD/.gocache" GOFLAGS=-mod=mod go test -v ./...',
        source="calc/calc.go",
        fix=GO_FIX,
        failing="TestAdd",
        new_test=(
            "calc/more_test.go",
            'package calc\n\nimport "testing"\n\n'
            "func TestMore(t *testing.T) {\n\tif Add(1, 2) != 3 {\n\t\tt.Fatal(Add(1, 2))\n\t}\n}\n",
        ),
        add_only=["**/*_test.go"],
        protected=["go.mod", "go.sum"],
        tools=("go",),
    )


RUNNERS = {
    "pytest": _pytest,
    "unittest": _unittest,
    "jest": _jest,
    "vitest": _vitest,
    "node": _node,
    "cargo": _cargo,
    "go": _go,
}


def runner(name: str) -> Runner:
    """The project of runner ``name``; skipped (or failed under ``make test``) when its
    tools are not installed."""
    made = RUNNERS[name]()
    for tool in made.tools:
        require_tool(tool)
    return made


def runner_project(tmp_path: Path, made: Runner, writes: dict[str, str]) -> Project:
    """The repository of ``made`` whose worker writes ``writes`` (path: text), one
    attempt; its task names the base's failing test."""
    body = "".join(
        f"Path({k!r}).parent.mkdir(parents=True, exist_ok=True)\nPath({k!r}).write_text({v!r})\n"
        for k, v in writes.items()
    )
    return make_project(
        tmp_path,
        body,
        files=made.files,
        checks=[{"name": "tests", "run": made.check, "timeout": 180}],
        scope={"writable": ["**"], "add_only": made.add_only, "protected": made.protected},
        budgets={"attempts": 1},
        gitignore="__pycache__/\n*.pyc\n/target/\n/.gocache/\nnode_modules/\n",
    )
