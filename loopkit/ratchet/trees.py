"""The work tree as a tree object, bringing the work tree to a tree, and saving it.

Every git call goes through ``loopkit.git`` (hooks, fsmonitor, filters off). Trees of the
work tree are built in a scratch index seeded from HEAD (or from loopkit's own stat cache),
never from a copy of the real index, whose flags and stat data a worker can forge.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

from loopkit import discovery, git
from loopkit.errors import EnvironmentProblem


class Where:
    """The work tree a step works in: its root, its own git folder, the state folder
    (relative to the root when inside it) and what git ignored when the task began."""

    def __init__(
        self, root: Path, own: Path, state: Path, start_ignored: Sequence[str] = ()
    ) -> None:
        self.root = root
        self.own = own
        self.state = state
        try:
            self.state_rel: str | None = state.resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            self.state_rel = None
        self.start_ignored = list(start_ignored)

    def out(self, args: Sequence[str], **kw: object) -> str:
        return git.out(args, cwd=self.root, **kw)

    def ok(self, args: Sequence[str], **kw: object) -> bool:
        return git.git(args, cwd=self.root, check=False, **kw).exit_code == 0  # type: ignore[arg-type]


def head(w: Where) -> tuple[str, str]:
    """The commit at HEAD ("" when none) and the branch it is on ("" when detached): from
    git's ref files where it can (no process), else git's answer."""
    found = discovery.head_from_files(w.root)
    if found is not None:
        return found
    commit, _, branch = head_tree(w)
    return commit, branch


def head_tree(w: Where) -> tuple[str, str, str]:
    """The commit at HEAD, its tree and the branch ("" for each that is not there): read
    from git's files when HEAD's commit is a loose object (a landed or marked commit is),
    else one git call while HEAD has a commit."""
    found = discovery.head_from_files(w.root)
    dirs = discovery.find_dirs(w.root) if found and found[0] else None
    tree = discovery.tree_from_files(dirs.common, found[0]) if found and dirs else None
    if found and tree:
        git.known_commit(w.root, found[0], tree)
        return found[0], tree, found[1]
    done = git.git(
        ["rev-parse", "HEAD^{commit}", "HEAD^{tree}", "--symbolic-full-name", "HEAD"],
        cwd=w.root,
        check=False,
    )
    lines = done.stdout.decode("utf-8", "surrogateescape").split("\n")
    if done.exit_code == 0 and len(lines) >= 3 and git.is_object_id(lines[0]):
        branch = lines[2] if lines[2].startswith("refs/") else ""
        git.known_commit(w.root, lines[0], lines[1])
        return lines[0], lines[1], branch
    if done.exit_code < 0 or done.exit_code > 128:  # killed: no answer, never "no commit"
        raise git.GitError(f"git rev-parse HEAD failed in {w.root} (exit {done.exit_code})")
    sym = git.git(["symbolic-ref", "-q", "HEAD"], cwd=w.root, check=False)
    if sym.exit_code not in (0, 1):
        raise git.GitError(f"git symbolic-ref HEAD failed in {w.root} (exit {sym.exit_code})")
    branch = sym.stdout.decode("utf-8", "surrogateescape").strip() if sym.exit_code == 0 else ""
    return "", "", branch


def is_ancestor(w: Where, old: str, new: str) -> bool:
    return w.ok(["merge-base", "--is-ancestor", old, new])


@contextlib.contextmanager
def scratch_index(w: Where) -> Iterator[Path]:
    """A scratch index file in the git folder, removed (with its lock) afterwards."""
    folder = w.own / "loopkit"
    folder.mkdir(parents=True, exist_ok=True)
    index = folder / f"scratch-{os.getpid()}.index"
    _unlink(index, Path(f"{index}.lock"))
    try:
        yield index
    finally:
        _unlink(index, Path(f"{index}.lock"))


def _unlink(*paths: Path) -> None:
    for p in paths:
        with contextlib.suppress(FileNotFoundError):
            p.unlink()


def live_tree(
    w: Where, *, seed: Path | None = None, keep: Path | None = None, expect: str | None = None
) -> str:
    """The tree of the work tree as it stands: tracked and untracked files, ignored ones,
    the state folder and what the start ignored left out. ``seed``: an index to start
    from (loopkit's stat cache, written after the worker ended); ``keep``: where to move
    the index the tree was built in -- only when the tree is ``expect``, if given."""
    with scratch_index(w) as index:
        env = {"GIT_INDEX_FILE": str(index)}
        if seed is not None and seed.is_file():
            shutil.copy2(seed, index)  # with its mtime: git's racy-entry rule
        elif head(w)[0]:
            w.out(["read-tree", "HEAD"], env=env)
        # The tree the index held before ``add`` (its whole cache tree, or the tree this
        # process hashed through an index of the same bytes), so that when add moved only
        # stat data the index tells the tree after it too: no write-tree.
        data = index.read_bytes() if expect is not None and index.exists() else None
        earlier = (data, git.tree_of_index(data)) if data is not None else None
        w.out(["-c", "advice.addEmbeddedRepo=false", "add", "-A", "--", "."], env=env)
        if expect is not None:
            tree = git.index_tree(index, earlier) or w.out(["write-tree"], env=env)
            if tree == expect:
                if keep is not None:
                    os.replace(index, keep)
                return tree
            keep = None
        drop = [":(top,literal).loopkit"]
        if w.state_rel:
            drop.append(f":(top,literal){w.state_rel}")
        drop += [f":(top,literal){p.rstrip('/')}" for p in w.start_ignored if p.rstrip("/")]
        w.out(
            [
                "rm",
                "-r",
                "--cached",
                "-q",
                "--ignore-unmatch",
                "--pathspec-from-file=-",
                "--pathspec-file-nul",
            ],
            env=env,
            input="\0".join(drop).encode("utf-8", "surrogateescape"),
        )
        tree = w.out(["write-tree"], env=env)
        if keep is not None:
            os.replace(index, keep)
        return tree


def index_tree(w: Where) -> str:
    """The tree the real index holds (what is staged), written from a copy."""
    real = Path(git.index_path(w.root))
    with scratch_index(w) as index:
        if real.is_file():
            shutil.copy2(real, index)
        return w.out(["write-tree"], env={"GIT_INDEX_FILE": str(index)})


def start_walk(w: Where) -> tuple[bool, list[str]]:
    """Whether the work tree has changes git would commit, and what git ignores now."""
    # As a person's `git status`, it may refresh the index's stat data (optional locks on):
    # entries written in the same second as their files ("racily clean") are settled once
    # here, before the worker, so later hashes need not read those files again.
    raw = git.git(
        ["status", "--porcelain", "-z", "--untracked-files=normal", "--ignored=matching"],
        cwd=w.root,
        env={"GIT_OPTIONAL_LOCKS": "1"},
    ).stdout.decode("utf-8", "surrogateescape")
    dirty, ignored = False, []
    for entry in raw.split("\0"):
        if not entry:
            continue
        if entry.startswith("!! "):
            ignored.append(entry[3:])
        elif entry[:2] in ("R ", "C ", "RM", "CM"):
            dirty = True
        else:
            dirty = True
    return dirty, ignored


def dirty(w: Where) -> bool:
    return bool(w.out(["status", "--porcelain", "--untracked-files=all"]))


def _literal(path: str) -> str | None:
    """``path`` as a literal ``git clean -e`` pattern anchored at the root."""
    if "\n" in path:
        return None
    p = path.replace("\\", "\\\\").replace("*", "\\*").replace("?", "\\?")
    p = p.replace("[", "\\[").replace("]", "\\]")
    if p[:1] in ("#", "!"):
        p = "\\" + p
    if p.endswith(" "):
        p = p[:-1] + "\\ "
    return "/" + p


def sync_to(w: Where, target: str, index: str | None = None) -> None:
    """Make the work tree hold exactly ``target`` and the index ``index`` (default
    ``target``); ignored files and the state folder are left alone. The index is rebuilt
    from the tree first (the worker may have written the real one), untracked debris is
    removed -- untracked under both sets of ignore rules, the attempt's and ``target``'s,
    whose .gitignore files are written back first -- and only files that differ are
    written."""
    w.out(["read-tree", target])
    w.ok(["update-index", "-q", "--refresh"])
    keep: list[str] = []
    clean = True
    listed = w.out(["ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory"])
    for path in [*listed.split("\0"), *w.start_ignored]:
        if not path:
            continue
        pattern = _literal(path)
        if pattern is None:
            clean = False
            continue
        keep += ["-e", pattern]
    ignores = w.out(["diff-files", "--name-only", "-z", "--", ":(glob)**/.gitignore"])
    if ignores:
        w.out(
            ["checkout-index", "-f", "-u", "-z", "--stdin"],
            input=ignores.encode("utf-8", "surrogateescape"),
        )
    if clean:
        state = ["-e", f"/{w.state_rel}/"] if w.state_rel else []
        w.out(["clean", "-fdq", *state, *keep, "--", "."])
    differ = w.out(["diff-files", "--name-only", "-z"])
    if differ:
        w.out(
            ["checkout-index", "-f", "-u", "-z", "--stdin"],
            input=differ.encode("utf-8", "surrogateescape"),
        )
    if index and index != target:
        w.out(["read-tree", index])
        w.ok(["update-index", "-q", "--refresh"])


#: The attributes by which a checkout writes a file other than as git stores it.
CONVERTING = ("ident", "filter", "eol", "working-tree-encoding")


def checkout_converted(w: Where, old: str, new: str, *, tree: str = "") -> list[str]:
    """The files that changed from ``old`` to ``new`` and that a checkout writes converted
    (``ident``, a filter, ``eol``, an encoding) written again from the index, as a checkout
    of ``new`` writes them: a worker wrote them as git stores them (``$Id$`` unexpanded),
    which ``git status`` finds clean though a clone holds other text. Call with the index
    at ``new``. Returns the paths written. ``tree``: ``new``'s tree; when no attribute can
    apply to it (``git.no_attributes``), nothing is asked."""
    if tree and git.no_attributes(w.root, tree):
        return []
    changed = w.out(["diff-tree", "-r", "-z", "--name-only", "--no-renames", old, new])
    paths = [p for p in changed.split("\0") if p]
    if not paths:
        return []
    found = w.out(["check-attr", "-z", "--stdin", *CONVERTING], input="\0".join(paths).encode())
    fields = found.split("\0")
    converted = sorted(
        {path for path, _, value in zip(fields[0::3], fields[1::3], fields[2::3], strict=False)
         if value not in ("unspecified", "unset", "")}
    )  # fmt: skip
    if converted:
        # checkout-index skips a file whose stat data the index matches: gone first.
        for path in converted:
            with contextlib.suppress(FileNotFoundError):
                (w.root / path).unlink()
        w.out(["checkout-index", "-f", "-u", "-q", "-z", "--stdin"],
              input="\0".join(converted).encode())  # fmt: skip
    return converted


def keep_commit(w: Where, task: str, label: str, commit: str) -> str:
    """A new ref ``refs/loopkit/<task>/<label>[-N]`` holding ``commit`` (never an existing
    one overwritten: the empty old value makes update-ref refuse one that appeared)."""
    base = f"refs/loopkit/{git.ref_component(task)}/{git.ref_component(label)}"
    ref, n = base, 1
    while w.ok(["rev-parse", "-q", "--verify", ref]):
        n += 1
        ref = f"{base}-{n}"
    w.out(["update-ref", "-m", "loopkit: save", ref, commit, ""])
    return ref


def save(w: Where, task: str, label: str, message: str, parent: str | None) -> str:
    """Save the whole work tree (tracked and untracked, not ignored) as a commit under a new
    ref; returns the ref. Neither the real index nor the work tree is touched."""
    tree = live_tree(w)
    args = ["commit-tree", tree, *(["-p", parent] if parent else []), "-m", message]
    return keep_commit(w, task, label, w.out(args))


def ensure_writable(path: Path) -> None:
    """Exit 4 naming ``path`` when a file cannot be written there."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".loopkit-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise EnvironmentProblem(f"cannot write {e.filename or path}: {e.strerror}") from None
