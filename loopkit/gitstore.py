"""Git objects and refs that loopkit writes itself, byte for byte as git writes them.

A blob, a tree, a commit, a note and a ref of loopkit's own, each written to the plain
object store without starting git (a git process costs more than the write). Where the
store or the refs are not the plain kind (another hash, a shared or included config, a
reftable), each writer answers ``None`` or ``False`` and the caller asks git instead.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import time
import zlib
from pathlib import Path

from loopkit import git
from loopkit.discovery import find_dirs, is_object_id, loose_object, ref_from_files

TYPE_CHECKING = False  # typing stays unloaded at run time (start-up is a feature)
if TYPE_CHECKING:
    from collections.abc import Iterable

    from loopkit.discovery import GitDirs


def write_blob(
    root: str | os.PathLike[str],
    data: bytes,
    *,
    durable: bool = False,
    dirs: GitDirs | None = None,
) -> str:
    """``data`` as a blob in the repository's objects, and its id -- written as git writes
    a loose object (compressed beside its place, then renamed in; ``durable``: flushed to
    disk, the file and its folder) without starting git, where the store is the plain one
    (SHA-1, not shared, no object directory from the environment); else by ``git
    hash-object -w``. An object already there is left as it is (its content is its name).
    ``dirs``: the git folders, when ``root`` is a git folder rather than a work tree."""
    dirs = dirs or find_dirs(root)
    if dirs is None or not git.plain_store(dirs) or not (dirs.common / "objects").is_dir():
        flags = list(git.FSYNC) if durable else []
        return git.out([*flags, "hash-object", "-w", "--stdin"], cwd=root, input=data).strip()
    return _write_loose(dirs, b"blob", data, durable=durable)


def _write_loose(dirs: GitDirs, kind: bytes, data: bytes, *, durable: bool) -> str:
    body = b"%s %d\0" % (kind, len(data)) + data
    oid = hashlib.sha1(body).hexdigest()
    path = dirs.common / "objects" / oid[:2] / oid[2:]
    if not path.exists():
        from loopkit.files import atomic_write  # not at import: lk-plan next never writes

        atomic_write(path, zlib.compress(body), sync=durable, mode=0o444)
    return oid


#: Words in a config file that make a ref's write more than a file's (``write_own_ref``).
_REF_WORDS = (b"refstorage", b"include", b"precomposeunicode")
#: ``core.logAllRefUpdates`` as every non-bare repository has it: no reflog for refs/worktree.
_NO_REFLOG = re.compile(
    rb"logallrefupdates[ \t]*(?:=[ \t]*(true|false|yes|no|on|off|1|0)?)?[ \t]*$"
)


def write_own_ref(dirs: GitDirs, ref: str, oid: str) -> bool:
    """Point the work tree's own ref ``ref`` (``refs/worktree/...``) at ``oid`` as git's
    files backend does -- a lock file made exclusively, the id written and flushed, renamed
    into place, the folder flushed -- without starting git. False, nothing written, where
    git would do more or otherwise (a reflog asked for, another ref store, an include or a
    setting from the environment, the lock held, a file in the ref's way): ask git then."""
    if not ref.startswith("refs/worktree/") or not is_object_id(oid) or _reflogs(dirs) != "":
        return False
    return _moved_ref(dirs.own, ref, oid, None, b"")


def _reflogs(dirs: GitDirs) -> str | None:
    """``core.logAllRefUpdates`` as every config file git reads for ``dirs`` sets it: ""
    (unset, or a plain yes or no: no reflog for refs/worktree/), "false"; None where a
    ref's write is more than a file's (``_REF_WORDS``, "always", settings from the
    environment, a file that cannot be read)."""
    if any(k in os.environ for k in ("GIT_CONFIG", "GIT_CONFIG_COUNT", "GIT_CONFIG_PARAMETERS")):
        return None  # settings of the environment's own (``-c``, ``GIT_CONFIG_KEY_0``)
    files = [dirs.common / "config", dirs.own / "config.worktree"]
    files += [Path(name) for name, _key in git.user_files()[:-2]]  # the config files
    last = ""
    for file in files:
        try:
            text = file.read_bytes().lower()
        except FileNotFoundError:
            continue
        except OSError:
            return None
        if any(word in text for word in _REF_WORDS):
            return None
        for line in (x.strip() for x in text.splitlines() if b"logallrefupdates" in x):
            found = _NO_REFLOG.fullmatch(line)
            if found is None:
                return None  # "always": git writes a reflog for every ref
            last = "false" if found.group(1) in (b"false", b"no", b"off", b"0") else ""
    return last


def _moved_ref(folder: Path, ref: str, oid: str, old: str | None, log: bytes) -> bool:
    """``ref`` under ``folder`` moved to ``oid`` under its lock, as git's files backend
    does; only from ``old`` when given (the value the ref file holds, or ``absent`` -- a
    ref only in ``packed-refs`` is then read from there), with the reflog line ``log``
    appended (none when empty). False, nothing moved, when the lock is held, the ref
    moved meanwhile, or a file is in the way."""
    target = folder / ref
    lock = target.with_name(target.name + ".lock")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError:
        return False
    try:
        try:
            if old is not None and ref_from_files(folder, ref) != old:
                raise OSError("moved meanwhile")
            os.write(fd, f"{oid}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        if log:
            logs = folder / "logs" / ref
            logs.parent.mkdir(parents=True, exist_ok=True)
            with open(logs, "ab") as f:
                f.write(log)
        os.rename(lock, target)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(lock)
        return False
    flushed = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY)  # the rename, flushed
    try:
        os.fsync(flushed)
    finally:
        os.close(flushed)
    return True


_NOTE_MESSAGE = b"Notes added by 'git notes add'"


def add_note(root: Path, ref: str, commit: str, blob: str) -> bool:
    """``git notes --ref REF add -f -C BLOB COMMIT`` done by loopkit itself: the notes tree
    with ``commit``'s note set, a commit of it on the ref's last, the ref moved under its
    lock from the value read (its reflog line as git writes it) -- the objects as git
    writes them, fanned out as git fans them (``_notes_tree``). False, nothing moved,
    where git would do more or otherwise: a store or ref store that is not the plain one,
    notes git would fan out deeper than one level of folders or that are not loose here,
    an identity from git's guesses, the ref moved meanwhile, an encoding configured (git
    names it in the commit). Then ask git."""
    dirs = find_dirs(root)
    if dirs is None or not git.plain_store(dirs) or _reflogs(dirs) != "":
        return False
    if not (is_object_id(commit) and is_object_id(blob) and len(commit) == 40):
        return False
    old = ref_from_files(dirs.common, ref)
    if old is None:
        return False
    top: dict[bytes, tuple[bytes, bytes]] = {}  # name -> (mode, id) of the notes tree's top
    if old != "absent":
        last = loose_object(dirs.common, old)
        if last is None or last[0] != b"commit" or not last[1].startswith(b"tree "):
            return False
        listed = _tree_entries(dirs, last[1][5:45].decode("ascii", "replace"))
        if listed is None:
            return False
        top = listed
    tree_id = _notes_tree(dirs, top, commit.encode(), bytes.fromhex(blob))
    if tree_id is None:
        return False
    made = _commit(root, dirs, tree_id, None if old == "absent" else old, _NOTE_MESSAGE)
    if made is None:
        return False
    new, committer = made
    was = "0" * 40 if old == "absent" else old
    log = b"%s %s %s\tnotes: %s\n" % (was.encode(), new.encode(), committer, _NOTE_MESSAGE)
    return _moved_ref(dirs.common, ref, new, old, log)


_HEX = b"0123456789abcdef"


def _tree_entries(dirs: GitDirs, tree: str) -> dict[bytes, tuple[bytes, bytes]] | None:
    """A loose tree's entries, name -> (mode, raw id); None when it is not one here."""
    found = loose_object(dirs.common, tree)
    if found is None or found[0] != b"tree":
        return None
    body, at, entries = found[1], 0, {}
    while at < len(body):
        end = body.index(b"\0", at)
        mode, _, name = body[at:end].partition(b" ")
        entries[name] = (mode, body[end + 1 : end + 21])
        at = end + 21
    return entries


def _spread(names: Iterable[bytes], digit: int) -> bool:
    """Whether every one of the 16 hex digits at ``digit`` starts at least two of
    ``names``: git's sign (notes.c ``determine_fanout``) that a level of its notes tree
    is full enough to be written as a level of folders."""
    seen: dict[int, int] = {}
    for name in names:
        seen[name[digit]] = seen.get(name[digit], 0) + 1
    return len(seen) == 16 and min(seen.values()) >= 2


def _notes_tree(
    dirs: GitDirs, top: dict[bytes, tuple[bytes, bytes]], key: bytes, note: bytes
) -> str | None:
    """The notes tree git writes once ``key``'s note is ``note``, from the last one's top
    entries -- flat (every note named by its commit) or one level of folders named by a
    commit's first two digits, as git chooses: folders once every first digit starts two
    notes, a second level (which is then git's to write) once a folder's every third
    digit does. None where the notes are not one of those two shapes of loose trees."""

    def is_note(name: bytes, mode: bytes, width: int) -> bool:
        return mode == b"100644" and len(name) == width and not name.strip(_HEX)

    flat = all(is_note(n, m, 40) for n, (m, _) in top.items())
    if flat:
        notes = {n: i for n, (_, i) in top.items()}
        notes[key] = note
        if not _spread(notes, 0):
            return _write_tree_of(dirs, {n: (b"100644", i) for n, i in notes.items()})
        folders: dict[bytes, dict[bytes, bytes]] = {}
        for name, oid in notes.items():  # fanned out now, as git fans them
            folders.setdefault(name[:2], {})[name[2:]] = oid
    else:
        if not all(
            m == b"40000" and len(n) == 2 and not n.strip(_HEX) for n, (m, _) in top.items()
        ):
            return None
        if len({n[:1] for n in top}) < 16:
            return None  # a folder level git would fold back: git's to write
        folder = top.get(key[:2])
        inner: dict[bytes, bytes] = {}
        if folder is not None:
            listed = _tree_entries(dirs, folder[1].hex())
            if listed is None or not all(is_note(n, m, 38) for n, (m, _) in listed.items()):
                return None
            inner = {n: i for n, (_, i) in listed.items()}
        inner[key[2:]] = note
        folders = {key[:2]: inner}
    written = dict(top) if not flat else {}
    for prefix, inner in folders.items():
        if len(inner) > 1 and _spread(inner, 0):
            return None  # git would fan this folder out once more
        made = _write_tree_of(dirs, {n: (b"100644", i) for n, i in inner.items()})
        written[prefix] = (b"40000", bytes.fromhex(made))
    return _write_tree_of(dirs, written)


def _write_tree_of(dirs: GitDirs, entries: dict[bytes, tuple[bytes, bytes]]) -> str:
    """A tree of ``entries`` (name -> mode, raw id; files and folders whose names sort
    alike) written as a loose object, flushed."""
    body = b"".join(b"%s %s\0%s" % (entries[n][0], n, entries[n][1]) for n in sorted(entries))
    return _write_loose(dirs, b"tree", body, durable=True)


#: Bytes git trims from the ends of a name or an e-mail address (``crud`` in its ident.c).
_CRUD = frozenset(b" .,:;<>\"\\'") | frozenset(range(33))


def _ident(root: str | os.PathLike[str], role: str, when: int) -> bytes | None:
    """``Name <email> seconds +zone`` as ``git commit-tree`` writes the ``role`` (author,
    committer) now, from the environment and the config listing loopkit keeps; None where
    git's own rules would do more than take the values as they are (a date from the
    environment, a name git would trim or guess)."""
    date = os.environ.get(f"GIT_{role.upper()}_DATE")
    stamp = _date(date) if date is not None else _now(when)
    if stamp is None:
        return None
    name = os.environ.get(f"GIT_{role.upper()}_NAME")
    if name is None:
        name = git.config_value(root, f"{role}.name") or git.config_value(root, "user.name")
    email = os.environ.get(f"GIT_{role.upper()}_EMAIL")
    if email is None:
        email = git.config_value(root, f"{role}.email") or git.config_value(root, "user.email")
        email = email or os.environ.get("EMAIL")
    try:
        parts = [(name or "").encode("utf-8"), (email or "").encode("utf-8")]
    except UnicodeEncodeError:
        return None
    if not all(p and p[0] not in _CRUD and p[-1] not in _CRUD for p in parts):
        return None
    if any(c in p for p in parts for c in b"<>\n"):
        return None
    return b"%s <%s> %d %s" % (parts[0], parts[1], stamp[0], stamp[1].encode())


def _now(when: int) -> tuple[int, str]:
    offset = time.localtime(when).tm_gmtoff // 60
    return when, f"{'-' if offset < 0 else '+'}{abs(offset) // 60:02d}{abs(offset) % 60:02d}"


#: The dates ``_date`` reads as git does: git's own form (``@1700000000 +0200``), and ISO
#: 8601 to the second with its zone (``2026-01-01T00:00:00Z``, ``... 00:00:00 +01:00``).
_RAW_DATE = re.compile(r"@?(\d{9,}) ([+-]\d{4})")
_ISO_DATE = re.compile(r"(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d) ?(Z|[+-]\d\d:?\d\d)")


def _date(text: str) -> tuple[int, str] | None:
    """A date from the environment as git reads it (seconds, zone); None for any other
    form (git's reading of those is git's)."""
    raw = _RAW_DATE.fullmatch(text)
    if raw:
        return int(raw.group(1)), raw.group(2)
    iso = _ISO_DATE.fullmatch(text)
    if not iso:
        return None
    year, month, day, hour, minute, second = (int(iso.group(k)) for k in range(1, 7))
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour < 24 and minute < 60 and second < 60):
        return None
    zone = "+0000" if iso.group(7) == "Z" else iso.group(7).replace(":", "")
    minutes = int(zone[1:3]) * 60 + int(zone[3:5])
    # Days since 1970-01-01 of a proleptic Gregorian date (the civil-days formula).
    y = year - (month <= 2)
    era = y // 400
    of_era = y - era * 400
    of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    days = era * 146097 + of_era * 365 + of_era // 4 - of_era // 100 + of_year - 719468
    seconds = days * 86400 + hour * 3600 + minute * 60 + second
    return seconds - (minutes if zone[0] == "+" else -minutes) * 60, zone


def commit_object(root: Path, tree: str, parent: str, message: str) -> str | None:
    """The commit ``git commit-tree TREE -p PARENT -m MESSAGE`` makes, written by loopkit
    itself as a loose object (flushed to disk), byte for byte the object git writes; None
    -- ask git -- where git would do more than that: a store that is not the plain one, a
    tree that is not a loose tree object here, signing or another encoding configured, an
    identity from git's guesses."""
    dirs = find_dirs(root)
    if dirs is None or not git.plain_store(dirs) or not is_object_id(parent):
        return None
    if (loose_object(dirs.common, tree, 16) or (b"",))[0] != b"tree":
        return None
    if git.config_value(root, "commit.gpgsign") not in (None, "false"):
        return None
    try:
        text = message.encode("utf-8")
    except UnicodeEncodeError:
        return None
    made = _commit(root, dirs, tree, parent, text)
    return made[0] if made else None


def _commit(
    root: Path, dirs: GitDirs, tree: str, parent: str | None, message: bytes
) -> tuple[str, bytes] | None:
    """A commit of ``tree`` on ``parent`` (none: a root commit) saying ``message``, by git's
    identity now, written as a loose object and flushed: its id and the committer line
    (a reflog line names it). None where git would write it otherwise: an encoding
    configured (git names it in the commit), an identity from git's guesses."""
    if git.config_value(root, "i18n.commitencoding"):
        return None
    when = int(time.time())
    author, committer = _ident(root, "author", when), _ident(root, "committer", when)
    if author is None or committer is None:
        return None
    parents = b"" if parent is None else b"parent %s\n" % parent.encode()
    body = b"tree %s\n%sauthor %s\ncommitter %s\n\n%s" % (
        tree.encode(),
        parents,
        author,
        committer,
        message,
    )
    if not body.endswith(b"\n"):
        body += b"\n"
    return _write_loose(dirs, b"commit", body, durable=True), committer
