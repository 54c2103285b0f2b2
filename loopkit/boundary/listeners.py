"""A threaded listener that holds at most N connections: the meter's and the egress gate's.

A connection past the cap is closed unanswered at once, so a client that opens many and
sends nothing cannot make loopkit start a thread for each.
"""

from __future__ import annotations

import socketserver
import threading
from typing import Any


def capped(base: type, cap: int, lock: threading.Lock) -> Any:
    """A subclass of ``base`` (a ``socketserver`` server) with a thread per connection,
    at most ``cap`` of them open (counted under ``lock``)."""

    class Capped(socketserver.ThreadingMixIn, base):  # type: ignore[misc]
        daemon_threads = True
        block_on_close = False
        open = 0

        def verify_request(self, request: Any, client_address: Any) -> bool:
            with lock:
                if Capped.open >= cap:
                    return False
                Capped.open += 1
            return True

        def process_request_thread(self, request: Any, client_address: Any) -> None:
            try:
                super().process_request_thread(request, client_address)
            finally:
                with lock:
                    Capped.open -= 1

    return Capped
