"""loopkit.values.Value: what @dataclass(frozen=True) gave the scope policy, violations,
changes, glob tokens and the clean room -- equality, hashing, repr, immutability; and
loopkit.values.record: what @dataclass gave a plain record -- its fields, in order, with
their defaults -- without loading dataclasses."""

from __future__ import annotations

import copy
import pickle
import subprocess
import sys
from typing import ClassVar

import pytest

from loopkit.evidence.cleanroom import Room
from loopkit.evidence.scope import Change, Policy, Violation
from loopkit.values import Value, field, fields_of, record


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


@record
class _Sample:
    name: str
    size: int = 0
    tags: list[str] = field(default_factory=list)
    kinds: ClassVar[tuple[str, ...]] = ("a",)

    def described(self) -> str:
        return f"{self.name}:{self.size}:{','.join(self.tags)}"


@record(slots=True)
class _Slotted:
    name: str
    note: str | None = None


@record
class _Derived:
    text: str

    def __post_init__(self) -> None:
        self.words = self.text.split()


def test_a_record_takes_its_fields_in_order_with_their_defaults() -> None:
    assert _Sample("a").described() == "a:0:"
    assert _Sample("b", 2, ["x"]).described() == "b:2:x"
    assert _Sample(size=3, name="c").described() == "c:3:"
    with pytest.raises(TypeError, match="name"):
        _Sample()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        _Sample("a", 1, [], "kinds")  # type: ignore[call-arg]  # a ClassVar is no field
    assert _Sample.kinds == ("a",)


def test_a_made_default_is_new_for_each_record_and_for_none() -> None:
    one, two = _Sample("a"), _Sample("b")
    one.tags.append("t")
    assert two.tags == [] and _Sample("c").tags == []
    assert _Sample("d", tags=None).tags == []  # type: ignore[arg-type]
    given = ["g"]
    assert _Sample("e", tags=given).tags is given


def test_a_slotted_record_has_no_dict_and_records_compare_by_identity() -> None:
    s = _Slotted("a")
    assert (s.name, s.note) == ("a", None) and _Slotted("b", "n").note == "n"
    assert _Slotted.__slots__ == ("name", "note") and not hasattr(s, "__dict__")
    with pytest.raises(AttributeError):
        s.other = 1  # type: ignore[attr-defined]
    assert _Slotted("a") != _Slotted("a") and _Sample("a") != _Sample("a")
    assert _Slotted.__qualname__ == "_Slotted" and _Slotted.__init__.__qualname__.startswith(
        "_Slotted."
    )


def test_a_record_refuses_a_default_every_record_would_share() -> None:
    with pytest.raises(ValueError, match=r"Shared\.tags: a mutable default"):

        @record
        class Shared:
            tags: list[str] = []  # noqa: RUF012


def test_a_record_gives_its_fields_in_order_and_runs_its_post_init() -> None:
    assert fields_of(_Sample("a", 1, ["t"])) == {"name": "a", "size": 1, "tags": ["t"]}
    assert list(fields_of(_Sample(tags=[], size=2, name="b"))) == ["name", "size", "tags"]
    assert fields_of(_Slotted("s")) == {"name": "s", "note": None}
    d = _Derived("two words")
    assert d.words == ["two", "words"] and fields_of(d) == {"text": "two words"}


def test_records_load_neither_dataclasses_nor_typing() -> None:
    probe = (
        "import sys\n"
        "from loopkit.values import record\n"
        "@record\nclass R:\n    a: int\n    b: str = ''\n"
        "assert R(1).b == '' and R(1, 'x').b == 'x'\n"
        "print(sorted(m for m in ('dataclasses', 'inspect', 'typing') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
