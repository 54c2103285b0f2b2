"""loopkit.background: a call begun in a thread hands over its outcome -- its value, or
what it raised, raised again where it is asked for."""

from __future__ import annotations

import threading

import pytest

from loopkit.background import Background
from loopkit.git import GitError


def test_the_value_comes_back_once_the_call_is_done() -> None:
    gate = threading.Event()
    later = Background(lambda: (gate.wait(5), 42)[1], name="test")
    gate.set()
    assert later.result() == 42
    assert later.result() == 42  # asked again: the same value, nothing run twice


def test_what_it_raised_is_raised_where_it_is_asked_for() -> None:
    def fails() -> None:
        raise GitError("git rev-parse failed: bad revision")

    later = Background(fails, name="test")
    later.wait()  # waiting alone raises nothing
    with pytest.raises(GitError, match="bad revision"):
        later.result()


def test_it_runs_beside_the_caller() -> None:
    # Started at once, not when asked: the caller can meet it half-way.
    started, release = threading.Event(), threading.Event()

    def call() -> str:
        started.set()
        release.wait(5)
        return "done"

    later = Background(call, name="test")
    assert started.wait(5)
    release.set()
    assert later.result() == "done"
