"""The workspace: which repository, which contract, which task, which state folder.

Every command builds one ``Workspace`` at its start and hands it to the core, so every
command and recipe gives the same answers to the same flags, document and environment:

- **root**: the top of the git work tree the command runs in (``git.locate``).
- **contract**: ``--contract FILE`` > the piped attempt document's ``contract`` > a
  ``loop.yaml`` (``.yml``, ``.json``) in the current folder, else at the root. The piped
  document's task is **always** applied (its scope replaces ``writable``, its budget caps
  the size budgets): no command can check a task against the whole contract by accident.
- **snapshot**: the contract a loop started with. The first command that reads a contract
  file records its sha256 in the document (``contract_source``); when a later stage is
  given the same file with ``--contract`` and the file changed meanwhile (a worker edited
  ``loop.yaml``), the command refuses (exit 3) instead of judging by the new rules.
- **state**: ``$LOOPKIT_STATE_DIR`` > the contract's ``state_dir`` > ``.loopkit`` at the
  root; created and excluded from git (``.git/info/exclude``) on first use, with every
  cache and artifact inside it.

``lk workspace --json`` prints these answers for scripts in any language.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from loopkit import SCHEMA_VERSION, __version__, git, loader
from loopkit.digest import sha256
from loopkit.document import emit, read_attempt, vouched
from loopkit.errors import BadInput, EnvironmentProblem
from loopkit.values import field, record

TYPE_CHECKING = False  # typing stays unloaded at run time (start-up is a feature)
if TYPE_CHECKING:
    from typing import Any

    from loopkit.sections import Attempt, Contract, Task

STATE_ENV = "LOOPKIT_STATE_DIR"
NO_CONTRACT = "no contract: pass --contract FILE, pipe an attempt document, or add loop.yaml"
DEFAULT_STATE = ".loopkit"


@record
class Workspace:
    """The answers one command works with; built by ``Workspace.open``. (A record, as
    ``Found`` is: ``lk workspace`` loads no ``dataclasses``.)"""

    root: Path
    index: Path
    document: Mapping[str, Any] | None = None
    contract: Contract | None = None
    #: Where the contract came from: a file path, "<stdin>" (the piped document) or None.
    contract_from: str | None = None
    #: The contract file's sha256, when it came from a file.
    contract_sha256: str | None = None
    #: Why the contract file on disk is not the one this attempt started under, if so.
    contract_drift: str | None = None
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)
    _state: Path | None = None  # the state folder, once asked for

    # ------------------------------------------------------------------ building

    @classmethod
    def open(
        cls,
        *,
        contract_path: str | None = None,
        document: Mapping[str, Any] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        environ: Mapping[str, str] | None = None,
        require_contract: bool = False,
    ) -> Workspace:
        """The workspace for a command run in ``cwd`` (default: the current folder).

        A bad contract is reported (exit 3) before a missing repository (exit 4).
        """
        here = Path(cwd) if cwd is not None else Path.cwd()
        env = environ if environ is not None else os.environ
        try:
            where = git.locate(here)
        except EnvironmentProblem:
            resolve_contract(contract_path, document, start=here, root=None)
            raise
        found = resolve_contract(contract_path, document, start=here, root=where.root)
        if found.contract is None and require_contract:
            raise BadInput("--contract", NO_CONTRACT)
        return cls(
            root=where.root,
            index=where.index,
            document=document,
            contract=found.contract,
            contract_from=found.source,
            contract_sha256=found.sha256,
            contract_drift=found.drift,
            environ=env,
        )

    # ------------------------------------------------------------------ answers

    @property
    def terms(self) -> Contract:
        """The contract, which ``open(require_contract=True)`` made sure of."""
        if self.contract is None:
            raise BadInput("--contract", NO_CONTRACT)
        return self.contract

    @property
    def task(self) -> Task | None:
        task: Task | None = (self.document or {}).get("task")
        return task if isinstance(task, dict) else None

    @property
    def state(self) -> Path:
        """The state folder, created and excluded from git (once per workspace)."""
        if self._state is None:
            self._state = state_folder(
                self.root, self.index, env=self.environ, configured=self.configured_state
            )
        return self._state

    @property
    def configured_state(self) -> str | None:
        value = self.contract.get("state_dir") if self.contract else None
        return value if isinstance(value, str) and value else None

    def state_path(self) -> Path:
        """Where the state folder is, without creating it."""
        return choose_state(self.root, env=self.environ, configured=self.configured_state)

    def control_files(self) -> list[str]:
        """The files that steer the loop, repository-relative: the contract file, the
        memory file and the task's TASKS.md. A worker may change none of them."""
        out: list[str] = []
        task_source = (self.task.get("source") if self.task else None) or {}
        candidates = [
            self.contract_from if self.contract_from != "<stdin>" else None,
            str(self.memory_file()) if self.memory_file() else None,
            task_source.get("file") if isinstance(task_source, Mapping) else None,
        ]
        for path in candidates:
            if not path:
                continue
            full = Path(path) if os.path.isabs(path) else Path.cwd() / path
            try:
                rel = Path(os.path.abspath(full)).relative_to(os.path.abspath(self.root))
            except ValueError:
                continue
            if rel.as_posix() not in out:
                out.append(rel.as_posix())
        return out

    def memory_file(self) -> Path | None:
        memory = self.contract.get("memory") if self.contract else None
        if not isinstance(memory, str) or not memory:
            return None
        return self.root / memory

    def stamp(self, document: Attempt) -> None:
        """Record in ``document`` the contract this workspace works under (the snapshot
        every later stage reads) and where it came from."""
        Found(self.contract, self.contract_from, self.contract_sha256).stamp(document)

    def as_dict(self) -> dict[str, Any]:
        """The answers, for ``lk workspace --json``."""
        memory = self.memory_file()
        return {
            "kind": "loopkit/workspace",
            "version": 1,
            "root": str(self.root),
            "state_dir": str(self.state_path()),
            "contract": self.contract_from,
            "contract_sha256": self.contract_sha256,
            "memory": str(memory) if memory else None,
            "task": self.task.get("id") if self.task else None,
            "scope": self.contract.get("scope") if self.contract else None,
        }


def report(contract_path: str | None, *, as_json: bool) -> None:
    """What ``lk workspace`` prints on stdout for the piped document (if any) and
    ``--contract``: one JSON line (schemas/workspace.json), or NAME=VALUE lines quoted for
    a shell. The state folder is created and excluded from git, as any command would."""
    doc = read_attempt()
    ws = Workspace.open(contract_path=contract_path, document=doc)
    ws.state  # noqa: B018 -- created and excluded, as every command would
    body = ws.as_dict()
    if as_json:
        emit(body)
        return
    import shlex  # only for a shell's lines

    lines = []
    for key in ("root", "state_dir", "contract", "contract_sha256", "memory", "task"):
        value = body.get(key)
        lines.append(f"{key}={shlex.quote(str(value)) if value is not None else ''}\n")
    sys.stdout.write("".join(lines))
    sys.stdout.flush()


# --------------------------------------------------------------------------- contract


@record
class Found:
    """A resolved contract (task applied), where it came from, and its file's sha256."""

    contract: Contract | None
    source: str | None
    sha256: str | None
    #: Set when the contract file changed since the attempt started: the snapshot rules.
    drift: str | None = None

    def stamp(self, document: Attempt) -> None:
        if self.contract is not None and not isinstance(document.get("contract"), Mapping):
            document["contract"] = vouched(self.contract)
        if self.source and self.sha256 and "contract_source" not in document:
            path = self.source if self.source == "<stdin>" else os.path.abspath(self.source)
            document["contract_source"] = {"path": path, "sha256": self.sha256}


def find_default(*folders: Path | None) -> Path | None:
    """loop.yaml (or .yml/.json) in the first of ``folders`` that has one."""
    from loopkit.contract import DEFAULT_FILENAMES  # not loaded for a cached contract

    for folder in folders:
        if folder is None:
            continue
        for name in DEFAULT_FILENAMES:
            p = folder / name
            if p.is_file():
                return p
    return None


def resolve_contract(
    path: str | None,
    document: Mapping[str, Any] | None,
    *,
    start: Path,
    root: Path | None,
    cache_root: Path | None = None,
) -> Found:
    """--contract > the piped document's > ./loop.yaml (then the root's); the task applied.

    ``cache_root``: the repository whose git folder remembers checked contracts, when it
    is not ``root`` (lk-plan looks for loop.yaml in the current folder alone, yet in a
    repository parses a contract once)."""
    cache = cache_root if cache_root is not None else root

    piped = document.get("contract") if document is not None else None
    task = document.get("task") if document is not None else None
    if path:
        raw = _read(path)
        sha = _sha256(raw)
        recorded = (document or {}).get("contract_source")
        same_file = isinstance(recorded, Mapping) and recorded.get("path") == os.path.abspath(path)
        if isinstance(piped, Mapping) and isinstance(recorded, Mapping) and same_file:
            # The file this attempt started under: if it changed since (a worker edited
            # it), the attempt is judged by the snapshot it started with, and lk-diff
            # reports the change.
            if recorded.get("sha256") != sha:
                data = _trusted(piped)
                drift = (
                    f"{path} changed since this attempt started (sha256 "
                    f"{str(recorded.get('sha256'))[:12]} then, {sha[:12]} now)"
                )
                return Found(_with_task(data, task), path, str(recorded.get("sha256")), drift)
            # Unchanged: the snapshot is the contract (no parsing, no cache to trust).
            return Found(_with_task(_trusted(piped), task), path, sha)
        return Found(_with_task(_parsed(raw, path, sha, cache), task), path, sha)
    if isinstance(piped, Mapping):
        # Already checked against its schema when the document was read.
        data = _trusted(piped)
        recorded = (document or {}).get("contract_source")
        was = recorded if isinstance(recorded, Mapping) else {}
        return Found(_with_task(data, task), was.get("path") or "<stdin>", was.get("sha256"))
    default = find_default(start, root)
    if default is None:
        return Found(None, None, None)
    raw = _read(str(default))
    sha = _sha256(raw)
    return Found(_with_task(_parsed(raw, str(default), sha, cache), task), str(default), sha)


def _parsed(raw: bytes, source: str, sha: str, root: Path | None) -> Contract:
    """The contract file's bytes parsed and checked, remembered by their content.

    A commit hook runs lk-verify on every commit with the same loop.yaml: its checked
    form is kept under the git folder (``loopkit/cache/``), keyed by the file's sha256 and
    loopkit's version, so the YAML parser need not even be imported next time. The git
    folder, not the state folder: a worker in the sandbox cannot write there, and without
    one lk-diff reports any change under ``.git`` (a planted cache entry included).
    """
    cached = _cache_file(root, sha)
    if cached is not None:
        try:
            data = loader.json_loads(cached.read_bytes())
            if isinstance(data, dict) and data.get("criteria"):
                kept: Contract = vouched(data)
                return kept
        except (OSError, ValueError):
            pass
    from loopkit import contract as contracts  # a contract met before needs no checking

    data = contracts.checked(contracts.parse_text(raw, source), source)
    if cached is not None:
        from loopkit.files import atomic_write  # lk-plan next meets cached contracts

        try:
            atomic_write(cached, _dumps(data))
        except OSError:
            pass  # a cache, never a reason to fail
    return data


#: At most this many remembered contracts are kept across a worker run.
MAX_REMEMBERED = 32


def _cache_folder(root: Path) -> Path:
    """Where checked contracts are remembered: under the git folder (see ``_parsed``)."""
    return root / ".git" / "loopkit" / "cache"


def remembered(root: Path) -> dict[str, bytes]:
    """The remembered contracts as they are now (file name -> bytes), to be put back by
    ``clear_cache`` once a worker has ended: what loopkit itself had checked before it."""
    folder = _cache_folder(root)
    found: dict[str, bytes] = {}
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return found
    for name in names:
        if name.startswith("contract-") and name.endswith(".json") and len(found) < MAX_REMEMBERED:
            try:
                found[name] = (folder / name).read_bytes()
            except OSError:
                continue
    return found


def clear_cache(root: Path, *, keep: Mapping[str, bytes] | None = None) -> None:
    """Forget every remembered contract: lk-invoke calls it once the worker has ended, so
    nothing the worker wrote there is ever read as a checked contract. ``keep``
    (``remembered`` before the worker) is then written back as it was: loopkit's own
    entries survive the run, and the next command to meet that contract (the next loop's
    ``lk workspace``, the next task's ``lk-plan next``) need not parse it again."""
    import shutil

    folder = _cache_folder(root)
    shutil.rmtree(folder, ignore_errors=True)
    if not keep:
        return
    from loopkit.files import atomic_write

    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in keep.items():
            atomic_write(folder / name, data)
    except OSError:
        pass  # a cache, never a reason to fail


def _dumps(data: Any) -> str:
    return json.dumps(data, allow_nan=False)


def _cache_file(root: Path | None, sha: str) -> Path | None:
    if root is None:
        return None
    if not (root / ".git").is_dir():
        return None  # a linked worktree or a submodule: no cache rather than a git call
    # The validation rules are part of the key: a changed contract.py is a new cache.
    rules = os.stat(Path(__file__).with_name("contract.py"))
    key = _sha256(
        f"{sha}\0{__version__}\0{SCHEMA_VERSION}\0{rules.st_mtime_ns}\0{rules.st_size}".encode()
    )
    return _cache_folder(root) / f"contract-{key[:32]}.json"


def _trusted(piped: Mapping[str, Any]) -> Contract:
    """A piped document's contract: it passed schemas/contract.json when the document was
    read (the hand-written validator and the schema agree, a test holds them to it), so
    only its defaults are filled in -- not validated again in every stage."""
    from loopkit.contract import with_defaults

    return with_defaults(piped)


def _with_task(contract: Contract, task: Any) -> Contract:
    if isinstance(task, Mapping):
        from loopkit.contract import apply_task

        return apply_task(contract, task)
    return contract


def _read(path: str) -> bytes:
    p = Path(path)
    try:
        return p.read_bytes()
    except FileNotFoundError:
        raise BadInput(path, "no such file") from None
    except IsADirectoryError:
        raise BadInput(path, "is a directory, expected a contract file") from None
    except OSError as e:
        raise BadInput(path, f"cannot read: {e.strerror}") from None


def _sha256(raw: bytes) -> str:
    return str(sha256(raw).hexdigest())


# --------------------------------------------------------------------------- state folder


def choose_state(
    root: Path, *, env: Mapping[str, str] | None = None, configured: str | None = None
) -> Path:
    """$LOOPKIT_STATE_DIR > the contract's state_dir > .loopkit, relative to ``root``."""
    environ = env if env is not None else os.environ
    chosen = environ.get(STATE_ENV) or configured or DEFAULT_STATE
    return Path(chosen) if os.path.isabs(chosen) else root / chosen


def state_folder(
    root: Path,
    index: Path | None = None,
    *,
    env: Mapping[str, str] | None = None,
    configured: str | None = None,
) -> Path:
    """The state folder, created and excluded through ``info/exclude`` (no git call when
    both are already so)."""
    path = choose_state(root, env=env, configured=configured)
    try:
        try:
            rel = path.resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            path.mkdir(parents=True, exist_ok=True)
            return path  # outside the work tree: nothing to exclude
        pattern = f"/{rel}/"
        if path.is_dir() and index is not None and git.info_excludes(index, pattern):
            return path
        git.exclude(root, pattern)
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise EnvironmentProblem(f"cannot set up the state folder {path}: {e.strerror}") from None
    return path


def for_state_only(cwd: str | os.PathLike[str] = ".") -> Workspace:
    """The workspace of a command that needs only the state folder (lk cancel, lk report):
    a contract that cannot be read names no state_dir -- cancelling must work with a
    broken contract too."""
    here = Path(cwd)
    where = git.locate(here)
    try:
        found = resolve_contract(None, None, start=here, root=where.root)
    except BadInput:
        found = Found(None, None, None)
    return Workspace(
        root=where.root,
        index=where.index,
        contract=found.contract,
        contract_from=found.source,
        contract_sha256=found.sha256,
    )
