"""Run the contract's acceptance checks and record evidence bound to the tree.

Each check is a shell command run in the repository root with its timeout (the whole
process group is ended when it runs out). Its full output goes to a log under the
attempt's artifact folder; the evidence keeps the exit code, a bounded tail, the output's
sha256 and, for a failure, a fingerprint. The tree is hashed before the first check and
after each one: a check that changed the tree is flagged, since its evidence is not about
the tree it started from.
"""

from __future__ import annotations

import functools
import json
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from loopkit import digest, git, proc, text
from loopkit.errors import BadInput, LoopkitError
from loopkit.evidence import basetests, cleanroom, fingerprint, globs, specialfiles
from loopkit.files import atomic_write
from loopkit.loader import json_loads
from loopkit.state import artifacts

TYPE_CHECKING = False
if TYPE_CHECKING:
    from loopkit.sections import BaseCheck, Baseline, CannotRun, Check, KnownFailure, Verify

#: The verify section as lk-verify recorded it, in the attempt's artifact folder.
RECORD_NAME = "verify.json"
#: The output tail kept in the document: at most this many lines and bytes (from the end).
TAIL_LINES = 40
TAIL_BYTES = 4096
#: Bytes from the end of the output a fingerprint reads (a failure is told at the end).
FINGERPRINT_WINDOW = 256 * 1024
_CHUNK = 1 << 20

#: progress(event, index, total, name, finished-check-or-None): "start" as a check starts,
#: "ran" once its process ended (None), "end" once its result is known.
Progress = Callable[[str, int, int, str, "Check | None"], None]
#: launch(command, env) -> (argv or shell text, env, shell?): how one check is started.
Launch = Callable[[str, Mapping[str, str]], "tuple[list[str] | str, dict[str, str], bool]"]


def select(criteria: Sequence[Mapping[str, Any]], only: Sequence[str]) -> list[Mapping[str, Any]]:
    """The criteria to run, in contract order; ``only`` names a subset (unknown names: exit 3)."""
    if not only:
        return list(criteria)
    names = [str(c["name"]) for c in criteria]
    unknown = [n for n in only if n not in names]
    if unknown:
        raise BadInput(
            "--only", f"no check named {unknown[0]!r}; the contract has: {', '.join(names)}"
        )
    return [c for c in criteria if c["name"] in only]


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.")[:60] or "check"


def _sha256_file(path: Path) -> tuple[str, bytes]:
    """The file's sha256 and its last bytes (enough for the tail and the fingerprint)."""
    size = path.stat().st_size
    h = digest.sha256(size=size)
    with open(path, "rb") as f:
        while block := f.read(_CHUNK):
            h.update(block)
        f.seek(max(0, size - FINGERPRINT_WINDOW))
        end = f.read()
    return h.hexdigest(), end


class Result:
    """The ``verify`` section, and whether every check passed."""

    def __init__(self, body: Verify, moved: Mapping[str, str] | None = None) -> None:
        self.body = body
        #: What the checks changed of the tree they ran on: path -> status (A, M, D, T).
        self.moved = dict(moved or {})

    @property
    def passed(self) -> bool:
        return bool(self.body["passed"])


def run_checks(
    root: Path,
    criteria: Sequence[Mapping[str, Any]],
    *,
    log_dir: Path,
    fail_fast: bool = False,
    progress: Progress | None = None,
    env: Mapping[str, str] | None = None,
    index: Path | None = None,
    skip: Sequence[str] = (),
    home: Path | None = None,
    synced: str | None = None,
    launch: Launch | None = None,
    should_stop: Callable[[], str | None] | None = None,
    between: Callable[[bool], None] | None = None,
) -> Result:
    """Run ``criteria`` in order in the repository at ``root``; the ``verify`` section.

    ``index`` (from ``git.locate``) spares a git call when the caller already knows it;
    ``skip`` names top-level paths left out of the tree hashes (a clean room's carried
    symlinks); ``home`` is the repository the evidence is about when ``root`` is its clean
    room (log paths are recorded relative to it, and both paths are noise in fingerprints);
    ``synced`` is the tree git has just checked out there (a clean room's), taken as the
    tree before the checks instead of hashing it again -- were it not, the hash after them
    differs and the checks are said to have changed it: the verification fails.
    ``launch`` turns a check's command and environment into what is started (the checks'
    sandbox, ``containment.for_checks``); without it the command runs as it is.
    ``should_stop`` is asked while a check runs: a reason (``lk cancel``) ends that check's
    process group at once (``checks[].cancelled``), and the checks after it do not run.
    ``between`` is called before each check but the first (given whether the check
    before it changed the tree): a clean room brings itself back to the verified tree
    there (``cleanroom.restore``), so no file one check wrote reaches the next.
    """
    where = git.locate(root) if index is None else git.Located(root=root, index=index, base=None)
    with git.TreeWatch(where.root, index=where.index, skip=skip) as watch:
        return _run(
            where,
            watch,
            criteria,
            log_dir,
            fail_fast,
            progress,
            env,
            home or root,
            synced,
            launch,
            should_stop,
            between,
        )


def in_clean_room(
    root: Path,
    criteria: Sequence[Mapping[str, Any]],
    *,
    log_dir: Path,
    head: str | None,
    index: Path | None = None,
    carry: Sequence[str] = (),
    carry_before: Mapping[str, str] | None = None,
    fail_fast: bool = False,
    progress: Progress | None = None,
    env: Mapping[str, str] | None = None,
    tree: str | None = None,
    early: cleanroom.EarlyRoom | None = None,
    contract: Mapping[str, Any] | None = None,
    state: Path | None = None,
    reset: Sequence[str] = (),
    should_stop: Callable[[], str | None] | None = None,
    prove: bool = False,
) -> Result:
    """Run ``criteria`` in the clean room synced to the working tree's tree (see
    ``loopkit.evidence.cleanroom``); the ``verify`` section, bound to that tree. ``tree`` is that
    tree when the caller has it (the one lk-diff checked: lk-decide completes only when
    it is still the tree on disk), else the working tree is hashed here. ``early``: the
    clean room's sync begun earlier (``lk attempt``), used when it is for this tree.

    A check that changes a file of the tree there (or deletes one) is listed in
    ``changed_by_checks`` and the verification does not pass: the tree the recipe would
    commit is not the one the checks left. New files (caches, build output) are debris of
    the clean room, never committed. A carried path whose fingerprint moved since the
    worker started fails the verification too.

    When the attempt added or changed more than the code under test, the contract's
    criteria run again on the base's tests' tree (``basetests``, ``_phased``). ``prove``
    (``verify.prove_new_tests``): they run once more on the attempt's tests with the
    base's code under test (``basetests.without_fix``), and the verification passes only
    when a test fails there and passes on the attempt (``proof``).
    """
    if tree is None:
        tree = git.tree_hash(root, index=index)
    base_tree, tests_tree, plain = _base_tests(root, criteria, tree, head, contract)
    first: Result | None = None
    unfixed: Result | None = None
    links = room_links(contract, carry)
    with cleanroom.held(root, tree, head=head, carry=links, early=early) as room:
        jail = _jail(root, room, contract, carry, state, env, reset)
        ran = functools.partial(
            _run_on, root=root, jail=jail, carry=carry, env=env, reset=reset, stop=should_stop
        )
        result = ran(room, room, criteria, tree, log_dir, fail_fast=fail_fast, progress=progress)
        body = result.body
        touched: list[str] = []
        moved = result.moved
        if body.get("tree_changed"):
            touched = _edited(moved)
            body["changed_by_checks"] = touched
            body["debris"] = sorted(p for p, status in moved.items() if status == "A")[:200]
        stopped = any(c.get("cancelled") for c in body["checks"])
        if plain and not stopped and body["tree"] == tree and not touched:
            # The base's tests, as the base had them (``basetests``): the room brought to
            # that tree (only the files that differ are written), the plain criteria again.
            at = cleanroom.moved(room, root, tests_tree, reset=reset)
            first = ran(
                room,
                at,
                plain,
                tests_tree,
                log_dir / "base-tests",
                fail_fast=fail_fast,
                progress=None
                if progress is None
                else lambda ev, i, n, name, e: progress(ev, i, n, f"{name} (the base's tests)", e),
            )
            touched = _edited(first.moved)
            room = at
        unfixed_tree = (
            basetests.without_fix(root, base_tree, tree, contract)
            if prove and base_tree and not stopped and not touched
            else None
        )
        if unfixed_tree and unfixed_tree != tree:
            # The attempt's tests on the base's code under test: what they show of the change.
            back = cleanroom.moved(room, root, unfixed_tree, reset=reset)
            unfixed = ran(
                room, back, basetests.plain(criteria), unfixed_tree, log_dir / "without-fix"
            )
            touched = _edited(unfixed.moved)
            room = back
        body["sandbox"] = jail.recorded()  # after every run: the hosts refused to any of them
        # New files alone (debris) leave the tree's own files as they were: the next sync
        # removes them anyway.
        cleanroom.settle(room, intact=body["tree"] == tree and not touched)
    body["clean_room"] = True
    carried = (root, carry, carry_before)
    _judged(body, tree, first, tests_tree, touched, prove, unfixed, carried)
    return result


def _base_tests(
    root: Path,
    criteria: Sequence[Mapping[str, Any]],
    tree: str,
    head: str | None,
    contract: Mapping[str, Any] | None,
) -> tuple[str | None, str, list[Mapping[str, Any]]]:
    """The base's tree (None without a head), the base's tests' tree (``basetests.tree``;
    ``tree`` itself when there is no base or nothing to take back), and the criteria that
    run again there (none when it is ``tree``)."""
    base_tree = git.resolve(root, f"{head}^{{tree}}") if head else None
    commands = [str(c["run"]) for c in criteria]
    tests_tree = (
        basetests.tree(root, base_tree, tree, contract, named_by=commands) if base_tree else tree
    )
    return base_tree, tests_tree, basetests.plain(criteria) if tests_tree != tree else []


def _edited(moved: Mapping[str, str]) -> list[str]:
    """The files of the tree the checks changed or deleted (``moved``: path -> status; a
    new file, ``A``, is debris)."""
    return sorted(p for p, status in moved.items() if status != "A")


def _run_on(
    room: cleanroom.Room,
    into: cleanroom.Room,
    criteria: Sequence[Mapping[str, Any]],
    tree: str,
    log_dir: Path,
    *,
    root: Path,
    jail: Any,
    carry: Sequence[str],
    env: Mapping[str, str] | None,
    reset: Sequence[str],
    stop: Callable[[], str | None] | None,
    fail_fast: bool = False,
    progress: Progress | None = None,
) -> Result:
    """One run of ``criteria`` in the clean room (``room``) as synced to ``tree``
    (``into``: what each check's changes are undone to), in the checks' sandbox."""
    return run_checks(
        room.path,
        criteria,
        log_dir=log_dir,
        fail_fast=fail_fast,
        progress=progress,
        env=env,
        skip=(*room.carried, *carry),
        home=root,
        synced=tree,
        launch=jail.command,
        should_stop=stop,
        between=lambda changed: cleanroom.restore(into, root, changed=changed, reset=reset),
    )


def _judged(
    body: Verify,
    tree: str,
    first: Result | None,
    tests_tree: str,
    touched: list[str],
    prove: bool,
    unfixed: Result | None,
    carry: tuple[Path, Sequence[str], Mapping[str, str] | None],
) -> None:
    """The clean room's runs judged as one section: the base's tests' run (``first``), the
    proof when asked (``prove``; ``unfixed``: the run without the fix, None when there is
    none), what the checks changed of the tree (``touched``) and of the carried paths
    (``carry``: the root, the paths, their fingerprints when the worker started)."""
    problems: list[str] = []
    if first is not None:
        _phased(body, first.body, tests_tree)
    if touched and not body.get("changed_by_checks"):
        body["changed_by_checks"] = touched
        body["tree_changed"] = True
    if prove:
        if unfixed is not None:
            body["proof"] = {"tree": unfixed.body["tree"], **basetests.proof(body, unfixed.body)}
        else:
            why = "the change holds no code under test, or its checks did not all run"
            body["proof"] = {"proven": False, "tests": [], "why": [why]}
        if not body["proof"]["proven"]:
            problems.append("not proven by a test: " + "; ".join(body["proof"]["why"]))
    if body["tree"] != tree:
        problems.append(f"the clean room held tree {body['tree'][:12]}, not {tree[:12]}")
        body["tree"] = tree
    if body.get("tree_changed"):
        if touched:
            problems.append(
                f"the checks changed {len(touched)} file(s) of the tree they verified "
                f"({', '.join(touched[:5])}): no check ran on the tree they left"
            )
    root, carried, carry_before = carry
    moved_carry = cleanroom.changed_carry(carry_before, root, carried)
    if moved_carry:
        body["carry_changed"] = moved_carry
        problems.append("carried paths changed since the worker started: " + ", ".join(moved_carry))
    if problems:
        body["passed"] = False
        body["problems"] = problems


def _phased(body: Verify, first: Verify, tests_tree: str) -> None:
    """The two runs as one section: ``checks`` holds the base's tests' run for each plain
    criterion (what the ratchet judges) and the whole tree's for a task's own checks;
    ``whole_tree`` the whole tree's run of the plain criteria (the worker's new tests with
    them). Passed only when both runs pass."""
    ran = {str(c["name"]): c for c in first["checks"]}
    whole = [c for c in body["checks"] if str(c["name"]) in ran]
    for c in first["checks"]:
        c["run_on"] = "base_tests"
    body["checks"] = [ran.get(str(c["name"]), c) for c in body["checks"]]
    body["base_tests_tree"] = tests_tree
    body["whole_tree"] = {
        "checks": whole,
        "passed": all(c["passed"] for c in whole),
        "skipped": list(first.get("skipped") or []),
    }
    every = [*body["checks"], *whole]
    body["passed"] = bool(body["passed"] and first["passed"] and all(c["passed"] for c in every))
    body["fingerprint"] = fingerprint.combine(
        [(c["name"], c["fingerprint"]) for c in body["checks"]]
        + [(f"{c['name']} (whole tree)", c["fingerprint"]) for c in whole if not c["passed"]]
    )
    stuck = _cannot_run(body["checks"])
    body.pop("environment", None)
    if stuck:
        body["environment"] = stuck


def room_links(contract: Mapping[str, Any] | None, carry: Sequence[str]) -> list[str]:
    """The carried paths linked into the clean room itself: none when the checks run in
    the sandbox (there they are bound read-only at their place); all of them without one
    (a symlink to the work tree's, as before)."""
    from loopkit.boundary import containment

    return [] if containment.checks_policy(contract)[1] else list(carry)


def _jail(
    root: Path,
    room: cleanroom.Room,
    contract: Mapping[str, Any] | None,
    carry: Sequence[str],
    state: Path | None,
    env: Mapping[str, str] | None,
    reset: Sequence[str],
) -> Any:
    """The sandbox the checks run in (``containment.for_checks``), for the room synced."""
    from loopkit.boundary import containment

    cleanroom.make_reset_dirs(room.path, reset)
    real = Path(os.path.realpath(root))
    dirs = git.git_dirs(root)
    hidden = [
        cleanroom.rooms(),
        containment.provider_homes(),
        dirs.common,
        dirs.own,
    ]
    if state is not None:
        hidden.append(state)
    return containment.for_checks(
        contract,
        root=real,
        room=room.path,
        objects=dirs.common / "objects",
        carried=carry,
        hidden=hidden,
        env=os.environ if env is None else env,
    )


def _run(
    where: git.Located,
    watch: git.TreeWatch,
    criteria: Sequence[Mapping[str, Any]],
    log_dir: Path,
    fail_fast: bool,
    progress: Progress | None,
    env: Mapping[str, str] | None,
    home: Path,
    synced: str | None = None,
    launch: Launch | None = None,
    should_stop: Callable[[], str | None] | None = None,
    between: Callable[[bool], None] | None = None,
) -> Result:
    before = synced or watch.hash()
    folders = None
    if synced is not None and criteria:  # a clean room: its folders, listed meanwhile
        from loopkit.background import Background

        folders = Background(lambda: git.tree_folders(where.root, synced), name="lk-folders")
    roots = sorted(
        {str(p) for p in (where.root, home)} | {os.path.realpath(p) for p in (where.root, home)},
        key=len,
        reverse=True,
    )
    current = before
    moved: dict[str, str] = {}  # path -> status, of what the checks changed in the tree
    checks: list[Check] = []
    base_env = dict(os.environ if env is None else env)
    user_home = os.path.expanduser("~")
    total = len(criteria)
    for i, c in enumerate(criteria):
        name = str(c["name"])
        if progress:
            progress("start", i, total, name, None)
        log = log_dir / f"verify-{i + 1:02d}-{_slug(name)}.log"
        if between is not None and i:
            between(current != before)
            current = before
        run_env = dict(base_env)
        run_env.update({str(k): str(v) for k, v in (c.get("env") or {}).items()})
        started = time.time()
        command, run_env, shell = (
            launch(str(c["run"]), run_env) if launch else (str(c["run"]), run_env, True)
        )
        started_ns = time.time_ns() - specialfiles.CLOCK_MARGIN_NS
        done = proc.run(
            command,
            shell=shell,
            cwd=where.root,
            env=run_env,
            timeout=float(c["timeout"]) if c.get("timeout") else None,
            output=log,
            should_stop=should_stop,
        )
        stopped = done.stopped if done.stopped not in (None, "timeout") else None
        if progress:
            progress("ran", i, total, name, None)
        digest, end = _sha256_file(log)
        if launch is not None and not shell:
            from loopkit.boundary import sandbox

            why = sandbox.failed_to_start(done.exit_code, end)
            if why:
                raise sandbox.SandboxUnavailable(f"the checks' sandbox did not start: {why}")
        entry = _entry(name, str(c["run"]), done, log, (digest, end), roots, user_home, home)
        passed = entry["passed"]
        if not passed:
            _read_tests(entry, c, where.root, log, end, started, path=run_env.get("PATH"))
        if stopped:
            entry["cancelled"] = True
        if folders is not None:  # the clean room: a FIFO a check left would block the hash
            specialfiles.clear_new(where.root, since_ns=started_ns, folders=folders.result())
        after = watch.hash()
        if after != current:
            entry["changed_tree"] = True
            entry["tree_after"] = after
            for path, status in git.changed_paths(where.root, current, after):
                moved.setdefault(path, status)
        current = after
        checks.append(entry)
        if progress:
            progress("end", i, total, name, entry)
        if stopped or (fail_fast and not passed):
            break
    return _section(criteria, checks, before, current, moved)


def _entry(
    name: str,
    command: str,
    done: proc.Finished,
    log: Path,
    output: tuple[str, bytes],
    roots: Sequence[str],
    user_home: str,
    home: Path,
) -> Check:
    """One check's result as its process ended: ``output`` is its output's sha256 and
    last bytes (``_sha256_file``)."""
    digest, end = output
    passed = done.exit_code == 0 and not done.timed_out
    return {
        "name": name,
        "command": command,
        "exit_code": done.exit_code,
        "passed": passed,
        "timed_out": done.timed_out,
        "duration_s": round(done.duration_s, 3),
        "output_tail": text.tail(end, lines=TAIL_LINES, limit=TAIL_BYTES),
        "output_sha256": digest,
        "output_bytes": log.stat().st_size,
        "fingerprint": None
        if passed
        else fingerprint.of_output(
            end,
            exit_code=done.exit_code,
            timed_out=done.timed_out,
            roots=roots,
            home=user_home,
        ),
        "log": artifacts.relative(log, home),
    }


def _section(
    criteria: Sequence[Mapping[str, Any]],
    checks: list[Check],
    before: str,
    current: str,
    moved: Mapping[str, str],
) -> Result:
    """The ``verify`` section of the checks that ran, from tree ``before`` to ``current``."""
    total = len(criteria)
    passed_all = all(c["passed"] for c in checks) and len(checks) == total
    changed = any(c.get("changed_tree") for c in checks)
    body: Verify = {
        "tree": before,
        "tree_after": current,
        "tree_changed": changed,
        "passed": passed_all,
        "fingerprint": fingerprint.combine((c["name"], c["fingerprint"]) for c in checks),
        "checks": checks,
        "skipped": [str(c["name"]) for c in criteria[len(checks) :]],
    }
    stuck = _cannot_run(checks)
    if stuck:
        body["environment"] = stuck
    if changed:
        # What the checks themselves changed: the diff, taken before them, never saw it.
        body["changed_by_checks"] = sorted(moved)
    return Result(body, moved)


def _cannot_run(checks: Sequence[Check]) -> list[CannotRun]:
    """The checks that could not run at all (``environment``)."""
    return [
        {"name": c["name"], "command": c["command"], "why": c["cannot_run"]}
        for c in checks
        if "cannot_run" in c
    ]


def _read_tests(
    entry: Check,
    criterion: Mapping[str, Any],
    cwd: Path,
    log: Path,
    end: bytes,
    started: float,
    *,
    path: str | None = None,
) -> None:
    """A failed check's per-test results (``tests``) and, where the check could not run
    at all, why (``cannot_run``, naming the program on the checks' ``path``). With per-test results the check's fingerprint is the
    set of its failing test ids: the same failure is exactly the same tests failing."""
    from loopkit.evidence import testresults

    why = testresults.cannot_run(entry["command"], entry["exit_code"], end, path=path)
    if why is not None:
        entry["cannot_run"] = why
        return
    output = end
    if entry["output_bytes"] > len(end) and entry["output_bytes"] <= FULL_OUTPUT_BYTES:
        output = log.read_bytes()  # go test -json and TAP list every test from the start
    notes: list[str] = []
    found = testresults.read(criterion, cwd=cwd, output=output, started=started, notes=notes)
    if found is None:
        if notes:
            entry["per_test_unread"] = notes[0]
        return
    entry["tests"] = found.section()
    if found.failed:
        entry["fingerprint"] = fingerprint.of_tests(found.failed)


#: A failed check's whole output is read for its per-test results up to this size.
FULL_OUTPUT_BYTES = 32 << 20


def check_env(
    contract: Mapping[str, Any], doc: Mapping[str, Any] | None, *, root: Path | None = None
) -> dict[str, str]:
    """The checks' environment: the allow-list (loopkit.boundary.secrets) plus the contract's
    ``verify.env_allow``, as in the project's activated environment (``secrets.project_env``:
    its ``.venv`` first, for the repository at ``root``), and LOOPKIT_TASK_ID when a task
    is piped."""
    from loopkit.boundary import secrets

    names = [*secrets.CHECK_ENV, *((contract.get("verify") or {}).get("env_allow") or [])]
    env = secrets.project_env(secrets.allowed_env(os.environ, names), root)
    task = (doc or {}).get("task")
    if isinstance(task, Mapping) and task.get("id"):
        env["LOOPKIT_TASK_ID"] = str(task["id"])
    return env


# --------------------------------------------------------------------------- the ratchet

#: Where the criteria's results on a base tree are kept, in the state folder.
BASELINE_FOLDER = "baseline"


def baseline(
    root: Path,
    state: Path,
    base: str,
    criteria: Sequence[Mapping[str, Any]],
    *,
    log_dir: Path,
    env: Mapping[str, str] | None = None,
    carry: Sequence[str] = (),
    sealed: Mapping[str, str] | None = None,
    same: Mapping[str, Any] | None = None,
    contract: Mapping[str, Any] | None = None,
    reset: Sequence[str] = (),
    kept_in: Path | None = None,
    written: dict[str, str] | None = None,
    should_stop: Callable[[], str | None] | None = None,
) -> Baseline:
    """The contract's criteria run on the untouched tree of commit ``base`` (in the clean
    room), remembered by tree and commands: a task's later attempts, and the next task
    that starts from the same tree, reuse them -- but only a result that was there, with
    the same content, when lk-invoke sealed the state folder (``sealed``: name -> sha256):
    one the worker wrote is never read, it is run again. ``kept_in``: a folder no worker
    can leave a result in (the git folder's cache, for a commit hook), whose results are
    read as they are. ``written`` receives the name and sha256 of a result this call
    wrote (lk-invoke seals it: the base run beside the worker)."""
    plain = basetests.plain(criteria)
    tree = git.resolve(root, f"{base}^{{tree}}") or base
    key = base_key(tree, plain)
    cached = (kept_in / f"base-{key}.json") if kept_in else state / BASELINE_FOLDER / f"{key}.json"
    if same is not None and same.get("tree") == tree:
        # The checks just ran on the base's own tree (a reproduction, no worker): those
        # are its results. Kept for the attempts after it, which the seal then covers.
        kept = [_at_base(c) for c in same.get("checks") or []]
        out: Baseline = {
            "tree": tree,
            "checks": [c for c in kept if not basetests.is_task_check(c["name"])],
        }
        atomic_write(cached, json.dumps(out, allow_nan=False))
        return out
    try:
        raw = cached.read_bytes()
        trusted = (
            kept_in is not None or (sealed or {}).get(cached.name) == digest.sha256(raw).hexdigest()
        )
        found = json_loads(raw) if trusted else None
        if isinstance(found, dict) and isinstance(found.get("checks"), list):
            return cast("Baseline", found)
    except (OSError, ValueError, LoopkitError):
        pass
    with cleanroom.occupied(root):
        room = cleanroom.prepare(root, tree, head=base, carry=room_links(contract, carry))
        jail = _jail(root, room, contract, carry, state, env, reset)
        result = _run_on(
            room,
            room,
            plain,
            tree,
            log_dir / "baseline",
            root=root,
            jail=jail,
            carry=carry,
            env=env,
            reset=reset,
            stop=should_stop,
        )
        cleanroom.settle(room, intact=result.body["tree_after"] == tree)
    out = {"tree": tree, "checks": [_at_base(c) for c in result.body["checks"]]}
    if result.body.get("tree_changed"):
        return out  # the checks (or someone) changed the base's files there: not kept
    if any(c.get("cancelled") for c in result.body["checks"]):
        return out  # a cut-short run is no result
    data = json.dumps(out, allow_nan=False).encode()
    atomic_write(cached, data)
    if written is not None:
        written[cached.name] = digest.sha256(data).hexdigest()
    return out


def base_key(tree: str, plain: Sequence[Mapping[str, Any]]) -> str:
    """What a base result is kept under: the tree and the checks' names and commands."""
    named = [[c["name"], c["run"], c.get("junit")] for c in plain]
    return digest.sha256(json.dumps([tree, named]).encode()).hexdigest()[:32]


def keep_as_base(
    state: Path, body: Mapping[str, Any], criteria: Sequence[Mapping[str, Any]]
) -> bool:
    """lk-verify's results on a tree that lands, kept as that tree's base results: the
    next task starts from exactly that tree (the landing commits the tree the checks ran
    on), so its base run finds them instead of syncing the clean room and running every
    check again. Only a whole run in the clean room whose checks left the tree as it was
    (``tree_after``), none cut short, every check of the contract there; read back only
    as sealed by the next lk-invoke, like every base result."""

    plain = basetests.plain(criteria)
    checks = body.get("checks")
    tree = body.get("tree")
    if not (body.get("clean_room") and body.get("passed") and isinstance(checks, list)):
        return False
    if not isinstance(tree, str) or body.get("tree_after") != tree or body.get("problems"):
        return False
    ran = {c.get("name"): c for c in checks if isinstance(c, Mapping)}
    if any(c["name"] not in ran or ran[c["name"]].get("cancelled") for c in plain):
        return False
    out = {"tree": tree, "checks": [_at_base(ran[c["name"]]) for c in plain]}
    atomic_write(
        state / BASELINE_FOLDER / f"{base_key(tree, plain)}.json", json.dumps(out, allow_nan=False)
    )
    return True


def _at_base(check: Mapping[str, Any]) -> BaseCheck:
    """What the base keeps of one check: its verdict, fingerprint, per-test results and
    whether it could run at all."""
    out: BaseCheck = {
        "name": check["name"],
        "passed": check["passed"],
        "fingerprint": check["fingerprint"],
    }
    if "tests" in check:
        out["tests"] = check["tests"]
    if "cannot_run" in check:
        out["cannot_run"] = check["cannot_run"]
    return out


def ratchet(
    body: Verify,
    base: Baseline,
    *,
    task: Mapping[str, Any] | None = None,
    demand: bool = True,
) -> None:
    """Never worse than the base.

    What must pass is the task's own checks and every criterion that passed on the
    untouched tree. A criterion already failing there is judged per test when both runs
    gave per-test results (``loopkit.evidence.testresults``): no test that passed at the base may
    fail, a new test may not fail, and a test the task names (in its text or its
    ``check:`` lines) must pass; the check blocks only then, and its fingerprint is the
    set of those blocking test ids. Without per-test results a criterion failing at the
    base does not block (``known_failures``, today's per-check rule, said in ``judged``).
    If nothing is required and the task has no checks or named tests of its own, every
    check must pass but a criterion judged per test whose failing tests are the base's,
    left as they were (``demand``: a task is judged by what it changes, and another task's
    red test parked at the base blocks no one) -- only for a task that says where it works
    (its own ``scope:``) whose base failures all lie outside it, each a test whose id names
    its file (``tests/test_calc.py::test_add``), and that does not say it fixes something.
    A task with no scope of its own, or whose scope holds a failing test's file, is there
    for that failure: it must leave every check green. Judged as a whole, a failure
    cannot be told to be the one the base had, and still blocks. A commit hook, which has
    no task, asks only "not worse". The section's fingerprint follows the blocking
    failures only, so a failure the task did not cause is not taken for no progress.

    A check that cannot run (``cannot_run``) and could not at the base either is the
    environment's failure, not the task's: it is listed in ``environment``, and the
    verification does not pass (a check that cannot run guards nothing).
    """
    from loopkit.evidence import testresults

    at_base = {str(c["name"]): c for c in base.get("checks") or []}
    names = [str(c["name"]) for c in body["checks"]] + list(body.get("skipped") or [])
    text = _task_words(task)
    required: list[str] = []
    blocking: dict[str, str | None] = {}  # name -> the fingerprint it blocks with
    known: list[KnownFailure] = []
    named_any = any(basetests.is_task_check(n) for n in names)
    environment: list[CannotRun] = []
    for c in body["checks"]:
        name = str(c["name"])
        b: BaseCheck = at_base.get(name) or {}
        now_ids = testresults.failed_ids(c.get("tests"))
        base_ids = testresults.failed_ids(b.get("tests"))
        same_source = _source(c) == _source(b)
        named = _named(text, now_ids or (), base_ids or ())
        named_any = named_any or bool(named)
        if c.get("cannot_run") and (not b or b.get("cannot_run")):
            environment.append({"name": name, "command": c["command"], "why": c["cannot_run"]})
        if basetests.is_task_check(name) or b.get("passed", True):
            c["judged"] = "per_test" if now_ids is not None else "per_check"
            required.append(name)
            if not c["passed"]:
                blocking[name] = c["fingerprint"]
            continue
        if c["passed"]:
            c["judged"] = "per_check"
            continue
        if base_ids is not None and now_ids is not None and same_source:
            c["judged"] = "per_test"
            worse = sorted((now_ids - base_ids) | (named & now_ids))
            c["regressions"] = sorted(now_ids - base_ids)[: testresults.MAX_IDS]
            if worse:
                required.append(name)
                c["blocking_tests"] = worse[: testresults.MAX_IDS]
                blocking[name] = fingerprint.of_tests(worse)
            else:
                known.append(
                    {"name": name, "fingerprint": c["fingerprint"], "tests": sorted(now_ids)[:50]}
                )
            continue
        if base_ids is not None and now_ids is None and not c.get("cannot_run"):
            # The base told test by test; this run gives nothing to compare: what it
            # broke cannot be told apart from what it did not.
            c["judged"] = "per_test"
            c["regressions"] = []
            required.append(name)
            blocking[name] = c["fingerprint"]
            continue
        c["judged"] = "per_check"
        known.append({"name": name, "fingerprint": c["fingerprint"]})
    for n in body.get("skipped") or []:
        if basetests.is_task_check(n) or (at_base.get(n) or {}).get("passed", True):
            required.append(n)
    blocking.update(_whole_tree_blocking(body, text))
    if demand and not required and not named_any:
        # Every check, but the base's failing tests, left as they were, are still the base's.
        required = names
        blocking, known = _but_the_bases(body, known, task)
    _record(body, base, required=required, known=known, environment=environment, blocking=blocking)


def _but_the_bases(
    body: Verify, known: list[KnownFailure], task: Mapping[str, Any] | None
) -> tuple[dict[str, str | None], list[KnownFailure]]:
    """With every check required (``ratchet``'s ``demand``): what blocks -- each failing
    check but one whose failing tests are the base's, left as they were and outside the
    task's scope (``_elsewhere``) -- and the known failures that stay known."""
    same = {
        str(k["name"])
        for k in known
        if "tests" in k and not basetests.says_fix(task) and _elsewhere(k["tests"], task)
    }
    blocking = {
        str(c["name"]): c["fingerprint"]
        for c in body["checks"]
        if not c["passed"] and c["name"] not in same
    }
    return blocking, [k for k in known if k["name"] in same]


def _record(
    body: Verify,
    base: Baseline,
    *,
    required: list[str],
    known: list[KnownFailure],
    environment: list[CannotRun],
    blocking: Mapping[str, str | None],
) -> None:
    """The ratchet's verdict written into the section: what was required, known to fail,
    the environment's failures; passed, and the fingerprint of what blocks."""
    body["baseline"] = base.copy()
    body["required"] = required
    body["known_failures"] = known
    body.pop("environment", None)
    if environment:
        body["environment"] = environment
    ran_all = not set(required) & set(body.get("skipped") or [])
    body["passed"] = bool(ran_all and not blocking and not environment and not body.get("problems"))
    body["fingerprint"] = fingerprint.combine(blocking.items())


def _source(check: Check | BaseCheck) -> str | None:
    """Where a check's per-test results were read from (None: it has none)."""
    return check["tests"]["source"] if "tests" in check else None


def _whole_tree_blocking(body: Verify, text: str) -> dict[str, str | None]:
    """The whole tree's run (``whole_tree``: the worker's new tests beside the base's),
    judged against the base's tests' run of the same criterion: a test failing there that
    did not fail in the base's tests' run blocks (a new test, or one the worker's added
    files broke), and so does a test the task names; without per-test results, a failure
    blocks when the base's tests' run of it passed."""
    from loopkit.evidence import testresults

    first: dict[str, Mapping[str, Any]] = {str(c["name"]): c for c in body["checks"]}
    out: dict[str, str | None] = {}
    for c in body["whole_tree"]["checks"] if "whole_tree" in body else []:
        if c["passed"]:
            continue
        name = str(c["name"])
        b = first.get(name) or {}
        now_ids = testresults.failed_ids(c.get("tests"))
        then_ids = testresults.failed_ids(b.get("tests"))
        key = f"{name} (whole tree)"
        if now_ids is not None and (then_ids is not None or b.get("passed")):
            worse = sorted((now_ids - (then_ids or frozenset())) | _named(text, now_ids))
            if worse:
                c["blocking_tests"] = worse[: testresults.MAX_IDS]
                out[key] = fingerprint.of_tests(worse)
        elif b.get("passed", True):
            out[key] = c["fingerprint"]
    return out


def _elsewhere(tests: Sequence[str], task: Mapping[str, Any] | None) -> bool:
    """Whether every failing test in ``tests`` lies outside the task's own scope, each
    told by the file its id names (``path::name``). A task with no scope of its own, or an
    id that names no file, tells nothing: the failure may be the task's to fix."""
    scope = [str(g) for g in (task or {}).get("scope") or []]
    if not scope or not tests or len(tests) >= 50:  # 50: the known list is cut there
        return False
    if any("::" not in t or t.startswith("::") for t in tests):
        return False
    return not any(globs.matches(t.split("::", 1)[0], scope) for t in tests)


def _task_words(task: Mapping[str, Any] | None) -> str:
    """The text a task names its tests in: its text and its own checks' commands."""
    if not task:
        return ""
    parts = [str(task.get("text") or "")]
    parts += [str(c) for c in task.get("checks") or []]
    return "\n".join(parts)


def _named(text: str, *groups: Any) -> frozenset[str]:
    """The test ids among ``groups`` the task's text names: the whole id, or its last
    part (``test_parse_blank`` of ``tests/test_h.py::test_parse_blank[1]``) as a word of
    at least four characters."""
    if not text:
        return frozenset()
    out = set()
    for tid in {t for g in groups for t in g}:
        if tid in text:
            out.add(tid)
            continue
        last = re.split(r"::|[./#\\ ]", tid.split("[", 1)[0].rstrip("/"))[-1]
        if len(last) >= 4 and re.search(r"(?<![\w-])" + re.escape(last) + r"(?![\w-])", text):
            out.add(tid)
    return frozenset(out)
