"""Every name created in a folder while a block runs, seen by inotify (Linux).

    with Creations(repo) as seen:
        ...            # run a worker
    assert "secret.py" not in seen.names   # never there, not even for a moment

A file created and removed again between two looks at the folder is still seen: the
kernel queues the event when the name is made.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import select
import struct
import threading
from pathlib import Path
from types import TracebackType

IN_CREATE = 0x00000100
IN_MOVED_TO = 0x00000080
_HEADER = struct.Struct("iIII")


class Creations:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.names: list[str] = []
        self._stop = threading.Event()
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        self._fd = libc.inotify_init1(os.O_NONBLOCK)
        if self._fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        wd = libc.inotify_add_watch(self._fd, str(folder).encode(), IN_CREATE | IN_MOVED_TO)
        if wd < 0:
            raise OSError(ctypes.get_errno(), "inotify_add_watch")
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _drain(self) -> None:
        try:
            data = os.read(self._fd, 65536)
        except BlockingIOError:
            return
        at = 0
        while at + _HEADER.size <= len(data):
            _wd, _mask, _cookie, length = _HEADER.unpack_from(data, at)
            raw = data[at + _HEADER.size : at + _HEADER.size + length]
            self.names.append(raw.rstrip(b"\0").decode("utf-8", "replace"))
            at += _HEADER.size + length

    def _loop(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self._fd], [], [], 0.1)
            if ready:
                self._drain()

    def __enter__(self) -> Creations:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
        self._drain()
        os.close(self._fd)
