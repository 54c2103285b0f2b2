"""The clean room: a checkout of exactly the attempt's tree, where its checks run.

Verifying the working tree in place lets whatever the worker left beside its change vote:
an ignored ``conftest.py`` that turns failures into passes, a stale ``__pycache__`` that
hides broken source, a ``node_modules`` it patched. In a loop (an attempt document piped
in), lk-verify instead runs the checks in a persistent checkout kept outside the
repository, synced to the attempt's tree before each run:

1. the tree is hashed from the working tree (tracked and untracked files, not ignored
   ones: the same tree ``lk-diff`` saw and a recipe commits);
2. ``git clean -ffdx`` empties the clean room (a repository of its own that borrows the
   repository's objects, with a fresh config and no hooks) of everything its index does
   not hold -- ignored files, caches, nested repositories -- then ``git read-tree -u
   --reset TREE`` brings it to the tree (git rewrites only the files that differ, so the
   cost follows the size of the change, and removes those the tree does not hold). When
   the last checks left the room holding exactly the tree they ran on and its index as
   the sync wrote it (the *settled* mark, ``settle``), the sync reads only what differs
   between that tree and this one (``git read-tree -u -m``); the hash after the checks is
   what guarantees the verdict either way -- a file of the tree that is not as it should
   be when they end fails the verification. ``lk attempt`` begins the sync beside lk-diff
   (``EarlyRoom``): the room cleared while lk-diff walks the work tree, the tree read in
   the moment lk-diff has written it;
3. only the ignored paths the contract names (``verify.carry``: a virtualenv,
   ``node_modules``) are brought in, as symlinks to the working tree's; their content
   fingerprint is taken before the worker runs (lk-invoke) and compared here, so a worker
   that patched them fails verification.

The clean room lives outside the repository (``$LOOPKIT_CLEANROOM``, else the user cache
folder), so no tool that looks upwards for its configuration (pytest's rootdir and
conftest files, node's module resolution) can reach the working tree's files.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from loopkit import git
from loopkit.digest import sha256
from loopkit.files import atomic_write
from loopkit.places import ROOM_ENV as ROOM_ENV
from loopkit.places import home_of as home_of
from loopkit.places import rooms as rooms
from loopkit.places import source_of as source_of
from loopkit.values import Value


@contextlib.contextmanager
def occupied(root: Path) -> Iterator[None]:
    """Hold the clean room of ``root``'s repository for one verification (two loops in two
    worktrees of one repository take turns)."""
    lock = home_of(root).with_suffix(".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


#: In the clean room's git folder: the tree its files held when the last checks ended, and
#: the stamp of its index then -- the index the sync wrote, untouched (``settle``); on a
#: second line, that tree's ``.gitattributes`` entries, on a third its folders and on a
#: fourth their entries' counts (``git.tree_listing``): the next sync makes the next
#: tree's listing from them.
SETTLED = "loopkit-settled"

#: A settled tree and its listing (None: not known).
Held = tuple[str, git.TreeListing | None]


class Room(Value):
    """A clean room synced to ``tree`` (ready for the checks); ``stamp``: its index's, as
    the sync left it."""

    path: Path
    tree: str
    carried: tuple[str, ...]
    stamp: str

    _fields = ("path", "tree", "carried", "stamp")

    def __init__(self, path: Path, tree: str, carried: tuple[str, ...], stamp: str = "") -> None:
        self._set(path=path, tree=tree, carried=carried, stamp=stamp)


def _stamp(path: Path) -> str:
    """The room's index's stamp (``git.index_stamp``) as text; empty when there is none."""
    stamp = git.index_stamp(path / ".git" / "index")
    return ":".join(map(str, stamp)) if stamp else ""


def _held(path: Path) -> Held | None:
    """The tree the room is known to hold (its settled mark, when its index is still the
    one the mark names) and its attributes files, the mark taken away: a sync or a check
    that does not end leaves none behind, and the next sync checks every file."""
    mark = path / ".git" / SETTLED
    try:
        first, second, third, fourth = [*mark.read_text(encoding="utf-8").split("\n"), "", "", ""][
            :4
        ]
        mark.unlink()
    except (OSError, UnicodeDecodeError):
        return None
    tree, _, stamp = first.strip().partition(" ")
    if not (stamp and stamp == _stamp(path) and git.is_object_id(tree)):
        return None
    try:
        attributes = tuple((str(p), str(m), str(o)) for p, m, o in json.loads(second))
        folders = frozenset(str(f) for f in json.loads(third))
        counts = {str(f): int(n) for f, n in json.loads(fourth).items()}
    except (ValueError, TypeError, AttributeError):
        return tree, None  # not listed: the sync asks the index
    return tree, git.TreeListing(folders, attributes, counts)


def settle(room: Room, *, intact: bool) -> None:
    """After the checks: mark the room as holding ``room.tree`` when their hash found its
    files so (``intact``: none of the tree's changed or gone; new ones are removed by any
    sync) and its index is the one the sync wrote -- the next sync then reads only what
    differs (``prepare``)."""
    if intact and room.stamp and _stamp(room.path) == room.stamp:
        listing = git.tree_listing(room.path, room.tree)
        attributes, folders = json.dumps(listing.attributes), json.dumps(sorted(listing.folders))
        counts = json.dumps(listing.counts, sort_keys=True)
        mark = f"{room.tree} {room.stamp}\n{attributes}\n{folders}\n{counts}\n"
        atomic_write(room.path / ".git" / SETTLED, mark)


def prepare(
    root: Path,
    tree: str,
    *,
    head: str | None,
    carry: Sequence[str] = (),
) -> Room:
    """Bring the clean room of ``root`` to exactly ``tree`` (plus the carried paths)."""
    path, held = _cleared(root, head=head)
    return _synced(root, path, tree, held, carry)


def _cleared(root: Path, *, head: str | None) -> tuple[Path, Held | None]:
    """The clean room of ``root`` (made if need be), its HEAD at ``head``, nothing in it but
    its index's files; and the tree it is known to hold (its settled mark), if any. The
    half of a sync that needs no tree yet."""
    path = home_of(root)
    git.ensure_room(root, path, head=head)
    held = _held(path)
    git.clean_worktree(path)
    return path, held


def _synced(root: Path, path: Path, tree: str, held: Held | None, carry: Sequence[str]) -> Room:
    """The other half (``_cleared`` done): the room brought to ``tree``, the carried paths
    linked in."""
    was, listing = held or (None, None)
    git.sync_worktree(path, tree, held=was, cleaned=True, held_listing=listing)
    stamp = _stamp(path)
    return Room(path=path, tree=tree, carried=_link(root, path, carry), stamp=stamp)


def restore(room: Room, root: Path, *, changed: bool, reset: Sequence[str] = ()) -> None:
    """Bring the room back to the tree it was synced to, between two checks: everything
    a check left that the index does not hold removed (untracked and ignored files: a
    ``conftest.py``, a ``sitecustomize.py``, a ``.pth``, a ``__pycache__`` -- whatever the
    next check's runner would pick up), and, when the check changed a file of the tree
    (``changed``), every file checked against the index; then the carried links and the
    reset folders as the sync made them. One ``git clean`` when nothing of the tree moved."""
    if changed:
        git.sync_worktree(room.path, room.tree)
    else:
        git.clean_worktree(room.path)
    _link(root, room.path, room.carried)
    make_reset_dirs(room.path, reset)


def moved(room: Room, root: Path, tree: str, *, reset: Sequence[str] = ()) -> Room:
    """The room, its checks done and the files of its tree as the sync wrote them, brought
    to another ``tree``: what the checks left removed, only the files that differ written
    (``git read-tree -m``), the carried links and reset folders made again."""
    listed = git.tree_listing(room.path, room.tree)
    git.sync_worktree(room.path, tree, held=room.tree, held_listing=listed)
    _link(root, room.path, room.carried)
    make_reset_dirs(room.path, reset)
    return Room(path=room.path, tree=tree, carried=room.carried, stamp=_stamp(room.path))


def _link(root: Path, path: Path, carry: Sequence[str]) -> tuple[str, ...]:
    """The carried paths linked into the room at ``path`` (symlinks to the work tree's);
    those linked."""
    carried = []
    for rel in carry:
        name = rel.strip().strip("/")
        source = source_of(root, name)
        if not name or not (source.exists() or source.is_symlink()):
            continue
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink() or target.exists():
            continue  # a tracked path of that name: the tree wins
        os.symlink(source, target, target_is_directory=source.is_dir())
        carried.append(name)
    return tuple(carried)


@contextlib.contextmanager
def held(
    root: Path,
    tree: str,
    *,
    head: str | None,
    carry: Sequence[str] = (),
    early: EarlyRoom | None = None,
) -> Iterator[Room]:
    """The clean room of ``root`` synced to ``tree`` and held (``occupied``) while the
    caller runs its checks there: the one ``early`` synced, when it was for exactly these,
    else synced now."""
    room = early.take(root, tree, head, carry) if early is not None else None
    if early is not None and room is not None:
        try:
            yield room
        finally:
            early.release()
        return
    with occupied(root):
        yield prepare(root, tree, head=head, carry=carry)


class EarlyRoom:
    """A sync of the clean room begun before lk-verify asks for it: ``lk attempt`` starts it
    as lk-diff begins -- the room cleared (``_cleared``) while lk-diff walks the work tree
    -- and hands it the tree the moment lk-diff has written it (``sync``), so the room is
    ready when the checks are to run. It holds the clean room (``occupied``) from its start
    until lk-verify is done there (``held``), or it is dropped (``release``): lk-verify
    asked for another tree, head or carried paths, or never ran."""

    def __init__(self, root: Path, *, head: str | None, carry: Sequence[str]) -> None:
        from loopkit.background import Background

        self._for = (root, head, tuple(carry))
        self._hold: contextlib.AbstractContextManager[None] | None = None
        self._tree: str | None = None
        self._given = threading.Event()
        self._sync = Background(self._prepare, name="lk-early-room")

    def _prepare(self) -> Room | None:
        root, head, carry = self._for
        hold = occupied(root)
        hold.__enter__()
        self._hold = hold
        path, held = _cleared(root, head=head)
        self._given.wait()
        if self._tree is None:
            return None  # dropped before lk-diff wrote a tree
        return _synced(root, path, self._tree, held, carry)

    def sync(self, tree: str) -> None:
        """The tree to bring the room to (lk-diff's, once written)."""
        if not self._given.is_set():
            self._tree = tree
            self._given.set()

    def take(self, root: Path, tree: str, head: str | None, carry: Sequence[str]) -> Room | None:
        """The room, synced, when it is for exactly these (the hold passes to the caller,
        who ``release``s it); else None, and nothing held."""
        self._given.set()  # no tree handed over by now: none will be
        try:
            room: Room | None = self._sync.result()
        except Exception:
            room = None  # the caller's own sync says why
        if room is None or room.tree != tree or (root, head, tuple(carry)) != self._for:
            self.release()
            return None
        return room

    def release(self) -> None:
        """Wait for the sync (given no tree, it stops short) and let the clean room go."""
        self._given.set()
        self._sync.wait()
        hold, self._hold = self._hold, None
        if hold is not None:
            hold.__exit__(None, None, None)


# --------------------------------------------------------------------------- carried paths

#: Ignored folders a project's checks commonly need, carried without being named: what a
#: package manager installs into the repository. A virtualenv only when it is used.
DEPENDENCY_FOLDERS = {
    "node_modules": "npm/yarn/pnpm packages, resolved from the repository",
    "vendor": "vendored dependencies (composer, bundler, go mod vendor)",
    "bower_components": "bower packages",
}
VIRTUALENVS = (".venv", "venv")


class Carried(Value):
    """An ignored path of the work tree shown to the checks as it was before the worker
    ran, and why it is."""

    name: str
    why: str

    _fields = ("name", "why")

    def __init__(self, name: str, why: str) -> None:
        self._set(name=name, why=why)


def _uses_venv(
    root: Path, name: str, commands: Sequence[str], env: Mapping[str, str]
) -> str | None:
    folder = os.path.realpath(root / name)
    for value in (env.get("VIRTUAL_ENV", ""), *env.get("PATH", "").split(os.pathsep)):
        if value and (os.path.realpath(value) + os.sep).startswith(folder + os.sep):
            return f"the environment uses it ({'VIRTUAL_ENV' if value == env.get('VIRTUAL_ENV') else 'PATH'})"
    for command in commands:
        if f"{name}/" in command:
            return "a criterion runs from it"
    if (root / name / "pyvenv.cfg").is_file() and any(
        ("pytest" in c or "python" in c or "tox" in c) for c in commands
    ):
        return "a virtualenv beside Python checks"
    return None


def carried(
    root: Path, terms: Mapping[str, Any] | None, env: Mapping[str, str] | None = None
) -> list[Carried]:
    """The ignored paths the checks see from the work tree (read-only, as before the
    worker): the contract's ``verify.carry``, and the dependency folders found on disk
    (``DEPENDENCY_FOLDERS``; ``.venv``/``venv`` when a criterion or the environment uses
    it). Only paths that exist; a tracked path of the same name is the tree's (the room
    holds it and nothing is carried over it). ``env``: the checks' (by default the
    project's own, ``secrets.project_env``: its virtualenv is on their PATH)."""
    from loopkit.boundary.secrets import project_env

    env = project_env(os.environ, root) if env is None else env
    verify = (terms or {}).get("verify") or {}
    out: dict[str, str] = {}
    for rel in verify.get("carry") or []:
        name = str(rel).strip().strip("/")
        if name and (os.path.lexists(source_of(root, name))):
            out.setdefault(name, "verify.carry")
    for name, why in DEPENDENCY_FOLDERS.items():
        if os.path.isdir(source_of(root, name)):
            out.setdefault(name, why)
    criteria = (terms or {}).get("criteria") or []
    commands = [str(c.get("run", "")) for c in criteria if isinstance(c, Mapping)]
    for name in VIRTUALENVS:
        if os.path.isdir(root / name):
            why_venv = _uses_venv(root, name, commands, env)
            if why_venv:
                out.setdefault(name, f"virtualenv: {why_venv}")
    return [Carried(name, why) for name, why in out.items()]


#: Ignored names that are a tool's own cache or output, never what a check needs.
CACHES = frozenset(
    {
        "__pycache__",
        ".pytest_cache",
        ".mypy_cache",
        ".ruff_cache",
        ".hypothesis",
        ".coverage",
        ".tox",
        ".nox",
        ".DS_Store",
        ".idea",
        ".vscode",
        ".cache",
        "dist",
        "build",
        "target",
        ".eggs",
        "coverage",
        ".nyc_output",
        ".next",
        ".turbo",
    }
)


def not_shown(
    ignored: Sequence[str], carried: Sequence[str], reset: Sequence[str], state: str
) -> list[str]:
    """Of the work tree's ignored paths (``run.ignored_at_start``), those the checks did
    not see that a check may have needed: neither carried, nor a reset folder, nor
    loopkit's state folder, nor a tool's cache or build output."""
    skip = {n.strip("/") for n in (*carried, *reset, state)}
    out = []
    for raw in ignored:
        name = raw.rstrip("/")
        base = name.rsplit("/", 1)[-1]
        if not name or name in skip or any(name.startswith(s + "/") for s in skip):
            continue
        if base in CACHES or base.endswith((".pyc", ".egg-info", ".log")):
            continue
        out.append(raw)
    return out


def reset_dirs(root: Path, env: Mapping[str, str] | None = None) -> list[str]:
    """The reset paths (``RESET_PATHS``, a recipe's ``--reset-path``) that a reset leaves
    as empty directories: they exist in the clean room too, empty."""
    env = os.environ if env is None else env
    out = []
    for raw in (env.get("RESET_PATHS") or "").split():
        name = raw.strip().strip("/")
        if not name or name.startswith("..") or os.path.isabs(raw) or "/../" in f"/{name}/":
            continue
        if raw.endswith("/") or os.path.isdir(root / name):
            out.append(name)
    return out


def make_reset_dirs(room: Path, names: Sequence[str]) -> None:
    """Each reset directory in the room as a reset leaves it (a directory, empty), unless
    the tree holds something of that name."""
    for name in names:
        target = room / name
        if not os.path.lexists(target):
            target.mkdir(parents=True, exist_ok=True)


def fingerprint(root: Path, paths: Iterable[str]) -> dict[str, str]:
    """A fingerprint of each carried path's content: file names, sizes, modes, mtimes,
    change times and inodes, symlink targets. Cheap enough to take before every attempt,
    and any write shows: a file rewritten with the same size and its mtime set back still
    has a new change time, which no process without the right to set the clock can
    choose (and the sandbox drops every capability)."""
    out: dict[str, str] = {}
    for rel in paths:
        name = rel.strip().strip("/")
        if not name:
            continue
        out[name] = _walk_digest(root / name)
    return out


def _walk_digest(top: Path) -> str:
    h = sha256()
    try:
        st = os.lstat(top)
    except FileNotFoundError:
        return "absent"
    stack = [(top, st)]
    while stack:
        path, st = stack.pop()
        rel = os.path.relpath(path, top)
        h.update(
            f"{rel}\0{st.st_mode}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0{st.st_ino}\0".encode(
                "utf-8", "surrogateescape"
            )
        )
        if stat.S_ISLNK(st.st_mode):
            h.update(os.readlink(path).encode("utf-8", "surrogateescape"))
        elif stat.S_ISDIR(st.st_mode):
            try:
                entries = sorted(os.scandir(path), key=lambda e: e.name, reverse=True)
            except OSError:
                continue
            for e in entries:
                try:
                    stack.append((Path(e.path), e.stat(follow_symlinks=False)))
                except OSError:
                    continue
    return h.hexdigest()


def changed_carry(before: Mapping[str, str] | None, root: Path, paths: Sequence[str]) -> list[str]:
    """The carried paths whose fingerprint differs from the one taken before the worker."""
    if not before:
        return []
    now = fingerprint(root, paths)
    return [p for p, digest in now.items() if p in before and before[p] != digest]
