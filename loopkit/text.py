"""Text loopkit shows or writes from worker and check output: cleaned and bounded.

That output is untrusted. Besides colours it may carry terminal control sequences that
retitle a window, rewrite what is on the screen, set the clipboard (OSC 52), plant links
or hide text from the person reading. ``clean`` removes every one of them, and whatever
loopkit prints on stderr or writes into a document, a handoff, TASKS.md, a report or the
ledger from such output goes through it. The other helpers bound text to a size, each
the way its callers need: ``clip`` (characters, an ellipsis), ``bound`` (head and tail),
``cut`` (UTF-8 bytes, at a line), ``tail`` (the last lines of an output) and
``file_tail`` (the last bytes of a file). ``shown`` makes a file name that is not UTF-8
(read from git with ``surrogateescape``) text a JSON document can carry.
"""

from __future__ import annotations

import functools
import os
import re

#: Every terminal control sequence, then every control character left over.
_CONTROL_TEXT = (
    # OSC, DCS, SOS, PM and APC strings (ESC ] P X ^ _ or their C1 forms), ended by BEL or ST;
    # the body stops at any introducer too, so text full of them is still read once
    r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x90\x98\x9c-\x9f]*(?:\x07|\x1b\\|\x9c)"
    # CSI: ESC [ (or C1 CSI), parameter bytes, intermediate bytes, one final byte
    r"|(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
    # any other escape sequence: ESC, intermediate bytes, one final character
    r"|\x1b[ -/]*[0-~]"
    # what is left: C0 controls but tab and newline, DEL, C1 controls (a lone ESC too)
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]"
)


def is_utf8(name: str) -> bool:
    """Whether a name decoded with ``surrogateescape`` was UTF-8 (no byte had to be
    smuggled through as a lone surrogate)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shown(name: str) -> str:
    """A name decoded with ``surrogateescape`` as text any JSON reader takes: bytes that
    are not UTF-8 become ``\\xNN`` escapes (``caf\\xe9.txt``)."""
    if is_utf8(name):
        return name
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


@functools.cache
def pattern(text: str, flags: int = 0) -> re.Pattern[str]:
    """``re.compile(text, flags)`` on first use, once per process. Modules keep a pattern's
    text and ask for it where it is matched: every command imports them, and compiling
    them all at import cost each command a few milliseconds it mostly never used."""
    return re.compile(text, flags)


#: Every character a control sequence or control character starts with (tab and newline
#: aside): text with none of them is clean as it is, and the pattern is not even compiled.
_STARTERS = frozenset(chr(c) for c in (*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0)))


def clean(text: str) -> str:
    """``text`` without terminal control sequences or control characters (tab and
    newline kept). An unterminated string sequence loses only its introducer, so the
    text after it stays visible."""
    if _STARTERS.isdisjoint(text):
        return text
    return pattern(_CONTROL_TEXT).sub("", text)


def clip(text: str, limit: int) -> str:
    """At most ``limit`` characters; a cut one ends with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def clip_words(text: str, limit: int) -> str:
    """At most ``limit`` characters, cut at a word boundary when one is near, with an
    ellipsis: for a person's table, never half a word."""
    if len(text) <= limit:
        return text
    head = text[: max(1, limit - 1)]
    space = head.rfind(" ")
    if space >= limit // 2:
        head = head[:space].rstrip(" ,;:")
    return head + "\u2026"


def bound(text: str, limit: int) -> str:
    """Text cut to ``limit`` characters, keeping its head and (longer) tail."""
    if len(text) <= limit:
        return text
    marker = "\n[... cut ...]\n"
    keep = max(limit - len(marker), 0)
    head = keep // 3
    return text[:head] + marker + text[len(text) - (keep - head) :]


def cut(text: str, limit: int, *, keep: str = "head") -> str:
    """``text`` within ``limit`` UTF-8 bytes, at a line boundary when one is near."""
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    marker = "[... cut ...]"
    room = max(limit - len(marker) - 1, 0)
    if keep == "tail":
        part = raw[len(raw) - room :].decode("utf-8", "ignore")
        nl = part.find("\n")
        if 0 <= nl < len(part) // 3:
            part = part[nl + 1 :]
        return f"{marker}\n{part}"
    part = raw[:room].decode("utf-8", "ignore")
    nl = part.rfind("\n")
    if nl > len(part) * 2 // 3:
        part = part[:nl]
    return f"{part}\n{marker}"


def tail(data: bytes, *, lines: int, limit: int) -> str:
    """The end of an output: its last ``lines`` lines, at most ``limit`` bytes, cleaned."""
    chunk = data[-limit * 2 :] if len(data) > limit * 2 else data
    # A lone CR ends a line here, as it does for a terminal (progress bars).
    text = clean(chunk.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n"))
    kept = text.splitlines()[-lines:]
    out = "\n".join(kept)
    encoded = out.encode("utf-8")
    if len(encoded) > limit:
        out = encoded[-limit:].decode("utf-8", "ignore")
        out = out.split("\n", 1)[1] if "\n" in out else out
    return out


def file_tail(path: str | os.PathLike[str], limit: int = 4096) -> str:
    """The last ``limit`` bytes of a file as text ("" when it cannot be read)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - limit))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""
