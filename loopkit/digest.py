"""Content hashes: the one sha256 constructor loopkit uses.

The interpreter's built-in sha256 loads in a fraction of a millisecond; ``hashlib`` loads
OpenSSL first (about 5 ms of every command's start-up), for the same digest.
"""

from __future__ import annotations

from typing import Protocol


class Hasher(Protocol):
    def update(self, data: bytes, /) -> None: ...
    def digest(self) -> bytes: ...
    def hexdigest(self) -> str: ...


def sha256(data: bytes = b"") -> Hasher:
    """A sha256 hasher fed ``data``."""
    try:
        from _sha2 import sha256 as make  # type: ignore[import-not-found,unused-ignore]  # 3.12+
    except ImportError:
        try:
            from _sha256 import sha256 as make  # type: ignore[import-not-found,no-redef,unused-ignore]
        except ImportError:
            from hashlib import sha256 as make  # type: ignore[assignment,unused-ignore]
    hasher: Hasher = make(data)
    return hasher
