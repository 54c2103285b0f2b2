"""Content hashes: the one sha256 constructor loopkit uses.

The interpreter's built-in sha256 loads in a fraction of a millisecond; ``hashlib`` loads
OpenSSL first (about 5 ms of every command's start-up), for the same digest. OpenSSL's
is about six times faster, though: from a quarter of a megabyte on (the stat cache of a
repository of a few thousand files, a long ledger, a big check log) it pays for its
loading, and is used.
"""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False  # typing stays unloaded at run time (start-up is a feature)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Protocol

    class Hasher(Protocol):
        def update(self, data: bytes, /) -> None: ...
        def digest(self) -> bytes: ...
        def hexdigest(self) -> str: ...


#: From this many bytes on, OpenSSL's sha256 is worth loading.
BIG = 1 << 18


def sha256(data: bytes = b"", *, size: int = 0) -> Hasher:
    """A sha256 hasher fed ``data``; ``size``: how many more bytes it will be fed (a file's
    size), when known."""
    if len(data) + size >= BIG:
        try:
            from _hashlib import openssl_sha256 as fast  # type: ignore[import-not-found,unused-ignore]

            big: Hasher = fast(data)
            return big
        except ImportError:
            pass
    hasher: Hasher = (_built_in or _find_built_in())(data)
    return hasher


_built_in: Callable[[bytes], Hasher] | None = None


def _find_built_in() -> Callable[[bytes], Hasher]:
    """The interpreter's own sha256, looked up once (a failed import is a search of the
    whole path, every time it is tried)."""
    global _built_in
    try:
        from _sha2 import sha256 as make  # type: ignore[import-not-found,unused-ignore]  # 3.12+
    except ImportError:
        try:
            from _sha256 import sha256 as make  # type: ignore[import-not-found,no-redef,unused-ignore]
        except ImportError:
            from hashlib import sha256 as make  # type: ignore[assignment,unused-ignore]
    found: Callable[[bytes], Hasher] = make
    _built_in = found
    return found


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The sha256 of a file's content, read in blocks (raises OSError)."""
    with open(path, "rb") as f:
        h = sha256(size=os.fstat(f.fileno()).st_size)
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def file_digest(path: str | os.PathLike[str]) -> str:
    """sha256 of a file's kind, executable bit and content (of a symlink: where it points),
    as hex; ``absent`` when there is none, ``unreadable: WHY`` when it cannot be read."""

    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "absent"
    except OSError as e:
        return f"unreadable: {e.strerror}"
    h = sha256(size=st.st_size)
    if stat.S_ISLNK(st.st_mode):
        h.update(b"link\0" + os.fsencode(os.readlink(path)))
    elif stat.S_ISREG(st.st_mode):
        h.update(b"file x\0" if st.st_mode & 0o111 else b"file -\0")
        try:
            with open(path, "rb") as f:
                while block := f.read(1 << 20):
                    h.update(block)
        except OSError as e:
            return f"unreadable: {e.strerror}"
    else:
        h.update(f"special {stat.S_IFMT(st.st_mode)}".encode())
    return h.hexdigest()
