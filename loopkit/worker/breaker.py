"""The live breaker: one tool failing the same way K times in a row stops the worker.

A worker that repeats one failing call (an Edit whose old text is not in the file, a
test command that keeps dying the same way) makes no progress however long it runs. The
breaker watches tool results as they stream in; for each tool it keeps the normalized
error of its last failure and how many times in a row that tool has failed with it. A
success of that tool, or a different error, starts the count again; so does a successful
write of any file, because a failure repeated after the worker changed the tree is a new
try (edit, rerun the tests), not the same call resubmitted unchanged. At ``repeats``
(contract ``worker.breaker_repeats``, default 3) it trips and names the repeated pair.

Normalization removes what changes between otherwise identical failures: paths, numbers,
hex ids, temp names, quoted snippets longer than a few words.
"""

from __future__ import annotations

import re
from functools import lru_cache

from loopkit.text import pattern
from loopkit.values import field, fields_of, record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from loopkit.worker.providers.base import JsonObject

DEFAULT_REPEATS = 3

_ANSI = r"\x1b\[[0-9;]*[A-Za-z]"
_PATH = r"(?:[A-Za-z]:)?[/\\][\w.@+/\\-]+"
_TMP = r"\b(?:tmp|temp)[\w.-]*"
_HEX = r"\b0x[0-9a-f]+\b|\b(?=[a-f]*\d)(?=\d*[a-f])[0-9a-f]{8,}\b"
_NUMBER = r"\b\d+(?:\.\d+)?(?:ms|s)?\b"


def normalize(error: str, *, limit: int = 300) -> str:
    """The error text with the noise taken out: equal for failures that are the same."""
    return _normalize(error, limit)


@lru_cache(maxsize=256)  # a stuck worker repeats the same text: normalize it once
def _normalize(error: str, limit: int) -> str:
    # Claude's Edit failure repeats the old text it looked for: keep only its first line.
    text = error.split("\nString:", 1)[0][: limit * 2]
    # Each pass runs only when its kind of noise can be there (this is on the live path).
    if "\x1b" in text:
        text = pattern(_ANSI).sub("", text)
    if "/" in text or "\\" in text:
        text = pattern(_PATH).sub("<path>", text)
    low = text.lower()
    if "tmp" in low or "temp" in low:
        text = pattern(_TMP, re.I).sub("<tmp>", text)
    text = pattern(_HEX, re.I).sub("<hex>", text)
    if any(c.isdigit() for c in text):
        text = pattern(_NUMBER).sub("<n>", text)
    return " ".join(text.split())[:limit]


@record
class Trip:
    tool: str
    error: str  # normalized
    repeats: int
    example: str  # the last raw error (clipped)
    input: JsonObject = field(default_factory=dict)

    def as_dict(self) -> JsonObject:
        return fields_of(self)

    def message(self) -> str:
        """The run's error line for a worker stopped by this trip."""
        return f"stuck: {self.tool} failed the same way {self.repeats} times in a row: {self.error}"


@record
class Breaker:
    repeats: int = DEFAULT_REPEATS
    tripped: Trip | None = None
    _last: dict[str, tuple[str, int]] = field(default_factory=dict)

    def observe(
        self,
        tool: str,
        ok: bool,
        error: str | None = None,
        *,
        input: JsonObject | None = None,
        wrote: bool = False,
    ) -> Trip | None:
        """Record one tool result; the Trip when this one makes K in a row (then sticky).

        ``wrote``: the (successful) call changed files, which starts every count again.
        """
        if self.tripped is not None:
            return self.tripped
        if ok:
            if wrote:
                self._last.clear()
            else:
                self._last.pop(tool, None)
            return None
        key = normalize(error or "")
        prev, count = self._last.get(tool, ("", 0))
        count = count + 1 if prev == key else 1
        self._last[tool] = (key, count)
        if count >= self.repeats:
            self.tripped = Trip(
                tool=tool,
                error=key,
                repeats=count,
                example=(error or "")[:500],
                input=dict(input or {}),
            )
        return self.tripped
