"""The live breaker: K identical failures of one tool in a row trip it, nothing else does."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopkit.worker.breaker import Breaker, normalize


def test_three_identical_failures_trip_with_the_pair() -> None:
    b = Breaker(3)
    assert b.observe("Edit", False, "String to replace not found in file.\nString: a") is None
    assert b.observe("Edit", False, "String to replace not found in file.\nString: b") is None
    trip = b.observe(
        "Edit",
        False,
        "String to replace not found in file.\nString: c",
        input={"file_path": "x.py"},
    )
    assert trip is not None
    assert (trip.tool, trip.repeats) == ("Edit", 3)
    assert trip.error == "String to replace not found in file."
    assert trip.as_dict()["input"] == {"file_path": "x.py"}
    assert b.observe("Read", True) is trip  # sticky once tripped


def test_a_success_of_that_tool_resets_the_count() -> None:
    b = Breaker(3)
    b.observe("Bash", False, "exit 1: ModuleNotFoundError")
    b.observe("Bash", False, "exit 1: ModuleNotFoundError")
    b.observe("Bash", True)
    assert b.observe("Bash", False, "exit 1: ModuleNotFoundError") is None


def test_a_different_error_starts_again_and_other_tools_do_not_reset() -> None:
    b = Breaker(3)
    b.observe("Edit", False, "String to replace not found")
    b.observe("Edit", False, "File has not been read yet")
    b.observe("Read", True)  # another tool succeeding between attempts
    b.observe("Edit", False, "File has not been read yet")
    assert b.tripped is None
    assert b.observe("Edit", False, "File has not been read yet") is not None


def test_a_successful_write_between_failures_starts_every_count_again() -> None:
    # Edit, rerun the tests, same failure: a new try after a change, not the same call
    # resubmitted unchanged. Reads in between (reference: the Edit resent right after
    # re-reading the file) do not count as a change.
    b = Breaker(3)
    for _ in range(4):
        assert b.observe("Bash", False, "exit 1: 1 failed in 0.12s") is None
        b.observe("Edit", True, wrote=True)
    b.observe("Edit", False, "String to replace not found")
    b.observe("Read", True)
    b.observe("Edit", False, "String to replace not found")
    b.observe("Read", True)
    assert b.observe("Edit", False, "String to replace not found") is not None


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (
            "/tmp/pytest-of-root/pytest-12/x.py:14: error",
            "/tmp/pytest-of-root/pytest-13/x.py:99: error",
        ),
        ("took 1.52s, addr 0x7ffd1234", "took 0.9s, addr 0x7ffe9999"),
        ("commit deadbeefcafe1234 failed", "commit 0123456789abcdef failed"),
        ("\x1b[31mFAILED\x1b[0m test_a", "FAILED test_a"),
    ],
)
def test_noise_is_normalized_away(a: str, b: str) -> None:
    assert normalize(a) == normalize(b)


def test_different_failures_stay_different() -> None:
    assert normalize("ModuleNotFoundError: foo") != normalize("SyntaxError: invalid syntax")


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["Edit", "Bash", "Read"]),
            st.booleans(),
            st.sampled_from(["e1", "e2", "e3"]),
        ),
        max_size=40,
    ),
    st.integers(min_value=1, max_value=5),
)
def test_trips_exactly_when_k_in_a_row(calls: list[tuple[str, bool, str]], k: int) -> None:
    b = Breaker(k)
    streak: dict[str, tuple[str, int]] = {}
    expected = None
    for tool, ok, err in calls:
        got = b.observe(tool, ok, err)
        if expected is None:
            if ok:
                streak.pop(tool, None)
            else:
                prev, n = streak.get(tool, ("", 0))
                n = n + 1 if prev == err else 1
                streak[tool] = (err, n)
                if n >= k:
                    expected = (tool, err)
        assert (got is not None) == (expected is not None)
    if expected:
        assert b.tripped is not None and (b.tripped.tool, b.tripped.error) == expected
