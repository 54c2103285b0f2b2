"""Immutable value types, without ``dataclasses``.

``@dataclass(frozen=True)`` costs every command that imports it: the module loads
``inspect`` (and ``ast``, ``dis``, ``tokenize`` with it), and each class has its methods
written and compiled at import. On the path of one attempt that was a sixth of all the
instructions ``lk attempt`` ran. The few value types there (a scope policy, a violation,
a change, a glob token, a clean room) derive from :class:`Value` instead: equal when
their fields are, hashable, shown with them, never changed once made. Records that are
only filled in and read are plain classes with an ``__init__``.
"""

from __future__ import annotations


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
