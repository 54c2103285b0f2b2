"""Per-test results: which tests a failing check ran, which of them failed, and whether
the check could run at all.

Sources, the first that gives an answer wins:

1. the JUnit XML report(s) the criterion names in ``junit`` (a path or a glob relative to
   the repository root: pytest ``--junitxml``, jest-junit, vitest, go-junit-report, cargo
   nextest, maven surefire, ...), read from the check's working directory after it ran;
   only a file written while the check ran counts;
2. the check's own output, without the user's help: ``go test -json`` events, TAP
   (``ok 1 - …`` / ``not ok 2 - …``), pytest's summary (``FAILED id``, ``ERROR id``, and the
   final counts, which must agree), ``go test -v`` (``--- FAIL: TestX``), ``cargo test``
   (``test a::b ... FAILED``, with ``-q`` ``a::b --- FAILED``; named by its test binary),
   unittest (``FAIL: test_x (mod.Class.test_x)``), jest (``FAIL file`` and its ``● name``
   lines), vitest (``FAIL file > name``) and rspec (``rspec ./spec/x_spec.rb:4 # name``)
   -- each only when its counts agree, read with the colour codes taken out.

A source that lists failures only (pytest, unittest, cargo, go text) gives ``passed`` as
None. A test recorded more than once (reruns) counts as failed when any record failed.
Nothing here trusts more than the check itself: the check is the worker's code too.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from loopkit.text import pattern

TYPE_CHECKING = False
if TYPE_CHECKING:
    from loopkit.sections import TestCounts

#: Failing ids kept per check in the documents (the count is always whole).
MAX_IDS = 500
#: A JUnit report larger than this is not read.
MAX_REPORT_BYTES = 64 << 20


class Tests:
    """One check's per-test outcome: its failing ids, and its passing ones when known."""

    __slots__ = ("failed", "passed", "source", "total")

    def __init__(
        self, source: str, failed: set[str], passed: set[str] | None, total: int | None = None
    ) -> None:
        self.source = source
        self.failed = frozenset(failed)
        self.passed = None if passed is None else frozenset(passed - failed)
        self.total = total

    def section(self) -> TestCounts:
        """What the documents keep: the source, the counts and the failing ids (sorted)."""
        out: TestCounts = {
            "source": self.source,
            "failed": sorted(self.failed)[:MAX_IDS],
            "failed_count": len(self.failed),
        }
        if self.passed is not None:
            out["passed_count"] = len(self.passed)
        if self.total is not None:
            out["total"] = self.total
        return out


def failed_ids(section: Mapping[str, Any] | None) -> frozenset[str] | None:
    """The failing ids a recorded ``tests`` section holds; None when it holds none, or
    fewer than it counted (cut at MAX_IDS: not exact enough to compare)."""
    if not isinstance(section, Mapping) or not isinstance(section.get("failed"), list):
        return None
    ids = frozenset(str(i) for i in section["failed"])
    if len(ids) != section.get("failed_count", len(ids)):
        return None
    return ids


# --------------------------------------------------------------------------- reading


class NoIdentity(Exception):
    """An output that names its tests, but not one by one: why it is read per check."""


def read(
    criterion: Mapping[str, Any],
    *,
    cwd: Path,
    output: bytes,
    started: float,
    notes: list[str] | None = None,
) -> Tests | None:
    """The check's per-test results (None when no source gives them). ``output`` is the
    check's output (its end is enough for every source but ``go test -json`` and TAP);
    ``started`` is when the check started (an older report is a stale one). ``notes``
    receives why an output that lists tests is not read per test (``NoIdentity``)."""
    junit = criterion.get("junit")
    if isinstance(junit, str) and junit:
        found = _junit(cwd, junit, started)
        if found is not None:
            return found
    text = _ANSI.sub("", output.decode("utf-8", "replace"))  # vitest colours a pipe too
    for parse in (_go_json, _tap, _pytest, _go_text, _cargo, _unittest, _jest, _vitest, _rspec):
        try:
            found = parse(text)
        except NoIdentity as why:
            if notes is not None:
                notes.append(str(why))
            return None
        if found is not None:
            return found
    return None


#: A terminal's colour and cursor codes, which no reader wants between the words.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _junit(cwd: Path, spec: str, started: float) -> Tests | None:
    from xml.etree import ElementTree

    paths = sorted(cwd.glob(spec)) if any(ch in spec for ch in "*?[") else [cwd / spec]
    failed: set[str] = set()
    passed: set[str] = set()
    read_any = False
    for path in paths:
        try:
            st = path.stat()
            if st.st_mtime < started - 1 or st.st_size > MAX_REPORT_BYTES or not path.is_file():
                continue
            root = ElementTree.parse(path).getroot()
        except (OSError, ElementTree.ParseError, ValueError):
            continue
        read_any = True
        for case in root.iter("testcase"):
            cls, name = case.get("classname") or "", case.get("name") or ""
            tid = f"{cls}::{name}" if cls else name
            kinds = {child.tag for child in case}
            if kinds & {"failure", "error"}:
                failed.add(tid)
            elif "skipped" not in kinds:
                passed.add(tid)
    if not read_any:
        return None
    return Tests("junit", failed, passed, len(failed | passed))


def _go_json(text: str) -> Tests | None:
    failed: set[str] = set()
    passed: set[str] = set()
    seen = False
    for line in text.splitlines():
        if not line.startswith('{"'):
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict) or "Action" not in event:
            continue
        seen = True
        action, pkg, test = event.get("Action"), event.get("Package") or "", event.get("Test")
        tid = f"{pkg}.{test}" if test else pkg
        if action == "fail":
            failed.add(tid)
        elif action == "pass":
            passed.add(tid)
    if not seen:
        return None
    # A package fails when one of its tests does: the package itself is a failure of its
    # own only when none of its tests failed (a build error, a panic outside a test).
    failed = {t for t in failed if not any(o != t and o.startswith(t + ".") for o in failed)}
    return Tests("go-json", failed, passed, None)


_TAP = r"^\s*(not ok|ok)\b\s*(\d+)?\s*(?:-\s*)?([^#\n]*?)\s*(#\s*(?:skip|todo)\b.*)?$"


#: tape's closing counts, and other comments that are no test's name.
_TAP_COUNTS = r"^(?:tests|pass|fail|skip|todo|ok|not ok)\b(?:\s+\d+)?\s*$"


def _tap(text: str) -> Tests | None:
    """TAP: each result's id is its description under the test it belongs to -- the last
    top-level comment (tape: ``# name``) and the open subtests (node:test: ``# Subtest:
    name``, indented) -- with the number of its kind within that test when the same
    description is there more than once (tape's "should be equal"). Where descriptions
    repeat and the output names no tests to tell them apart, no id is an identity: the
    check is read per check (``NoIdentity``)."""
    if not pattern(r"^\s*(?:TAP version \d+|1\.\.\d+)\s*$", re.M).search(text):
        return None
    header = ""
    subtests: list[tuple[int, str]] = []  # (indent, name), open
    results: list[tuple[str, str, bool]] = []  # (the test it is in, description, failed)
    for line in text.splitlines():
        indent = len(line) - len(line.lstrip())
        body = line.strip()
        sub = pattern(r"^#\s*Subtest:\s*(.+?)\s*$").match(body)
        if sub:
            subtests = [s for s in subtests if s[0] < indent] + [(indent, sub.group(1))]
            continue
        if body.startswith("#") and indent == 0:
            name = body.lstrip("#").strip()
            if name and not pattern(_TAP_COUNTS, re.I).match(name):
                header = name
            continue
        m = pattern(_TAP, re.I).match(line)
        if not m:
            continue
        verdict, number, desc, directive = m.groups()
        desc = desc.strip() or f"#{number}"
        subtests = [s for s in subtests if s[0] < indent or (s[0] == indent and s[1] != desc)]
        if subtests and subtests[-1] == (indent, desc):
            subtests.pop()
        if directive:  # skipped or todo: neither way a verdict
            continue
        within = " \u203a ".join([header, *(n for i, n in subtests if i < indent)])
        results.append((within.strip(" \u203a"), desc, verdict.lower() == "not ok"))
    if not results:
        return None
    seen: dict[tuple[str, str], int] = {}
    for within, desc, _ in results:
        seen[(within, desc)] = seen.get((within, desc), 0) + 1
    repeated = [k for k, n in seen.items() if n > 1]
    if repeated and any(not within for within, _ in repeated):
        raise NoIdentity(
            f"TAP: the description {repeated[0][1]!r} is given to more than one test and the "
            "output names no test to tell them apart: read per check"
        )
    failed: set[str] = set()
    passed: set[str] = set()
    count: dict[tuple[str, str], int] = {}
    for within, desc, bad in results:
        key = (within, desc)
        count[key] = count.get(key, 0) + 1
        tid = f"{within} \u203a {desc}" if within else desc
        if seen[key] > 1:
            tid += f" [{count[key]}]"
        (failed if bad else passed).add(tid)
    return Tests("tap", failed, passed, len(failed | passed))


_PYTEST_SUMMARY = (
    r"^=*\s*((?:\d+ (?:failed|passed|errors?|skipped|deselected|xfailed|xpassed|warnings?|"
    r"rerun)(?:, )?)+) in [\d.]+s\b"
)


def _pytest(text: str) -> Tests | None:
    summaries = pattern(_PYTEST_SUMMARY, re.M).findall(text)
    if not summaries:
        return None
    counts = {
        word.rstrip("s") if word.startswith("error") else word: int(n)
        for n, word in re.findall(r"(\d+) (\w+)", summaries[-1])
    }
    failed = set(pattern(r"^(?:FAILED|ERROR) (\S+)", re.M).findall(text))
    expected = counts.get("failed", 0) + counts.get("error", 0)
    # Failures only when every one of them is named: `-rN`, `-p no:terminal` or a cut
    # output would otherwise read as fewer failures than there were.
    if len(failed) != expected:
        return None
    return Tests(
        "pytest", failed, None, sum(counts.get(k, 0) for k in ("failed", "passed", "error"))
    )


def _go_text(text: str) -> Tests | None:
    if not pattern(r"^(?:FAIL|ok)\s+\S+", re.M).search(text):
        return None
    failed = set(pattern(r"^\s*--- FAIL: (\S+)", re.M).findall(text))
    build = pattern(r"^FAIL\s+(\S+)\s+\[(?:build|setup) failed\]", re.M).findall(text)
    failed |= set(build)
    if not failed and not pattern(r"^\s*--- PASS: ", re.M).search(text):
        return None
    passed = set(pattern(r"^\s*--- PASS: (\S+)", re.M).findall(text))
    return Tests("go", failed, passed or None, None) if failed or passed else None


def _cargo(text: str) -> Tests | None:
    """cargo test: ``test a::b ... FAILED`` (``a::b --- FAILED`` with ``-q``) and the
    ``failures:`` list, each under the test binary that ran it (``Running tests/calc.rs
    (…)``: the same name in two binaries is two tests); only when the failures read agree
    with the binaries' ``test result:`` counts."""
    if not pattern(r"^test result: (?:ok|FAILED)\.", re.M).search(text):
        return None
    failed: set[str] = set()
    passed: set[str] = set()
    counted = 0
    where = ""
    listing = False
    for line in text.splitlines():
        m = pattern(r"^\s*(?:Running|Doc-tests)\s+(?:unittests\s+)?(\S+)").match(line)
        if m:
            where, listing = m.group(1) + "::", False
            continue
        m = pattern(r"^test result: \w+\. \d+ passed; (\d+) failed").match(line)
        if m:
            counted += int(m.group(1))
            listing = False
            continue
        if line in ("failures:", "") or line.startswith("---- "):
            listing = line == "failures:" or (listing and not line)
            continue
        m = pattern(r"^test (.+?) \.\.\. (FAILED|ok)\b").match(line) or pattern(
            r"^(\S+) --- (FAILED)$"
        ).match(line)
        if m:
            (failed if m.group(2) == "FAILED" else passed).add(where + m.group(1))
        elif listing and pattern(r"^    \S+$").match(line):
            failed.add(where + line.strip())
    if len(failed) != counted:
        return None
    return Tests("cargo", failed, passed, len(failed | passed))


def _unittest(text: str) -> Tests | None:
    ran = pattern(r"^Ran (\d+) tests? in ", re.M).search(text)
    if not ran:
        return None
    failed = set()
    for name, where in pattern(r"^(?:FAIL|ERROR): (\S+) \(([^)\s]+)\)", re.M).findall(text):
        failed.add(where if where.endswith("." + name) else f"{where}.{name}")
    m = pattern(r"^FAILED \((.*)\)\s*$", re.M).search(text)
    expected = (
        sum(int(n) for k, n in re.findall(r"(failures|errors)=(\d+)", m.group(1))) if m else 0
    )
    if len(failed) != expected:
        return None
    return Tests("unittest", failed, None, int(ran.group(1)))


def _jest(text: str) -> Tests | None:
    counts = pattern(r"^Tests:\s+(.*\btotal)\s*$", re.M).search(text)
    if not counts:
        return None
    failed: set[str] = set()
    broken = 0
    where = ""
    for line in text.splitlines():
        m = pattern(r"^\s*(FAIL|PASS)\s+(\S+)").match(line)
        if m:
            where = m.group(2) if m.group(1) == "FAIL" else ""
            continue
        m = pattern(r"^\s+\u25cf (.+?)\s*$").match(line)
        if m and where and m.group(1) != "Console":  # console.log blocks are no tests
            name = f"{where} \u203a {m.group(1)}"
            if m.group(1) == "Test suite failed to run" and name not in failed:
                broken += 1
            failed.add(name)
    n = pattern(r"(\d+) failed").search(counts.group(1))
    if len(failed) != (int(n.group(1)) if n else 0) + broken:
        return None
    total = pattern(r"(\d+) total").search(counts.group(1))
    return Tests("jest", failed, None, int(total.group(1)) if total else None)


def _vitest(text: str) -> Tests | None:
    counts = pattern(r"^\s*Tests\s+(.*)\(\d+\)\s*$", re.M).search(text)
    if not counts:
        return None
    failed = set(pattern(r"^\s*FAIL\s+(\S+ > .+?)\s*$", re.M).findall(text))
    n = pattern(r"(\d+) failed").search(counts.group(1))
    if len(failed) != (int(n.group(1)) if n else 0):
        return None
    return Tests("vitest", failed, None, None)


def _rspec(text: str) -> Tests | None:
    counts = pattern(r"^\d+ examples?, (\d+) failures?", re.M).search(text)
    if not counts:
        return None
    failed = set(pattern(r"^rspec \S+ # (.+?)\s*$", re.M).findall(text))
    if len(failed) != int(counts.group(1)):
        return None
    return Tests("rspec", failed, None, None)


# --------------------------------------------------------------------------- cannot run

_MISSING_PROGRAM = r"(?:^|:\s)([^\s:]+): (?:command )?not found\s*$"
_NO_MODULE = r"^\S*python[\d.]*: No module named (\S+)"
_NOTHING_COLLECTED = (
    r"^=* ?no tests ran\b|^NO TESTS RAN\b|^No tests found\b|^error: no test files\b|"
    r"^Ran 0 tests in "
)


def cannot_run(
    command: str, exit_code: int | None, output: bytes, *, path: str | None = None
) -> str | None:
    """Why the check could not run at all -- its program missing or not executable, the
    interpreter without its test runner, a runner that collected nothing -- as one line;
    None when it ran (whatever it then found). ``path`` (the checks' PATH) names which
    program ran and where it came from."""
    if exit_code is None:  # timed out: it ran
        return None
    text = output[-8192:].decode("utf-8", "replace")
    program = _program(command)
    if exit_code == 127:
        m = pattern(_MISSING_PROGRAM, re.M).search(text)
        what = m.group(1) if m else program
        hidden = _hidden(what, path)
        if hidden:
            return hidden
        return f"`{what}` is not installed or not on PATH (exit 127){_searched(path)}"
    if exit_code == 126:
        return f"`{program}` cannot be executed (exit 126: not executable, or a bad interpreter)"
    m = pattern(_NO_MODULE, re.M).search(text)
    if m:
        return (
            f"the interpreter has no `{m.group(1)}` module (its test runner is not installed)"
            + _which(program, path)
        )
    if (exit_code == 5 and "pytest" in command) or pattern(_NOTHING_COLLECTED, re.M | re.I).search(
        text
    ):
        return "the test runner collected no tests"
    return None


def _hidden(program: str, path: str | None) -> str | None:
    """Why a program the check could not find is there all the same, outside the checks'
    sandbox: under /tmp (the sandbox's own /tmp is private and empty), or elsewhere it
    hides. None when it is nowhere to be found."""
    if path is None:
        return None
    found = program if "/" in program else shutil.which(program, path=path)
    if not found or not os.path.isfile(found):
        return None
    if found == "/tmp" or found.startswith("/tmp/"):
        return (
            f"`{program}` is {found}, under /tmp, and the checks' sandbox has a private /tmp "
            "of its own: install the tool elsewhere (or sandbox.mode: off) (exit 127)"
        )
    return f"`{program}` is {found}, which the checks' sandbox does not show (exit 127)"


def _which(program: str, path: str | None) -> str:
    """``: `python` is /p/.venv/bin/python (the checks' PATH)``, or nothing when unknown."""
    if path is None:
        return ""
    found = program if "/" in program else shutil.which(program, path=path)
    if not found:
        return ""
    return f": `{program}` is {found} (found on the checks' PATH{_searched(path, inside=True)})"


def _searched(path: str | None, *, inside: bool = False) -> str:
    """The checks' PATH, shortened to its first entries, for a line about a program."""
    if path is None:
        return ""
    entries = [p for p in path.split(os.pathsep) if p]
    shown = ", ".join(entries[:4]) + (", ..." if len(entries) > 4 else "")
    return f": {shown}" if inside else f"; the checks' PATH: {shown}"


def _program(command: str) -> str:
    """The program a shell command starts (its first word after ``VAR=value`` settings)."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    for word in words:
        if "=" in word.split("/", 1)[0] and not word.startswith("="):
            continue
        return word
    return command.strip()


def missing_programs(criteria: Any, *, path: str | None) -> list[tuple[str, str]]:
    """(check name, program) for each criterion whose program is not found on ``path``:
    an absolute or relative path to a file (``./run-tests``) is not looked up, nor a
    shell builtin or keyword."""
    out = []
    for c in criteria or []:
        if not isinstance(c, Mapping) or not isinstance(c.get("run"), str):
            continue
        program = absent_program(c["run"], path=path)
        if program is not None:
            out.append((str(c.get("name")), program))
    return out


def absent_program(command: str, *, path: str | None, cwd: str | None = None) -> str | None:
    """The program the shell command starts when it is not found on ``path`` (with
    ``cwd``: a path to a program, from there, that is not an executable file), else None
    -- also for a shell builtin or keyword, or a word the shell expands first."""
    program = _program(command)
    if not program or program in _SHELL_WORDS or any(c in program for c in "$`*?~;&|<>(){}"):
        return None
    if "/" in program:
        if cwd is None:
            return None
        full = os.path.join(cwd, program)
        return None if os.path.isfile(full) and os.access(full, os.X_OK) else program
    return program if shutil.which(program, path=path) is None else None


_SHELL_WORDS = frozenset(
    [
        "!",
        "[",
        "[[",
        "{",
        "(",
        ".",
        ":",
        "alias",
        "break",
        "cd",
        "command",
        "continue",
        "echo",
        "eval",
        "exec",
        "exit",
        "export",
        "false",
        "for",
        "if",
        "printf",
        "pwd",
        "read",
        "return",
        "set",
        "shift",
        "test",
        "times",
        "trap",
        "true",
        "type",
        "ulimit",
        "umask",
        "unset",
        "until",
        "wait",
        "while",
        "case",
        "source",
        "builtin",
        "let",
        "local",
    ]
)
