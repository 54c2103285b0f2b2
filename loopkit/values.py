"""Immutable value types and plain records, without ``dataclasses``.

``@dataclass(frozen=True)`` costs every command that imports it: the module loads
``inspect`` (and ``ast``, ``dis``, ``tokenize`` with it), and each class has its methods
written and compiled at import. On the path of one attempt that was a sixth of all the
instructions ``lk attempt`` ran. The few value types there (a scope policy, a violation,
a change, a glob token, a clean room) derive from :class:`Value` instead: equal when
their fields are, hashable, shown with them, never changed once made. Records that are
only filled in and read are :func:`record` classes: fields declared once, as a dataclass
declares them, and an ``__init__`` that sets them.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing stays unloaded at run time (start-up is a feature)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar, dataclass_transform, overload

    T = TypeVar("T")
else:

    def dataclass_transform(**_):  # the type checker's alone
        return lambda f: f


class Value:
    """Equal (and hashed) by ``_fields``, shown with them, immutable once made: set each
    field in ``__init__`` with ``_set``."""

    #: The fields that make the value, in order: equality, hash and repr use these.
    _fields: tuple[str, ...] = ()

    def _set(self, **values: object) -> None:
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def _key(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self._fields)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Value)
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is a value: its {name} cannot change")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is a value: its {name} cannot change")

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__name__}({shown})"


class _Made:
    """A field's default that is made anew for each record (``field``)."""

    __slots__ = ("make",)

    def __init__(self, make: Callable[[], object]) -> None:
        self.make = make


_NO_DEFAULT = object()
#: Each record class's fields, in order.
_FIELDS: dict[type, tuple[str, ...]] = {}


def field(*, default_factory: Callable[[], T]) -> T:
    """A field's default made anew for each record (a list, a dict) when its argument is
    not given or is None."""
    return _Made(default_factory)  # type: ignore[return-value]


if TYPE_CHECKING:

    @overload
    def record(cls: type[T], /) -> type[T]: ...

    @overload
    def record(*, slots: bool = False) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(eq_default=False, field_specifiers=(field,))
def record(
    cls: type[T] | None = None, /, *, slots: bool = False
) -> type[T] | Callable[[type[T]], type[T]]:
    """A record class: its ``__init__`` takes the fields the class annotates (not its
    bases'), in order, and sets them, a field's class value being its default (``field``
    for one made anew), then calls the class's ``__post_init__`` if it has one. What
    ``@dataclass`` gives a plain record, without loading ``dataclasses``: the ``__init__``
    is written when the first record is made (~0.1 ms); records compare by identity.
    ``slots=True``: the class gets ``__slots__`` for its fields (it is made again, as
    ``dataclass(slots=True)`` makes it)."""

    def wrap(cls: type[T]) -> type[T]:
        names = tuple(
            name
            for name, kind in vars(cls).get("__annotations__", {}).items()
            if not str(kind).startswith("ClassVar")
        )
        defaults = {name: cls.__dict__[name] for name in names if name in cls.__dict__}
        for name, default in defaults.items():
            if isinstance(default, (list, dict, set)):  # one object every record would share
                raise ValueError(f"{cls.__name__}.{name}: a mutable default; use field()")
        if slots:
            body = {
                key: value
                for key, value in cls.__dict__.items()
                if key not in defaults and key not in ("__dict__", "__weakref__")
            }
            body["__slots__"] = names
            cls = type(cls.__name__, cls.__bases__, body)
        else:
            for name, default in defaults.items():
                if isinstance(default, _Made):
                    delattr(cls, name)

        def first(self: object, *args: object, **kwargs: object) -> None:
            init = _init_for(cls, names, defaults)
            cls.__init__ = init  # type: ignore[method-assign]
            init(self, *args, **kwargs)

        cls.__init__ = first  # type: ignore[method-assign]
        _FIELDS[cls] = names
        return cls

    return wrap if cls is None else wrap(cls)


def _init_for(
    cls: type, names: tuple[str, ...], defaults: dict[str, object]
) -> Callable[..., None]:
    """The ``__init__`` of a record class, written and compiled."""
    given: dict[str, object] = {}
    params, lines = ["self"], []
    for name in names:
        default = defaults.get(name, _NO_DEFAULT)
        if isinstance(default, _Made):
            given[f"_make_{name}"] = default.make
            params.append(f"{name}=None")
            lines.append(f"  self.{name} = _make_{name}() if {name} is None else {name}")
            continue
        if default is not _NO_DEFAULT:
            given[f"_default_{name}"] = default
            params.append(f"{name}=_default_{name}")
        else:
            params.append(name)
        lines.append(f"  self.{name} = {name}")
    if hasattr(cls, "__post_init__"):
        lines.append("  self.__post_init__()")
    source = f"def __init__({', '.join(params)}):\n" + "\n".join(lines or ["  pass"])
    exec(compile(source, f"<record {cls.__qualname__}>", "exec"), given)
    init: Callable[..., None] = given["__init__"]  # type: ignore[assignment]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


def fields_of(record: object) -> dict[str, object]:
    """A record's fields and their values, in the order the class declares them."""
    return {name: getattr(record, name) for name in _FIELDS[type(record)]}


def replaced(record: T, **changes: object) -> T:
    """A copy of a record with ``changes`` to some of its fields (``dataclasses.replace``
    for a ``record`` class)."""
    made: T = type(record)(**{**fields_of(record), **changes})
    return made
