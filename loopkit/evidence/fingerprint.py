"""Failure fingerprints: a failing check's signature with the noise taken out.

The same failure in another clone, another temporary directory or another run must give
the same fingerprint; a different failure a different one. So the output is normalized
(colours, the repository root, temporary and other absolute paths, line numbers, memory
addresses, durations, dates and times, pids, ports, run counts) and the fingerprint is a
hash of the lines that describe the failure -- error lines when there are any, else the
end of the output -- together with how the check ended.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence

from loopkit.digest import sha256
from loopkit.text import clean, pattern

#: Hex characters kept from the sha256 (64 bits: collisions are not a practical concern).
LENGTH = 16
#: Lines of the output's end used when no line looks like an error.
TAIL_LINES = 20
#: At most this many signature lines (the first ones: later ones are usually fallout).
MAX_LINES = 60

_TEMP_ROOTS = (
    r"/tmp",
    r"/var/tmp",
    r"/private/var/folders",
    r"/var/folders",
    r"/dev/shm",
    r"/run/user/\d+",
)
_PATH_CHARS = r"[^\s'\"`:,;()\[\]{}<>|=]"
_TEMP_PATH_TEXT = r"(?:" + "|".join(_TEMP_ROOTS) + r")(?:/" + _PATH_CHARS + "*)*"
_ABS_PATH_TEXT = r"(?<![\w.~<>])(?:/" + _PATH_CHARS + "+)+"
_WIN_PATH_TEXT = r"\b[A-Za-z]:\\(?:[^\s'\"`:,;()<>|\\]+\\)*"

#: (pattern, replacement, flags), applied in order; compiled on first use (start-up matters).
_RULE_TEXT: tuple[tuple[str, str, int], ...] = (
    # dates and times (before numbers are touched)
    (
        r"\b\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2}|\s?UTC)?",
        "<time>",
        0,
    ),
    (r"\b\d{4}[-/]\d{2}[-/]\d{2}\b", "<date>", 0),
    (
        r"\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*,?\s+(?:\d{1,2}\s+)?"
        r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.?\s+\d{1,2}",
        "<date>",
        re.I,
    ),
    (r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b", "<time>", 0),
    # identifiers that differ on every run
    (r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", "<uuid>", re.I),
    (r"\b0x[0-9a-f]+\b", "0x<addr>", re.I),
    (r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{12,}\b", "<hex>", re.I),
    (r"\b(pid|process|thread|tid|ppid)([\s:=#]+)\d+\b", r"\1\2<pid>", re.I),
    (r"\b(localhost|127\.0\.0\.1|0\.0\.0\.0|\[::1?\]):\d+\b", r"\1:<port>", re.I),
    (r"\b(tmp|temp)(?=[A-Za-z0-9_]*[\d_])[A-Za-z0-9_]{4,}", r"\1<tmp>", re.I),
    (r"\bpytest-(?:of-[\w.-]+|\d+)", "pytest-<tmp>", 0),
    # durations and sizes of the run
    (
        r"\b\d+(?:\.\d+)?\s?(?:ns|us|µs|ms|s|sec|secs|seconds?|m|min|mins|minutes?|h|hours?)\b",
        "<dur>",
        0,
    ),
    (r"\(\s*\d+(?:\.\d+)?\s*%\s*\)|\b\d+(?:\.\d+)?%", "<pct>", 0),
    # line and column numbers
    (r"(\.[A-Za-z0-9_]+):\d+(?::\d+)?\b", r"\1:<n>", 0),
    (r"(\.(?:cs|fs|vb|c|cc|cpp|h|hpp|java|kt|scala))\(\d+(?:,\d+)?\)", r"\1:<n>", 0),
    (r"\b(line|lines|col|column|ln)(\s+)\d+(?:\s*-\s*\d+)?", r"\1\2<n>", re.I),
    # run counts in summary lines ("3 passed, 1 failed in 0.1s")
    (
        r"\b\d+ (passed|failed|errors?|skipped|warnings?|xfailed|xpassed|deselected|"
        r"selected|tests?|items?|examples?|assertions?|specs?|pending|todo|total|ignored|measured)\b",
        r"<k> \1",
        re.I,
    ),
    (r"\b(collected|ran|running)\s+\d+\b", r"\1 <k>", re.I),
)


@functools.cache
def _rules() -> tuple[tuple[re.Pattern[str], str], ...]:
    return tuple((pattern(p, f), r) for p, r, f in _RULE_TEXT)


_SIGNAL_TEXT = (
    r"error|fail|exception|traceback|assert|panic|fatal|abort|expected|unexpected|"
    r"not found|no such|cannot|can't|could not|denied|refused|undefined|invalid|"
    r"segmentation|timed out|timeout|^E\s|^\s*>\s|^\s*File \"|^\s*at \S"
)
#: Lines that say a run is over rather than what went wrong.
_SUMMARY_TEXT = r"^[=\-_*#~ ]*(?:<k> \w+[, ]*)+(?:in <dur>)?[=\-_*#~ ]*$|^[=\-_*#~ ]+$"


def normalize_line(line: str, *, roots: Sequence[str] = (), home: str | None = None) -> str:
    """One output line with the run-specific noise replaced by placeholders."""
    s = clean(line).rstrip()
    for root in sorted((r.rstrip("/") for r in roots if r and r != "/"), key=len, reverse=True):
        if root in s:  # whole path components only: /p is not the start of /pytest
            s = pattern(r"(?<![\w.-])" + re.escape(root) + r"(?![\w.-])").sub("<root>", s)
    s = pattern(_TEMP_PATH_TEXT).sub(
        lambda m: "<tmp>/" + m.group(0).rstrip("/").rsplit("/", 1)[-1], s
    )
    if home and home != "/" and home in s:
        s = pattern(r"(?<![\w.-])" + re.escape(home.rstrip("/")) + r"(?![\w.-])").sub("<home>", s)
    # Other absolute paths (interpreters, site-packages, build dirs) differ from machine
    # to machine: keep the file name, which is what a reader recognises.
    s = pattern(_ABS_PATH_TEXT).sub(
        lambda m: "<abs>/" + m.group(0).rstrip("/").rsplit("/", 1)[-1], s
    )
    s = pattern(_WIN_PATH_TEXT).sub("<abs>\\\\", s)
    for rx, repl in _rules():
        s = rx.sub(repl, s)
    return " ".join(s.split())


def normalize(text: str, *, roots: Sequence[str] = (), home: str | None = None) -> list[str]:
    """Every non-empty line of ``text``, normalized."""
    out = []
    for line in text.splitlines():
        n = normalize_line(line, roots=roots, home=home)
        if n:
            out.append(n)
    return out


def signature(lines: Sequence[str]) -> list[str]:
    """The lines that describe the failure: error lines if any, else the output's end."""
    summary, error = pattern(_SUMMARY_TEXT), pattern(_SIGNAL_TEXT, re.I)
    picked: list[str] = []
    seen: set[str] = set()
    for line in lines:
        if summary.match(line) or not error.search(line) or line in seen:
            continue
        seen.add(line)
        picked.append(line)
        if len(picked) >= MAX_LINES:
            break
    if picked:
        return picked
    return [line for line in lines if not summary.match(line)][-TAIL_LINES:]


def _digest(parts: Iterable[str]) -> str:
    h = sha256()
    for p in parts:
        h.update(p.encode("utf-8", "surrogateescape"))
        h.update(b"\n")
    return str(h.hexdigest())[:LENGTH]


def of_output(
    output: bytes | str,
    *,
    exit_code: int | None,
    timed_out: bool = False,
    roots: Sequence[str] = (),
    home: str | None = None,
) -> str:
    """The fingerprint of a failed check's output and ending (exit code or timeout)."""
    text = output.decode("utf-8", "replace") if isinstance(output, bytes) else output
    ending = "timeout" if timed_out else f"exit {exit_code}"
    return _digest([ending, *signature(normalize(text, roots=roots, home=home))])


def combine(named: Iterable[tuple[str, str | None]]) -> str | None:
    """The attempt's fingerprint from its checks' (name, fingerprint); None if none failed."""
    failed = [f"{name}={fp}" for name, fp in named if fp is not None]
    return _digest(failed) if failed else None


def of_tests(ids: Iterable[str]) -> str:
    """The fingerprint of a set of failing test ids (their order does not matter)."""
    return _digest(["tests", *sorted(set(ids))])
