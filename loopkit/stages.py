"""What each stage command does once its options are parsed -- without click.

``lk-decide``, ``lk-invoke``, ``lk-diff``, ``lk-verify`` and ``lk-judge`` parse their
options with click (loopkit.cli.<name>: options, help, exit-code table) and call the
function of the same name here with them; so does ``lk attempt``, which runs the stages
one after another in one process (loopkit.attempt). The console script answers a plain
``lk attempt`` through loopkit.cli.door, so an attempt never loads click (click and what
it loads were a tenth of an attempt's instructions).

Each function reads its document on stdin and prints its document on stdout -- or, within
one ``lk attempt`` (loopkit.attempt), takes it from the ``Attempt`` and leaves its own
there as a value -- writes its lines on stderr (``say``), and returns the exit code;
errors are raised (loopkit.errors) for the one handler (loopkit.handling) to report.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from loopkit import document, git, proc
from loopkit.evidence import basetests, cleanroom, statcache
from loopkit.evidence import verify as checks
from loopkit.files import atomic_write
from loopkit.handling import say
from loopkit.state import artifacts, cancel
from loopkit.text import clean
from loopkit.workspace import Workspace, _cache_folder

TYPE_CHECKING = False  # typing stays unloaded at run time (start-up is a feature)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from loopkit.sections import Attempt as Document  # the document; Attempt here: the run
    from loopkit.sections import Contract, Verify


class Attempt:
    """What one ``lk attempt`` carries from a stage to the next beside the document: work a
    later stage needs, begun early by the one before it. Handed to each stage explicitly
    (``within=``); a stage command run on its own gets none and begins nothing early.
    The document travels in it too: each stage takes ``doc`` (the one before it left) and
    leaves its own in ``out``, as a value -- nothing is printed or read back between them."""

    def __init__(self) -> None:
        #: The document the stage running now works on.
        self.doc: Document | None = None
        #: The document it left (``document.handed``); None until it is done.
        self.out: Document | None = None
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


def _taken(within: Attempt | None) -> Document | None:
    """The stage's document: the one the attempt hands it, else the piped one (read and
    validated)."""
    return within.doc if within is not None else document.read_attempt()


def _leave(within: Attempt | None, doc: Mapping[str, Any]) -> None:
    """The stage's document: left for the attempt's next stage, else printed."""
    if within is not None:
        within.out = document.vouched(document.handed(doc))
    else:
        document.emit(doc)


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
        document.emit(result.document, schema_name="replay")
        say("lk-decide", result.summary)
        return result.code
    if interrupted:
        record = controller.interrupted(interrupted, reason=reason or "", ledger_path=ledger_path)
        document.emit(record, schema_name="ledger-record")
        say("lk-decide", f"{interrupted}: attempt {record['attempt']} recorded as interrupted")
        return 0
    doc = _taken(within)
    if admit:
        step = controller.admit
    else:
        early = within.take_tree() if within is not None else None
        step = functools.partial(controller.decide, early=early)
    result = step(doc, contract_path=contract_path, ledger_path=ledger_path, trigger=trigger)
    for line in result.warnings:
        say("lk-decide", f"warning: {line}")
    for line in result.notes:
        say("lk-decide", line)
    _leave(within, result.document)
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
    within: Attempt | None = None,
) -> int:
    """lk-invoke: one bounded worker attempt, its run record added to the document."""
    from loopkit.worker import invoke as core

    if transcript:
        record = core.normalize_transcript(transcript, provider=provider)
        document.emit(document.attach(None, "run", record))
        return 0 if record["stop_reason"] == "completed" else 1
    doc = _taken(within)
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

    proc.guard()  # SIGTERM ends the worker's processes on the way out (exit 130)
    out = core.attempt(req)
    if doc is None:
        _leave(within, document.attach(None, "run", out))
        run = out
    else:
        _leave(within, out)
        run = out["run"]
    return 0 if run["stop_reason"] == "completed" else 1


# --------------------------------------------------------------------------- lk-diff

#: Violations named on stderr (all of them are in the JSON document).
MAX_SHOWN = 20


def diff(
    *, contract_path: str | None = None, base: str | None = None, within: Attempt | None = None
) -> int:
    """lk-diff: the change against its base, the tree's hash, the scope policy."""
    from loopkit.evidence import diff as changes  # lk-diff's own core: not for the others

    doc = _taken(within)
    seen: Mapping[str, Any] = doc or {}
    recorded = seen.get("diff") or {}
    started = (seen.get("run") or {}).get("base")  # HEAD before the worker ran
    asked = recorded.get("base") or base or started or "HEAD"
    ws = Workspace.open(contract_path=contract_path, document=doc)
    where = git.Located(root=ws.root, index=ws.index, base=None)
    terms = ws.contract
    started = (seen.get("run") or {}).get("git_control")  # .git before the worker
    seed = statcache.seed(ws.state, (seen.get("run") or {}).get("state_seal"))
    result = changes.assess(
        changes.gather_at(
            where,
            asked,
            git_control=started,
            seed=seed,
            ignored_at_start=(seen.get("run") or {}).get("ignored_at_start"),
            on_tree=_early_work(within, ws, doc, terms, seed)
            if within is not None and within.early
            else None,
        ),
        contract=terms,
        control=ws.control_files() if doc is not None else (),
        drift=ws.contract_drift,
        git_control=started,
        special_files=(seen.get("run") or {}).get("special_files") or (),
    )
    if terms is None:
        say("lk-diff", "no contract: the scope policy was not checked")
    violations = result.body["violations"]
    for v in violations[:MAX_SHOWN]:  # paths are the worker's choice: say() cleans them
        say("lk-diff", f"{v['rule']}: {v['path']} ({v.get('detail', '')})")
    if len(violations) > MAX_SHOWN:
        say("lk-diff", f"... and {len(violations) - MAX_SHOWN} more violations")
    _leave(within, document.attach(doc, "diff", result.body))
    return 0 if result.within_policy else 1


# --------------------------------------------------------------------------- lk-judge


def judge(
    *,
    contract_path: str | None = None,
    goal: str | None = None,
    provider: str | None = None,
    model: str | None = None,
    transcript: str | None = None,
    within: Attempt | None = None,
) -> int:
    """lk-judge: a read-only model's grounded verdict on the goal, added to the document."""
    from loopkit.judge.ruling import passed
    from loopkit.judge.running import evaluate

    doc = _taken(within)
    body = evaluate(
        doc,
        contract_path=contract_path,
        goal=goal,
        provider=provider,
        model=model,
        transcript=transcript,
    )
    _leave(within, document.attach(doc, "judge", body))
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
    attest: bool = False,
    within: Attempt | None = None,
) -> int:
    """lk-verify: the acceptance checks, in a clean room for a piped attempt (else in
    place), their evidence bound to the tree. ``ratchet`` (a commit hook, alone): never
    worse than HEAD -- what failed there does not block, per test where results exist.
    ``attest``: HEAD's signed statement must hold first (loopkit.attest.check.require)."""
    if attest:
        from loopkit.attest import check  # the signing code: for --attest alone

        check.require(Path.cwd(), "HEAD")
    doc = _taken(within)
    ws = Workspace.open(contract_path=contract_path, document=doc, require_contract=True)
    terms = ws.terms
    if within is not None:
        judge = terms.get("judge")
        within.review = bool(judge and judge.get("review"))
    chosen = checks.select(terms["criteria"], only)
    attempt = artifacts.assign_attempt_id(doc if doc is not None else {})
    run = _Checks(ws, terms, chosen, only=only, fail_fast=fail_fast, doc=doc, attempt=attempt)
    proc.guard()  # nothing a check starts outlives it, nor this command
    ticker = _Ticker() if _stderr_is_terminal() else None
    shown = ticker.update if ticker else None if summary else _lines
    try:
        if clean_room if clean_room is not None else doc is not None:
            result = run.in_clean_room(doc, shown, within)
        else:
            result = run.in_place(shown, ratchet=ratchet)
    finally:
        if ticker:
            ticker.close()
    _say_results(result.body)
    # The evidence as recorded: lk-decide refuses a verify section that differs from it.
    atomic_write(run.log_dir / checks.RECORD_NAME, document.dumps(result.body))
    out = document.attach(doc, "verify", result.body, attempt_id=attempt)
    if summary:
        atomic_write(ws.state / "verify-last.json", document.dumps(out) + "\n")
        sys.stdout.write(_summary(result.body, ws.state / "verify-last.json", ws.root))
        sys.stdout.flush()
    else:
        _leave(within, out)
    return 0 if result.passed else 1


def verify_tree(root: Path, tree: str, contract_path: str) -> dict[str, Any]:
    """The merge queue's verification of ``tree`` (``loopkit.ratchet.queue``, in the
    lander's own process): lk-verify's clean room of the worktree at ``root`` synced to
    ``tree`` from the object store, every criterion run there once in the checks' sandbox,
    as for a piped attempt -- but with no base to be judged against and no proof asked
    (the question is only whether ``tree`` is green). The section is kept beside its logs
    (``verify.json``), as lk-verify keeps it; nothing is printed."""
    env = {k: v for k, v in os.environ.items() if k != "LOOPKIT_STATE_DIR"}
    ws = Workspace.open(contract_path=contract_path, cwd=root, environ=env, require_contract=True)
    terms = ws.terms
    chosen = checks.select(terms["criteria"], ())
    attempt = artifacts.assign_attempt_id({})
    run = _Checks(ws, terms, chosen, only=(), fail_fast=False, doc=None, attempt=attempt)
    proc.guard()  # nothing a check starts outlives it, nor this command
    carried = cleanroom.carried(ws.root, terms)
    result = checks.in_clean_room(
        ws.root,
        chosen,
        index=ws.index,
        head=None,
        carry=[c.name for c in carried],
        contract=terms,
        state=ws.state,
        reset=cleanroom.reset_dirs(ws.root),
        log_dir=run.log_dir,
        env=run.env,
        tree=tree,
        should_stop=run.cancelled,
    )
    result.body["carried"] = [{"path": c.name, "why": c.why} for c in carried]
    atomic_write(run.log_dir / checks.RECORD_NAME, document.dumps(result.body))
    # As lk-verify prints it with nothing piped: the section alone, with its attempt id.
    return dict(document.attach(None, "verify", result.body, attempt_id=attempt))


class _Checks:
    """One lk-verify's chosen checks and what every way of running them shares: the
    workspace, the contract, the log folder, the checks' environment."""

    def __init__(
        self,
        ws: Workspace,
        terms: Contract,
        chosen: Any,
        *,
        only: Sequence[str],
        fail_fast: bool,
        doc: Document | None,
        attempt: Any,
    ) -> None:
        self.ws, self.terms, self.chosen = ws, terms, chosen
        self.only, self.fail_fast = only, fail_fast
        self.log_dir = artifacts.attempt_dir(ws.state, attempt)
        self.env = checks.check_env(terms, doc, root=ws.root)

    def cancelled(self) -> str | None:
        """`lk cancel` ends a running check at once, not after it (loopkit.state.cancel)."""
        return "cancelled" if cancel.requested(self.ws.state) else None

    def in_place(self, shown: Any, *, ratchet: bool) -> Any:
        """The checks in the working tree itself (alone: a commit hook); ``ratchet``: a
        failure is judged against HEAD's results."""
        result = checks.run_checks(
            self.ws.root,
            self.chosen,
            index=self.ws.index,
            log_dir=self.log_dir,
            fail_fast=self.fail_fast,
            progress=shown,
            env=self.env,
            should_stop=self.cancelled,
        )
        if ratchet and not self.only and not result.passed:
            self.against_head(result.body)
        return result

    def in_clean_room(self, doc: Document | None, shown: Any, within: Attempt | None) -> Any:
        """The checks in the clean room on the attempt's tree, then (a check failed) the
        same checks on the base's tree: never worse than the base."""
        ws, terms = self.ws, self.terms
        seen: Mapping[str, Any] = doc or {}
        run: Mapping[str, Any] = seen.get("run") or {}
        carried = cleanroom.carried(ws.root, terms)
        carry = [c.name for c in carried]
        reset = cleanroom.reset_dirs(ws.root)
        result = checks.in_clean_room(
            ws.root,
            self.chosen,
            index=ws.index,
            head=run.get("base"),
            carry=carry,
            carry_before=run.get("carry"),
            contract=terms,
            state=ws.state,
            reset=reset,
            log_dir=self.log_dir,
            fail_fast=self.fail_fast,
            progress=_early_tree_after(within, shown, ws.root, ws.state, run)
            if within is not None and within.early
            else shown,
            env=self.env,
            tree=_checked_tree(doc),
            early=within.take_room() if within is not None else None,
            should_stop=self.cancelled,
            prove=basetests.proving(terms, seen.get("task")),
        )
        if within is not None and within.tree is not None:
            within.tree.wait()  # it ran beside the clean room's hash; done first
        # The base: the commit the worker started from; with no worker (a
        # reproduction on the untouched tree), the one lk-diff measured from.
        base = run.get("base") or (None if run else (seen.get("diff") or {}).get("base"))
        stopped = any(c.get("cancelled") for c in result.body["checks"])
        if base and not self.only and not result.passed and not stopped:
            if within is not None:
                within.drop_tree()  # the base's checks run next: hashed after them
            self.against_base(result, str(base), doc, carry=carry, reset=reset)
        result.body["carried"] = [{"path": c.name, "why": c.why} for c in carried]
        if not all(c["passed"] for c in result.body["checks"]):
            _explain_unseen(result.body, run, carry, reset, ws)
        return result

    def against_base(
        self, result: Any, base: str, doc: Document | None, *, carry: Any, reset: Any
    ) -> None:
        """Never worse than the base: the criteria's results on the untouched tree. Asked
        only when a check failed: when every check passes, nothing can be worse than the
        base, and the tree is not checked out and run twice."""
        seen: Mapping[str, Any] = doc or {}
        run: Mapping[str, Any] = seen.get("run") or {}
        at_base = checks.baseline(
            self.ws.root,
            self.ws.state,
            base,
            self.chosen,
            log_dir=self.log_dir,
            env=self.env,
            carry=carry,
            sealed=(run.get("state_seal") or {}).get("baseline"),
            contract=self.terms,
            reset=reset,
            same=None if run else result.body,
            should_stop=self.cancelled,
        )
        checks.ratchet(result.body, at_base, task=seen.get("task"))

    def against_head(self, body: Verify) -> None:
        """The ratchet for a commit hook: HEAD's results (run once per tree in the clean
        room, kept in the git folder's cache, out of a worker's reach) are the base."""
        ws = self.ws
        head = git.resolve(ws.root, "HEAD")
        if not head:
            return  # no commit yet: nothing to be worse than
        say(
            "lk-verify",
            "a check failed: running the checks on HEAD to see what this change made worse",
        )
        at_head = checks.baseline(
            ws.root,
            ws.state,
            head,
            self.chosen,
            log_dir=self.log_dir,
            env=self.env,
            carry=[c.name for c in cleanroom.carried(ws.root, self.terms)],
            contract=self.terms,
            reset=cleanroom.reset_dirs(ws.root),
            kept_in=_cache_folder(ws.root),
        )
        checks.ratchet(body, at_head, demand=False)


def _say_results(body: Mapping[str, Any]) -> None:
    """A line on stderr for each check that failed (and why), changed the tree, or was
    judged against the base; each check that cannot run; each problem of the evidence."""
    known = {k.get("name") for k in body.get("known_failures") or []}
    for c in body["checks"]:
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
        _say_judged(c, body)
    for e in body.get("environment") or []:
        say("lk-verify", f"{e['name']} cannot run: `{e['command']}`: {e['why']}")
    for problem in body.get("problems") or []:
        say("lk-verify", f"not verified: {problem}")


def _say_judged(check: Mapping[str, Any], body: Mapping[str, Any]) -> None:
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


def _explain_unseen(body: Verify, run: Any, carry: Any, reset: Any, ws: Any) -> None:
    """A failing check in the clean room, and ignored paths of the work tree it did not
    see: one line naming them and the key that shows them (``verify.carry``), so neither
    a person nor the agent chases a failure that is the set-up's."""
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


def _summary(body: Mapping[str, Any], saved: Any, root: Any) -> str:
    """The checks for a person: one line each, the tail of a failing one under it."""
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


def _lines(event: str, index: int, total: int, name: str, check: Any) -> None:
    """Progress off a terminal (a log, a recipe): one line as each check starts and ends."""
    if event == "start":
        say("lk-verify", f"[{index + 1}/{total}] {name} ...")
    elif event == "end":
        mark = "ok" if check and check.get("passed") else "FAILED"
        secs = check.get("duration_s", 0.0) if check else 0.0
        say("lk-verify", f"[{index + 1}/{total}] {name}: {mark} ({secs:.1f}s)")


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


class _Ticker:
    """One status line on a terminal's stderr: which check runs and for how long."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._line: tuple[int, int, str, float] | None = None
        self._thread = threading.Thread(target=self._run, name="lk-verify-progress", daemon=True)
        self._thread.start()

    def update(self, event: str, index: int, total: int, name: str, check: Any) -> None:
        with self._lock:
            if event == "start":
                self._line = (index, total, name, time.monotonic())
                self._draw()
            elif event == "end":
                self._line = None
                mark = "ok" if check and check.get("passed") else "FAILED"
                secs = check.get("duration_s", 0.0) if check else 0.0
                shown = clean(name)  # the line's own control codes only
                _stderr(f"\r\x1b[K[{index + 1}/{total}] {shown}: {mark} ({secs:.1f}s)\n")

    def _draw(self) -> None:
        if self._line is None:
            return
        index, total, name, started = self._line
        elapsed = time.monotonic() - started
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
    attempt: Attempt, ws: Any, doc: Document | None, terms: Any, seed: Path | None
) -> Any:
    """Within ``lk attempt``, as lk-diff begins: what lk-diff hands the tree it writes
    (and the index holding it) to, for the stages after it --

    - the clean room's sync for lk-verify's checks (cleanroom.EarlyRoom), cleared now;
      taken only when lk-verify asks for that same tree, head and carried paths;
    - a copy of the index, for lk-decide's hash of the tree on disk (statcache.Handoff),
      when the hash started from the stat cache (loopkit's own stat data: ``seed``).
    """
    room = None
    if doc is not None and isinstance(terms, dict):
        carry = [c.name for c in cleanroom.carried(ws.root, terms)]
        run: Mapping[str, Any] = doc.get("run") or {}
        room = cleanroom.EarlyRoom(
            ws.root, head=run.get("base"), carry=checks.room_links(terms, carry)
        )
        attempt.room = room
    handed = statcache.beside(ws.state, "diff")

    def begin(tree: str, index: Path) -> None:
        if room is not None:
            room.sync(tree)
        if seed is not None:
            attempt.handed = statcache.Handoff.leave(index, handed, tree)

    return begin


def _checked_tree(doc: Document | None) -> str | None:
    """The tree lk-diff checked (diff.tree): the one to verify, so the scope policy and the
    checks judge the same tree. None without one: the working tree is hashed instead."""
    seen: Mapping[str, Any] = doc or {}
    tree = (seen.get("diff") or {}).get("tree")
    return tree if isinstance(tree, str) and tree else None


def _stderr(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()
