"""What a shell command seen in a worker's stream does: files it reads, effects outside the tree.

Best effort on purpose: it reads the words of a command line (``bash -lc '...'``
unwrapped, split on ``&&``, ``||``, ``;`` and ``|``), never runs anything. A side effect is
something a ``git reset`` cannot undo: a push, a network call, a package install.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterable
from functools import lru_cache

from loopkit.text import pattern

#: Commands whose file operands are read (cat FILE, sed -n 1,5p FILE, ...).
_READERS = {"cat", "head", "tail", "less", "more", "nl", "wc", "bat", "sed", "grep", "rg", "awk"}
#: Options of the readers that take a value (so the value is not a file).
_VALUE_OPTS = {"-n", "-c", "-e", "-f", "-m", "-A", "-B", "-C", "-g", "-t", "--max-count"}
_PATTERN_FIRST = {"grep", "rg", "sed", "awk"}
#: "-n"/"-c" take a value for these; elsewhere they are flags (sed -n, grep -n, rg -n, cat -n).
_N_TAKES_VALUE = {"head", "tail", "nl"}

#: Cheap pre-checks: most commands mention no reader and no outside tool at all. Patterns
#: are kept as text and compiled where first matched (``text.pattern``).
_MAYBE_READS = r"\b(" + "|".join(sorted(_READERS)) + r")\b"
_MAYBE_EFFECTS = (
    r"\b(push|publish|upload|install|add|ci|i|get|yarn|curl|wget|ssh|scp|sftp|rsync|nc|ncat|telnet"
    r"|ftp|http|https|gh|aws|gcloud|az|kubectl|docker|fetch|pull|clone|remote)\b"
)
_SEPARATORS = r"&&|\|\||;|\||\n"

#: (kind, pattern over one simple command) -- first match wins.
_EFFECTS: tuple[tuple[str, str], ...] = (
    ("git_push", r"^git\b.*\bpush\b"),
    ("publish", r"^(npm|yarn|pnpm)\s+publish\b|^twine\s+upload\b|^cargo\s+publish\b"),
    (
        "package_install",
        (
            r"^(sudo\s+)?(pip3?|uv\s+pip|python3?\s+-m\s+pip)\s+install\b"
            r"|^(sudo\s+)?(apt|apt-get|yum|dnf|apk|brew|pacman|zypper)\s+(install|add|-S)\b"
            r"|^(npm|pnpm)\s+(install|i|add|ci)\b|^yarn(\s+add|\s+install|\s*$)"
            r"|^(cargo|go|gem)\s+install\b|^(pipx|uv\s+tool)\s+install\b|^(poetry|uv|cargo)\s+add\b"
            r"|^go\s+get\b"
        ),
    ),
    (
        "network",
        (
            r"^(curl|wget|ssh|scp|sftp|rsync|nc|ncat|telnet|ftp|http|https|gh|aws|gcloud"
            r"|az|kubectl|docker\s+(push|pull|login)|git\s+(fetch|pull|clone|remote\s+add))\b"
        ),
    ),
)


def _split(text: str) -> list[str]:
    """shlex.split, without its cost when there is nothing to unquote."""
    if not any(c in text for c in "'\"\\"):
        return text.split()
    return shlex.split(text)


def unwrap(command: str) -> str:
    """``bash -lc 'X'`` / ``sh -c "X"`` -> ``X`` (codex wraps every command like this)."""
    s = command.strip()
    for _ in range(3):
        m = re.match(r"^(?:/\S*/)?(?:ba|z|da)?sh\s+-l?c\s+(.*)$", s, re.S)
        if not m:
            break
        rest = m.group(1).strip()
        try:
            words = _split(rest)
        except ValueError:
            return rest
        s = words[0] if words else rest
    return s


def simple_commands(command: str) -> list[str]:
    return [c.strip() for c in pattern(_SEPARATORS).split(unwrap(command)) if c.strip()]


def _words(cmd: str) -> list[str]:
    try:
        words = _split(cmd)
    except ValueError:
        words = cmd.split()
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        words.pop(0)  # FOO=bar cmd ...
    return words


def files_read_by(command: str) -> list[str]:
    """Files a command line reads, by the words of its reading commands."""
    return list(_each_command(command, _MAYBE_READS, _operands_read))


def side_effects(command: str) -> list[str]:
    """The kinds of outside effects in a command line ([] when it stays in the tree)."""
    return list(dict.fromkeys(_each_command(command, _MAYBE_EFFECTS, _effect)))


def _each_command(
    command: str, maybe: str, reading: Callable[[list[str]], Iterable[str]]
) -> tuple[str, ...]:
    """What ``reading`` finds in the words of each simple command of ``command``, in
    order; nothing when the cheap pre-check ``maybe`` does not match the line."""
    return _found(command, reading) if pattern(maybe).search(command) else ()


@lru_cache(maxsize=1024)
def _found(command: str, reading: Callable[[list[str]], Iterable[str]]) -> tuple[str, ...]:
    out: list[str] = []
    for cmd in simple_commands(command):
        words = _words(cmd)
        if words:
            out.extend(reading(words))
    return tuple(out)


def _operands_read(words: list[str]) -> list[str]:
    prog = words[0].rsplit("/", 1)[-1]
    if prog not in _READERS:
        return []
    operands: list[str] = []
    skip = False
    explicit_script = False
    for w in words[1:]:
        if skip:
            skip = False
            continue
        if w in ("-e", "-f") and prog in _PATTERN_FIRST:
            explicit_script = True
        if w in _VALUE_OPTS and (w not in ("-n", "-c") or prog in _N_TAKES_VALUE):
            skip = True
            continue
        if w.startswith("-") and w != "-":
            continue
        if w.startswith(("<", ">", "2>")):
            continue
        operands.append(w)
    if prog in _PATTERN_FIRST and not explicit_script and operands:
        operands = operands[1:]
    return [o for o in operands if o != "-" and not re.search(r"[*?]", o)]


def _effect(words: list[str]) -> list[str]:
    line = " ".join([words[0].rsplit("/", 1)[-1], *words[1:]])
    for kind, effect in _EFFECTS:
        if pattern(effect).search(line):
            return [kind]
    return []
