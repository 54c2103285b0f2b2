"""The tamper check: what in the git folders (and the user's own git files) steers git
and loopkit, as a state of content hashes taken before a worker runs and again after --
so lk-diff can tell what a worker changed there. ``loopkit.git`` makes such changes
harmless inside loopkit's own git calls; this says that they happened."""

from __future__ import annotations

import os
from pathlib import Path

from loopkit import git
from loopkit.digest import file_digest, sha256
from loopkit.discovery import packed_refs, ref_from_files

TYPE_CHECKING = False  # typing stays unloaded at run time (start-up is a feature)
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

#: ``control_state`` keys that say where the work tree's HEAD points.
HEAD_KEY = ".git/HEAD"
#: A control-state key whose value is loopkit's to change (lk-invoke drops the contract
#: cache after each worker run): lk-invoke watches it around the worker instead.
CACHE_PREFIX = ".git/loopkit/cache/"
#: Folders of a submodule's git folder that hold its history, not its controls.
_MODULE_DATA = frozenset({"objects", "refs", "logs", "lfs", "worktrees"})
_MODULE_DATA_FILES = frozenset({"index", "HEAD", "ORIG_HEAD", "FETCH_HEAD", "packed-refs"})


def control_state(
    root: str | os.PathLike[str], *, since: Mapping[str, str] | None = None
) -> dict[str, str]:
    """What in the git folders steers git and loopkit: path -> content hash, for each file
    a worker could change to move what judges it.

    - the config (``config``, ``config.worktree``), ``commondir``, and whether ``.git`` is
      a folder or points into a repository (which one);
    - ``hooks/*`` (git runs only exact hook names: ``*.sample`` files are left out), with
      the executable bit;
    - ``info/*`` (``exclude``, ``attributes``, ``sparse-checkout``, ``grafts``...);
    - ``modules/*`` (a submodule's config, hooks and info, not its history);
    - ``loopkit/cache/*`` (the checked-contract cache);
    - ``HEAD`` (its text: ``ref: refs/heads/main`` or a commit id), the branch it names
      (the commit id it points at, loose or packed), and ``refs/replace/*``.

    - the user's own git files outside the repository (``git.user_files``: the global and
      system config, the default attributes and ignore files), keyed ``~/.gitconfig``...,
      and the files a config names (``git.configured_files``: ``git config file: PATH``);

    Keys are ``.git/``-relative paths (a linked worktree's own files as if its git folder
    were ``.git``), and those of ``git.user_files``. Plain file reads, no git call (except for refs git keeps in a form
    other than loose files and ``packed-refs``). With ``since`` (an earlier state), the
    branch its HEAD named is read too, wherever HEAD points now.
    """
    dirs = git.git_dirs(root)
    state: dict[str, str] = {}
    dotgit = Path(root) / ".git"
    if dotgit.is_dir() and not dotgit.is_symlink():
        state[".git"] = "folder"
    else:
        # Which repository it points into; not which worktree (a retry may run in another).
        state[".git"] = f"linked worktree of {dirs.common}"
    files = [(dirs.common / "config", "config")]
    if dirs.own != dirs.common:
        files += [(dirs.own / "config.worktree", "config.worktree")]
        files += [(dirs.own / "commondir", "commondir")]
    else:
        files += [(dirs.common / "config.worktree", "config.worktree")]
    for path, key in files:
        value = file_digest(path)
        if value != "absent":
            state[f".git/{key}"] = value
    _walk(dirs.common / "hooks", ".git/hooks", state, skip=lambda name: name.endswith(".sample"))
    # info/refs is git's own listing for dumb transports, rewritten by a background
    # `git gc` (after any commit): it steers nothing, and must not look like a worker.
    _walk(dirs.common / "info", ".git/info", state, skip=_NOT_CONTROL.__contains__)
    if dirs.own != dirs.common:
        _walk(
            dirs.own / "info",
            f".git/worktrees/{dirs.own.name}/info",
            state,
            skip=_NOT_CONTROL.__contains__,
        )
    _walk(dirs.common / "modules", ".git/modules", state, prune=_MODULE_DATA, skip=_module_data)
    _walk(dirs.common / "loopkit" / "cache", CACHE_PREFIX.rstrip("/"), state)
    try:
        head = (dirs.own / "HEAD").read_text(encoding="utf-8", errors="surrogateescape").strip()
    except OSError:
        head = "absent"
    state[HEAD_KEY] = head
    for named in (head, (since or {}).get(HEAD_KEY, "")):
        if named.startswith("ref:"):
            ref = named[len("ref:") :].strip()
            state[f".git/{ref}"] = _ref_value(root, dirs.common, ref)
    for ref, value in _replace_refs(dirs.common).items():
        state[f".git/{ref}"] = value
    defaults = git.user_files()
    _digest_into(state, defaults)
    _digest_into(state, git.configured_files(root, dirs, defaults))
    return state


def _digest_into(state: dict[str, str], files: Sequence[tuple[str, str]]) -> None:
    for file, key in files:
        # What git reads: a dotfiles symlink's target's content, and where it points.
        value = file_digest(Path(os.path.realpath(file)))
        if value != "absent" and os.path.islink(file):
            value = f"{value} via a symlink to {os.readlink(file)}"
        if value != "absent":
            state[key] = value


#: Files in info/ git writes for itself (update-server-info): not control state.
_NOT_CONTROL = frozenset({"refs"})


def _module_data(name: str) -> bool:
    return name in _MODULE_DATA_FILES or name.endswith(".lock")


def _walk(
    top: Path,
    label: str,
    state: dict[str, str],
    *,
    prune: frozenset[str] = frozenset(),
    skip: Callable[[str], bool] | None = None,
) -> None:
    """Every file under ``top`` (symlinks not followed) into ``state`` as ``label/REL``."""
    for folder, subdirs, names in os.walk(top):
        subdirs[:] = sorted(d for d in subdirs if d not in prune)
        for name in sorted(names):
            if skip is not None and skip(name):
                continue
            path = Path(folder) / name
            rel = path.relative_to(top).as_posix()
            state[f"{label}/{rel}"] = file_digest(path)
        # A symlink to a folder is listed among subdirs but not walked: record it.
        for d in subdirs:
            path = Path(folder) / d
            if path.is_symlink():
                state[f"{label}/{path.relative_to(top).as_posix()}"] = file_digest(path)


def _ref_value(root: str | os.PathLike[str], common: Path, ref: str) -> str:
    """The id a branch points at (``discovery.ref_from_files``), else git's answer (another
    ref store); ``absent`` for a branch without commits."""
    found = ref_from_files(common, ref)
    if found is not None:
        return found
    done = git.git(["rev-parse", "-q", "--verify", "--end-of-options", ref], cwd=root, check=False)
    return done.stdout.decode().strip() or "absent"


def _replace_refs(common: Path) -> dict[str, str]:
    """``refs/replace/*``: each makes git show another object in place of one."""
    found = {k: v for k, v in packed_refs(common).items() if k.startswith("refs/replace/")}
    loose: dict[str, str] = {}
    _walk(common / "refs" / "replace", "refs/replace", loose)
    for name in loose:
        try:
            found[name] = (common / name).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            found[name] = "unreadable"
    return found


def control_digest(state: Mapping[str, str]) -> str:
    """One sha256 over a whole control state (its full hashes)."""
    h = sha256()
    for key in sorted(state):
        h.update(f"{key}\0{state[key]}\n".encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def short(value: str) -> str:
    """A control-state value as the attempt document records it: a file's sha256 cut to
    16 hex digits (the record's ``digest`` keeps the full strength), anything else as is."""
    if len(value) == 64 and all(c in "0123456789abcdef" for c in value):
        return value[:16]
    return value


def control_changes(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """The keys whose value differs between two control states (either may be shortened
    by ``short``), in order."""
    return [
        key
        for key in sorted(set(before) | set(after))
        if short(before.get(key, "absent")) != short(after.get(key, "absent"))
    ]
