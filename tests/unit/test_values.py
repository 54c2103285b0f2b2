"""loopkit.values.Value: what @dataclass(frozen=True) gave the scope policy, violations,
changes, glob tokens and the clean room -- equality, hashing, repr, immutability."""

from __future__ import annotations

import copy
import pickle

import pytest

from loopkit.evidence.cleanroom import Room
from loopkit.evidence.scope import Change, Policy, Violation
from loopkit.values import Value


def test_equal_by_fields_and_only_within_one_type() -> None:
    assert Violation("protected", "a.py") == Violation("protected", "a.py", "")
    assert Violation("protected", "a.py") != Violation("protected", "b.py")
    assert hash(Violation("r", "p", "d")) == hash(Violation("r", "p", "d"))
    assert len({Violation("r", "p"), Violation("r", "p"), Violation("r", "q")}) == 2

    class Other(Value):
        _fields = ("rule", "path", "detail")

        def __init__(self, rule: str, path: str, detail: str = "") -> None:
            self._set(rule=rule, path=path, detail=detail)

    assert Other("r", "p") != Violation("r", "p")  # same fields, another type


def test_a_value_never_changes() -> None:
    v = Violation("r", "p")
    with pytest.raises(AttributeError, match="cannot change"):
        v.path = "elsewhere"  # type: ignore[misc]
    with pytest.raises(AttributeError, match="cannot change"):
        del v.rule
    assert v.path == "p"


def test_a_policy_compares_without_its_cache_and_but_replaces_fields() -> None:
    a, b = Policy(writable=("src/**",)), Policy(writable=("src/**",))
    assert a.in_scope("src/x.py") and not a.in_scope("docs/x.md")  # a's cache is filled
    assert a == b and hash(a) == hash(b)
    c = a.but(control=("loop.yaml",))
    assert c.control == ("loop.yaml",) and c.writable == ("src/**",) and a.control == ()
    assert c != a
    assert "writable=('src/**',)" in repr(a) and "_seen" not in repr(a)


def test_values_copy_and_pickle_as_themselves() -> None:
    change = Change("a.py", "modified", added=2, extra={"k": 1})
    room = Room(path=__import__("pathlib").Path("/tmp/r"), tree="abc", carried=(".venv",))
    for v in (change, room, Violation("r", "p")):
        assert copy.copy(v) == v
        assert copy.deepcopy(v) == v
        assert pickle.loads(pickle.dumps(v)) == v
