"""The one module that talks to git (through ``loopkit.proc``).

Plumbing commands only, never porcelain whose output may change with configuration.

Every call runs with the configuration a worker could have written made harmless (see
``neutral_settings``): no hook, no fsmonitor, no untracked cache, no replace objects, no
clean/smudge/process filter that the repository's own config defines, no external diff
or textconv. A worker with a shell can write ``.git/config``; nothing it writes there runs
inside loopkit's own git calls. ``loopkit.control`` is the other half: what lk-invoke
records of ``.git`` before the worker starts, so that lk-diff can tell what the worker
changed.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import posixpath
import re
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from loopkit.digest import file_digest
from loopkit.discovery import (
    DISCOVERY_ENV,
    GitDirs,
    discover,
    find_dirs,
    head_from_files,
)
from loopkit.discovery import Located as Located  # the answer of ``locate``
from loopkit.discovery import is_object_id as is_object_id  # one rule for an id
from loopkit.errors import EnvironmentProblem, LoopkitError
from loopkit.exitcodes import ExitCode

TYPE_CHECKING = False  # typing stays unloaded at run time (start-up is a feature)
if TYPE_CHECKING:
    from typing import TypeVar

    from loopkit import proc  # loaded by the first git call: finding a repository runs none

    _T = TypeVar("_T")

#: Keep git from reading a user's pager, editor or locale into our parsing, and from
#: reading objects through ``refs/replace/`` (a worker could otherwise make the base
#: commit lk-diff compares against show any tree it likes).
_ENV_FIXES = {
    "GIT_PAGER": "cat",
    "GIT_TERMINAL_PROMPT": "0",
    "LC_ALL": "C",
    "GIT_OPTIONAL_LOCKS": "0",
    "GIT_NO_REPLACE_OBJECTS": "1",
}

#: Settings every git call gets, whatever the repository's config says. They are passed
#: through ``GIT_CONFIG_COUNT`` (command-line scope: it wins over every config file, and
#: unlike ``-c`` it takes a key as written, even a filter named ``a=b``).
NEUTRAL_CONFIG: tuple[tuple[str, str], ...] = (
    # No hook runs: post-index-change (git add), reference-transaction (update-ref),
    # post-checkout (worktree add), pre-auto-gc... all of them worker-writable files.
    ("core.hooksPath", "/dev/null"),
    # No fsmonitor hook or daemon; the index's fsmonitor bits are not trusted either.
    ("core.fsmonitor", "false"),
    # A planted untracked cache in the index cannot hide untracked files from `add -A`.
    ("core.untrackedCache", "false"),
)

#: The keys of a filter driver that run commands (``required=false``: with its commands
#: emptied, a required driver would otherwise fail every call).
_FILTER_KEYS = (("clean", ""), ("smudge", ""), ("process", ""), ("required", "false"))

#: Config scopes whose filter drivers keep working: the user's global and system config
#: (git-lfs installs itself there) and ``command`` (loopkit's own caller). Every other
#: scope is neutralised: the repository's own config and whatever it includes (``git
#: config --show-scope`` reports an included key with the scope of the including file).
_TRUSTED_SCOPES = frozenset({"system", "global", "command"})

#: Subcommands that never read a working-tree file's content, so no filter can run in
#: them: no need to look for filter drivers first. (Not ``write-tree``: writing an index
#: re-reads racily clean files through their clean filter.)
_FILTER_FREE = frozenset(
    {
        "rev-parse",
        "config",
        "update-ref",
        "symbolic-ref",
        "diff-tree",
        "ls-tree",
        "for-each-ref",
        "show-ref",
        "commit-tree",
        "merge-base",
        "rev-list",
        "mktree",
    }
)

#: Subcommands that can show a diff: an external diff or a textconv command could run.
_DIFFING = frozenset({"diff", "diff-index", "diff-tree", "diff-files", "log", "show"})


class GitError(LoopkitError):
    """A git command failed where it should not have (a broken or unreadable repository):
    an environment error (4), never mistaken for a verdict or a bug."""

    code = ExitCode.ENVIRONMENT


def _env(
    extra: Mapping[str, str] | None = None, *, settings: Sequence[tuple[str, str]] = ()
) -> dict[str, str]:
    env = dict(os.environ)
    env.update(_ENV_FIXES)
    if extra:
        env.update(extra)
    # Appended after any the caller set: for a single-valued key the last one wins.
    try:
        n = max(int(env.get("GIT_CONFIG_COUNT") or 0), 0)
    except ValueError:
        n = 0
    for key, value in (*NEUTRAL_CONFIG, *settings):
        env[f"GIT_CONFIG_KEY_{n}"] = key
        env[f"GIT_CONFIG_VALUE_{n}"] = value
        n += 1
    env["GIT_CONFIG_COUNT"] = str(n)
    return env


def _subcommand(args: Sequence[str]) -> tuple[int, str]:
    """Where the subcommand is in ``args`` (after ``-c KEY=VALUE`` and other options)."""
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-c", "-C", "--config-env"):
            i += 2
        elif a.startswith("-"):
            i += 1
        else:
            return i, a
    return len(args), ""


def _may_filter(sub: str, args: Sequence[str]) -> bool:
    """Could ``git SUB ARGS`` run a filter driver (read or write a working-tree file)?"""
    if sub in _FILTER_FREE:
        return False
    if sub == "cat-file":
        return any(a in ("--filters", "--textconv") or a.startswith("--path") for a in args)
    if sub == "diff-index":
        return "--cached" not in args
    if sub == "hash-object":  # stdin alone, with no --path, is hashed as is (git's own rule)
        rest = args[_subcommand(args)[0] + 1 :]
        named = any(a.startswith("--path") or a == "--stdin-paths" for a in rest)
        return named or "--stdin" not in rest or not all(a.startswith("-") for a in rest)
    return True


def neutral_settings(cwd: str | os.PathLike[str]) -> list[tuple[str, str]]:
    """Config settings that switch off every filter driver the repository's own config
    defines (``.git/config``, ``config.worktree`` and the files they include).

    Looked up again for every call that may run a filter, never cached: between two of
    loopkit's git calls a check (code the worker wrote) may have added a driver. When
    neither config file so much as mentions ``filter`` or ``include``, no git call is
    needed to know there is none.
    """
    if not _may_define_filters(cwd):
        return []
    from loopkit import proc

    done = proc.capture(
        ["git", "config", "-z", "--show-scope", "--get-regexp", r"^filter\."],
        cwd=cwd,
        env=_env(),
    )
    names: list[str] = []
    fields = done.stdout.decode("utf-8", "surrogateescape").split("\0")
    for scope, entry in zip(fields[0::2], fields[1::2], strict=False):
        if scope in _TRUSTED_SCOPES:
            continue
        key = entry.split("\n", 1)[0]
        # filter.<name>.<key>: the name is everything between the first and last dot.
        first, last = key.find("."), key.rfind(".")
        if first < last:
            name = key[first + 1 : last]
            if name not in names:
                names.append(name)
    return [(f"filter.{name}.{k}", v) for name in names for k, v in _FILTER_KEYS]


def _may_define_filters(cwd: str | os.PathLike[str]) -> bool:
    """False only when the repository's config files surely define no filter driver (a
    section header naming one must contain ``filter``; an include, ``include``)."""
    dirs = find_dirs(cwd)
    if dirs is None:
        return True
    for path in (dirs.common / "config", dirs.own / "config.worktree"):
        try:
            with open(path, "rb") as f:
                text = f.read().lower()
        except FileNotFoundError:
            continue
        except OSError:
            return True
        if b"filter" in text or b"include" in text:
            return True
    return False


def git(
    args: Sequence[str],
    *,
    cwd: str | os.PathLike[str],
    env: Mapping[str, str] | None = None,
    input: bytes | None = None,
    check: bool = True,
) -> proc.Captured:
    at, sub = _subcommand(args)
    argv = list(args)
    if sub in _DIFFING:
        argv[at + 1 : at + 1] = ["--no-ext-diff", "--no-textconv"]
    settings = neutral_settings(cwd) if _may_filter(sub, args) else []
    from loopkit import proc

    full_env = _env(env, settings=settings)
    done = proc.capture(["git", *argv], cwd=cwd, env=full_env, input=input)
    if done.exit_code == 127 and not done.stdout:
        raise EnvironmentProblem("git is not installed (or not on PATH)")
    if done.exit_code != 0:
        lock = _lock_in_the_way(done.stderr, cwd)
        if lock is not None:
            # A lock git left when it was killed: gone once no process holds it, and the
            # call made again; one a live process holds is named with its remedy.
            if stale_lock_cleared(lock):
                done = proc.capture(["git", *argv], cwd=cwd, env=full_env, input=input)
            elif check:
                raise GitError(
                    f"git {sub} failed: {lock} exists and a git process still holds it; if "
                    f"none runs in this repository, remove it: rm -f '{lock}'"
                )
    if check and done.exit_code != 0:
        msg = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitError(f"git {sub} failed: {msg[-1] if msg else f'exit {done.exit_code}'}")
    return done


def _lock_in_the_way(stderr: bytes, cwd: str | os.PathLike[str]) -> Path | None:
    """The lock file named in git's "Unable to create '<path>.lock': File exists", if so."""
    text = stderr.decode("utf-8", "surrogateescape")
    if "File exists" not in text:
        return None
    start = text.find("Unable to create '")
    if start < 0:
        return None
    start += len("Unable to create '")
    end = text.find("'", start)
    if end < 0 or not text[start:end].endswith(".lock"):
        return None
    path = Path(text[start:end])
    return path if path.is_absolute() else Path(cwd) / path


#: How long a lock nobody holds open must have existed before it is taken for a dead
#: git's: git closes the file a moment before it renames it into place.
STALE_AFTER_S = 2.0


def stale_lock_cleared(lock: Path) -> bool:
    """Remove ``lock`` when its owner is gone -- no process holds it open (read through
    /proc) and it is older than a moment -- and say whether it is gone. Without /proc
    nothing is removed."""

    try:
        age = time.time() - lock.stat().st_mtime
    except FileNotFoundError:
        return True  # released meanwhile
    except OSError:
        return False
    if not os.path.isdir("/proc/self/fd"):
        return False
    if age < STALE_AFTER_S:
        time.sleep(STALE_AFTER_S - age)
        if not lock.exists():
            return True
    if _held_open(lock):
        return False
    try:
        lock.unlink()
    except FileNotFoundError:
        pass
    except OSError:
        return False
    return True


def _held_open(path: Path) -> bool:
    """Whether any process this one can see holds ``path`` open."""
    target = os.path.realpath(path)
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return True
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                    return True
            except OSError:
                continue
    return False


def out(args: Sequence[str], *, cwd: str | os.PathLike[str], **kw: object) -> str:
    return git(args, cwd=cwd, **kw).stdout.decode("utf-8", "surrogateescape").rstrip("\n")  # type: ignore[arg-type]


def toplevel(path: str | os.PathLike[str] = ".") -> Path:
    """The repository root containing ``path``; exit 4 when there is none."""
    done = git(["rev-parse", "--show-toplevel"], cwd=path, check=False)
    if done.exit_code != 0:
        raise EnvironmentProblem(f"{Path(path).resolve()}: not a git repository")
    return Path(done.stdout.decode("utf-8", "surrogateescape").strip())


def common_dir(root: str | os.PathLike[str]) -> Path:
    """The shared .git folder (the same for every worktree of a repository), found by
    reading the ``.git`` folder or file (``git_dirs``): git is asked only in unusual
    set-ups."""
    return git_dirs(root).common


def index_path(root: str | os.PathLike[str]) -> Path:
    """The index file git uses at ``root`` (honours ``GIT_INDEX_FILE``, worktrees)."""
    found = discover(root)
    if found is not None:  # a plain repository: no git call
        return found.index
    p = Path(out(["rev-parse", "--git-path", "index"], cwd=root))
    return p if p.is_absolute() else (Path(root) / p).resolve()


def locate(
    path: str | os.PathLike[str] = ".", *, base: str | None = None, unborn_ok: bool = True
) -> Located:
    """The repository root and index at ``path``, and ``base`` resolved (one git call; none
    for a plain repository and a commit git named in this process, ``known_commit``).

    Exit 4 when ``path`` is not in a git repository. A ``base`` that names nothing gives
    ``base=None``, except ``HEAD`` in a repository without commits, which resolves to the
    empty tree when ``unborn_ok``.
    """
    # With a base, the walk is worth it only when this process knows a commit already.
    found = discover(path) if base is None or _COMMITS else None
    if found is not None and base is None:
        return found
    if found is not None and base is not None:
        # A commit git named as one here already (the HEAD ``lk task begin`` read, in the
        # same process), HEAD's read from the ref files: no git call.
        head = head_from_files(found.root) if base == "HEAD" else None
        commit = head[0] if head else base
        if commit in _COMMITS.get(os.path.realpath(found.root), ()):
            return Located(root=found.root, index=found.index, base=commit)
    args = ["rev-parse", "--show-toplevel", "--git-path", "index"]
    if base is not None:
        args += ["--verify", "-q", "--end-of-options", f"{base}^{{commit}}"]
    done = git(args, cwd=path, check=False)
    lines = done.stdout.decode("utf-8", "surrogateescape").splitlines()
    if len(lines) < 2:
        raise EnvironmentProblem(f"{Path(path).resolve()}: not a git repository")
    root = Path(lines[0])
    index = Path(lines[1])
    if not index.is_absolute():
        index = (Path(path) / index).resolve()
    resolved = lines[2] if len(lines) > 2 and done.exit_code == 0 else None
    if resolved is not None:
        _known_commit(root, resolved)
    if base is not None and resolved is None:
        resolved = _tree_or_empty(root, base, unborn_ok=unborn_ok)
    return Located(root=root, index=index, base=resolved)


#: Commit ids git named as commits in this process, by repository root: an object's id
#: is its content, so such an id stays a commit (``resolve`` answers it without git). An
#: object removed since (a pruning ``gc``) fails the git call that reads it, as before.
_COMMITS: dict[str, set[str]] = {}


#: Each such commit's tree, where git named it too.
_TREES: dict[str, str] = {}


def _known_commit(root: str | os.PathLike[str], commit: str, tree: str = "") -> None:
    if is_object_id(commit):
        _COMMITS.setdefault(os.path.realpath(root), set()).add(commit)
        if is_object_id(tree):
            _TREES[commit] = tree


def known_commit(root: str | os.PathLike[str], commit: str, tree: str) -> None:
    """``commit`` is a commit whose tree is ``tree``, as git just answered (``rev-parse
    C^{commit} C^{tree}``): asked again in this process, ``locate`` and ``resolve`` answer
    without git."""
    _known_commit(root, commit, tree)


def resolve(root: Path, base: str, *, unborn_ok: bool = True) -> str | None:
    """``base`` as a commit id (or a tree id); None when it names nothing (see ``locate``).
    A commit's full id git already named as a commit here is answered without git."""
    if base in _COMMITS.get(os.path.realpath(root), ()):
        return base
    if base.endswith("^{tree}"):  # never a commit: one question, not two
        commit = base.removesuffix("^{tree}")
        if commit in _TREES and commit in _COMMITS.get(os.path.realpath(root), ()):
            return _TREES[commit]
        return _tree_or_empty(root, base, unborn_ok=unborn_ok)
    done = git(
        ["rev-parse", "--verify", "-q", "--end-of-options", f"{base}^{{commit}}"],
        cwd=root,
        check=False,
    )
    if done.exit_code == 0:
        commit = done.stdout.decode().strip()
        if commit == base:  # a full id that is a commit (a tag's peels to another id)
            _known_commit(root, commit)
        return commit
    return _tree_or_empty(root, base, unborn_ok=unborn_ok)


def _tree_or_empty(root: Path, base: str, *, unborn_ok: bool) -> str | None:
    tree = git(
        ["rev-parse", "--verify", "-q", "--end-of-options", f"{base}^{{tree}}"],
        cwd=root,
        check=False,
    )
    if tree.exit_code == 0:
        return tree.stdout.decode().strip()
    if base == "HEAD" and unborn_ok:
        return empty_tree(root)
    return None


def plain_root(path: str | os.PathLike[str] = ".") -> Path | None:
    """The root of the repository at ``path`` when it is found without starting git (a
    ``.git`` folder of our own), else None -- for commands that also work outside one."""
    found = discover(path)
    return found.root if found is not None else None


def new_blob_ids(records: bytes) -> list[str]:
    """The blob ids on the new side of ``git diff-index -z --raw [--numstat] [-M]``
    output (``records``): each raw record's new id, but a deleted path's or a submodule's
    commit. The raw records come first, each ``:meta`` and its path (two paths for a rename
    or a copy); the numstat lines after them never start with ``:``, and a path that does
    is never read as a record, as the fields are taken in their record's order."""
    fields = records.split(b"\0")
    ids = []
    at = 0
    while at < len(fields) - 1 and fields[at][:1] == b":":
        _, new_mode, _, new_id, status = fields[at][1:].split(b" ")[:5]
        if new_mode not in (b"000000", b"160000"):  # deleted, or a submodule's commit
            ids.append(new_id.decode("ascii"))
        at += 3 if status[:1] in (b"R", b"C") else 2
    return ids


def object_sizes(
    root: str | os.PathLike[str], ids: Sequence[str], *, env: Mapping[str, str] | None = None
) -> dict[str, int]:
    """The size in bytes of each object named, from git's object store (one ``cat-file``
    for all of them, nothing read into memory; none for those stored loose, whose size
    heads their file: the blobs a ``git add`` just wrote); ids git does not have are left
    out."""
    sizes = _loose_sizes(root, ids, env)
    ids = [i for i in ids if i not in sizes]
    if not ids:
        return sizes
    done = git(
        ["cat-file", "--batch-check=%(objectname) %(objectsize)"],
        cwd=root,
        env=env,
        input="".join(f"{i}\n" for i in ids).encode(),
    )
    for line in done.stdout.decode("ascii", "replace").splitlines():
        name, _, size = line.partition(" ")
        if size.isdigit():  # "<id> missing" has no size
            sizes[name] = int(size)
    return sizes


def _loose_sizes(
    root: str | os.PathLike[str], ids: Sequence[str], env: Mapping[str, str] | None
) -> dict[str, int]:
    """``object_sizes`` of the ids stored as loose objects in the plain store, read from
    each file's header (``<type> <size>\\0``, what ``cat-file --batch-check`` reads of
    it too); the others are left to git."""
    dirs = find_dirs(root)
    if dirs is None or not plain_store(dirs, env):
        return {}
    sizes: dict[str, int] = {}
    for oid in ids:
        if not is_object_id(oid):
            continue
        try:
            with open(dirs.common / "objects" / oid[:2] / oid[2:], "rb") as f:
                head = zlib.decompressobj().decompress(f.read(256), 64)
        except (OSError, zlib.error):
            continue
        kind, _, rest = head.partition(b" ")
        size, nul, _ = rest.partition(b"\0")
        if nul and kind in (b"blob", b"tree", b"commit", b"tag") and size.isdigit():
            sizes[oid] = int(size)
    return sizes


def plain_store(dirs: GitDirs, env: Mapping[str, str] | None = None) -> bool:
    """Is the object store the plain one: SHA-1, not shared, no object directory from the
    environment (``gitstore.write_blob``, ``object_sizes``)?"""
    if any(k in os.environ or k in (env or {}) for k in ("GIT_OBJECT_DIRECTORY", *DISCOVERY_ENV)):
        return False
    try:
        with open(dirs.common / "config", "rb") as f:
            text = f.read().lower()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return not any(word in text for word in _STORE_WORDS)


def git_dirs(root: str | os.PathLike[str]) -> GitDirs:
    """The git folders of the work tree at ``root`` (asks git only in unusual set-ups)."""
    found = find_dirs(root)
    if found is not None:
        return found
    lines = out(["rev-parse", "--absolute-git-dir", "--git-common-dir"], cwd=root).splitlines()
    common = Path(lines[1])
    return GitDirs(
        own=Path(lines[0]), common=common if common.is_absolute() else Path(root) / common
    )


#: Settings a git call that writes objects or refs gets when they must reach the disk.
FSYNC = ("-c", "core.fsync=loose-object,reference", "-c", "core.fsyncMethod=fsync")
#: Config words that change how an object is stored: then git writes it.
_STORE_WORDS = (b"objectformat", b"sharedrepository", b"include", b"compressionlevel")


#: ``_configured_and_includes``' last answer in this process: what it was read from (the
#: repository's and the user's config files, HEAD, git's environment), the answer, and
#: the digest of every other file it depends on (each file named and each include
#: target, present or not). lk-invoke asks before and after the worker, lk-diff again.
_configured_last: (
    tuple[tuple[object, ...], list[tuple[str, str]], dict[str, str], dict[str, str]] | None
) = None


def configured_files(
    root: str | os.PathLike[str],
    dirs: GitDirs | None = None,
    defaults: Sequence[tuple[str, str]] | None = None,
) -> list[tuple[str, str]]:
    """``_configured_and_includes``' files, without its git call when nothing it depends
    on changed since the last answer: the repository's config files, HEAD (for
    ``includeIf onbranch:``) and the user's files (``defaults``, ``user_files``) are
    digested, every file named in the answer too, and an include target that held no
    entry (empty, or absent) -- so a worker filling one is seen as when git is asked."""
    global _configured_last
    dirs = dirs or git_dirs(root)
    defaults = user_files() if defaults is None else defaults
    env = tuple(
        sorted(
            (k, v)
            for k, v in os.environ.items()
            if k.startswith("GIT_") or k in ("HOME", "XDG_CONFIG_HOME")
        )
    )
    # A ref's value steers no config (``includeIf onbranch:`` reads the branch's name, in
    # HEAD): a landing that moves the branch keeps the answer.
    read = [dirs.common / "config", dirs.common / "config.worktree", dirs.own / "HEAD"]
    read += [dirs.own / "config.worktree", dirs.own / "commondir"]
    read += [Path(f) for f, _ in defaults]
    steering = tuple(file_digest(os.path.realpath(f)) for f in read)
    key = (os.path.realpath(root), str(dirs.common), str(dirs.own), env, steering)
    last = _configured_last
    if last is not None and last[0] == key:
        if all(file_digest(os.path.realpath(f)) == d for f, d in last[2].items()):
            return last[1]
    found, includes, values = _configured_and_includes(root, dirs, defaults)
    depends = {f: file_digest(os.path.realpath(f)) for f in [*(f for f, _ in found), *includes]}
    _configured_last = (key, found, depends, values)
    return found


def config_value(root: str | os.PathLike[str], key: str) -> str | None:
    """What ``git config --get KEY`` answers (the last value set; "" for a key set without
    one), None when unset; ``key`` as git takes it (its section and name in any case). From
    the listing ``configured_files`` keeps: no git call while no file git reads config
    from has changed since the last answer in this process."""
    configured_files(root)
    last = _configured_last
    section, _, rest = key.partition(".")
    middle, _, name = rest.rpartition(".")  # a subsection keeps its case, as git's listing
    canonical = ".".join(p for p in (section.lower(), middle, name.lower()) if p)
    return last[3].get(canonical) if last is not None else None


def user_files() -> list[tuple[str, str]]:
    """The files outside the repository that git reads for it, as (path, control-state
    key): the global and system config, and the default attributes and ignore files
    (``core.attributesFile``, ``core.excludesFile``). A worker without the sandbox could
    set a filter, ``* -diff`` or an ignore rule there, for every repository at once."""
    env = os.environ
    home = os.path.expanduser("~")
    xdg = env.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    found = []
    if env.get("GIT_CONFIG_GLOBAL"):
        found.append((env["GIT_CONFIG_GLOBAL"], "global git config"))
    else:
        found += [(os.path.join(home, ".gitconfig"), "~/.gitconfig")]
        found += [(os.path.join(xdg, "git", "config"), "~/.config/git/config")]
    if not env.get("GIT_CONFIG_NOSYSTEM"):
        found.append((env.get("GIT_CONFIG_SYSTEM") or "/etc/gitconfig", "system git config"))
    found += [(os.path.join(xdg, "git", "attributes"), "~/.config/git/attributes")]
    found += [(os.path.join(xdg, "git", "ignore"), "~/.config/git/ignore")]
    return found


def _configured_and_includes(
    root: str | os.PathLike[str], dirs: GitDirs, defaults: Sequence[tuple[str, str]]
) -> tuple[list[tuple[str, str]], list[str], dict[str, str]]:
    """The files git reads for this repository because a config names them, as (path,
    control-state key ``git config file: PATH``): every config file an entry comes from
    (an ``include.path`` target, a global config elsewhere) and the ``core.attributesFile``
    and ``core.excludesFile`` set to a path of their own (``~/.gitignore_global``). The
    repository's own config files are ``.git/`` control state already, and ``defaults``
    (``user_files``) are watched by name. Beside them, every file an include names
    (``include.path``, ``includeIf.*.path``), whether git read an entry from it or not.
    One git call; beside them, each key's last value (``config_value``)."""
    done = git(["config", "--list", "--show-origin", "-z"], cwd=root, check=False)
    if done.exit_code != 0:
        return [], [], {}
    includes: list[str] = []
    values: dict[str, str] = {}
    fields = done.stdout.split(b"\0")
    own = {os.path.realpath(d) for d in (dirs.own, dirs.common)}
    found: dict[str, None] = {}
    for origin, entry in zip(fields[0::2], fields[1::2], strict=False):
        key, _, value = entry.partition(b"\n")
        values[key.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "surrogateescape")
        if not origin.startswith(b"file:"):
            continue  # the command line's own settings (loopkit's), a blob, stdin
        source = os.path.join(root, os.fsdecode(origin[len(b"file:") :]))
        if os.path.dirname(os.path.realpath(source)) not in own:
            found[os.path.normpath(source)] = None
        if key.lower() in (b"core.attributesfile", b"core.excludesfile") and value:
            named = os.path.expanduser(os.fsdecode(value))
            found[os.path.normpath(os.path.join(root, named))] = None
        lowered = key.lower()
        if (
            value
            and lowered.endswith(b".path")
            and lowered.startswith((b"include.", b"includeif."))
        ):
            # Relative to the file that names it (git's rule for an include).
            named = os.path.expanduser(os.fsdecode(value))
            includes.append(os.path.normpath(os.path.join(os.path.dirname(source), named)))
    by_name = {os.path.normpath(path) for path, _ in defaults}
    named_files = [(path, f"git config file: {path}") for path in found if path not in by_name]
    return named_files, includes, values


def empty_tree(root: str | os.PathLike[str]) -> str:
    """The id of the empty tree in this repository's hash (sha1 or sha256)."""
    return out(["hash-object", "-t", "tree", "--stdin"], cwd=root, input=b"")


#: Folder names left out of every tree hash, whatever info/exclude says (loopkit's state).
_NEVER_HASHED = (".loopkit",)


def info_excludes(index: Path, pattern: str) -> bool:
    """Whether ``info/exclude`` beside ``index`` has the line ``pattern`` (False if unreadable)."""
    try:
        lines = (index.parent / "info" / "exclude").read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return False
    return pattern in lines


def exclude(root: Path, pattern: str) -> None:
    """Add the line ``pattern`` to the repository's ``info/exclude`` (once)."""
    path = common_dir(root) / "info" / "exclude"
    try:
        current = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        current = ""
    if pattern in current.splitlines():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        if current and not current.endswith("\n"):
            f.write("\n")
        f.write(f"# loopkit state: never committed, never reset\n{pattern}\n")


def _maybe_hashed(root: Path, name: str) -> bool:
    """Could ``git add -A`` have put the folder ``name`` in the index? (False: surely not.)
    Whenever it is there: info/exclude leaving it out proves nothing, since a ``.gitignore``
    in the work tree (``!/.loopkit/``, the worker's to write) outranks it."""
    return os.path.lexists(root / name)


def _index_may_hold(index: str, names: Sequence[str]) -> bool:
    """Could the index file ``index`` hold an entry whose path contains one of ``names``?

    Answered from its bytes: a version 2 or 3 index stores every path whole, so a name
    found nowhere in the file is in no entry (False). Version 4 (paths stored as a
    difference from the one before), a split index (entries in another file: its ``link``
    extension) and an unreadable file answer True, as does any chance match: git is asked.
    """
    try:
        with open(index, "rb") as f:
            data = f.read()
    except OSError:
        return True
    if data[:4] != b"DIRC" or data[4:8] not in (b"\0\0\0\2", b"\0\0\0\3") or b"link" in data:
        return True
    return any(os.fsencode(name) in data for name in names)


#: The trees of the indexes this process kept (``TreeWatch.keep``), by their bytes' digest.
_INDEX_TREES: dict[bytes, str] = {}


def tree_of_index(data: bytes) -> str | None:
    """The tree of an index whose bytes are ``data``, when this process hashed a tree
    through an index of these very bytes and kept it: an ``earlier`` for ``index_tree``
    that needs no whole cache tree."""
    return _INDEX_TREES.get(hashlib.sha1(data).digest()) if _INDEX_TREES else None


def index_tree(
    index: str | os.PathLike[str], earlier: tuple[bytes, str | None] | None = None
) -> str | None:
    """The tree ``git write-tree`` would answer for the index file ``index``, without it.

    From the cache tree git keeps in the file (its ``TREE`` extension) when git left it
    whole -- write-tree itself answers from that record then; else, with ``earlier`` (the
    bytes of this index before git last wrote it, and the tree they held -- None: the one
    their own whole cache tree names), that tree when every entry's path, mode, object id
    and flags are still the same (only stat data moved: a racily clean file read again,
    say), as a tree is made of nothing else. None -- ask ``write-tree`` -- otherwise, or
    when the file is no version 2 or 3 index that parses to its last byte (version 4, a
    split index).
    """
    try:
        with open(index, "rb") as f:
            data = f.read()
    except OSError:
        return None
    found = _index_layout(data)
    if found is None:
        return None
    root, starts, width = found
    if root or earlier is None:
        return root or None
    then, tree = earlier
    # The same bytes everywhere but in the entries' stat data (the 40 bytes before each
    # id, less the mode): the same entries, so the same tree.
    if then[:12] != data[:12] or len(then) < starts[-1]:
        return None
    for k in range(len(starts) - 1):
        at, nxt = starts[k], starts[k + 1]
        if (
            then[at + 24 : at + 28] != data[at + 24 : at + 28]
            or then[at + 40 : nxt] != data[at + 40 : nxt]
        ):
            return None
    # Its entries laid out as these: its extensions start where these do.
    return tree or _cache_tree_root(then, starts[-1], width) or None


def _index_layout(data: bytes) -> tuple[str, list[int], int] | None:
    """A version 2 or 3 index's whole cache-tree root (``""`` if none), where its entries
    start (the last number: where they end) and its ids' width; None when ``data`` is no
    such index."""
    if data[:4] != b"DIRC" or data[4:8] not in (b"\0\0\0\2", b"\0\0\0\3"):
        return None
    for width in (20, 32):  # sha1, sha256: the one that parses up to the checksum
        starts = _entry_starts(data, width)
        root = _cache_tree_root(data, starts[-1], width) if starts else None
        if starts and root is not None:
            return root, starts, width
    return None


def _entry_starts(data: bytes, width: int) -> list[int] | None:
    end = len(data) - width
    pos = 12
    starts = []
    for _ in range(int.from_bytes(data[8:12], "big")):
        starts.append(pos)
        at = pos + 40 + width  # the flags: extended, stage, the path's length
        if at + 2 > end:
            return None
        flags = (data[at] << 8) | data[at + 1]
        name_at = at + 4 if flags & 0x4000 else at + 2
        length = flags & 0xFFF
        if length == 0xFFF:
            length = data.find(b"\0", name_at) - name_at
            if length < 0:
                return None
        pos += (name_at - pos + length + 8) & ~7
    starts.append(pos)
    return starts


def _cache_tree_root(data: bytes, pos: int, width: int) -> str | None:
    """The whole root of the cache tree among the extensions from ``pos`` (``""`` when
    none); None when they do not end at the checksum, or the index is split."""
    end = len(data) - width
    root = ""
    while pos + 8 <= end:
        kind, size = data[pos : pos + 4], int.from_bytes(data[pos + 4 : pos + 8], "big")
        body = data[pos + 8 : pos + 8 + size]
        pos += 8 + size
        if kind == b"link":
            return None  # a split index: its entries are elsewhere
        if kind == b"TREE" and body[:1] == b"\0":  # the root's entry: "\0<count> <subtrees>\n"
            line, _, rest = body[1:].partition(b"\n")
            if line.split(b" ")[0].isdigit() and len(rest) >= width:
                root = rest[:width].hex()
    return root if pos == end else None


def _copy_fd(src: int, dst: int, size: int) -> None:
    """Copy ``size`` bytes in the kernel where it can (one call, no GIL held meanwhile)."""
    done = 0
    sendfile = getattr(os, "sendfile", None)
    if sendfile is not None:
        try:
            while done < size:
                sent = sendfile(dst, src, done, size - done)
                if sent == 0:
                    break
                done += sent
        except OSError:
            pass  # not supported for these files: copy the rest by hand
    os.lseek(src, done, os.SEEK_SET)
    os.lseek(dst, done, os.SEEK_SET)
    while block := os.read(src, 1 << 20):
        view = memoryview(block)
        while view:
            view = view[os.write(dst, view) :]


#: A ``TreeWatch`` seed that is no index at all: every file is read and hashed, no stat
#: data trusted.
NO_INDEX = Path("/nonexistent/loopkit-no-index")


def _scratch_copy(real: Path, source: Path | None = None) -> str:
    """A private copy of the index ``source`` (default ``real``) beside ``real`` (an
    unused name if there is no such index yet).

    The copy keeps the index's own mtime, so entries that were "racily clean" stay so
    and git compares their content instead of trusting the stat data. (No shutil or
    tempfile: their imports cost more than this whole function.)
    """
    source = real if source is None else source
    # Beside the real index when git's folder is writable, else in the temporary folder.
    for where in (str(real.parent), os.environ.get("TMPDIR") or "/tmp"):
        for _ in range(50):
            tmp = os.path.join(where, f"loopkit-index-{os.getpid()}-{os.urandom(4).hex()}")
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                continue
            except OSError:
                break  # not writable here: try the next folder
            try:
                if source == NO_INDEX:
                    raise FileNotFoundError(source)
                src = os.open(source, os.O_RDONLY)
            except FileNotFoundError:
                os.close(fd)
                os.unlink(tmp)  # no index yet (fresh repository): git starts an empty one
                return tmp
            try:
                st = os.fstat(src)
                _copy_fd(src, fd, st.st_size)
            finally:
                os.close(src)
                os.close(fd)
            os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
            return tmp
    raise GitError(f"cannot create a scratch index beside {real}")


def copy_index(source: Path, dest: Path) -> None:
    """Copy the index ``source`` to ``dest`` (replaced in one step), keeping its mtime."""
    os.replace(_scratch_copy(dest, source), dest)


def index_stamp(path: str | os.PathLike[str]) -> tuple[int, int, int] | None:
    """An index file as a file -- inode, mtime, size -- that any write by git changes (git
    writes an index whole, under a new inode); None when there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def unmoved(root: str | os.PathLike[str], read: Callable[[], _T], *, wait: float = 10.0) -> _T:
    """``read()`` of the checkout at ``root`` (its files, its index) with no git process
    moving it meanwhile -- a lander's checkout of what it landed, a person's ``git
    checkout``. git writes a checkout's files under its index's lock and the index anew at
    the end, so a read that began and ended with no lock there and the same index saw one
    state; else it is read again. A lock a live git holds open is waited for while it
    holds it; one no process holds (a killed git left it) is waited out for ``wait``
    seconds, and then the read is taken as it comes, as it is outside a repository (and
    where /proc cannot say who holds a file). An index rewritten under every read for six
    times ``wait`` is taken as it comes too."""
    dirs = find_dirs(root)
    if dirs is None:
        return read()
    index = dirs.own / "index"
    lock = dirs.own / "index.lock"
    deadline = time.monotonic() + wait
    give_up, asked = deadline + 5 * wait, 0.0
    while True:
        now = time.monotonic()
        before = index_stamp(index)
        if not lock.exists():
            got = read()
            if now > give_up or (not lock.exists() and index_stamp(index) == before):
                return got
        elif now > deadline and now - asked >= 1.0:  # who holds it: asked once a second
            asked = now
            if not (os.path.isdir("/proc/self/fd") and _held_open(lock)):
                return read()  # a lock no git holds: nothing is moving the checkout
        time.sleep(0.02)


class TreeWatch:
    """Hashes of the working tree, taken again and again through one scratch index.

    The scratch index keeps git's stat cache warm between hashes, and when ``git add -A``
    leaves it unwritten the tree cannot have changed, so ``git write-tree`` is skipped.
    """

    def __init__(
        self,
        root: Path,
        *,
        index: Path | None = None,
        skip: Sequence[str] = (),
        seed: Path | None = None,
        held: str | None = None,
    ) -> None:
        """``seed``: the index whose stat data the scratch index starts from (default the
        real one; see ``loopkit.evidence.statcache`` for one the worker cannot have written);
        ``held``: the tree that index is known to hold (a first hash that finds nothing
        changed is then that tree, no ``git write-tree``)."""
        self.root = root
        #: Top-level names left out of every hash (a clean room's carried symlinks).
        self.skip = tuple(skip)
        if index is None:
            found = discover(root)
            index = found.index if found is not None else index_path(root)
        self.real = index
        self.path = _scratch_copy(self.real, seed)
        self.env = {"GIT_INDEX_FILE": self.path}
        self._last: str | None = held if seed is not None else None
        #: Nested repositories without a commit, found by the last refresh: git cannot
        #: record them (not even as a gitlink), so their files are in no tree hash.
        self.unborn: list[str] = []

    def _stamp(self) -> tuple[int, int, int] | None:
        return index_stamp(self.path)

    def refresh(self) -> bool:
        """Bring the scratch index up to the working tree; False when nothing changed."""
        before = self._stamp()
        quiet = ["-c", "advice.addEmbeddedRepo=false", "-c", "core.safecrlf=false"]
        add = [*quiet, "add", "-A", "--", "."]
        done = git(add, cwd=self.root, env=self.env, check=False)
        self.unborn = _unborn_repositories(done) if done.exit_code != 0 else []
        if self.unborn:
            # Everything else is hashed; lk-diff reports the nested repositories.
            left_out = [f":(top,exclude,literal){p}" for p in self.unborn]
            git([*add, *left_out], cwd=self.root, env=self.env)
        elif done.exit_code != 0:
            git(add, cwd=self.root, env=self.env)  # its error, as any other failing call
        # Dropped afterwards, not excluded by pathspec: `add` fails on an exclude pathspec
        # naming a folder info/exclude already ignores. Skipped (one git call saved) when
        # the folder is not there at all, or the index just written holds no such name.
        never = [f":(top){name}" for name in _NEVER_HASHED if _maybe_hashed(self.root, name)] + [
            f":(top,literal){name}" for name in self.skip if _maybe_hashed(self.root, name)
        ]
        if never and _index_may_hold(self.path, [*_NEVER_HASHED, *self.skip]):
            git(
                # -f: from the index alone, whatever the files hold now (loopkit may be
                # appending to one of its own there, say a stage's stderr).
                ["rm", "-r", "--cached", "-f", "-q", "--ignore-unmatch", "--", *never],
                cwd=self.root,
                env=self.env,
            )
        return before is None or self._stamp() != before

    def hash(self) -> str:
        """The tree id of the working tree as it stands now."""
        try:
            with open(self.path, "rb") as f:
                before = f.read()
        except OSError:
            before = b""
        if self.refresh() or self._last is None:
            # Told by the index itself when it can (``index_tree``): one process less.
            earlier = (before, self._last) if before else None
            self._last = index_tree(self.path, earlier) or out(
                ["write-tree"], cwd=self.root, env=self.env
            )
        return self._last

    def keep(self, dest: Path) -> None:
        """Leave a copy of the scratch index (its stat data as fresh as the last hash) at
        ``dest``; its tree is remembered by its bytes (``tree_of_index``)."""
        copy_index(Path(self.path), dest)
        if self._last is not None:
            with contextlib.suppress(OSError):
                _INDEX_TREES[hashlib.sha1(dest.read_bytes()).digest()] = self._last

    def close(self) -> None:
        for p in (self.path, self.path + ".lock"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(p)

    def __enter__(self) -> TreeWatch:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def new_repository(path: Path, *, name: str, email: str, message: str) -> None:
    """A repository at ``path`` whose first commit holds every file there (no hooks, no
    signing): the demo's and a rehearsal's starting point."""
    for args in (
        ["init", "-q"],
        ["config", "user.name", name],
        ["config", "user.email", email],
        ["config", "commit.gpgsign", "false"],
        ["config", "core.hooksPath", "/dev/null"],
        ["add", "-A"],
        ["commit", "-q", "-m", message],
    ):
        git(args, cwd=path)


def log_lines(root: Path) -> list[str]:
    """``git log --oneline``: one line per commit, newest first."""
    return out(["log", "--oneline"], cwd=root).splitlines()


def ref_component(name: str) -> str:
    """``name`` (a task id) made safe for one component of a ref and a folder name (``lk
    task``'s refs and run folders): other characters become ``-``, no leading ``.`` or
    ``-``, no ``..``, no ``.lock`` ending."""

    out = re.sub(r"[^A-Za-z0-9._-]", "-", name)
    out = re.sub(r"^[.-]*", "", out)
    out = re.sub(r"\.\.+", ".", out)
    out = re.sub(r"\.lock$", "-lock", out)
    return out or "task"


def refs_under(root: Path, prefix: str) -> list[tuple[str, str, str]]:
    """The refs under ``prefix`` (``refs/loopkit/<task>/``): (name, commit, subject),
    oldest commit first."""
    done = git(
        [
            "for-each-ref",
            "--sort=committerdate",
            "--format=%(refname)%00%(objectname)%00%(subject)",
            prefix,
        ],
        cwd=root,
        check=False,
    )
    out = []
    for line in done.stdout.decode("utf-8", "surrogateescape").splitlines():
        parts = line.split("\0")
        if len(parts) == 3:
            out.append((parts[0], parts[1], parts[2]))
    return out


def blob(root: Path, object_id: str) -> bytes:
    """The content of a blob (a file as git stored it)."""
    return git(["cat-file", "blob", object_id], cwd=root).stdout


def blobs(root: Path, object_ids: Sequence[str]) -> list[bytes]:
    """The contents of blobs, in the order asked: one ``git cat-file --batch`` for all (none
    when there is none to read)."""
    if not object_ids:
        return []
    batch = "".join(f"{oid}\n" for oid in object_ids).encode()
    data = git(["cat-file", "--batch"], cwd=root, input=batch).stdout
    found, at = [], 0
    for oid in object_ids:
        header_end = data.index(b"\n", at)
        parts = data[at:header_end].split()
        if len(parts) != 3 or parts[1] != b"blob":
            raise GitError(f"git cat-file: {oid} is no blob ({data[at:header_end]!r})")
        size = int(parts[2])
        found.append(data[header_end + 1 : header_end + 1 + size])
        at = header_end + 1 + size + 1
    return found


def lines_in_tree(root: Path, tree: str, lines: Sequence[str]) -> dict[str, int]:
    """How many times each of ``lines`` is, whole, a line of a text file of ``tree``
    (those found at all)."""
    wanted = {line for line in lines if line.strip()}
    if not wanted:
        return {}
    args = ["grep", "-F", "-h", "-I", "--no-color"]
    for line in sorted(wanted):
        args += ["-e", line]
    done = git([*args, tree, "--"], cwd=root, check=False)
    counts: dict[str, int] = {}
    for found in done.stdout.decode("utf-8", "surrogateescape").splitlines():
        found = found.rstrip("\r")
        if found in wanted:
            counts[found] = counts.get(found, 0) + 1
    return counts


def _unborn_repositories(done: proc.Captured) -> list[str]:
    """The nested repositories without a commit that made ``git add`` fail (empty when
    anything else went wrong too)."""

    found: list[str] = []
    for line in done.stderr.decode("utf-8", "surrogateescape").splitlines():
        m = re.fullmatch(r"error: '(.+)/' does not have a commit checked out", line)
        if m:
            found.append(m.group(1))
        elif line not in ("fatal: adding files failed",) and not line.startswith("hint:"):
            return []
    return sorted(found)


def changed_paths(root: Path, old: str, new: str) -> list[tuple[str, str]]:
    """The paths that differ between two trees, each with its status letter (A, M, D, T);
    empty when git cannot tell (an unknown tree). For showing: a name that is not UTF-8
    comes with ``\\xNN`` escapes (``text.shown``)."""
    done = git(
        ["diff-tree", "-r", "-z", "--name-status", "--no-renames", old, new],
        cwd=root,
        check=False,
    )
    if done.exit_code != 0:
        return []
    from loopkit.text import shown

    fields = done.stdout.decode("utf-8", "surrogateescape").split("\0")
    return [
        (shown(fields[i + 1]), fields[i][:1]) for i in range(0, len(fields) - 1, 2) if fields[i]
    ]


class Entry:
    """A path as a tree holds it: its name (bytes, as git stores it), mode and object id;
    mode ``000000`` for a path the tree does not hold."""

    __slots__ = ("mode", "oid", "path")

    def __init__(self, path: bytes, mode: str, oid: str) -> None:
        self.path, self.mode, self.oid = path, mode, oid


#: The mode ``tree_edited`` reads as "no such path".
ABSENT = "000000"


def tree_diff(root: Path, old: str, new: str) -> list[tuple[str, Entry, Entry]]:
    """Each path that differs between two trees: its status letter (A, M, D, T), and the
    path as ``old`` and as ``new`` hold it (``ABSENT`` where one does not). One
    ``diff-tree`` a process for each pair, none for the pair lk-diff's records answered
    (``worktree_changes``): the clean room's sync and the base's tests ask for the same
    pair, from two threads."""
    with _CHANGES_LOCK:
        once = _CHANGES.setdefault((old, new), _Once())
    with once.lock:
        if once.value is None:
            once.value = _tree_diff(root, old, new)
        return once.value


_GITLINK = "160000"


class _Once:
    """One answer, computed by the first thread that asks; the others wait for it."""

    __slots__ = ("lock", "value")

    def __init__(self, value: list[tuple[str, Entry, Entry]] | None = None) -> None:
        self.lock = threading.Lock()
        self.value = value


#: Pairs of trees already compared in this process, by their ids (a tree's content never
#: changes).
_CHANGES: dict[tuple[str, str], _Once] = {}
_CHANGES_LOCK = threading.Lock()


def _tree_diff(root: Path, old: str, new: str) -> list[tuple[str, Entry, Entry]]:
    done = git(
        ["diff-tree", "-r", "-z", "--raw", "--no-renames", "--no-abbrev", old, new],
        cwd=root,
        env={"GIT_INDEX_FILE": str(NO_INDEX)},  # two trees: the worker's index is not asked
    )
    fields = done.stdout.split(b"\0")
    out = []
    for i in range(0, len(fields) - 1, 2):
        meta = fields[i].decode("ascii")
        if not meta.startswith(":"):
            continue
        old_mode, new_mode, old_oid, new_oid, status = meta[1:].split()
        path = fields[i + 1]
        out.append((status[:1], Entry(path, old_mode, old_oid), Entry(path, new_mode, new_oid)))
    return out


def _read_diff(records: bytes) -> list[tuple[str, Entry, Entry]] | None:
    """``tree_diff``'s answer read from lk-diff's ``diff-index -M --raw`` records of an
    index against a commit: a rename is the path gone and the path made, as
    ``--no-renames`` says it. None for a copy (``-C``: not asked, not read)."""
    fields = records.split(b"\0")
    out: list[tuple[str, Entry, Entry]] = []
    i = 0
    while i < len(fields) - 1 and fields[i].startswith(b":"):
        old_mode, new_mode, old_oid, new_oid, status = fields[i][1:].decode("ascii").split()
        if status[:1] == "C":
            return None
        if status[:1] == "R":
            gone, made = fields[i + 1], fields[i + 2]
            zero = "0" * len(old_oid)
            out.append(("D", Entry(gone, old_mode, old_oid), Entry(gone, ABSENT, zero)))
            out.append(("A", Entry(made, ABSENT, zero), Entry(made, new_mode, new_oid)))
            i += 3
            continue
        path = fields[i + 1]
        out.append((status[:1], Entry(path, old_mode, old_oid), Entry(path, new_mode, new_oid)))
        i += 2
    out.sort(key=lambda c: c[1].path)
    return out


class _Told:
    """The pair (a commit's tree, the tree lk-diff's index holds) answered from lk-diff's
    records (``worktree_changes``): the tree is written beside ``diff-index`` and the
    clean room's sync may ask the moment it is, so whoever asks first waits for the
    records -- or asks git, if they never come."""

    def __init__(self, base_tree: str | None) -> None:
        self.base_tree = base_tree
        self._guard = threading.Lock()
        self._records: bytes | None = None
        self._waiting: _Once | None = None
        self._given = False

    def tree(self, new: str) -> None:
        """The tree is written (before anyone asks about the pair)."""
        if self.base_tree is None:
            return
        with self._guard:
            if self._given:  # the records came first (or never will)
                if self._records is not None:
                    value = _read_diff(self._records)
                    with _CHANGES_LOCK:
                        _CHANGES.setdefault((self.base_tree, new), _Once(value))
                return
            once = _Once()
            once.lock.acquire()
            with _CHANGES_LOCK:
                if _CHANGES.setdefault((self.base_tree, new), once) is not once:
                    once.lock.release()
                    return
            self._waiting = once

    def records(self, records: bytes | None) -> None:
        """The records (None: none came); a pair waiting for them is answered."""
        with self._guard:
            if self._given:
                return
            self._records, self._given = records, True
            waiting, self._waiting = self._waiting, None
        if waiting is not None:
            waiting.value = _read_diff(records) if records is not None else None
            waiting.lock.release()


def tree_edited(root: Path, tree: str, entries: Sequence[Entry]) -> str:
    """``tree`` with each of ``entries`` set as it says (``ABSENT``: removed): a scratch
    index, three git calls, no file written but the new tree objects."""
    import tempfile

    if not entries:
        return tree
    with tempfile.TemporaryDirectory(prefix="lk-tree-") as scratch:
        env = {"GIT_INDEX_FILE": os.path.join(scratch, "index")}
        git(["read-tree", tree], cwd=root, env=env)
        lines = b"".join(
            (b"0 " + b"0" * len(e.oid) if e.mode == ABSENT else f"{e.mode} {e.oid}".encode())
            + b"\t"
            + e.path
            + b"\0"
            for e in entries
        )
        git(["update-index", "-z", "--index-info"], cwd=root, env=env, input=lines)
        return out(["write-tree"], cwd=root, env=env)


class TreeListing:
    """What one listing of a tree says: every folder a checkout of it has (its trees and
    gitlinks, repository-relative, "" for the top), each ``.gitattributes`` entry (path,
    mode, id), sorted, and how many entries each of its trees holds directly (``counts``:
    a folder is gone with its last entry)."""

    __slots__ = ("attributes", "counts", "folders")

    def __init__(
        self,
        folders: frozenset[str],
        attributes: tuple[tuple[str, str, str], ...],
        counts: Mapping[str, int],
    ) -> None:
        self.folders = folders
        self.attributes = attributes
        self.counts = counts


#: Listings already read, by repository and tree id (a tree's content never changes).
_LISTINGS: dict[tuple[str, str], TreeListing] = {}


def tree_listing(root: Path, tree: str) -> TreeListing:
    """``tree``'s listing (``ls-tree -r -t``): one git call a process for each tree."""
    key = (os.path.realpath(root), tree)
    found = _LISTINGS.get(key)
    if found is not None:
        return found
    done = git(["ls-tree", "-r", "-t", "-z", tree], cwd=root)  # "<mode> <type> <id>\t<path>"
    folders = {""}
    attributes = []
    counts: dict[str, int] = {}
    for entry in done.stdout.split(b"\0"):
        meta, _, path = entry.partition(b"\t")
        if not meta:
            continue
        name = os.fsdecode(path)
        parent = posixpath.dirname(name)
        counts[parent] = counts.get(parent, 0) + 1
        if meta[:7] in (b"040000 ", b"160000 "):
            folders.add(name)
        elif posixpath.basename(path) == b".gitattributes":
            mode, _, oid = meta.decode("ascii").split(" ")
            attributes.append((name, mode, oid))
    found = TreeListing(frozenset(folders), tuple(sorted(attributes)), counts)
    _LISTINGS[key] = found
    return found


def listing_after(root: Path, held: str, listing: TreeListing, tree: str) -> TreeListing:
    """``tree``'s listing from ``held``'s (``listing``, which the caller vouches for) and
    what differs between the two trees (``tree_diff``, which the base's tests read too and
    lk-diff's own records answer in the same process) -- no listing of the whole tree. The
    same answer as ``tree_listing``'s, kept as its."""
    key = (os.path.realpath(root), tree)
    found = _LISTINGS.get(key)
    if found is not None:
        return found
    folders = set(listing.folders)
    counts = dict(listing.counts)
    attributes = {p: (m, o) for p, m, o in listing.attributes}

    def entry_gone(name: str) -> None:
        parent = posixpath.dirname(name)
        counts[parent] -= 1
        if not counts[parent] and parent:  # its last entry: the folder goes too
            del counts[parent]
            folders.discard(parent)
            entry_gone(parent)

    def entry_made(name: str) -> None:
        parent = posixpath.dirname(name)
        if parent and not counts.get(parent):
            entry_made(parent)
            folders.add(parent)
        counts[parent] = counts.get(parent, 0) + 1

    changes = [(os.fsdecode(now.path), was, now) for _, was, now in tree_diff(root, held, tree)]
    for name, _, now in changes:  # what goes first: a file where a folder was, and back
        if now.mode == ABSENT:
            entry_gone(name)
    for name, was, now in changes:
        if was.mode == ABSENT:
            entry_made(name)
        if now.mode == _GITLINK:
            folders.add(name)
        elif was.mode == _GITLINK:
            folders.discard(name)
        if posixpath.basename(now.path) == b".gitattributes":
            if now.mode in (ABSENT, _GITLINK):
                attributes.pop(name, None)
            else:
                attributes[name] = (now.mode, now.oid)
    found = _LISTINGS[key] = TreeListing(
        frozenset(folders),
        tuple(sorted((p, m, o) for p, (m, o) in attributes.items())),
        counts,
    )
    return found


def no_attributes(root: Path, tree: str) -> bool:
    """True only when no attribute can apply to a checkout of ``tree`` here: a listing of
    it read in this process holds no ``.gitattributes``, and no other file git reads
    attributes from has any (``info/attributes``, ``core.attributesFile``, the default
    and the system one: each absent or empty), nor does a setting read them from a tree
    (``GIT_ATTR_SOURCE``, ``attr.tree``). False whenever that is not known."""
    listed = next((v for (_, t), v in _LISTINGS.items() if t == tree), None)
    dirs = find_dirs(root)
    if listed is None or listed.attributes or dirs is None or "GIT_ATTR_SOURCE" in os.environ:
        return False
    if config_value(root, "attr.tree") is not None:
        return False
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    files = [str(dirs.common / "info" / "attributes"), os.path.join(xdg, "git", "attributes")]
    if not os.environ.get("GIT_ATTR_NOSYSTEM"):
        files.append("/etc/gitattributes")
    named = config_value(root, "core.attributesFile")
    if named:
        files.append(os.path.join(root, os.path.expanduser(named)))
    for name in files:
        try:
            if os.path.getsize(name):
                return False
        except FileNotFoundError:
            continue
        except OSError:
            return False
    return True


def tree_folders(root: Path, tree: str) -> set[str]:
    """Every folder a checkout of ``tree`` has: its trees and its gitlinks (a submodule's
    folder), repository-relative as the file system names them, and "" for the top."""
    return set(tree_listing(root, tree).folders)


def _write_tree_files(root: Path, tree: str, name: str, into: str) -> None:
    """Write every file called ``name`` (``.gitignore``, ``.gitattributes``) of ``tree``
    into the folder ``into``, at its path: two git calls, none when there is none. Blobs
    are asked for by id, so no path is ever written into git's input."""
    listed = git(["ls-tree", "-r", "-z", tree], cwd=root).stdout.split(b"\0")
    wanted: list[tuple[str, str]] = []
    for entry in listed:
        meta, _, found = entry.partition(b"\t")
        parts = meta.split()
        if len(parts) != 3 or parts[1] != b"blob" or posixpath.basename(found) != name.encode():
            continue
        if any(c in (b"", b".", b"..") for c in found.split(b"/")):
            continue  # no tree git wrote holds one; never a path out of ``into``
        wanted.append((parts[2].decode(), os.fsdecode(found)))
    if not wanted:
        return
    for (_, rel), body in zip(wanted, blobs(root, [oid for oid, _ in wanted]), strict=True):
        target = os.path.join(into, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as f:
            f.write(body)


@contextlib.contextmanager
def _by_tree_rules(root: Path, tree: str, name: str) -> Iterator[tuple[str, list[str]]]:
    """git's arguments for a run that reads ``name`` files (attributes or ignore rules)
    as ``tree`` has them, not as the work tree does: an empty folder holding only
    ``tree``'s files of that name is the work tree, the index does not exist, and
    ``attr.tree`` (git 2.42 and later) names ``tree`` too. The repository's ``info/`` files
    and the user's own are read as always: both are git control state."""
    import tempfile

    dirs = git_dirs(root)
    with tempfile.TemporaryDirectory(prefix="loopkit-rules-") as work:
        _write_tree_files(root, tree, name, work)
        yield work, [f"--git-dir={dirs.own}", f"--work-tree={work}", "-c", f"attr.tree={tree}"]


def line_counts_by_tree_attributes(
    root: Path, old: str, new: str
) -> dict[str, tuple[int, int] | None]:
    """Lines added and deleted per path between two trees, as git counts them with the
    ``.gitattributes`` files of ``old`` in force -- not the work tree's, which the worker
    may have rewritten (None: binary by those attributes or by content). Renames are found
    as in lk-diff's own numstat (``-M``), so paths match. A failing git call is an error:
    lines the worker hid are never taken as none."""
    with _by_tree_rules(root, old, ".gitattributes") as (work, options):
        done = git(
            [*options, "diff-tree", "-r", "-z", "--numstat", "-M", old, new],
            cwd=work,
            env={"GIT_INDEX_FILE": os.path.join(work, "index")},
        )
    counts: dict[str, tuple[int, int] | None] = {}
    fields = done.stdout.split(b"\0")
    i = 0
    while i < len(fields):
        if not fields[i]:
            i += 1
            continue
        added, deleted, rest = fields[i].split(b"\t", 2)
        if rest == b"":  # a rename: old and new path in the next two fields
            path, i = fields[i + 2], i + 3
        else:
            path, i = rest, i + 1
        counts[path.decode("utf-8", "surrogateescape")] = (
            None if added == b"-" or deleted == b"-" else (int(added), int(deleted))
        )
    return counts


def ignored_by_tree(root: Path, tree: str, paths: Sequence[str]) -> list[str]:
    """Which of ``paths`` the ignore rules of ``tree`` ignore: its ``.gitignore`` files,
    the repository's ``info/exclude`` and the user's ``core.excludesFile`` -- not the work
    tree's own ``.gitignore`` files, which the worker may have rewritten. The paths need
    not exist; each is given as ``./path``, so none is read as pathspec magic."""
    if not paths:
        return []
    with _by_tree_rules(root, tree, ".gitignore") as (work, options):
        return _check_ignore(work, paths, options=options, flags=("--no-index",))


def listed_files(root: Path) -> list[str]:
    """The work tree's files git sees: tracked, and untracked ones it does not ignore."""
    done = git(["ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root)
    return sorted({os.fsdecode(p) for p in done.stdout.split(b"\0") if p})


def ignored(root: Path, paths: Sequence[str]) -> list[str]:
    """Which of ``paths`` the ignore rules in force at ``root`` ignore (a folder as
    ``name/``); the paths need not exist."""
    if not paths:
        return []
    return _check_ignore(root, paths)


def _check_ignore(
    cwd: str | os.PathLike[str],
    paths: Sequence[str],
    *,
    options: Sequence[str] = (),
    flags: Sequence[str] = (),
) -> list[str]:
    """Which of ``paths`` the ignore rules in force at ``cwd`` ignore (one ``git
    check-ignore``). Each is given as ``./path``, so none is read as pathspec magic."""
    done = git(
        [*options, "check-ignore", *flags, "-z", "--stdin"],
        cwd=cwd,
        input=b"".join(b"./" + os.fsencode(p) + b"\0" for p in paths),
        check=False,
    )
    if done.exit_code not in (0, 1):  # 1: none of them is ignored
        raise GitError("git check-ignore failed: " + done.stderr.decode("utf-8", "replace").strip())
    return [os.fsdecode(p).removeprefix("./") for p in done.stdout.split(b"\0") if p]


def ignored_now(root: Path, *, leave_out: Sequence[str] = ()) -> list[str]:
    """What git ignores in the working tree as it stands: ignored files by path, and folders
    (``dir/``) that an ignore rule ignores as a whole -- not one listed only because each
    file now in it is ignored (a ``*.pyc`` folder), where a new file would not be. Ignored
    folders are not walked. ``leave_out``: entries not wanted (loopkit's state folder).
    Two git calls, the second only when a folder is listed."""
    done = git(
        ["ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory"],
        cwd=root,
    )
    found = [p for p in map(os.fsdecode, done.stdout.split(b"\0")) if p and p not in leave_out]
    folders = [p for p in found if p.endswith("/")]
    if not folders:
        return found
    whole = set(_check_ignore(root, folders))
    return [p for p in found if not p.endswith("/") or p in whole]


def ensure_room(root: Path, path: Path, *, head: str | None) -> None:
    """A repository of its own at ``path`` that borrows the objects of the repository at
    ``root`` (``objects/info/alternates``: nothing is copied), its HEAD detached at
    ``head`` (default: root's HEAD). It has a fresh config and no hooks, and is not
    registered in the repository (``git worktree list`` does not show it); remade when
    what is there is not that."""
    import shutil  # not at import: lk plan next and the other readers never remove

    objects = str((common_dir(root) / "objects").resolve())
    alternates = path / ".git" / "objects" / "info" / "alternates"
    try:
        ours = alternates.read_text(encoding="utf-8").strip() == objects
    except (OSError, UnicodeDecodeError):
        ours = False
    if not ours:
        if path.exists() or path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        git(["init", "-q", str(path)], cwd=path.parent)
        alternates.parent.mkdir(parents=True, exist_ok=True)
        alternates.write_text(objects + "\n", encoding="utf-8")
    commit = head or out(["rev-parse", "--verify", "-q", "HEAD"], cwd=root)
    try:
        detached = (path / ".git" / "HEAD").read_bytes() == f"{commit}\n".encode()
    except OSError:
        detached = False
    if detached:  # already so: no git call (a detached HEAD is its commit's id alone)
        return
    if is_object_id(commit):
        # The room is loopkit's own repository: its detached HEAD is written as git would
        # write it (the id and a newline, whole or not at all), without a git process.
        from loopkit.files import atomic_write  # not at import: lk-plan next never writes

        atomic_write(path / ".git" / "HEAD", f"{commit}\n")
    else:
        git(["update-ref", "--no-deref", "HEAD", commit], cwd=path)


def clean_worktree(path: Path) -> None:
    """Remove from the work tree at ``path`` everything its index does not hold: untracked
    and ignored files, nested repositories (the first half of ``sync_worktree``)."""
    git(["clean", "-ffdxq"], cwd=path)


def sync_worktree(
    path: Path,
    tree: str,
    *,
    held: str | None = None,
    cleaned: bool = False,
    held_listing: TreeListing | None = None,
) -> None:
    """Make the work tree at ``path`` hold exactly ``tree``: everything untracked or ignored
    (nested repositories too) removed (``clean_worktree``; already done when ``cleaned``),
    then its files rewritten only where they differ -- a file the index held and the tree
    does not is removed with it, so nothing but the tree is left.

    ``held``: a tree the work tree and the index are known to hold (loopkit.evidence.cleanroom's
    settled mark). Then only what differs between the two trees is read and written (a
    two-tree ``read-tree``: no file the trees share is looked at, and none at all when they
    are the same tree); else, or when git refuses (a file it would write is not as the
    index says), every file is checked against the index (``--reset``).

    ``held_listing``: ``held``'s listing (``tree_listing``): ``tree``'s is then made from it
    and what differs between the two trees (``listing_after``, which the checks' folder
    list uses too), and whether a ``.gitattributes`` changes read from the two, instead of
    a diff against the index."""
    if not cleaned:
        clean_worktree(path)
    if held == tree:
        return
    after = None
    if held is not None and held_listing is not None:
        try:
            after = listing_after(path, held, held_listing, tree)
        except GitError:  # the store lost ``held`` (a repository put back at this path, a
            held = None  # prune): every file is checked against the index
    if (
        _attributes_change(path, tree)
        if after is None or held_listing is None
        else after.attributes != held_listing.attributes
    ):
        # git rewrites only the files whose content differs: those the old attributes
        # checked out (LF where `eol=crlf` now asks CRLF, `$Id$` unexpanded, UTF-8 where a
        # `working-tree-encoding` now asks UTF-16) would stay as they were, unlike in a
        # person's checkout of the tree. Without an index every file is written anew;
        # what the old index held and the tree does not is then untracked, and cleaned.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path / ".git" / "index")
        git(["read-tree", "-u", "--reset", tree], cwd=path)
        clean_worktree(path)
        return
    two_trees = ["read-tree", "-u", "-m", str(held), tree]
    if held is None or git(two_trees, cwd=path, check=False).exit_code != 0:
        git(["read-tree", "-u", "--reset", tree], cwd=path)


#: Every ``.gitattributes`` file, at the top and in any folder.
_ATTRIBUTE_FILES = ":(glob)**/.gitattributes"


def _attributes_change(path: Path, tree: str) -> bool:
    """Whether a ``.gitattributes`` of ``tree`` differs from the one the index of the work
    tree at ``path`` holds (or the index holds one the tree does not): then the files the
    index's attributes checked out may not be what ``tree``'s make of the same blobs."""
    done = git(
        ["diff-index", "--cached", "--name-only", "-z", tree, "--", _ATTRIBUTE_FILES],
        cwd=path,
    )
    return bool(done.stdout.strip(b"\0"))


@contextlib.contextmanager
def worktree_index(root: Path, *, index: Path | None = None) -> Iterator[dict[str, str]]:
    """A throwaway index holding the working tree as it stands; yields the env selecting it.

    The real index is copied (so git's stat cache spares re-reading unchanged files) and
    ``git add -A`` runs on the copy: tracked and untracked files, ignored ones left out.
    The real index is never written.
    """
    with TreeWatch(root, index=index) as watch:
        watch.refresh()
        yield watch.env


def tree_hash(
    root: Path,
    *,
    index: Path | None = None,
    seed: Path | None = None,
    keep: Path | None = None,
    held: str | None = None,
) -> str:
    """A content hash of the working tree as it stands: a git tree id.

    Tracked files and untracked files git does not ignore, with their modes and symlink
    targets; ignored files (and loopkit's own state folder) are left out. Equal content
    gives an equal hash in any clone, whatever the timestamps. The real index is never
    touched: the work happens in a copy of it (the copy keeps git's stat cache, so only
    files that changed are read again) -- or of ``seed``; with ``keep``, the index the hash
    was taken with is left there too; ``held``: the tree ``seed`` holds (``TreeWatch``).
    """
    with TreeWatch(root, index=index, seed=seed, held=held) as watch:
        tree = watch.hash()
        if keep is not None:
            watch.keep(keep)
        return tree


@contextlib.contextmanager
def worktree_changes(
    root: Path,
    base: str | Callable[[], str],
    *,
    index: Path | None = None,
    seed: Path | None = None,
    on_tree: Callable[[str, Path], None] | None = None,
) -> Iterator[tuple[bytes, Callable[[], str], Callable[[], dict[str, int]], list[str]]]:
    """The working tree's change against ``base``, a call that returns its hash, one that
    returns the sizes of the blobs it adds, and the nested repositories left out.

    Yields ``(records, tree, sizes, unborn)``: ``records`` is the ``-z`` output of ``git
    diff-index --raw --numstat -M`` (renames found, binary files marked ``-``), tracked
    and untracked files alike; ``tree()`` waits for ``git write-tree`` and ``sizes()`` for
    the size of every blob the change's new side names (``{id: bytes}``: ``new_blob_ids``
    of the records, then ``object_sizes``). Both run meanwhile (they only read the scratch index and the
    object store), so the caller can parse the records in the mean time. ``unborn`` names
    nested repositories without a commit (left out of the index, so of all three).
    ``base`` may be a call that returns the base's id, made once the index is up to date
    (so it can be resolved while ``git add`` runs). ``on_tree`` is handed the tree's id
    the moment it is written, with the scratch index that holds it (in the thread that
    wrote it; the index is gone once this returns).
    """
    from loopkit.background import Background  # threads: not for lk plan next

    with TreeWatch(root, index=index, seed=seed) as watch:
        watch.refresh()
        env = watch.env
        base_id = base() if callable(base) else base

        told = _Told(_TREES.get(base_id))

        def write() -> str:
            tree = out(["write-tree"], cwd=root, env=env)
            told.tree(tree)
            if on_tree is not None:
                on_tree(tree, Path(watch.path))  # as write-tree left it: its cache tree whole
            return tree

        writer = Background(write, name="loopkit-write-tree")
        sizer: Background | None = None

        def tree() -> str:
            return str(writer.result())

        def sizes() -> dict[str, int]:
            assert sizer is not None
            found: dict[str, int] = sizer.result()
            return found

        try:
            done = git(
                [
                    "diff-index",
                    "--cached",
                    "-z",
                    "-M",
                    "--raw",
                    "--numstat",
                    "--end-of-options",
                    base_id,
                ],
                cwd=root,
                env=env,
            )
            told.records(done.stdout)  # the pair's changes: the room's sync, the base's tests
            # The new side's sizes from the same records: one listing of the change.
            ids = new_blob_ids(done.stdout)
            sizer = Background(lambda: object_sizes(root, ids, env=env), name="loopkit-blob-sizes")
            yield done.stdout, tree, sizes, list(watch.unborn)
        finally:
            told.records(None)  # none came (diff-index failed): a pair waiting asks git
            writer.wait()  # the scratch index goes only once write-tree is done with it
            if sizer is not None:
                sizer.wait()
