"""The ledger: an append-only JSON-lines file, one record per attempt, plus a derived index.

Storage (argued in docs/decide.md):

- ``ledger.jsonl`` is the record of truth: one JSON object per line, readable with jq.
  A record is written with one ``write()`` on an ``O_APPEND`` descriptor and ``fsync``-ed
  before the command reports its decision, under an exclusive ``flock`` -- so concurrent
  loops never interleave bytes, and a record that was reported is on disk.
- ``ledger.jsonl.idx/`` is an index derived from the ledger and rebuildable from it at
  any time: one small file per task holding its folded history (``loopkit.decision.budget.fold``),
  and ``meta.json`` with the byte offset up to which the index has read the ledger. A
  decision reads one task file and at most the few bytes appended since -- its cost
  does not grow with the ledger.
- A crash mid-write leaves a torn last line. Readers report it and skip it; the next
  append starts on a fresh line so the torn bytes never glue onto a whole record.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from loopkit import loader
from loopkit.boundary.secrets import scrub
from loopkit.decision import budget
from loopkit.digest import file_sha256, sha256
from loopkit.errors import EnvironmentProblem
from loopkit.evidence import statcache
from loopkit.files import atomic_write

if TYPE_CHECKING:
    from typing import TypedDict

    from loopkit.sections import History, Record

    class IndexEntry(TypedDict):
        """A task's entry in the ledger's index: its history, folded up to ``offset``."""

        task_id: str
        offset: int
        history: History


RECORD_KIND = "loopkit/ledger-record"
DEFAULT_NAME = "ledger.jsonl"
#: The derived index beside the default ledger (``Ledger.index_dir``).
INDEX_NAME = DEFAULT_NAME + ".idx"
TRIGGERS = ("manual", "schedule", "event")


def now_iso() -> str:
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"


def task_file_name(task_id: str) -> str:
    """A file name for a task id; ids that had to be changed get a hash, so none collide."""
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", task_id)[:100] or "_"
    if safe != task_id:
        safe += "-" + sha256(task_id.encode()).hexdigest()[:12]
    return safe


class Problem:
    """A line of the ledger that is not a whole record (torn by a crash, or damaged)."""

    line: int | None
    offset: int
    message: str

    def __init__(self, line: int | None, offset: int, message: str) -> None:
        self.line = line
        self.offset = offset
        self.message = message

    def as_dict(self) -> dict[str, int | str | None]:
        return {"line": self.line, "offset": self.offset, "message": self.message}

    def __str__(self) -> str:
        where = f"line {self.line}" if self.line else f"byte {self.offset}"
        return f"{where}: {self.message}"


def _parse_lines(
    data: bytes, *, start_offset: int, start_line: int | None
) -> Iterator[tuple[int | None, int, Record | None, Problem | None]]:
    """(line number, end offset, record or None, problem or None) for each line in ``data``."""
    pos = 0
    line = start_line
    while pos < len(data):
        nl = data.find(b"\n", pos)
        torn = nl < 0
        end = len(data) if torn else nl + 1
        chunk = data[pos:end].strip()
        offset = start_offset + pos
        if chunk:
            if torn:
                yield (
                    line,
                    start_offset + end,
                    None,
                    Problem(
                        line, offset, f"torn last record ({len(chunk)} bytes, no newline): skipped"
                    ),
                )
            else:
                why = "torn or damaged"
                try:
                    rec = loader.json_loads(chunk)
                except loader.LoadError as e:
                    rec = None
                    if e.path is not None:  # whole JSON, but not strict: a NaN, a repeated key
                        why = f"{e.problem} at {e.path}"
                if isinstance(rec, dict) and rec.get("kind") == RECORD_KIND:
                    yield line, start_offset + end, cast("Record", rec), None
                else:
                    yield (
                        line,
                        start_offset + end,
                        None,
                        Problem(line, offset, f"not a whole ledger record ({why}): skipped"),
                    )
        pos = end
        if line is not None:
            line += 1


def _scan(
    path: Path, start: int, stop: int, *, chunk: int = 8 << 20
) -> Iterator[tuple[int | None, int, Record | None, Problem | None]]:
    """``_parse_lines`` over bytes [start, stop) of a file, a chunk at a time (bounded memory)."""
    with open(path, "rb") as f:
        f.seek(start)
        pos = start
        carry = b""
        while pos < stop:
            block = f.read(min(chunk, stop - pos))
            if not block:
                break
            pos += len(block)
            data = carry + block
            cut = data.rfind(b"\n") + 1 if pos < stop else len(data)
            yield from _parse_lines(data[:cut], start_offset=pos - len(data), start_line=None)
            carry = data[cut:]
        if carry:
            yield from _parse_lines(carry, start_offset=pos - len(carry), start_line=None)


def read(path: str | os.PathLike[str]) -> tuple[list[tuple[int, Record]], list[Problem]]:
    """Every whole record with its line number, and the lines that are not (never fatal)."""
    problems: list[Problem] = []
    return list(stream(path, problems)), problems


def stream(path: str | os.PathLike[str], problems: list[Problem]) -> Iterator[tuple[int, Record]]:
    """``read``'s records one at a time, a line read as each is asked for (the lines that
    are not whole records go to ``problems``): a reader that needs each record once, such
    as ``lk-decide --replay``, holds one record at a time, whatever the ledger's size."""
    try:
        f = open(path, "rb")  # noqa: SIM115 (closed as the generator ends)
    except FileNotFoundError:
        return
    with f:
        offset = 0
        for number, raw in enumerate(f, start=1):
            for line, _, rec, problem in _parse_lines(raw, start_offset=offset, start_line=number):
                if rec is not None and line is not None:
                    yield line, rec
                elif problem is not None:
                    problems.append(problem)
            offset += len(raw)


class Ledger:
    path: Path
    problems: list[Problem]

    def __init__(self, path: str | os.PathLike[str], problems: list[Problem] | None = None) -> None:
        self.path = Path(path)
        self.problems = [] if problems is None else problems

    @property
    def index_dir(self) -> Path:
        return self.path.with_name(self.path.name + ".idx")

    def _task_file(self, task_id: str) -> Path:
        return self.index_dir / "tasks" / f"{task_file_name(task_id)}.json"

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """Exclusive access to the ledger and its index (flock), index caught up first.

        A ledger that cannot be written (permissions, a full disk) is an environment
        problem (exit 4): the decision is not printed, since it was not recorded.
        """
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.index_dir.mkdir(parents=True, exist_ok=True)
            lock_fd = os.open(self.index_dir / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise EnvironmentProblem(f"{self.path}: cannot open the ledger: {e.strerror}") from None
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
            txn = Transaction(self)
            try:
                txn.catch_up()
                yield txn
            except OSError as e:
                where = e.filename or self.path
                raise EnvironmentProblem(
                    f"{where}: cannot write the ledger: {e.strerror}"
                ) from None
        finally:
            os.close(lock_fd)  # closing releases the lock

    def history(self, task_id: str) -> History:
        with self.transaction() as txn:
            return txn.history(task_id)

    def attempt_ids(self, task_id: str) -> list[str]:
        path = self._task_file(task_id).with_suffix(".attempts")
        try:
            return [x for x in path.read_text(encoding="utf-8").split() if x]
        except FileNotFoundError:
            return []


class Transaction:
    """What one process may do while it holds the ledger's lock."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self._meta_path = ledger.index_dir / "meta.json"
        self._cache: dict[str, IndexEntry] = {}
        self.meta = self._read_json(self._meta_path) or {"offset": 0, "seq": 0}

    @staticmethod
    def _read_json(path: Path) -> dict[str, Any] | None:  # meta.json, a task's entry
        try:
            data = loader.json_loads(path.read_bytes())
        except (FileNotFoundError, loader.LoadError):
            return None
        return data if isinstance(data, dict) else None

    def _task(self, task_id: str) -> IndexEntry:
        if task_id not in self._cache:
            path = self.ledger._task_file(task_id)
            found = self._read_json(path)
            if found is not None and found.get("task_id") == task_id:
                entry = cast("IndexEntry", found)
            else:
                entry = {"task_id": task_id, "offset": 0, "history": budget.empty_history()}
                if path.exists():  # damaged (e.g. by a power loss): rebuild it from the ledger
                    entry = self._rebuild_task(task_id)
            self._cache[task_id] = entry
        return self._cache[task_id]

    def _rebuild_task(self, task_id: str) -> IndexEntry:
        """One task's index entry re-folded from the ledger (only when its file is damaged)."""
        entry: IndexEntry = {"task_id": task_id, "offset": 0, "history": budget.empty_history()}
        stop = int(self.meta.get("offset") or 0)
        if stop and self.ledger.path.exists():
            for _, end, rec, _ in _scan(self.ledger.path, 0, stop):
                if rec is not None and str(rec.get("task_id") or "") == task_id:
                    entry["history"] = budget.fold(entry["history"], rec)
                    entry["offset"] = end
        self.ledger.problems.append(
            Problem(
                None, 0, f"the index entry of task {task_id!r} was damaged: rebuilt from the ledger"
            )
        )
        return entry

    def history(self, task_id: str) -> History:
        return budget.filled(self._task(task_id)["history"])

    def _size(self) -> int:
        try:
            return self.ledger.path.stat().st_size
        except FileNotFoundError:
            return 0

    def catch_up(self) -> None:
        """Fold whatever the ledger holds beyond the index's offset (normally nothing)."""
        size = self._size()
        offset = int(self.meta.get("offset") or 0)
        if size == offset:
            return
        if size < offset:  # the ledger was replaced or cut: rebuild the index from scratch
            shutil.rmtree(self.ledger.index_dir / "tasks", ignore_errors=True)
            self._cache.clear()
            self.meta = {"offset": 0, "seq": 0}
            offset = 0
        touched: set[str] = set()
        new_ids: dict[str, list[str]] = {}
        for _, end, rec, problem in _scan(self.ledger.path, offset, size):
            if problem is not None:
                self.ledger.problems.append(problem)
                continue
            assert rec is not None
            tid = str(rec.get("task_id") or "")
            entry = self._task(tid)
            if end > int(entry.get("offset") or 0):
                entry["history"] = budget.fold(entry["history"], rec)
                entry["offset"] = end
                touched.add(tid)
                if rec.get("type") == "attempt" and rec.get("attempt_id"):
                    new_ids.setdefault(tid, []).append(str(rec["attempt_id"]))
            self.meta["seq"] = max(int(self.meta.get("seq") or 0), int(rec.get("seq") or 0))
        for tid in touched:
            self._save_task(tid)
        for tid, ids in new_ids.items():
            self._add_attempt_id(tid, *ids)
        self.meta["offset"] = size
        atomic_write(self._meta_path, json.dumps(self.meta))

    def _save_task(self, task_id: str) -> None:
        atomic_write(self.ledger._task_file(task_id), json.dumps(self._task(task_id)))

    def _add_attempt_id(self, task_id: str, *attempt_ids: str) -> None:
        path = self.ledger._task_file(task_id).with_suffix(".attempts")
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            f.write("".join(a + "\n" for a in attempt_ids))

    def append(self, entry: Mapping[str, Any]) -> Record:
        """Write one record durably (one write, fsync), then fold it into the index."""
        seq = int(self.meta.get("seq") or 0) + 1
        record: Record = scrub({"kind": RECORD_KIND, "version": 1, "seq": seq, **entry})
        record["seq"] = seq
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        data = (line + "\n").encode()
        fd = os.open(self.ledger.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                data = b"\n" + data  # a torn tail stays its own (skipped) line
            written = os.write(fd, data)
            while written < len(data):  # a short write is rare; finish the same record
                written += os.write(fd, data[written:])
            os.fsync(fd)
            end = os.fstat(fd).st_size
        finally:
            os.close(fd)
        tid = str(record.get("task_id") or "")
        index = self._task(tid)
        index["history"] = budget.fold(index["history"], record)
        index["offset"] = end
        self._save_task(tid)
        if record.get("type") == "attempt" and record.get("attempt_id"):
            self._add_attempt_id(tid, str(record["attempt_id"]))
        self.meta = {"offset": end, "seq": seq}
        atomic_write(self._meta_path, json.dumps(self.meta))
        return record


def seal(state: Path, *, stat_cache: bool = True, task: str | None = None) -> dict[str, Any]:
    """What the worker must not change in the state folder, condensed: the ledger's size
    and sha256, the index's files, whether a cancellation is in force, the base results
    and the stat cache (loopkit.evidence.statcache; left out with ``stat_cache=False``). lk-invoke
    takes it before the worker starts; lk-decide compares (``tampered``); the base results
    and the stat cache are only ever used as sealed.

    With ``task`` (the attempt's), the ledger may grow meanwhile by records of *other*
    tasks -- slices running side by side share one ledger -- and the index is sealed as
    far as it is this task's: its own files."""
    path = state / DEFAULT_NAME
    try:
        ledger = f"{path.stat().st_size}:{file_sha256(path)}"
    except OSError:
        ledger = "absent"
    index = sha256()
    own = task_file_name(task) + "." if task else None
    for folder, _, files in sorted(os.walk(state / INDEX_NAME)):
        for name in sorted(files):
            if own is not None and not name.startswith(own):
                continue
            p = os.path.join(folder, name)
            try:
                st = os.stat(p)
            except OSError:
                continue
            index.update(
                f"{p}\0{st.st_size}\0{st.st_mtime_ns}\0".encode("utf-8", "surrogateescape")
            )
    baseline = {}  # what must pass (loopkit.evidence.verify.baseline): trusted only as sealed here
    for result in sorted((state / "baseline").glob("*.json")):
        try:
            baseline[result.name] = sha256(result.read_bytes()).hexdigest()
        except OSError:
            continue
    try:
        folder = f"symlink to {os.readlink(state)}" if os.path.islink(state) else "directory"
    except OSError:
        folder = "unreadable"
    facts: dict[str, Any] = {
        "folder": folder,
        "ledger": ledger,
        "index": index.hexdigest(),
        "cancel": (state / "cancel.json").exists(),
        "baseline": baseline,
    }
    if task:
        facts["task"] = task
    if stat_cache:
        facts[statcache.SEAL_KEY] = statcache.digest(state)
    return facts


def tampered(sealed: Any, state: Path) -> list[str]:
    """What changed in the state folder since ``sealed`` (a ``seal``); empty when nothing.
    A cancellation asked meanwhile is a person's right, not a change to refuse."""
    if not isinstance(sealed, dict):
        return []
    # The stat cache is not compared: one the worker wrote is never trusted, only set
    # aside (loopkit.evidence.statcache.seed), and hashing it here would be read for nothing.
    task = sealed.get("task") if isinstance(sealed.get("task"), str) else None
    now = seal(state, stat_cache=False, task=task)
    out = []
    if "folder" in sealed and sealed["folder"] != now["folder"]:
        out.append(
            f"the state folder {state} was replaced ({sealed['folder']} then, {now['folder']} now)"
        )
    if sealed.get("ledger") != now["ledger"] and not (
        task and _others_appended(state / DEFAULT_NAME, str(sealed.get("ledger")), task)
    ):
        out.append(f"the ledger {state / DEFAULT_NAME} was rewritten")
    if sealed.get("index") != now["index"]:
        out.append(f"the ledger's index {state / INDEX_NAME} was changed")
    if sealed.get("cancel") and not now["cancel"]:
        out.append("the cancellation (cancel.json) was removed")
    for name, digest in (sealed.get("baseline") or {}).items():
        if now["baseline"].get(name) != digest:
            out.append(f"the base results {state / 'baseline' / name} were changed")
    return out


def _others_appended(path: Path, sealed: str, task: str) -> bool:
    """The ledger holds what was sealed, unchanged, followed only by whole records of tasks
    other than ``task``: what slices running beside it appended."""
    size_text, _, digest = sealed.partition(":")
    if not size_text.isdigit() or not digest:
        return False
    size = int(size_text)
    try:
        with open(path, "rb") as f:
            head = f.read(size)
            tail = f.read()
    except OSError:
        return False
    if len(head) != size or sha256(head).hexdigest() != digest:
        return False
    for line in tail.splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            return False
        if not isinstance(record, dict) or str(record.get("task_id") or "") == task:
            return False
    return True


def detect_trigger(option: str | None, env: Mapping[str, str]) -> dict[str, str]:
    """What started the loop: the --trigger option, else the CI environment, else manual."""
    if option:
        return {"kind": option, "source": "--trigger"}
    if env.get("LOOPKIT_TRIGGER") in TRIGGERS:
        return {"kind": env["LOOPKIT_TRIGGER"], "source": "LOOPKIT_TRIGGER"}
    gh = env.get("GITHUB_EVENT_NAME")
    if gh:
        kind = {"schedule": "schedule", "workflow_dispatch": "manual"}.get(gh, "event")
        return {"kind": kind, "source": f"GITHUB_EVENT_NAME={gh}"}
    gl = env.get("CI_PIPELINE_SOURCE")
    if gl:
        kind = {"schedule": "schedule", "web": "manual", "api": "manual"}.get(gl, "event")
        return {"kind": kind, "source": f"CI_PIPELINE_SOURCE={gl}"}
    if env.get("BUILDKITE_SOURCE") == "schedule":
        return {"kind": "schedule", "source": "BUILDKITE_SOURCE=schedule"}
    if env.get("CI"):
        return {"kind": "event", "source": "CI"}
    return {"kind": "manual", "source": "default"}
