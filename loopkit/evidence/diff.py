"""The change, collected from git independently of what the worker says, and its policy check.

Everything comes from one throwaway index holding the working tree as it stands (see
``git.worktree_index``): staged and unstaged edits, untracked files git does not ignore,
deletions, renames, binary files, mode changes and symlinks, with added/deleted lines and
the new blob's size in bytes per file (from git's object store, binary files included),
plus ``tree``, the content hash the rest of the evidence is bound to.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

from loopkit import control as controls
from loopkit import git
from loopkit.errors import BadInput
from loopkit.evidence import scope
from loopkit.text import is_utf8 as _is_utf8
from loopkit.text import shown
from loopkit.values import field, record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from loopkit.sections import Diff, DiffFile

    class _Parsed(DiffFile, total=False):
        """A file as parse_records reads it: with its new blob's id, until its size is read."""

        _id: str


_Named = TypeVar("_Named", bound="Mapping[str, Any]")

STATUS = {
    "A": "added",
    "M": "modified",
    "D": "deleted",
    "R": "renamed",
    "C": "copied",
    "T": "type_changed",
    "U": "unmerged",
    "X": "unknown",
}
SYMLINK_MODE = "120000"
SUBMODULE_MODE = "160000"


@record
class _Raw:
    status: str
    old_mode: str
    new_mode: str
    new_id: str
    path: str
    old_path: str | None


def _text(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


def _shown_names(entry: _Named, keys: Sequence[str]) -> _Named:
    if all(not isinstance(entry.get(k), str) or _is_utf8(entry[k]) for k in keys):
        return entry
    return cast(
        "_Named", {k: shown(v) if k in keys and isinstance(v, str) else v for k, v in entry.items()}
    )


def parse_records(data: bytes) -> list[_Parsed]:
    """Files from ``git diff-index -z --raw --numstat`` output, in git's (path) order."""
    fields = data.split(b"\0")
    raws: list[_Raw] = []
    stats: list[tuple[int | None, int | None]] = []
    i, n = 0, len(fields)
    while i < n:
        f = fields[i]
        if not f:
            i += 1
            continue
        if f.startswith(b":"):
            meta = f[1:].split(b" ")
            letter = _text(meta[4][:1])
            if letter in ("R", "C"):
                old, new = _text(fields[i + 1]), _text(fields[i + 2])
                i += 3
            else:
                old, new = None, _text(fields[i + 1])
                i += 2
            raws.append(
                _Raw(
                    status=STATUS.get(letter, "unknown"),
                    old_mode=_text(meta[0]),
                    new_mode=_text(meta[1]),
                    new_id=_text(meta[3]),
                    path=new,
                    old_path=old,
                )
            )
            continue
        added, deleted, rest = f.split(b"\t", 2)
        stats.append(
            (
                None if added == b"-" else int(added),
                None if deleted == b"-" else int(deleted),
            )
        )
        # A rename's numstat names both paths in the next two fields.
        i += 3 if rest == b"" else 1
    files: list[_Parsed] = []
    for k, r in enumerate(raws):
        a, d = stats[k] if k < len(stats) else (0, 0)
        entry: _Parsed = {
            "path": r.path,
            "status": r.status,
            "added": a or 0,
            "deleted": d or 0,
        }
        if r.old_path is not None:
            entry["old_path"] = r.old_path
        if a is None or d is None:
            entry["binary"] = True
        if r.status not in ("added", "deleted") and r.old_mode != r.new_mode:
            entry["old_mode"], entry["new_mode"] = r.old_mode, r.new_mode
        elif r.status == "added":
            entry["new_mode"] = r.new_mode
        if r.new_mode == SYMLINK_MODE and r.status != "deleted":
            entry["symlink"] = True
        if SUBMODULE_MODE in (r.old_mode, r.new_mode):
            entry["submodule"] = True
        if r.status != "deleted" and r.new_mode != SUBMODULE_MODE:
            entry["_id"] = r.new_id  # the new blob: its size is what the change adds
        files.append(entry)
    return files


def _symlink_target(root: Path, path: str, blob: str) -> str:
    try:
        return os.readlink(root / path)
    except OSError:  # changed since it was hashed: the recorded blob is the truth
        return _text(git.blob(root, blob))


class Result:
    body: Diff

    def __init__(self, body: Diff) -> None:
        self.body = body

    @property
    def within_policy(self) -> bool:
        return bool(self.body["within_policy"])


@record
class Facts:
    """What git says about the change, before any policy is applied."""

    root: Path
    base: str
    base_ref: str
    tree: str
    files: list[DiffFile]
    #: Nested repositories without a commit: in no tree, not even as a gitlink.
    unborn: list[str] = field(default_factory=list)
    #: The git folders' control state (``controls.control_state``), when it was asked for.
    git_control: dict[str, str] | None = None
    #: Files in the change that the base's ignore rules ignore (``_ignored_at_base``).
    ignored_at_base: list[str] = field(default_factory=list)
    #: Files in the change that were ignored when the task started (``_ignored_at_start``).
    ignored_at_start: list[str] = field(default_factory=list)


def gather(cwd: str | os.PathLike[str], *, base: str | None = None) -> Facts:
    """The change in the repository at ``cwd`` against ``base`` (default HEAD)."""
    return gather_at(git.locate(cwd), base or "HEAD")


def gather_at(
    where: git.Located,
    base_ref: str,
    *,
    git_control: Mapping[str, Any] | None = None,
    seed: Path | None = None,
    ignored_at_start: Sequence[str] | None = None,
    on_tree: Callable[[str, Path], None] | None = None,
) -> Facts:
    """The change in the located repository against ``base_ref`` (exit 3 if it names nothing).

    The base is resolved by a git call of its own that runs while ``git add`` refreshes
    the scratch index, off the critical path. With ``git_control`` (what lk-invoke
    recorded, ``run.git_control``), the git folders' control state is read too, meanwhile
    (nothing this gathering runs writes there: no hook, no filter driver of the
    repository's, the index a scratch copy). ``seed``: the index the hash starts from
    (``loopkit.evidence.statcache.seed``; default the real one). ``ignored_at_start``: what git
    ignored when the task started (``run.ignored_at_start``). ``on_tree``: handed the
    tree's id as soon as it is written, and the index that holds it, while the rest is
    gathered (``git.worktree_changes``).
    """
    from loopkit.background import Background

    controlling = None
    if isinstance(git_control, Mapping):
        paths = git_control.get("paths")
        since = {str(k): str(v) for k, v in paths.items()} if isinstance(paths, Mapping) else {}
        controlling = Background(
            lambda: controls.control_state(where.root, since=since), name="lk-diff-control"
        )

    resolver = Background(lambda: git.resolve(where.root, base_ref), name="lk-diff-base")

    def base_id() -> str:
        found: str | None = resolver.result()
        if found is None:
            raise BadInput("--base", f"{base_ref!r} names no commit or tree in {where.root}")
        return found

    try:
        with git.worktree_changes(
            where.root, base_id, index=where.index, seed=seed, on_tree=on_tree
        ) as changes:
            records, tree, blob_sizes, unborn = changes
            parsed = parse_records(records)  # while git write-tree still runs
            sizes = blob_sizes()
            files: list[DiffFile] = []
            for f in parsed:
                blob = f.pop("_id", None)
                if blob is not None:
                    f["bytes"] = sizes.get(blob, 0)
                if f.get("symlink"):
                    f["symlink_target"] = _symlink_target(where.root, f["path"], str(blob))
                files.append(f)
            tree_id = tree()
        _count_hidden_lines(where.root, base_id(), tree_id, files)
        control = controlling.result() if controlling is not None else None
        # In a loop (lk-invoke recorded the start): a person may un-ignore a file on purpose.
        ignored = _ignored_at_base(where.root, base_id(), files) if control is not None else []
        at_start = _ignored_at_start(files, ignored_at_start or (), set(ignored))
    finally:
        resolver.wait()
        if controlling is not None:
            controlling.wait()
    return Facts(
        root=where.root,
        base=base_id(),
        base_ref=base_ref,
        tree=tree_id,
        files=files,
        unborn=unborn,
        git_control=control,
        ignored_at_base=ignored,
        ignored_at_start=at_start,
    )


def _ignored_at_base(root: Path, base: str, files: Sequence[DiffFile]) -> list[str]:
    """The files the change brings in that the base's ignore rules ignore.

    A worker that rewrites a ``.gitignore`` (``# nothing``, ``!.env``; one that ignores
    itself is in no change) makes ``git add -A`` take files the repository kept out of
    git: the user's ``.env``, a build folder. Asked whenever the change brings in a file
    (three git calls); the other ignore sources, info/exclude and the user's excludes
    file, are git control state."""
    new = [f["path"] for f in files if f["status"] in ("added", "renamed", "copied")]
    return git.ignored_by_tree(root, base, new)


def _ignored_at_start(
    files: Sequence[DiffFile], ignored: Sequence[str], already: set[str]
) -> list[str]:
    """The files the change brings in that were ignored when the task started: one of
    ``ignored``'s files, or under one of its folders (``dir/``). What an ignore file in no
    commit kept out -- a ``secrets/.gitignore`` holding ``*``, a tool's own -- is not
    among the base's rules; a worker that empties or deletes that file would otherwise
    get the folder committed. No git call."""
    if not ignored:
        return []
    loose = {p for p in ignored if not p.endswith("/")}
    folders = tuple(p for p in ignored if p.endswith("/"))
    return [
        f["path"]
        for f in files
        if f["status"] in ("added", "renamed", "copied")
        and f["path"] not in already
        and (f["path"] in loose or f["path"].startswith(folders))
    ]


def _count_hidden_lines(root: Path, base: str, tree: str, files: Sequence[DiffFile]) -> None:
    """Files only the worker's attributes made binary get their lines counted.

    ``-diff`` or ``binary`` on a path makes git's numstat give no line counts, so a worker
    that writes ``* -diff`` into a ``.gitattributes`` (one that ignores itself included)
    would take every file out of the changed-lines budget. When a file comes back binary,
    the two trees are compared again with the base's attributes in force: what git then
    counts as text is counted. Attributes the base already had are the user's, and kept
    (a ``package-lock.json -diff`` stays out of the count).
    """
    if not any(f.get("binary") for f in files):
        return
    counts = git.line_counts_by_tree_attributes(root, base, tree)
    for f in files:
        found = counts.get(f["path"]) if f.get("binary") else None
        if found is not None:
            f["added"], f["deleted"] = found
            del f["binary"]


def nested_repositories(facts: Facts) -> list[scope.Violation]:
    """A new gitlink records a commit of another repository, not its files: a clone of
    the branch gets none of them. A nested repository without a commit is in no tree at
    all. Either way the change is not what it looks like, wherever it is."""
    out = [
        scope.Violation(
            scope.NESTED_REPOSITORY,
            f["path"],
            "a nested git repository, recorded as a gitlink: a clone gets none of its files",
        )
        for f in facts.files
        if f.get("submodule")
        and f["status"] != "deleted"
        and f.get("new_mode") == SUBMODULE_MODE
        and f.get("old_mode") != SUBMODULE_MODE
    ]
    out += [
        scope.Violation(
            scope.NESTED_REPOSITORY,
            path,
            "a nested git repository without a commit: its files are in no tree",
        )
        for path in facts.unborn
    ]
    return out


def git_control_violations(
    started: Mapping[str, Any] | None, now: Mapping[str, str] | None
) -> list[scope.Violation]:
    """What changed in the git folders since lk-invoke recorded them (``run.git_control``)
    before the worker started, and what lk-invoke saw change while it ran.

    HEAD or its branch pointing elsewhere is ``head_moved``; any other change (a hook,
    the config, ``info/exclude``, ``info/attributes``, a contract cache entry...) is
    ``git_control_changed``. The contract cache is loopkit's to empty: only what lk-invoke
    saw the worker write there counts.
    """
    if not isinstance(started, Mapping) or now is None:
        return []
    paths = started.get("paths")
    if not isinstance(paths, Mapping):
        return []
    was = {str(k): str(v) for k, v in paths.items()}
    keys = {str(k) for k in started.get("changed") or () if isinstance(k, str)}
    during = set(keys)
    if started.get("digest") != controls.control_digest(now):
        keys |= {
            k for k in controls.control_changes(was, now) if not k.startswith(controls.CACHE_PREFIX)
        }
    head = was.get(controls.HEAD_KEY, "")
    branch = f".git/{head[len('ref:') :].strip()}" if head.startswith("ref:") else None
    out: list[scope.Violation] = []
    for key in sorted(keys):
        before, after = (
            controls.short(was.get(key, "absent")),
            controls.short(now.get(key, "absent")),
        )
        when = "while the worker ran" if key in during else "since the worker started"
        if key in (controls.HEAD_KEY, branch):
            name = "HEAD" if key == controls.HEAD_KEY else key.removeprefix(".git/")
            moved = f"was {before}, now {after}" if before != after else "moved"
            out.append(scope.Violation(scope.HEAD_MOVED, name, f"{name} {moved} {when}"))
        else:
            how = "added" if before == "absent" else "removed" if after == "absent" else "changed"
            out.append(scope.Violation(scope.GIT_CONTROL_CHANGED, key, f"{how} {when}"))
    return out


def _tree_violations(
    facts: Facts, special_files: Sequence[Mapping[str, Any]]
) -> list[scope.Violation]:
    """What the change brings in that no change may, whatever the policy: files ignored at
    the base or when the task started, the special files lk-invoke removed after the
    worker, and file names that are not UTF-8."""
    found: list[scope.Violation] = []
    found += [
        scope.Violation(
            scope.IGNORED_AT_BASE,
            path,
            "ignored by the .gitignore rules of the base: a rewritten .gitignore lets it "
            "into the change (a file the repository keeps out of git is not the worker's "
            "to add)",
        )
        for path in facts.ignored_at_base
    ]
    found += [
        scope.Violation(
            scope.IGNORED_AT_BASE,
            path,
            "ignored when the task started, by an ignore file in no commit (a tool's own, "
            "or one that ignores itself): emptying or deleting it lets it into the change",
        )
        for path in facts.ignored_at_start
    ]
    found += [
        scope.Violation(
            scope.SPECIAL_FILE,
            str(f.get("path")),
            f"a {f.get('type') or 'special file'} the worker left, removed after its run: git "
            "holds only files, symlinks and folders, and reading a FIFO blocks (git reads "
            "one named .gitignore or .gitattributes)",
        )
        for f in special_files
        if isinstance(f, Mapping)
    ]
    found += [
        scope.Violation(
            scope.PATH_NOT_UTF8,
            name,
            "the file name is not UTF-8: the evidence cannot name it as it is (shown with "
            "\\x escapes) and a checkout on macOS or Windows cannot write it",
        )
        for f in facts.files
        for name in (f["path"], f.get("old_path"))
        if name is not None and not _is_utf8(name)
    ]
    return found


def assess(
    facts: Facts,
    *,
    contract: Mapping[str, Any] | None,
    control: Sequence[str] = (),
    drift: str | None = None,
    git_control: Mapping[str, Any] | None = None,
    special_files: Sequence[Mapping[str, Any]] = (),
) -> Result:
    """The ``diff`` section: the facts and the contract's scope policy applied to them.

    ``control`` names the files that steer the loop (a change is a violation whatever
    the globs say); ``drift`` says the contract file changed since the attempt started;
    ``git_control`` is what lk-invoke recorded of the git folders (``run.git_control``),
    compared with ``facts.git_control``. Nested repositories and changes to the git
    folders are violations with or without a contract: they are about whether the tree
    is the change, not about its scope. ``special_files``: the FIFOs, sockets and device
    nodes lk-invoke removed after the worker (``run.special_files``), each a violation.
    """
    files = facts.files
    policy = scope.Policy.from_contract(contract)
    if policy is not None and control:
        policy = policy.but(control=tuple(control))
    changes = [
        scope.Change(
            path=f["path"],
            status=f["status"],
            added=f["added"],
            deleted=f["deleted"],
            old_path=f.get("old_path"),
            symlink_target=f.get("symlink_target"),
            size=f.get("bytes", 0),
        )
        for f in files
    ]
    violations = scope.evaluate(policy, changes, root=str(facts.root))
    if drift and not any(v.rule == scope.CONTROL_FILE for v in violations):
        violations.append(scope.Violation(scope.CONTROL_FILE, "*", drift))
    violations += nested_repositories(facts)
    violations += git_control_violations(git_control, facts.git_control)
    violations += _tree_violations(facts, special_files)
    added = sum(f["added"] for f in files)
    deleted = sum(f["deleted"] for f in files)
    files = [_shown_names(f, ("path", "old_path", "symlink_target")) for f in files]
    listed = [_shown_names(v.as_dict(), ("path", "detail")) for v in violations]
    body: Diff = {
        "base": facts.base,
        "base_ref": facts.base_ref,
        "tree": facts.tree,
        "files": files,
        "totals": {
            "files": len(files),
            "lines": added + deleted,
            "added": added,
            "deleted": deleted,
            "bytes": sum(f.get("bytes", 0) for f in files),
        },
        "violations": listed,
        "within_policy": not violations,
        "policy": policy.as_dict() if policy is not None else None,
    }
    return Result(body)


def collect(
    cwd: str | os.PathLike[str],
    *,
    contract: Mapping[str, Any] | None,
    base: str | None = None,
) -> Result:
    """The ``diff`` section for the repository at ``cwd`` against ``base`` (default HEAD)."""
    return assess(gather(cwd, base=base), contract=contract)
