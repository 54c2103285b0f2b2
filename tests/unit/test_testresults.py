"""Per-test results read from a check's report or output, and a check that cannot run."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopkit.evidence import testresults, verify

PYTEST = b"""\
tests/test_a.py .F.                                                      [100%]
=================================== FAILURES ===================================
=========================== short test summary info ============================
FAILED tests/test_a.py::test_two - assert 1 == 2
ERROR tests/test_b.py - ImportError: nope
==================== 1 failed, 2 passed, 1 error in 0.05s ====================
"""

GO_JSON = b"""\
{"Action":"run","Package":"ex/p","Test":"TestA"}
{"Action":"pass","Package":"ex/p","Test":"TestA"}
{"Action":"run","Package":"ex/p","Test":"TestB"}
{"Action":"fail","Package":"ex/p","Test":"TestB"}
{"Action":"fail","Package":"ex/p"}
{"Action":"fail","Package":"ex/q"}
"""

TAP = b"""\
TAP version 13
1..4
ok 1 - adds
not ok 2 - subtracts
ok 3 - skipped one # SKIP no db
not ok 4 - divides
"""

GO_TEXT = b"""\
=== RUN   TestA
--- PASS: TestA (0.00s)
=== RUN   TestB
    b_test.go:9: wrong
--- FAIL: TestB (0.00s)
FAIL
FAIL\tex/p\t0.002s
"""

CARGO = b"""\
running 2 tests
test parse::blank ... FAILED
test parse::plain ... ok

test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out
"""

UNITTEST = b"""\
======================================================================
FAIL: test_two (tests.test_a.T.test_two)
----------------------------------------------------------------------
Ran 3 tests in 0.001s

FAILED (failures=1)
"""


JEST = """\
FAIL src/sum.test.js
  \u25cf Console

    console.log
      hello

PASS src/a.test.js
  \u25cf Console

    console.log
      hi
FAIL src/sum.test.js
  \u25cf sum \u203a adds

    expect(received).toBe(expected)

FAIL src/broken.test.js
  \u25cf Test suite failed to run

    SyntaxError: nope

Test Suites: 2 failed, 1 passed, 3 total
Tests:       1 failed, 4 passed, 5 total
""".encode()

VITEST = b"""\
 FAIL  test/basic.test.ts > math > adds
AssertionError: expected 3 to be 4
 Test Files  1 failed (1)
      Tests  1 failed | 2 passed (3)
"""

RSPEC = b"""\
3 examples, 1 failure

Failed examples:

rspec ./spec/calc_spec.rb:4 # Calc adds
"""


@pytest.mark.parametrize(
    ("output", "source", "failed", "passed"),
    [
        (
            JEST,
            "jest",
            {
                "src/sum.test.js \u203a sum \u203a adds",
                "src/broken.test.js \u203a Test suite failed to run",
            },
            None,
        ),
        (VITEST, "vitest", {"test/basic.test.ts > math > adds"}, None),
        (RSPEC, "rspec", {"Calc adds"}, None),
        (PYTEST, "pytest", {"tests/test_a.py::test_two", "tests/test_b.py"}, None),
        (GO_JSON, "go-json", {"ex/p.TestB", "ex/q"}, 1),
        (TAP, "tap", {"subtracts", "divides"}, 1),
        (GO_TEXT, "go", {"TestB"}, 1),
        (CARGO, "cargo", {"parse::blank"}, 1),
        (UNITTEST, "unittest", {"tests.test_a.T.test_two"}, None),
    ],
)
def test_each_runner_output_gives_its_failing_ids(
    tmp_path: Path, output: bytes, source: str, failed: set[str], passed: int | None
) -> None:
    found = testresults.read({}, cwd=tmp_path, output=output, started=time.time())
    assert found is not None
    assert (found.source, set(found.failed)) == (source, failed)
    assert (None if found.passed is None else len(found.passed)) == passed


def test_pytest_without_every_failure_named_gives_nothing(tmp_path: Path) -> None:
    # -rN: the counts say 2 failed, no line names them: not exact, so not per test.
    out = b"..FF\n2 failed, 2 passed in 0.10s\n"
    assert testresults.read({}, cwd=tmp_path, output=out, started=time.time()) is None


JUNIT = """<?xml version="1.0"?>
<testsuites><testsuite name="pytest">
<testcase classname="tests.test_a" name="test_one"/>
<testcase classname="tests.test_a" name="test_two"><failure message="x"/></testcase>
<testcase classname="tests.test_a" name="test_three"><skipped/></testcase>
<testcase classname="tests.test_b" name="test_four"><error message="y"/></testcase>
</testsuite></testsuites>
"""


def test_a_junit_report_named_by_the_criterion_wins(tmp_path: Path) -> None:
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports/junit.xml").write_text(JUNIT)
    found = testresults.read(
        {"junit": "reports/*.xml"}, cwd=tmp_path, output=PYTEST, started=time.time()
    )
    assert found is not None and found.source == "junit"
    assert set(found.failed) == {"tests.test_a::test_two", "tests.test_b::test_four"}
    assert found.passed == {"tests.test_a::test_one"}


def test_a_junit_report_older_than_the_check_is_stale(tmp_path: Path) -> None:
    (tmp_path / "junit.xml").write_text(JUNIT)
    found = testresults.read(
        {"junit": "junit.xml"}, cwd=tmp_path, output=b"", started=time.time() + 60
    )
    assert found is None


@pytest.mark.parametrize(
    ("command", "code", "output", "expected"),
    [
        ("tox -q", 127, b"sh: 1: tox: not found\n", "`tox` is not installed"),
        ("nox", 127, b"bash: line 1: nox: command not found\n", "`nox` is not installed"),
        ("./run-tests", 126, b"Permission denied\n", "`./run-tests` cannot be executed"),
        ("python3 -m pytest", 1, b"/usr/bin/python3: No module named pytest\n", "no `pytest`"),
        ("pytest -q", 5, b"no tests ran in 0.01s\n", "collected no tests"),
        ("pytest -q", 1, b"E   ModuleNotFoundError: No module named 'foo'\n", None),
        ("make test", 2, b"make: *** [test] Error 1\n", None),
        ("pytest", None, b"", None),
    ],
)
def test_a_check_that_cannot_run_is_told_apart(
    command: str, code: int | None, output: bytes, expected: str | None
) -> None:
    why = testresults.cannot_run(command, code, output)
    assert (why is None) if expected is None else (why is not None and expected in why)


def test_missing_programs_skips_paths_builtins_and_finds_the_rest() -> None:
    criteria = [
        {"name": "a", "run": "no-such-tool-xyz -q"},
        {"name": "b", "run": "FOO=1 sh -c true"},
        {"name": "c", "run": "./scripts/test"},
        {"name": "d", "run": "test -f x"},
    ]
    assert testresults.missing_programs(criteria, path="/usr/bin:/bin") == [
        ("a", "no-such-tool-xyz")
    ]


@given(st.binary(max_size=2000))
def test_reading_any_output_never_raises(output: bytes) -> None:
    testresults.read({}, cwd=Path("/nonexistent"), output=output, started=0.0)
    testresults.cannot_run("pytest", 1, output)


# --------------------------------------------------------------------------- the ratchet


def _check(name: str, failed: list[str] | None, *, passed: bool = False) -> dict:
    c = {
        "name": name,
        "command": "pytest",
        "exit_code": 0 if passed else 1,
        "passed": passed,
        "fingerprint": None if passed else f"fp-{name}-{len(failed or [])}",
    }
    if failed is not None:
        c["tests"] = {"source": "pytest", "failed": failed, "failed_count": len(failed)}
    return c


def _ratchet(now: list[dict], base: list[dict], text: str = "Fix it") -> dict:
    body = {"checks": now, "passed": False, "fingerprint": "x", "skipped": []}
    verify.ratchet(body, {"tree": "t", "checks": base}, task={"id": "t1", "text": text})
    return body


def test_a_test_that_passed_at_the_base_may_not_fail() -> None:
    body = _ratchet([_check("suite", ["t::a", "t::b"])], [_check("suite", ["t::a"])])
    assert body["passed"] is False and body["required"] == ["suite"]
    assert body["checks"][0]["blocking_tests"] == ["t::b"]


def test_failures_already_there_do_not_block_and_named_ones_must_pass() -> None:
    base = [_check("suite", ["t::test_parse", "t::test_other"])]
    fixed = _ratchet([_check("suite", ["t::test_other"])], base, "Fix test_parse")
    assert fixed["passed"] is True and fixed["fingerprint"] is None
    assert fixed["known_failures"][0]["tests"] == ["t::test_other"]
    still = _ratchet([_check("suite", ["t::test_parse", "t::test_other"])], base, "Fix test_parse")
    assert still["passed"] is False
    assert still["checks"][0]["blocking_tests"] == ["t::test_parse"]


def test_the_fingerprint_is_the_set_of_blocking_tests() -> None:
    base = [_check("suite", ["t::test_parse", "t::k"])]
    one = _ratchet([_check("suite", ["t::test_parse", "t::k"])], base, "Fix test_parse")
    moved = _ratchet([_check("suite", ["t::k", "t::c"])], base, "Fix test_parse")
    again = _ratchet([_check("suite", ["t::k", "t::test_parse"])], base, "Fix test_parse")
    assert one["fingerprint"] == again["fingerprint"] != moved["fingerprint"]


def test_without_per_test_results_the_check_is_judged_whole() -> None:
    body = _ratchet(
        [_check("suite", None), _check("lint", None, passed=True)],
        [_check("suite", None), _check("lint", None, passed=True)],
    )
    assert body["passed"] is True and body["checks"][0]["judged"] == "per_check"
    assert body["known_failures"][0]["name"] == "suite"


def test_results_that_vanish_block() -> None:
    body = _ratchet([_check("suite", None)], [_check("suite", ["t::a"])])
    assert body["passed"] is False and body["required"] == ["suite"]


def test_a_check_that_cannot_run_at_the_base_too_is_the_environment() -> None:
    now = {**_check("suite", None), "cannot_run": "`tox` is not installed"}
    body = _ratchet([now], [{**_check("suite", None), "cannot_run": "`tox` is not installed"}])
    assert body["environment"][0]["name"] == "suite" and body["passed"] is False
    # Known at the base, the check guards nothing: the verification does not pass
    # though nothing blocks, and the task's own check passed.
    task = {**_check("task-1", None, passed=True)}
    known = _ratchet([dict(now), task], [{**_check("suite", None), "cannot_run": "x"}])
    assert known["passed"] is False and known["environment"][0]["name"] == "suite"
    broken = _ratchet([dict(now)], [_check("suite", ["t::a"])])
    assert "environment" not in broken and broken["passed"] is False


#: tape: assertion messages shared by many tests, each test named in a comment before them.
TAPE = b"""\
TAP version 13
# parses blank
ok 1 should be strictly equal
not ok 2 should be deeply equivalent
# parses plain
ok 3 should be deeply equivalent
not ok 4 should be deeply equivalent
not ok 5 should be deeply equivalent

1..5
# tests 5
# pass  2
# fail  3
"""

#: node:test: subtests named, nested by indentation; two share a name in two suites.
NODE_TAP = b"""\
TAP version 13
# Subtest: parse
    # Subtest: works
    not ok 1 - works
      ---
      ...
    1..1
not ok 1 - parse
# Subtest: format
    # Subtest: works
    ok 1 - works
    1..1
ok 2 - format
1..2
# tests 2
"""


def _tap(text: bytes) -> testresults.Tests | None:
    return testresults.read({}, cwd=Path("."), output=text, started=0.0)


def test_tape_s_shared_messages_are_told_apart_by_their_test_and_number() -> None:
    found = _tap(TAPE)
    assert found is not None and found.source == "tap"
    assert found.failed == {
        "parses blank \u203a should be deeply equivalent",
        "parses plain \u203a should be deeply equivalent [2]",
        "parses plain \u203a should be deeply equivalent [3]",
    }
    assert found.passed == {
        "parses blank \u203a should be strictly equal",
        "parses plain \u203a should be deeply equivalent [1]",
    }


def test_node_test_s_subtests_are_named_by_their_suite() -> None:
    found = _tap(NODE_TAP)
    assert found is not None
    assert found.failed == {"parse \u203a works", "parse"}
    assert found.passed == {"format \u203a works", "format"}


def test_shared_messages_with_no_test_names_are_read_per_check_and_say_why() -> None:
    notes: list[str] = []
    text = b"TAP version 13\nok 1 should be equal\nnot ok 2 should be equal\n1..2\n"
    found = testresults.read({}, cwd=Path("."), output=text, started=0.0, notes=notes)
    assert found is None
    assert notes and "more than one test" in notes[0] and "per check" in notes[0]


#: cargo test -q over two test binaries, each with a test named the same.
CARGO_QUIET = b"""\
     Running unittests src/lib.rs (target/debug/deps/calc-1)

running 1 test
.
test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out

     Running tests/calc.rs (target/debug/deps/calc-2)

running 2 tests
. 1/2
same --- FAILED

failures:

---- same stdout ----
    indented output
thread 'same' panicked at tests/calc.rs:5:5:

failures:
    same

test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out
"""


def test_cargo_quiet_output_names_each_failure_by_its_test_binary(tmp_path: Path) -> None:
    found = testresults.read({}, cwd=tmp_path, output=CARGO_QUIET, started=time.time())
    assert found is not None and found.source == "cargo"
    assert set(found.failed) == {"tests/calc.rs::same"}
    # counts that do not agree with the failures read: not per test
    short = CARGO_QUIET.replace(b"same --- FAILED\n", b"").replace(b"    same\n", b"")
    assert testresults.read({}, cwd=tmp_path, output=short, started=time.time()) is None


def test_colour_codes_do_not_hide_the_failures(tmp_path: Path) -> None:
    coloured = b"\x1b[41m\x1b[1m FAIL \x1b[22m\x1b[49m tests/a.test.js\x1b[2m > \x1b[22madds\n" + (
        b"\x1b[2m      Tests \x1b[22m \x1b[1m\x1b[31m1 failed\x1b[39m\x1b[22m\x1b[90m (1)\x1b[39m\n"
    )
    found = testresults.read({}, cwd=tmp_path, output=coloured, started=time.time())
    assert found is not None and set(found.failed) == {"tests/a.test.js > adds"}
