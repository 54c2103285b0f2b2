"""Work begun in a thread while the caller goes on.

loopkit's waits are mostly on git processes (the GIL is free meanwhile), and many of them
do not depend on one another: a hash and a look-up, two walks of two trees. ``Background``
starts one such call now and hands its outcome over when asked -- the value it returned,
or what it raised, raised again in the thread that asks.
"""

from __future__ import annotations

import threading

TYPE_CHECKING = False  # typing stays unloaded at run time (start-up is a feature)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


class Background:
    """``call()`` running in a thread from now on."""

    def __init__(self, call: Callable[[], Any], *, name: str) -> None:
        self._out: dict[str, Any] = {}
        self._thread = threading.Thread(target=self._run, args=(call,), name=name, daemon=True)
        self._thread.start()

    def _run(self, call: Callable[[], Any]) -> None:
        try:
            self._out["value"] = call()
        except BaseException as e:  # raised again in the thread that asks (result)
            self._out["error"] = e

    def result(self) -> Any:
        """Wait for the call; what it returned, or raise what it raised."""
        self._thread.join()
        if "error" in self._out:
            raise self._out["error"]
        return self._out["value"]

    def wait(self) -> None:
        """Wait for the call, whatever its outcome (its outcome kept for ``result``)."""
        self._thread.join()

    def running(self) -> bool:
        """Whether the call is still running."""
        return self._thread.is_alive()
