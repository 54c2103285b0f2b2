"""Finding a repository's folders without starting git: the plain case of git's own
discovery (a ``.git`` folder or a linked worktree's ``.git`` file), and HEAD and refs read
from the files whose format git keeps stable. Every answer here is None where only git can
say (discovery variables, another ref store, an unusual set-up): then ``loopkit.git`` asks
git. Nothing here starts a process."""

from __future__ import annotations

import os
import zlib
from pathlib import Path

#: With any of these set, git's own discovery rules apply (so git is asked).
DISCOVERY_ENV = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_COMMON_DIR",
    "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM",
)


class GitDirs:
    """A work tree's git folders: its own (HEAD, the index; ``.git/worktrees/NAME`` for a
    linked worktree) and the shared one (config, hooks, info, refs, modules)."""

    __slots__ = ("common", "own")

    def __init__(self, own: Path, common: Path) -> None:
        self.own = own
        self.common = common


def _plain_start(path: str | os.PathLike[str]) -> str | None:
    """Where the walk up from ``path`` starts (its real path), or None when git's own
    rules decide: discovery variables set, or ``path`` inside a git folder -- unless
    ``path`` has a ``.git`` of its own (a worktree kept in a git folder): git looks for
    ``.git`` first at each level, so it stops there too."""
    if any(k in os.environ for k in DISCOVERY_ENV):
        return None
    try:
        here = os.path.realpath(path)
    except OSError:
        return None
    if ".git" in here.split(os.sep) and not os.path.lexists(os.path.join(here, ".git")):
        return None
    return here


def find_dirs(path: str | os.PathLike[str]) -> GitDirs | None:
    """The git folders of the work tree at ``path``, found without starting git: a ``.git``
    folder, or a ``.git`` file naming a linked worktree's folder. None when git's own
    discovery must decide (discovery variables set, ``path`` inside a git folder)."""
    here = _plain_start(path)
    if here is None:
        return None
    while True:
        dotgit = os.path.join(here, ".git")
        if os.path.isdir(dotgit):
            own = dotgit
            break
        if os.path.isfile(dotgit):
            try:
                with open(dotgit, encoding="utf-8") as f:
                    pointer = f.read().strip()
            except (OSError, UnicodeDecodeError):
                return None
            if not pointer.startswith("gitdir:"):
                return None
            own = os.path.join(here, pointer[len("gitdir:") :].strip())
            if not os.path.isdir(own):
                return None
            break
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent
    common = own
    try:
        with open(os.path.join(own, "commondir"), encoding="utf-8") as f:
            common = os.path.join(own, f.read().strip())
    except FileNotFoundError:
        pass
    except (OSError, UnicodeDecodeError):
        return None
    return GitDirs(own=Path(os.path.normpath(own)), common=Path(os.path.normpath(common)))


def dirs_of(git_dir: Path) -> GitDirs:
    """The git folders of a work tree whose own git folder is ``git_dir``."""
    try:
        common = git_dir / (git_dir / "commondir").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        common = git_dir
    return GitDirs(own=git_dir, common=Path(os.path.normpath(common)))


class Located:
    """Where a repository is, found with one ``git rev-parse``. (This module's records
    are plain classes, not dataclasses: ``lk workspace`` loads no ``dataclasses``.)"""

    __slots__ = ("base", "index", "root")

    def __init__(self, root: Path, index: Path, base: str | None) -> None:
        self.root = root
        self.index = index
        #: The commit (or tree) asked for, resolved to an id; None if unknown.
        self.base = base

    def __repr__(self) -> str:
        return f"Located(root={self.root!r}, index={self.index!r}, base={self.base!r})"


def discover(path: str | os.PathLike[str]) -> Located | None:
    """The plain case of git's repository discovery, without starting git (about 7 ms here).

    Only a ``.git`` folder of our own, with no worktree or bare setting in its config, is
    recognised; anything else (a ``.git`` file, discovery variables, another owner) returns
    None and git is asked.
    """
    here = _plain_start(path)
    if here is None:
        return None
    while True:
        dotgit = os.path.join(here, ".git")
        try:
            st = os.stat(dotgit)
        except OSError:
            st = None
        if st is not None:
            if not os.path.isdir(dotgit) or st.st_uid != os.geteuid():
                return None
            try:
                with open(os.path.join(dotgit, "config"), "rb") as f:
                    config = f.read(65536).lower()
            except OSError:
                return None
            if b"worktree" in config or b"bare = true" in config or b"bare=true" in config:
                return None
            if not os.path.isfile(os.path.join(dotgit, "HEAD")):
                return None
            chosen = os.environ.get("GIT_INDEX_FILE")
            index = Path(os.path.abspath(chosen)) if chosen else Path(dotgit, "index")
            return Located(root=Path(here), index=index, base=None)
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def head_from_files(root: str | os.PathLike[str]) -> tuple[str, str] | None:
    """The commit at HEAD ("" for an unborn branch) and its branch ("" when detached), read
    from git's files where their format is stable: the work tree's ``HEAD``, the branch's
    loose file, ``packed-refs``. None when only git can say (another ref store, a symbolic
    ref below HEAD, a HEAD not on a branch under ``refs/heads/``, discovery variables)."""
    dirs = find_dirs(root)
    if dirs is None or (dirs.common / "reftable").is_dir():
        return None
    try:
        text = (dirs.own / "HEAD").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if is_object_id(text):
        return text, ""
    ref = text.removeprefix("ref: ")
    if ref == text or not ref.startswith("refs/heads/"):
        return None
    value = ref_from_files(dirs.common, ref)
    if value is None:
        return None
    if value == "absent":
        return "", ref
    return (value, ref) if is_object_id(value) else None


def tree_from_files(common: Path, commit: str) -> str | None:
    """The tree of ``commit`` read from its loose object (the first bytes of it inflated),
    as git reads it; None when it is not a loose object here (packed, in an alternate, an
    object directory from the environment) or not a commit (a tag's id: git peels it)."""
    head = loose_object(common, commit, 32 + len(commit))
    if head is None or head[0] != b"commit" or not head[1].startswith(b"tree "):
        return None
    tree = head[1][5 : 5 + len(commit)].decode("ascii", "replace")
    return tree if is_object_id(tree) and len(tree) == len(commit) else None


def loose_object(common: Path, oid: str, size: int = -1) -> tuple[bytes, bytes] | None:
    """The type and content of the loose object ``oid`` (only the first ``size`` bytes
    inflated, header included, when given); None when it is not a loose object here
    (packed, in an alternate, an object directory from the environment)."""
    if not is_object_id(oid) or "GIT_OBJECT_DIRECTORY" in os.environ:
        return None
    try:
        with open(common / "objects" / oid[:2] / oid[2:], "rb") as f:
            if size < 0:
                data = zlib.decompress(f.read())
            else:
                data = zlib.decompressobj().decompress(f.read(4096 + size), size)
    except (OSError, zlib.error):
        return None
    header, _, body = data.partition(b"\0")
    kind, _, length = header.partition(b" ")
    if not length.isdigit() or (size < 0 and int(length) != len(body)):
        return None
    return kind, body


def ref_from_files(common: Path, ref: str) -> str | None:
    """The id a ref points at: its loose file, else its ``packed-refs`` line; ``absent``
    for one in neither; None when the store is not files (a reftable: only git can say)."""
    try:
        text = (common / ref).read_text(encoding="utf-8").strip()
        if text:
            return text
    except (OSError, UnicodeDecodeError):
        pass
    packed = packed_refs(common)
    if ref in packed:
        return packed[ref]
    return None if (common / "reftable").is_dir() else "absent"


def packed_refs(common: Path) -> dict[str, str]:
    try:
        raw = (common / "packed-refs").read_bytes()
    except OSError:
        return {}
    found: dict[str, str] = {}
    for line in raw.decode("utf-8", "surrogateescape").splitlines():
        if not line or line[0] in "#^":
            continue
        value, _, name = line.partition(" ")
        found[name] = value
    return found


def is_object_id(text: str) -> bool:
    """Whether ``text`` is a full object id (SHA-1 or SHA-256, lowercase hex)."""
    return len(text) in (40, 64) and not text.strip("0123456789abcdef")
