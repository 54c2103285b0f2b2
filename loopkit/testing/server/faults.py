"""The faults a script's turn injects into its answer: an API error and a cut connection.

``error`` sends the API's error envelope (or the script's own ``body``) with the scripted
status -- or, with ``in_stream``, a 200 stream that carries the error as an event
(``Handler.send_fault``). ``cut`` breaks the answer: a JSON answer stops halfway through
its promised length (``Handler.send_truncated``), a stream is closed after ``after``
events (each wire format has its default point, ``events_before_cut``). Whether a fault is
served again is counted per API, conversation and turn (``ModelServer.take``).
"""

from __future__ import annotations

from loopkit.testing.script import Cut


def events_before_cut(cut: Cut | None, *, default: int, total: int) -> int | None:
    """How many of a stream's ``total`` events are sent before the cut (never all of
    them); None when the stream is not cut."""
    if cut is None:
        return None
    return min(default if cut.after is None else cut.after, total - 1)
