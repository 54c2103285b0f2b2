"""Reading a judge's reply: the last ``VERDICT:`` line decides, bluntly.

Any line that contains ``VERDICT:`` (in any case, anywhere on the line) is a candidate;
the last candidate decides. It counts only when the whole line is the verdict --
``VERDICT: MET`` or ``VERDICT: NOT MET`` (markdown emphasis, a list dash, a quote mark
and a closing full stop are tolerated). Everything else is NOT_MET: no candidate line, a
last candidate that says anything more or less ("VERDICT: MET, mostly", "VERDICT: NOT",
"my verdict: fine"), an empty reply. A reply cut short therefore never reads as success:
a cut before the line leaves no line, a cut inside it leaves a malformed one (no prefix
of ``VERDICT: NOT MET`` is ``VERDICT: MET``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

VerdictValue = Literal["MET", "NOT_MET"]
MET: VerdictValue = "MET"
NOT_MET: VerdictValue = "NOT_MET"

#: Why a reply reads as it does (``Reading.reason``).
NO_VERDICT = "no_verdict"
MALFORMED = "malformed_verdict"

_CANDIDATE = re.compile(r"verdict\s*:", re.IGNORECASE)
_DECORATION = str.maketrans("", "", "*`")
_WELL_FORMED = re.compile(
    r"^[\s>#\-+]*VERDICT\s*:\s*(?P<value>MET|NOT[ \t_]+MET)\s*[.!]?\s*$", re.IGNORECASE
)


@dataclass(frozen=True)
class Reading:
    """What a reply says: the verdict, the line that decided it, and the reasons given."""

    verdict: VerdictValue
    said: VerdictValue | None  # what the decisive line declared; None when it declared nothing
    line: str | None  # the decisive line as written; None when there was none
    reason: str | None  # None when well-formed; else NO_VERDICT or MALFORMED
    reasons: str  # the reply without its decisive line: the judge's explanation


def value_of(line: str) -> VerdictValue | None:
    """The verdict a single line declares, or None when it is not exactly a verdict line."""
    m = _WELL_FORMED.match(line.translate(_DECORATION))
    if m is None:
        return None
    return MET if m.group("value").upper() == "MET" else NOT_MET


def is_candidate(line: str) -> bool:
    return _CANDIDATE.search(line) is not None


def parse(text: str | None) -> Reading:
    """Read a reply; anything but a final well-formed verdict line is NOT_MET."""
    lines = (text or "").splitlines()
    for index in range(len(lines) - 1, -1, -1):
        line = lines[index]
        if not is_candidate(line):
            continue
        said = value_of(line)
        rest = "\n".join(lines[:index] + lines[index + 1 :]).strip()
        return Reading(
            verdict=said or NOT_MET,
            said=said,
            line=line.strip(),
            reason=None if said else MALFORMED,
            reasons=rest,
        )
    return Reading(
        verdict=NOT_MET, said=None, line=None, reason=NO_VERDICT, reasons=(text or "").strip()
    )
