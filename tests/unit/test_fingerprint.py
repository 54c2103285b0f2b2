"""Failure fingerprints: the noise goes, the failure stays."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopkit.evidence.fingerprint import combine, normalize_line, of_output, signature

PYTEST_FAILURE = """\
============================= test session starts ==============================
platform linux -- Python 3.11.7, pytest-8.3.2, pluggy-1.5.0
rootdir: {root}
collected {n} items

tests/test_calc.py {dots}F                                                 [100%]

=================================== FAILURES ===================================
___________________________________ test_add ___________________________________

    def test_add():
        print("started", time.time())
>       assert add(2, 2) == 4
E       assert 0 == 4
E        +  where 0 = add(2, 2)

{root}/tests/test_calc.py:{line}: AssertionError
----------------------------- Captured stdout call -----------------------------
started at {when} in {tmp} pid {pid} object at {addr}
=========================== short test summary info ============================
FAILED tests/test_calc.py::test_add - assert 0 == 4
========================= 1 failed, {n} passed in {secs}s =========================
"""


def _run(**kw: object) -> str:
    values: dict[str, object] = {
        "root": "/home/a/work/clone-one",
        "n": 3,
        "dots": "..",
        "line": 12,
        "when": "2026-11-29T19:26:25Z",
        "tmp": "/tmp/pytest-of-a/pytest-7/test_add0",
        "pid": 4242,
        "addr": "0x7f3a2b1c9e50",
        "secs": "0.12",
    }
    values.update(kw)
    return PYTEST_FAILURE.format(**values)


def _fp(text: str, root: str = "/home/a/work/clone-one", code: int | None = 1) -> str:
    return of_output(text, exit_code=code, roots=[root], home="/home/a")


def test_same_failure_elsewhere_another_run_same_fingerprint() -> None:
    first = _fp(_run())
    other_clone = _run(
        root="/srv/ci/build-9281/repo",
        line=14,  # the test moved down two lines
        when="2027-01-02 03:04:05.123456+01:00",
        tmp="/tmp/pytest-of-ci/pytest-321/test_add1",
        pid=99,
        addr="0x55d0c0ffee00",
        secs="3.57",
        n=5,  # more tests pass now: not a different failure
        dots="....",
    )
    assert _fp(other_clone, root="/srv/ci/build-9281/repo") == first


def test_different_failure_different_fingerprint() -> None:
    first = _fp(_run())
    assert _fp(_run().replace("assert 0 == 4", "assert 5 == 4")) != first
    assert _fp(_run().replace("test_add", "test_sub")) != first
    assert _fp(_run(), code=2) != first  # it ended differently
    assert of_output(_run(), exit_code=None, timed_out=True) != first


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("\x1b[31mFAILED\x1b[0m x", "FAILED x"),
        ("at /tmp/tmpa8x_k2q/out.txt", "at <tmp>/out.txt"),
        ("in /private/var/folders/xy/T/abc/f.py", "in <tmp>/f.py"),
        ("/usr/lib/python3.11/json/decoder.py", "<abs>/decoder.py"),
        ("/home/a/.cache/x.json missing", "<home>/.cache/x.json missing"),
        ("/home/a/work/clone-one/src/m.py:3: E1", "<root>/src/m.py:<n>: E1"),
        ('File "x.py", line 42, in f', 'File "x.py", line <n>, in f'),
        ("main.go:17:5: undefined: foo", "main.go:<n>: undefined: foo"),
        ("Program.cs(10,5): error", "Program.cs:<n>: error"),
        ("object at 0x7ffee3b1c9a0", "object at 0x<addr>"),
        ("commit 3f9a1c2b7e4d5a6b", "commit <hex>"),
        ("id 123e4567-e89b-12d3-a456-426614174000", "id <uuid>"),
        ("took 1.25s and 340ms", "took <dur> and <dur>"),
        ("elapsed 3 seconds", "elapsed <dur>"),
        ("on Sun Nov 29 19:26:25 UTC 2026", "on <date> <time> UTC 2026"),
        ("at 2026-11-29T19:26:25.123Z", "at <time>"),
        ("on 2026-11-29", "on <date>"),
        ("worker pid 1234 died", "worker pid <pid> died"),
        ("Process 77 exited", "Process <pid> exited"),
        ("connect 127.0.0.1:54321 refused", "connect 127.0.0.1:<port> refused"),
        ("== 3 passed, 1 failed in 0.5s ==", "== <k> passed, <k> failed in <dur> =="),
        ("collected 12 items", "collected <k> items"),
        ("Tests: 1 failed, 3 passed, 4 total", "Tests: <k> failed, <k> passed, <k> total"),
        ("  trailing   spaces   ", "trailing spaces"),
        ("assert add(2, 2) == 4", "assert add(2, 2) == 4"),  # values that matter stay
        ("temperature too high", "temperature too high"),
    ],
)
def test_normalize_line(line: str, expected: str) -> None:
    assert normalize_line(line, roots=["/home/a/work/clone-one"], home="/home/a") == expected


def test_signature_prefers_error_lines_and_falls_back_to_the_end() -> None:
    lines = ["building", "step 1", "Error: disk full", "cleanup", "=== <k> failed in <dur> ==="]
    assert signature(lines) == ["Error: disk full"]
    quiet = [f"line {i}" for i in range(30)]
    assert signature(quiet) == quiet[-20:]
    assert signature(["x", "error a", "error a", "error b"]) == ["error a", "error b"]


def test_terminal_control_sequences_are_not_part_of_a_line() -> None:
    assert normalize_line("\x1b[1;32mok\x1b[0m \x1b]0;title\x07done") == "ok done"
    assert (
        normalize_line("\x1b]52;c;cHduZWQ=\x1b\\\x9b31mFAILED\x9b0m \x1bPq#0\x1b\\x") == "FAILED x"
    )


def test_combine() -> None:
    assert combine([("a", None), ("b", None)]) is None
    one = combine([("a", "f1"), ("b", None)])
    assert one is not None and one == combine([("a", "f1")])
    assert one != combine([("a", "f2")])
    assert one != combine([("b", "f1")])  # which check failed matters


def test_a_short_root_is_a_whole_path_component() -> None:
    text = "/p/src/x.py:3: error in /pytest-of-a/y"
    assert normalize_line(text, roots=["/p"]) == "<root>/src/x.py:<n>: error in <abs>/y"


@settings(max_examples=120, deadline=None)
@given(
    root=st.from_regex(r"/[a-z]{1,8}(/[a-z0-9_-]{1,10}){0,3}", fullmatch=True),
    pid=st.integers(min_value=1, max_value=4_000_000),
    secs=st.floats(min_value=0, max_value=9999, allow_nan=False).map(lambda f: f"{f:.2f}"),
    line=st.integers(min_value=1, max_value=99_999),
)
def test_noise_never_changes_the_fingerprint(root: str, pid: int, secs: str, line: int) -> None:
    baseline = _fp(_run())
    text = _run(root=root, pid=pid, secs=secs, line=line)
    assert _fp(text, root=root) == baseline
