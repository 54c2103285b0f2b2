"""What each stage command does once its options are parsed -- without click.

``lk-decide``, ``lk-invoke``, ``lk-diff``, ``lk-verify`` and ``lk-judge`` parse their
options with click (loopkit.cli.<name>: options, help, exit-code table) and call the
function of the same name here with them; so does ``lk attempt``, which runs the stages
one after another in one process (``attempt``, below). The console script answers a plain
``lk attempt`` through loopkit.cli.door, so an attempt never loads click (click and what
it loads were a tenth of an attempt's instructions).

Each function reads its document on stdin, prints its document on stdout, its lines on
stderr (``say``), and returns the exit code; errors are raised (loopkit.errors) for the
one handler (loopkit.cli._handle) to report.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from loopkit.cli._handle import handle, say
from loopkit.errors import UsageProblem
from loopkit.exitcodes import ExitCode

TYPE_CHECKING = False  # typing stays unloaded at run time (start-up is a feature)
if TYPE_CHECKING:
    from typing import IO, Any


class Attempt:
    """What one ``lk attempt`` carries from a stage to the next beside the document: work a
    later stage needs, begun early by the one before it. Handed to each stage explicitly
    (``within=``); a stage command run on its own gets none and begins nothing early."""

    def __init__(self) -> None:
        #: Whether the stage running now may begin later stages' work (set around lk-diff
        #: and lk-verify).
        self.early = False
        #: The clean room's sync to the tree lk-diff wrote, begun while lk-diff goes on,
        #: for the lk-verify after it (cleanroom.EarlyRoom).
        self.room: Any = None
        #: The tree on disk, hashed from the moment lk-verify's last check ended, for the
        #: lk-decide after it (controller.EarlyTree).
        self.tree: Any = None
        #: The index lk-diff's hash was taken with, for lk-decide's (statcache.Handoff).
        self.handed: Any = None
        #: The contract's review gate (``judge.review``), as lk-verify read it: every
        #: task whose checks passed goes to the judge, not only a GOAL.
        self.review = False

    def take_room(self) -> Any:
        room, self.room = self.room, None
        return room

    def take_tree(self) -> Any:
        tree, self.tree = self.tree, None
        return tree

    def drop_room(self) -> None:
        """Let go of a clean room synced early that lk-verify did not take."""
        room = self.take_room()
        if room is not None:
            room.release()

    def drop_tree(self) -> None:
        """Forget an early hash of the tree on disk: lk-decide hashes the tree itself."""
        tree = self.take_tree()
        if tree is not None:
            tree.drop()

    def drop_handed(self) -> None:
        """Remove the index lk-diff left for lk-decide (taken or not)."""
        handed, self.handed = self.handed, None
        if handed is not None:
            handed.drop()

    def close(self) -> None:
        """Nothing left running, held or handed on to a later call."""
        self.drop_room()
        self.drop_tree()
        self.drop_handed()


# --------------------------------------------------------------------------- lk-decide


def decide(
    *,
    contract_path: str | None = None,
    ledger_path: str | None = None,
    trigger: str | None = None,
    admit: bool = False,
    replay_path: str | None = None,
    interrupted: str | None = None,
    reason: str | None = None,
    within: Attempt | None = None,
) -> int:
    """lk-decide: the decision (``admit``: the admission) for the piped attempt."""
    from loopkit.decision import controller
    from loopkit.document import emit, read_attempt

    if replay_path:
        result = controller.replay_ledger(replay_path)
        for problem in result.warnings:
            say("lk-decide", f"warning: {problem}")
        for d in result.document["disagreements"]:
            say(
                "lk-decide",
                f"line {d['line']} (task {d['task_id']}, attempt {d['attempt']}): "
                f"recorded {d['field']} disagrees with the re-derived one",
            )
        emit(result.document, schema_name="replay")
        say("lk-decide", result.summary)
        return result.code
    if interrupted:
        record = controller.interrupted(interrupted, reason=reason or "", ledger_path=ledger_path)
        emit(record, schema_name="ledger-record")
        say("lk-decide", f"{interrupted}: attempt {record['attempt']} recorded as interrupted")
        return 0
    document = read_attempt(sys.stdin)
    if admit:
        result = controller.admit(
            document, contract_path=contract_path, ledger_path=ledger_path, trigger=trigger
        )
    else:
        early = within.take_tree() if within is not None else None
        result = controller.decide(
            document,
            contract_path=contract_path,
            ledger_path=ledger_path,
            trigger=trigger,
            early=early,
        )
    for line in result.warnings:
        say("lk-decide", f"warning: {line}")
    for line in result.notes:
        say("lk-decide", line)
    emit(result.document)
    say("lk-decide", result.summary)
    return result.code


# --------------------------------------------------------------------------- lk-invoke


def invoke(
    *,
    contract_path: str | None = None,
    provider: str | None = None,
    command: str | None = None,
    model: str | None = None,
    resume: str | None = None,
    timeout: float | None = None,
    dry_run: bool = False,
    transcript: str | None = None,
    quiet: bool = False,
    started_mark: str | None = None,
) -> int:
    """lk-invoke: one bounded worker attempt, its run record added to the document."""
    import json

    from loopkit import document
    from loopkit.worker import invoke as core

    if transcript:
        record = core.normalize_transcript(transcript, provider=provider)
        document.emit(document.attach(None, "run", record))
        return 0 if record["stop_reason"] == "completed" else 1
    doc = document.read_attempt()
    req = core.Request(
        document=doc,
        contract_path=contract_path,
        provider=provider,
        command=command,
        model=model,
        resume=resume,
        timeout=timeout,
        cwd=Path.cwd(),
        started_mark=Path(started_mark) if started_mark else None,
    )
    if not quiet:
        from loopkit.worker.progress import Progress

        req.progress = Progress("lk-invoke")
    if dry_run:
        sys.stdout.write(json.dumps(core.dry_run(req), ensure_ascii=False) + "\n")
        sys.stdout.flush()
        return 0
    from loopkit import proc

    proc.guard()  # SIGTERM ends the worker's processes on the way out (exit 130)
    out = core.attempt(req)
    if doc is None:
        document.emit(document.attach(None, "run", out))
        run = out
    else:
        document.emit(out)
        run = out["run"]
    return 0 if run["stop_reason"] == "completed" else 1


# --------------------------------------------------------------------------- lk-diff

#: Violations named on stderr (all of them are in the JSON document).
MAX_SHOWN = 20


def diff(
    *, contract_path: str | None = None, base: str | None = None, within: Attempt | None = None
) -> int:
    """lk-diff: the change against its base, the tree's hash, the scope policy."""
    from loopkit import document, git
    from loopkit.evidence import diff as core
    from loopkit.evidence import statcache
    from loopkit.workspace import Workspace

    doc = document.read_attempt()
    recorded = (doc or {}).get("diff") or {}
    started = ((doc or {}).get("run") or {}).get("base")  # HEAD before the worker ran
    asked = recorded.get("base") or base or started or "HEAD"
    ws = Workspace.open(contract_path=contract_path, document=doc)
    where = git.Located(root=ws.root, index=ws.index, base=None)
    terms = ws.contract
    started = ((doc or {}).get("run") or {}).get("git_control")  # .git before the worker
    seed = statcache.seed(ws.state, ((doc or {}).get("run") or {}).get("state_seal"))
    result = core.assess(
        core.gather_at(
            where,
            asked,
            git_control=started,
            seed=seed,
            ignored_at_start=((doc or {}).get("run") or {}).get("ignored_at_start"),
            on_tree=_early_work(within, ws, doc, terms, seed)
            if within is not None and within.early
            else None,
        ),
        contract=terms,
        control=ws.control_files() if doc is not None else (),
        drift=ws.contract_drift,
        git_control=started,
        special_files=((doc or {}).get("run") or {}).get("special_files") or (),
    )
    if terms is None:
        say("lk-diff", "no contract: the scope policy was not checked")
    violations = result.body["violations"]
    for v in violations[:MAX_SHOWN]:  # paths are the worker's choice: say() cleans them
        say("lk-diff", f"{v['rule']}: {v['path']} ({v.get('detail', '')})")
    if len(violations) > MAX_SHOWN:
        say("lk-diff", f"... and {len(violations) - MAX_SHOWN} more violations")
    document.emit(document.attach(doc, "diff", result.body))
    return 0 if result.within_policy else 1


# --------------------------------------------------------------------------- lk-judge


def judge(
    *,
    contract_path: str | None = None,
    goal: str | None = None,
    provider: str | None = None,
    model: str | None = None,
    transcript: str | None = None,
) -> int:
    """lk-judge: a read-only model's grounded verdict on the goal, added to the document."""
    from loopkit import document
    from loopkit.judge.ruling import passed
    from loopkit.judge.running import evaluate

    doc = document.read_attempt()
    body = evaluate(
        doc,
        contract_path=contract_path,
        goal=goal,
        provider=provider,
        model=model,
        transcript=transcript,
    )
    document.emit(document.attach(doc, "judge", body))
    return 0 if passed(body) else 1


# --------------------------------------------------------------------------- lk-verify


def verify(
    *,
    contract_path: str | None = None,
    only: Sequence[str] = (),
    fail_fast: bool = False,
    clean_room: bool | None = None,
    summary: bool = False,
    ratchet: bool = False,
    within: Attempt | None = None,
) -> int:
    """lk-verify: the acceptance checks, in a clean room for a piped attempt (else in
    place), their evidence bound to the tree. ``ratchet`` (a commit hook, alone): never
    worse than HEAD -- what failed there does not block, per test where results exist."""
    from loopkit import document, proc
    from loopkit.evidence import verify as core
    from loopkit.state import artifacts
    from loopkit.workspace import Workspace

    doc = document.read_attempt()
    ws = Workspace.open(contract_path=contract_path, document=doc, require_contract=True)
    terms = ws.contract or {}
    if within is not None:
        within.review = bool((terms.get("judge") or {}).get("review"))
    chosen = core.select(terms["criteria"], only)
    attempt = artifacts.assign_attempt_id(doc if doc is not None else {})
    log_dir = artifacts.attempt_dir(ws.state, attempt)
    proc.guard()  # nothing a check starts outlives it, nor this command
    env = _check_env(terms, doc)
    ticker = _Ticker() if _stderr_is_terminal() else None
    lines = None if ticker or summary else _lines
    state = ws.state

    def cancelled() -> str | None:
        # `lk cancel` ends a running check at once, not after it (loopkit.state.cancel).
        from loopkit.state import cancel

        return "cancelled" if cancel.requested(state) else None

    try:
        if clean_room if clean_room is not None else doc is not None:
            from loopkit.evidence import basetests, cleanroom

            run = (doc or {}).get("run") or {}
            carried = cleanroom.carried(ws.root, terms)
            carry = [c.name for c in carried]
            reset = cleanroom.reset_dirs(ws.root)
            shown = ticker.update if ticker else lines
            result = core.in_clean_room(
                ws.root,
                chosen,
                index=ws.index,
                head=run.get("base"),
                carry=carry,
                carry_before=run.get("carry"),
                contract=terms,
                state=ws.state,
                reset=reset,
                log_dir=log_dir,
                fail_fast=fail_fast,
                progress=_early_tree_after(within, shown, ws.root, ws.state, run)
                if within is not None and within.early
                else shown,
                env=env,
                tree=_checked_tree(doc),
                early=within.take_room() if within is not None else None,
                should_stop=cancelled,
                prove=basetests.proving(terms, (doc or {}).get("task")),
            )
            if within is not None and within.tree is not None:
                within.tree.wait()  # it ran beside the clean room's hash; done first
            # The base: the commit the worker started from; with no worker (a
            # reproduction on the untouched tree), the one lk-diff measured from.
            base_commit = run.get("base") or (
                None if run else ((doc or {}).get("diff") or {}).get("base")
            )
            stopped = any(c.get("cancelled") for c in result.body["checks"])
            if base_commit and not only and not result.passed and not stopped:
                if within is not None:
                    within.drop_tree()  # the base's checks run next: hashed after them
                # Never worse than the base: the criteria's results on the untouched tree.
                # Asked only when a check failed: when every check passes, nothing can be
                # worse than the base, and the tree is not checked out and run twice.
                base = core.baseline(
                    ws.root,
                    ws.state,
                    str(base_commit),
                    chosen,
                    log_dir=log_dir,
                    env=env,
                    carry=carry,
                    sealed=(run.get("state_seal") or {}).get("baseline"),
                    contract=terms,
                    reset=reset,
                    same=None if run else result.body,
                    should_stop=cancelled,
                )
                core.ratchet(result.body, base, task=(doc or {}).get("task"))
            result.body["carried"] = [{"path": c.name, "why": c.why} for c in carried]
            if not all(c["passed"] for c in result.body["checks"]):
                _explain_unseen(result.body, run, carry, reset, ws)
        else:
            result = core.run_checks(
                ws.root,
                chosen,
                index=ws.index,
                log_dir=log_dir,
                fail_fast=fail_fast,
                progress=ticker.update if ticker else lines,
                env=env,
                should_stop=cancelled,
            )
            if ratchet and not only and not result.passed:
                _against_head(result.body, ws, terms, chosen, log_dir, env)
    finally:
        if ticker:
            ticker.close()
    known = {k.get("name") for k in result.body.get("known_failures") or []}
    for c in result.body["checks"]:
        if not c["passed"] and c["name"] in known:
            say(
                "lk-verify",
                f"{c['name']} failed at the base too, before this attempt (fingerprint "
                f"{c['fingerprint']}): a known failure, not required; log: {c['log']}",
            )
        elif not c["passed"]:
            why = (
                "ended by lk cancel"
                if c.get("cancelled")
                else "timed out"
                if c.get("timed_out")
                else f"exit {c['exit_code']}"
            )
            say(
                "lk-verify",
                f"{c['name']} failed ({why}); fingerprint {c['fingerprint']}; log: {c['log']}",
            )
        if c.get("changed_tree"):
            say("lk-verify", f"{c['name']} changed the working tree")
        _say_judged(c, result.body)
    for e in result.body.get("environment") or []:
        say("lk-verify", f"{e['name']} cannot run: `{e['command']}`: {e['why']}")
    # The evidence as recorded: lk-decide refuses a verify section that differs from it.
    from loopkit.files import atomic_write

    atomic_write(log_dir / core.RECORD_NAME, document.dumps(result.body))
    for problem in result.body.get("problems") or []:
        say("lk-verify", f"not verified: {problem}")
    out = document.attach(doc, "verify", result.body, attempt_id=attempt)
    if summary:
        atomic_write(ws.state / "verify-last.json", document.dumps(out) + "\n")
        sys.stdout.write(_summary(result.body, ws.state / "verify-last.json", ws.root))
        sys.stdout.flush()
    else:
        document.emit(out)
    return 0 if result.passed else 1


def _against_head(
    body: dict[str, Any], ws: Any, terms: Any, chosen: Any, log_dir: Any, env: Any
) -> None:
    """The ratchet for a commit hook: HEAD's results (run once per tree in the clean room,
    kept in the git folder's cache, out of a worker's reach) are the base."""
    from loopkit import git
    from loopkit.evidence import cleanroom
    from loopkit.evidence import verify as core
    from loopkit.workspace import _cache_folder

    head = git.resolve(ws.root, "HEAD")
    if not head:
        return  # no commit yet: nothing to be worse than
    say(
        "lk-verify", "a check failed: running the checks on HEAD to see what this change made worse"
    )
    base = core.baseline(
        ws.root,
        ws.state,
        head,
        chosen,
        log_dir=log_dir,
        env=env,
        carry=[c.name for c in cleanroom.carried(ws.root, terms)],
        contract=terms,
        reset=cleanroom.reset_dirs(ws.root),
        kept_in=_cache_folder(ws.root),
    )
    core.ratchet(body, base, demand=False)


def _say_judged(check: dict[str, Any], body: dict[str, Any]) -> None:
    """How a check red at the base was judged: per test, or as a whole (and why)."""
    if check["passed"] or "required" not in body:
        return
    name = check["name"]
    if check.get("judged") == "per_test":
        worse = check.get("blocking_tests") or []
        if worse:
            shown = ", ".join(worse[:5]) + (f" and {len(worse) - 5} more" if len(worse) > 5 else "")
            say("lk-verify", f"{name}: judged per test; blocking: {shown}")
        elif name not in body["required"]:
            say("lk-verify", f"{name}: judged per test; no test that passed at the base fails")
    elif name not in body["required"]:
        why = check.get("per_test_unread") or "name a JUnit report in the criterion's `junit`"
        say(
            "lk-verify",
            f"{name}: no per-test results ({why}): "
            "judged as a whole; it failed at the base too, so it does not block",
        )


def _explain_unseen(body: dict[str, Any], run: Any, carry: Any, reset: Any, ws: Any) -> None:
    """A failing check in the clean room, and ignored paths of the work tree it did not
    see: one line naming them and the key that shows them (``verify.carry``), so neither
    a person nor the agent chases a failure that is the set-up's."""
    import os

    from loopkit.evidence import cleanroom

    ignored = run.get("ignored_at_start") or []
    state = os.path.relpath(ws.state, ws.root).replace(os.sep, "/")
    unseen = cleanroom.not_shown(ignored, carry, reset, state)
    if unseen:
        names = ", ".join(unseen[:5]) + (f" and {len(unseen) - 5} more" if len(unseen) > 5 else "")
        body["not_shown"] = unseen[:50]
        body["hint"] = (
            f"the checks ran on the verified tree alone; ignored paths of the work tree they "
            f"did not see: {names} -- if a check needs them, name them in verify.carry"
        )
        say("lk-verify", body["hint"])


def _summary(body: dict[str, Any], saved: Any, root: Any) -> str:
    """The checks for a person: one line each, the tail of a failing one under it."""
    import os

    from loopkit.text import clean

    lines = []
    for c in body["checks"]:
        mark = "ok" if c["passed"] else ("TIMED OUT" if c.get("timed_out") else "FAILED")
        known = not c["passed"] and c["name"] not in body.get("required", [c["name"]])
        if known:
            mark = "AS BEFORE"  # failed at the base too, and nothing in it got worse
        lines.append(f"{mark:>9}  {c['name']}  ({c['duration_s']:.1f}s)  {c['command']}")
        if c.get("blocking_tests"):
            lines.append("           | worse than before: " + ", ".join(c["blocking_tests"][:10]))
        if not c["passed"] and not known:
            tail = clean(c.get("output_tail") or "").splitlines()[-15:]
            lines.extend("           | " + t for t in tail)
    verdict = (
        "a check failed: the commit is blocked"
        if not body["passed"]
        else "nothing is worse than at HEAD"
        if "required" in body
        else "all checks passed"
    )
    lines.append(f"lk-verify: {verdict} (the evidence: {os.path.relpath(saved, root)})")
    return "\n".join(lines) + "\n"


def _check_env(terms: dict[str, Any], doc: dict[str, Any] | None) -> dict[str, str]:
    from loopkit.evidence.verify import check_env

    return check_env(terms, doc)


def _lines(event: str, index: int, total: int, name: str, check: Any) -> None:
    """Progress off a terminal (a log, a recipe): one line as each check starts and ends."""
    if event == "start":
        say("lk-verify", f"[{index + 1}/{total}] {name} ...")
    elif event == "end":
        mark = "ok" if check and check.get("passed") else "FAILED"
        secs = check.get("duration_s", 0.0) if check else 0.0
        say("lk-verify", f"[{index + 1}/{total}] {name}: {mark} ({secs:.1f}s)")


def _stderr_is_terminal() -> bool:
    import sys

    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


class _Ticker:
    """One status line on a terminal's stderr: which check runs and for how long."""

    def __init__(self) -> None:
        import threading

        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._line: tuple[int, int, str, float] | None = None
        self._thread = threading.Thread(target=self._run, name="lk-verify-progress", daemon=True)
        self._thread.start()

    def update(self, event: str, index: int, total: int, name: str, check: Any) -> None:
        import time

        with self._lock:
            if event == "start":
                self._line = (index, total, name, time.monotonic())
                self._draw()
            elif event == "end":
                self._line = None
                mark = "ok" if check and check.get("passed") else "FAILED"
                secs = check.get("duration_s", 0.0) if check else 0.0
                from loopkit.text import clean

                shown = clean(name)  # the line's own control codes only
                _stderr(f"\r\x1b[K[{index + 1}/{total}] {shown}: {mark} ({secs:.1f}s)\n")

    def _draw(self) -> None:
        import time

        if self._line is None:
            return
        index, total, name, started = self._line
        elapsed = time.monotonic() - started
        from loopkit.text import clean

        shown = clean(name)
        _stderr(f"\r\x1b[K[{index + 1}/{total}] {shown} ... {elapsed:.0f}s")

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            with self._lock:
                self._draw()

    def close(self) -> None:
        self._stop.set()


def _early_tree_after(attempt: Attempt, shown: Any, root: Path, state: Path, run: Any) -> Any:
    """``shown`` (lk-verify's progress lines), which also begins the hash of the tree on
    disk for lk-decide once the last check's process has ended, before the clean room is
    hashed after it (controller.EarlyTree)."""

    def progress(event: str, index: int, total: int, name: str, entry: Any) -> None:
        if shown is not None:
            shown(event, index, total, name, entry)
        if event == "ran" and index == total - 1 and attempt.tree is None:
            from loopkit.decision.controller import EarlyTree

            attempt.tree = EarlyTree(root, state, run, handed=attempt.handed)

    return progress


def _early_work(
    attempt: Attempt, ws: Any, doc: dict[str, Any] | None, terms: Any, seed: Path | None
) -> Any:
    """Within ``lk attempt``, as lk-diff begins: what lk-diff hands the tree it writes
    (and the index holding it) to, for the stages after it --

    - the clean room's sync for lk-verify's checks (cleanroom.EarlyRoom), cleared now;
      taken only when lk-verify asks for that same tree, head and carried paths;
    - a copy of the index, for lk-decide's hash of the tree on disk (statcache.Handoff),
      when the hash started from the stat cache (loopkit's own stat data: ``seed``).
    """
    from loopkit.evidence import cleanroom, statcache

    room = None
    if doc is not None and isinstance(terms, dict):
        from loopkit.evidence.verify import room_links

        carry = [c.name for c in cleanroom.carried(ws.root, terms)]
        room = cleanroom.EarlyRoom(
            ws.root, head=(doc.get("run") or {}).get("base"), carry=room_links(terms, carry)
        )
        attempt.room = room
    handed = statcache.beside(ws.state, "diff")

    def begin(tree: str, index: Path) -> None:
        if room is not None:
            room.sync(tree)
        if seed is not None:
            attempt.handed = statcache.Handoff.leave(index, handed, tree)

    return begin


def _checked_tree(doc: dict[str, Any] | None) -> str | None:
    """The tree lk-diff checked (diff.tree): the one to verify, so the scope policy and the
    checks judge the same tree. None without one: the working tree is hashed instead."""
    tree = ((doc or {}).get("diff") or {}).get("tree")
    return tree if isinstance(tree, str) and tree else None


def _stderr(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()


# --------------------------------------------------------------------------- lk attempt


def attempt(
    *,
    contract_path: str | None = None,
    base: str | None = None,
    resume: str | None = None,
    keep: str | None = None,
    as_shell: bool = False,
    early: bool = False,
    settle: bool = False,
    owner: int | None = None,
) -> int:
    """lk attempt: admission to decision, each stage the function above on the document
    the stage before it printed; the decision's exit code. ``early``: loaded first, the
    call read from stdin afterwards (``_early``). ``settle``: then the ratchet's step for
    that decision (``transactions.settle``), the lock's ``owner`` released by a last one."""
    from loopkit import document

    if early:
        if contract_path or base or resume or keep or as_shell or settle or owner:
            raise UsageProblem("lk attempt --early takes the rest of its call on stdin, not here")
        return _early()
    if owner and not settle:
        raise UsageProblem("lk attempt --owner names the lock --settle releases: add --settle")
    raw = sys.stdin.read() if document.stdin_has_data() else ""
    if document.parse_attempt(raw) is None:  # nothing piped: a usage error, nothing run
        raise UsageProblem("lk attempt reads an attempt document on stdin (lk-plan next)")
    return _attempt(raw, contract_path, base, resume, keep, as_shell, settle, owner)


def run_attempt(
    raw: str,
    *,
    contract_path: str | None = None,
    base: str | None = None,
    resume: str | None = None,
    keep: str | None = None,
    as_shell: bool = False,
    settle: bool = False,
    owner: int | None = None,
) -> int:
    """One attempt on the document ``raw`` (lk attempt's options as keywords), its
    documents printed; the decision's exit code (``lk task begin --attempt``'s round 1)."""
    return _attempt(raw, contract_path, base, resume, keep, as_shell, settle, owner)


def run_reproduce(raw: str, *, contract_path: str | None, base: str, keep: str) -> tuple[int, str]:
    """Round 0 (``lk task begin --reproduce``): lk-diff and lk-verify on the untouched
    tree, no worker, then lk-decide when the checks fail -- the ledger holds the failure,
    so a first fix that fails the same way replans. ``(0, "")`` when the checks pass;
    a failing stage's own code and ``""``; else the decision's code and document."""
    runner = _Runner(Path(keep))
    carry = Attempt()
    here = {"contract_path": contract_path, "within": carry}
    try:
        rc, text = runner.stage("diff", {**here, "base": base}, raw, ok=(0, 1))
        if runner.going:
            rc, text = runner.stage("verify", here, text, ok=(0, 1))
            carry.drop_room()
        if not runner.going or rc == 0:
            return rc, ""
        return runner.stage("decide", here, text, ok=(0, 10, 11, 20, 21, 22, 30))
    finally:
        carry.close()


def _attempt(
    raw: str,
    contract_path: str | None,
    base: str | None,
    resume: str | None,
    keep: str | None,
    as_shell: bool,
    settle: bool = False,
    owner: int | None = None,
) -> int:
    # Threads here mostly start a git process and wait for it: one that has work to hand
    # git should not wait the interpreter's default 5 ms for its turn.
    sys.setswitchinterval(0.0005)
    cargs: dict[str, Any] = {"contract_path": contract_path}
    runner = _Runner(Path(keep) if keep else None)
    carry = Attempt()
    here = {**cargs, "within": carry}
    rc, text = runner.stage("admit", {**cargs, "admit": True}, raw, ok=(0, 20, 22, 30))
    if rc == 0:
        # The mark a recovery reads: this round's worker was about to start (its attempt
        # is charged); without it, a loop stopped before the worker is not.
        mark = runner.keep.with_name(f"{runner.keep.name}-worker") if runner.keep else None
        options = {**cargs, "resume": resume, "started_mark": str(mark) if mark else None}
        rc, text = runner.stage("invoke", options, text, ok=(0, 1))
    try:
        if rc in (0, 1) and runner.going:
            carry.early = True  # lk-diff begins later stages' work (_early_work)
            try:
                rc, text = runner.stage("diff", {**here, "base": base}, text, ok=(0, 1))
            finally:
                carry.early = False
        if rc in (0, 1) and runner.going:
            carry.early = True
            try:
                rc, text = runner.stage("verify", here, text, ok=(0, 1))
            finally:
                carry.early = False
                carry.drop_room()  # never left holding the clean room
            if rc == 0 and runner.going and (carry.review or _kind(text) == "goal"):
                carry.drop_tree()  # the judge comes between: the tree is hashed after it
                rc, text = runner.stage("judge", cargs, text, ok=(0, 1))
        if rc in (0, 1) and runner.going:
            rc, text = runner.stage("decide", here, text, ok=(0, 10, 11, 20, 21, 22, 30))
    finally:
        carry.close()  # never left running, nor handed to a later call
    sys.stdout.write(_shell(text) if as_shell else text)
    sys.stdout.flush()
    if settle and rc in (0, 10, 11, 20, 21, 22, 30):
        import json

        from loopkit.cli import transactions

        return transactions.settle(rc, json.loads(text), owner=owner, as_shell=as_shell)
    return rc


#: What every attempt imports, loaded by ``lk attempt --early`` before its call arrives.
EARLY_MODULES = (
    "json",
    "shlex",
    "hashlib",
    "tempfile",
    "_ctypes",  # prctl (loopkit.proc)
    "loopkit.background",
    "loopkit.boundary.containment",
    "loopkit.decision.controller",
    "loopkit.document",
    "loopkit.worker.invoke",
    "loopkit.evidence.diff",
    "loopkit.evidence.verify",
    "loopkit.evidence.cleanroom",
    "loopkit.boundary.sandbox",
    "loopkit.handoff",
    "loopkit.worker.progress",
    "loopkit.evidence.statcache",
    "loopkit.worker.providers.command",
)


def _early() -> int:
    """``lk attempt --early``: load what an attempt needs, then read the call from stdin
    and run it -- so a recipe can start the process while it does its own work, and hand
    it the call when the round begins.

    A call is NUL-terminated fields: their number, then the working directory, a
    document's path, the number of arguments, the arguments, and the environment as
    NAME=value. The attempt's call (the arguments of a plain ``lk attempt``) replaces the
    environment the process started with by its own (but for the shell's exported
    functions, which it cannot list). Before it, one workspace call may come (arguments
    ``workspace [--contract FILE]``, no environment: it is answered in the one the process
    started with): what ``lk workspace`` would print for that document, then a NUL, its
    exit code and a NUL on stdout -- so the recipe's first question costs no Python
    start of its own. Nothing on stdin at all (the recipe ended first): nothing runs,
    exit 0.
    """
    import importlib

    from loopkit.cli.door import plain_args

    call = _read_call(0)
    if call is not None and call[2][:1] == ["workspace"]:
        rc = _early_workspace(call)
        if rc != 0:
            return rc
        call = None
    for name in EARLY_MODULES:
        importlib.import_module(name)
    if call is None:
        # While the call is awaited: whether a sandbox can start here (kept for the
        # binaries the environment names: an attempt whose own names others probes again).
        from loopkit.background import Background
        from loopkit.boundary import sandbox

        prober = Background(sandbox.probe, name="lk-early-probe")
        call = _read_call(0)
        prober.wait()
        if call is None:
            return 0
    cwd, doc_path, args, env = call
    found = plain_args(["attempt", *args])
    if found is None or found[1].get("early"):
        raise UsageProblem(
            f"lk attempt --early: the call on stdin is not a plain lk attempt: {' '.join(args)}"
        )
    _early_move(cwd)
    # The shell lists its exported variables, not its exported functions: those (bash's
    # BASH_FUNC_name%%) stay as the process started with them.
    kept = {k: v for k, v in os.environ.items() if k.startswith("BASH_FUNC_") and k not in env}
    os.environ.clear()
    os.environ.update({**env, **kept})
    raw = _early_document(doc_path)
    from loopkit import document

    if document.parse_attempt(raw) is None:
        raise UsageProblem(f"lk attempt --early: {doc_path} holds no attempt document")
    kw = found[1]
    return _attempt(
        raw,
        kw.get("contract_path"),
        kw.get("base"),
        kw.get("resume"),
        kw.get("keep"),
        bool(kw.get("as_shell")),
        bool(kw.get("settle")),
        kw.get("owner"),
    )


def _early_workspace(call: tuple[str, str, list[str], dict[str, str]]) -> int:
    """The workspace call of ``lk attempt --early``: ``lk workspace``'s answer for it on
    stdout, then a NUL, its exit code and a NUL; that exit code."""
    from loopkit.cli.door import plain_args
    from loopkit.workspace import report

    cwd, doc_path, args, env = call
    found = plain_args(args)
    if found is None or found[0] != "workspace" or found[1].get("as_json") or env:
        raise UsageProblem(
            f"lk attempt --early: the call on stdin is not a plain lk workspace: {' '.join(args)}"
        )
    _early_move(cwd)
    raw = _early_document(doc_path)
    out = io.StringIO()
    saved = sys.stdin, sys.stdout
    sys.stdin, sys.stdout = _Input(raw), out
    try:
        rc = handle(lambda: report(found[1].get("contract"), as_json=False), "lk")
    finally:
        sys.stdin, sys.stdout = saved
    sys.stdout.write(f"{out.getvalue()}\0{rc}\0")
    sys.stdout.flush()
    return rc


def _early_move(cwd: str) -> None:
    try:
        os.chdir(cwd)
    except OSError as e:
        raise UsageProblem(f"lk attempt --early: {cwd}: cannot work there ({e.strerror})") from e


def _early_document(path: str) -> str:
    """The text of the document a call names."""
    from loopkit.errors import BadInput

    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        why = e.strerror if isinstance(e, OSError) else "not UTF-8"
        raise BadInput(path, f"cannot read the attempt document ({why})") from e


def _read_call(fd: int) -> tuple[str, str, list[str], dict[str, str]] | None:
    """The call ``_early`` reads from ``fd``: read as it comes (never waiting for an end
    of file the recipe does not send), None when the input ends before any of it."""
    data = b""
    while True:
        count = data.count(b"\0")
        if count:
            head = data[: data.index(b"\0")]
            if not head.isdigit():
                raise UsageProblem(
                    "lk attempt --early: the call on stdin does not start with its length"
                )
            if count > int(head):
                break
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            if not data:
                return None
            raise UsageProblem("lk attempt --early: stdin ended in the middle of the call")
        data += chunk
    parts = data.split(b"\0")
    if parts[int(head) + 1 :] != [b""]:
        # Nothing is sent after a call before its answer: more is not the recipe's.
        raise UsageProblem("lk attempt --early: more on stdin than one call")
    fields = [os.fsdecode(f) for f in parts[1 : int(head) + 1]]
    if len(fields) < 3 or not fields[2].isdigit() or 3 + int(fields[2]) > len(fields):
        raise UsageProblem("lk attempt --early: the call on stdin is malformed")
    cwd, doc_path, nargs = fields[0], fields[1], int(fields[2])
    args = fields[3 : 3 + nargs]
    env: dict[str, str] = {}
    for entry in fields[3 + nargs :]:
        name, eq, value = entry.partition("=")
        if not eq or not name:
            raise UsageProblem(f"lk attempt --early: not an environment entry: {entry!r}")
        env[name] = value
    return cwd, doc_path, args, env


#: The fields the recipes act on: LK_DOC_<name> -> where in the document. `lk task save
#: --doc FILE --shell` prints the same for a file (loop.mk); a test holds the two together.
SHELL_FIELDS = {
    "TASK_ID": "task.id",
    "TASK_TEXT": "task.text",
    "TASK_KIND": "task.kind",
    "ATTEMPT_ID": "attempt_id",
    "TREE": "verify.tree",
    "SESSION": "run.session_id",
    "MEMORY": "contract.memory",
    "OUTCOME": "decision.outcome",
    "ATTEMPT": "decision.attempt",
    "REASON": "decision.reason",
    "BACKOFF": "decision.backoff_s",
    "CLASS": "decision.failure_class",
    "FEEDBACK": "decision.feedback",
    "JUDGE": "judge.feedback",
}


def _shell(text: str) -> str:
    """``text`` (a document, or nothing) as LK_DOC_* assignments: empty for null, false or
    missing, true as ``true``, objects and lists as JSON; LK_DOC_FAILING names the
    failing checks. Nothing for no document."""
    import json
    import shlex

    if not text.strip():
        return ""
    doc = json.loads(text)

    def get(path: str) -> str:
        value: Any = doc
        for key in path.split("."):
            value = value.get(key) if isinstance(value, dict) else None
        if value is None or value is False:
            return ""
        if value is True:
            return "true"
        if isinstance(value, (dict, list)):
            return json.dumps(value, separators=(",", ":"))
        return str(value)

    fields = {name: get(path) for name, path in SHELL_FIELDS.items()}
    checks = (doc.get("verify") or {}).get("checks") or []
    fields["FAILING"] = ", ".join(
        str(c.get("name")) for c in checks if isinstance(c, dict) and c.get("passed") is False
    )
    return "".join(f"LK_DOC_{name}={shlex.quote(value)}\n" for name, value in fields.items())


def _kind(text: str) -> str | None:
    import json

    try:
        task = json.loads(text).get("task") or {}
    except (ValueError, AttributeError):
        return None
    return task.get("kind") if isinstance(task, dict) else None


class _Runner:
    """Runs the stages one after another in this process, each with its own stdin, stdout
    and stderr, as the shell would give them. What a stage reads is the attempt's own
    document (the caller validated the first; each later one is what a stage printed),
    parsed without validating it again."""

    def __init__(self, keep: Path | None) -> None:
        self.keep = keep
        #: False once a stage failed in a way that stops the attempt.
        self.going = True

    def stage(
        self, name: str, options: dict[str, Any], text: str, *, ok: tuple[int, ...]
    ) -> tuple[int, str]:
        run = STAGES[name]
        prog = "lk-decide" if name == "admit" else f"lk-{name}"
        err = self.keep.with_name(f"{self.keep.name}-{name}.err") if self.keep else None
        kept = self.keep.with_name(f"{self.keep.name}-{name}.json") if self.keep else None
        if kept is not None:
            # Opened as the stage starts, empty until it printed (as a shell redirect
            # would): `lk status` reads the newest empty one as the stage in progress.
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_bytes(b"")
        out = io.StringIO()
        saved = sys.stdin, sys.stdout
        sys.stdin, sys.stdout = _Input(text, checked=True), out
        try:
            with _tee_stderr(err):
                rc = handle(lambda: run(**options), prog)
        finally:
            sys.stdin, sys.stdout = saved
        printed = out.getvalue()
        if kept is not None:
            from loopkit.files import atomic_write

            atomic_write(kept, printed)
        if rc not in ok:
            self.going = False
            say("lk attempt", f"{prog} failed with exit {rc}; the attempt stops there")
        elif not printed.strip():
            # A verdict or a decision without its document is a bug, never a result.
            self.going = False
            say("lk attempt", f"{prog} exited {rc} but printed no document")
            rc = ExitCode.INTERNAL
        return rc, printed


class _Input(io.StringIO):
    """A stage's stdin: the document before it, read like a pipe (never a terminal).
    ``checked``: the attempt's own document as a stage printed it, from the one the attempt
    validated when it began -- read by the next stage without validating it again."""

    def __init__(self, text: str, *, checked: bool = False) -> None:
        super().__init__(text)
        self.checked = checked

    def isatty(self) -> bool:
        return False


class _tee_stderr:
    """While a stage runs, what reaches this process's stderr (its own lines and those of
    the programs it starts) is shown as it comes and kept in ``path``, like the shell's
    ``2> >(tee path >&2)``."""

    def __init__(self, path: Path | None) -> None:
        self.path = path

    def __enter__(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.file: IO[bytes] = open(self.path, "wb")
        sys.stderr.flush()
        self.saved = os.dup(2)
        read, write = os.pipe()
        os.dup2(write, 2)
        os.close(write)
        import threading

        self.pump = threading.Thread(target=self._copy, args=(read,), daemon=True)
        self.pump.start()

    def _copy(self, read: int) -> None:
        # Drained to the end whatever fails on the way: a stage must never block on its
        # stderr because the terminal went away (`| head`) or the disk filled up.
        keep = show = True
        try:
            while block := os.read(read, 65536):
                if keep:
                    try:
                        self.file.write(block)
                    except (OSError, ValueError):
                        keep = False
                view = memoryview(block)
                while show and view:
                    try:
                        view = view[os.write(self.saved, view) :]
                    except OSError:
                        show = False
        except OSError:
            pass  # the stage is over and its stderr closed: what is left is not waited on
        finally:
            os.close(read)

    def __exit__(self, *_: Any) -> None:
        if self.path is None:
            return
        sys.stderr.flush()
        os.dup2(self.saved, 2)  # the pipe's last writer here is gone: the pump sees the end
        # A program the stage started and left holding the pipe is the stage's to end; the
        # attempt does not wait on it past a moment.
        self.pump.join(timeout=2.0)
        if self.pump.is_alive():
            return  # still copying: its descriptor and file stay open, never reused under it
        os.close(self.saved)
        self.file.close()


#: stage -> the function that is that command (a test plays a stage with a stand-in here)
STAGES: dict[str, Callable[..., int]] = {
    "admit": decide,
    "invoke": invoke,
    "diff": diff,
    "verify": verify,
    "judge": judge,
    "decide": decide,
}
