"""What each ``lk task`` step and ``lk attempt`` do once their arguments are parsed,
without click: the console script's door (loopkit.cli.door) calls these for a plain call,
the click commands (loopkit.cli.task, loopkit.cli.attempt) for the rest. The steps
themselves are loopkit.ratchet.steps; the attempt is loopkit.attempt, imported only where
an attempt runs (or its fields are printed): a plain ``lk task`` step loads no stage."""

from __future__ import annotations

import os
import shlex
import signal
import sys
from collections.abc import Callable

from loopkit import git
from loopkit.background import Background
from loopkit.document import emit, parse_attempt, read_attempt, stdin_has_data, vouched
from loopkit.errors import BadInput, UsageProblem
from loopkit.handling import say
from loopkit.ratchet import lock, steps
from loopkit.ratchet.steps import Context, Refused

TYPE_CHECKING = False  # typing stays unloaded at run time (start-up is a feature)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from loopkit.sections import Attempt


#: --shell: the result's fields a loop reads, by their variable's name.
_SHELL = {
    "LK_TASK_ID": "task",
    "LK_BASE": "base",
    "LK_DIFF_BASE": "diff_base",
    "LK_RUN_DIR": "run_dir",
    "LK_START": "start",
    "LK_STATE": "state",
    "LK_REF": "ref",
    "LK_COMMIT": "commit",
    "LK_TASK_KIND": "task_kind",
    "LK_FINISHED": "finished",
}


def _say(line: str) -> None:
    say("lk task", line)


def _run(
    step: Callable[[], dict[str, Any]],
    as_shell: bool = False,
    *,
    end: int | None = None,
    kept: dict[str, Any] | None = None,
) -> int:
    """Run one step with SIGINT, SIGTERM and SIGHUP held until it is done (a stop in the
    middle is what the journal is for, but there is no need to cause one), then print its
    result."""

    # Ignored, not handled: an ignored signal stays ignored in the git processes the step
    # starts, which share the loop's process group -- a Ctrl-C must not kill one of them
    # halfway either. The loop itself gets the signal and stops once the step is done.
    signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    old = {s: signal.signal(s, signal.SIG_IGN) for s in signals}
    try:
        try:
            result, code = step(), 0
        except Refused as e:
            _say(f"error: {e.message}")
            result, code = e.result, int(e.code)
        if end is not None:  # the loop's last step: its lock goes with it (no `end` to run)
            folder = git.git_dirs(git.locate().root).own / "loopkit"
            with lock.guard(folder):
                result["released"] = lock.release(folder, end)
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
    _print(result, as_shell)
    if kept is not None:
        kept.update(result)
    return code


def _print(result: Mapping[str, Any], as_shell: bool) -> None:
    if as_shell:
        for name, key in _SHELL.items():  # only what this step answers: nothing else is reset
            if key in result:
                value = result[key]
                sys.stdout.write(f"{name}={shlex.quote('' if value is None else str(value))}\n")
        sys.stdout.flush()
        return

    emit(result, schema_name="task-step")


def _doc(path: str | None, *, checked: bool = False) -> dict[str, Any] | None:
    """The document in ``path`` (its last line), or the piped one. ``checked``: only its
    kind is held to the schema here -- the step checks each field it acts on itself, so a
    decided document naming no tree is refused as such (40), not as bad input."""

    source = path if path and path != "-" else "<stdin>"
    try:
        if source != "<stdin>":
            with open(source, "rb") as f:
                raw = f.read()
        else:
            raw = sys.stdin.buffer.read() if stdin_has_data() else b""
    except OSError as e:
        raise BadInput(source, f"cannot read: {e.strerror}") from None
    lines = raw.strip().splitlines()
    return parse_attempt(lines[-1] if lines else b"", source=source, checked=checked)


def _decided(path: str | None) -> Attempt:
    doc = _doc(path, checked=True)
    if doc is None:
        raise BadInput(path or "<stdin>", "no document: expected the decided attempt document")
    decided: Attempt = vouched(doc)
    return decided


def _ctx(attempt_in: str | None = None) -> Any:
    return Context(say=_say, attempt_in=attempt_in)


def _releasing(end: bool, owner: int | None) -> int | None:
    """The lock's owner a loop's last step releases (``--end``): ``--owner``, else the
    loop that started this step; None when the step keeps the lock."""
    return (owner or os.getppid()) if end else None


def _label_of(doc: Mapping[str, Any], label: str) -> str:
    attempt = (doc.get("decision") or {}).get("attempt")
    return label or (str(attempt) if attempt else "attempt")


def _outcome_of(doc: Mapping[str, Any] | None, default: str) -> str:
    """The decision's outcome in ``doc`` (``default`` where there is none)."""
    return str(((doc or {}).get("decision") or {}).get("outcome") or default)


def begin(
    *,
    doc: str | None = None,
    task_id: str | None = None,
    task_text: str | None = None,
    goal: bool = False,
    contract_path: str | None = None,
    tasks: str | None = None,
    allow_dirty: bool = False,
    reset_paths: tuple[str, ...] = (),
    memory: str | None = None,
    owner: int | None = None,
    as_shell: bool = False,
    attempt: bool = False,
    reproduce: bool = False,
) -> int:
    if task_id:
        document: dict[str, Any] | None = {
            "kind": "loopkit/attempt",
            "version": 1,
            "task": {
                "id": task_id,
                "text": task_text or task_id,
                "kind": "goal" if goal else "task",
            },
        }
    else:
        document = _doc(doc)
    resets = [*os.environ.get("RESET_PATHS", "").split(), *reset_paths]
    pid = owner or os.getppid()
    ctx = _ctx()

    def step() -> dict[str, Any]:
        return steps.begin(
            ctx,
            owner=pid,
            document=document,
            contract_path=contract_path,
            outer=int(os.environ.get("LK_LOCK_OWNER") or 0) or None,
            allow_dirty=allow_dirty,
            tasks=tasks,
            reset_paths=resets,
            memory_file=memory or os.environ.get("MEMORY_FILE") or None,
        )

    if (attempt or reproduce) and document is None:
        raise UsageProblem("lk task begin --attempt or --reproduce needs the task (DOC, --task-id)")
    if attempt or reproduce:
        Background(_warm_rounds, name="lk-warm-rounds")
    begun: dict[str, Any] = {}
    code = _run(step, as_shell, kept=begun)
    if code or not (attempt or reproduce) or "finished" in begun:
        return code
    return _rounds(begun, pid, contract_path, attempt, reproduce, as_shell)


#: What the rounds run, imported while begin walks the tree.
_ROUND_MODULES = (
    "loopkit.attempt",
    "loopkit.decision.controller",
    "loopkit.worker.invoke",
    "loopkit.evidence.diff",
    "loopkit.evidence.verify",
    "loopkit.evidence.cleanroom",
    "loopkit.boundary.containment",
)


def _warm_rounds() -> None:
    """The rounds' code imported and their sandbox probed, in threads, while begin's own
    thread mostly waits for git's walk of the tree: some 20 ms of a one-round task."""
    from loopkit.boundary import sandbox

    Background(sandbox.probe, name="lk-sandbox-probe")
    for name in _ROUND_MODULES:
        __import__(name)


#: The note round 0 leaves in the start document when the checks already pass.
ALREADY_PASSING = (
    "The acceptance checks already pass on the untouched tree (reproduced before this "
    "attempt, no attempt spent): the change must keep them passing; make sure it is still "
    "needed."
)


def _rounds(
    begun: dict[str, Any],
    owner: int,
    contract_path: str | None,
    attempt: bool,
    reproduce: bool,
    as_shell: bool,
) -> int:
    """``lk task begin --reproduce`` and ``--attempt``: round 0 (the checks on the
    untouched tree, no worker) and round 1 (``lk attempt --settle``) in begin's process,
    each round's documents kept as <run_dir>/<round>-*.json and printed, each decision
    settled; the last round's exit (LK_ROUND names it with --shell)."""
    from loopkit import attempt as attempts  # the stages: not for the ratchet's steps alone

    doc = _start(begun)
    base, folder = str(begun["diff_base"]), str(begun["run_dir"])
    code, last = 0, None
    try:  # LK_ROUND names the round that ran last, even one a failure stopped
        if reproduce:
            last = 0
            code, decided = attempts.run_reproduce(
                doc, contract_path=contract_path, base=base, keep=os.path.join(folder, "0")
            )
            if decided is not None:
                doc = decided
                outcome = doc.get("decision", {}).get("outcome")
                _say(f"round 0: the checks fail on the untouched tree ({outcome}); recorded")
                sys.stdout.write(attempts.shell(doc) if as_shell else attempts.text(doc))
                code = settle_step(code, doc, owner=owner, as_shell=as_shell, label="0")
            elif code == 0:
                last = None  # nothing decided: round 1 begins from the start document
                _say("the checks already pass on the untouched tree: no failure to reproduce")
                steps.note(_ctx(), ALREADY_PASSING)
                doc = _start(begun)  # with the note: round 1's handoff carries it
        if attempt and code in (0, 10, 11):
            last = 1
            code = _round(
                doc,
                contract_path=contract_path,
                base=base,
                keep=os.path.join(folder, "1"),
                as_shell=as_shell,
                settle=True,
                owner=owner,
            )
    finally:
        if as_shell and last is not None:
            sys.stdout.write(f"LK_ROUND={last}\n")
        sys.stdout.flush()
    return code


def attempt(
    *,
    contract_path: str | None = None,
    base: str | None = None,
    resume: str | None = None,
    keep: str | None = None,
    as_shell: bool = False,
    settle: bool = False,
    owner: int | None = None,
) -> int:
    """lk attempt: admission to decision on the piped document (loopkit.attempt), the
    last document printed (``as_shell``: its fields); the decision's exit code.
    ``settle``: then the ratchet's step for that decision (``settle``), the lock's
    ``owner`` released by a last one."""

    if owner and not settle:
        raise UsageProblem("lk attempt --owner names the lock --settle releases: add --settle")
    doc = read_attempt()
    if doc is None:  # nothing piped: a usage error, nothing run
        raise UsageProblem("lk attempt reads an attempt document on stdin (lk-plan next)")
    return _round(
        doc,
        contract_path=contract_path,
        base=base,
        resume=resume,
        keep=keep,
        as_shell=as_shell,
        settle=settle,
        owner=owner,
    )


def _round(
    doc: Attempt,
    *,
    contract_path: str | None,
    base: str | None,
    keep: str | None,
    as_shell: bool,
    settle: bool,
    owner: int | None,
    resume: str | None = None,
) -> int:
    """One attempt on ``doc``, its last document printed, then (``settle``) its step."""
    from loopkit import attempt as attempts  # the stages: not for the ratchet's steps alone

    rc, last = attempts.run(doc, contract_path=contract_path, base=base, resume=resume, keep=keep)
    sys.stdout.write(attempts.shell(last) if as_shell else attempts.text(last))
    sys.stdout.flush()
    if settle and last is not None and rc in (0, 10, 11, 20, 21, 22, 30):
        return settle_step(rc, last, owner=owner, as_shell=as_shell)
    return rc


def _start(begun: dict[str, Any]) -> Attempt:
    """The start document ``lk task begin`` wrote (its own: parsed, not validated again)."""

    with open(begun["start"], encoding="utf-8") as f:
        doc = parse_attempt(f.read(), source=str(begun["start"]), checked=True)
    if doc is None:
        raise BadInput(str(begun["start"]), "no start document")
    start: Attempt = vouched(doc)
    return start


def save(
    *,
    label: str | None = None,
    why: str = "",
    doc: str | None = None,
    attempt_in: str | None = None,
    as_shell: bool = False,
) -> int:
    document = _decided(doc) if doc else None
    if not label and document is None:
        raise UsageProblem("lk task save needs a LABEL (or --doc, whose attempt names it)")
    name = label or _label_of(document or {}, "")
    outcome = why or _outcome_of(document, "saved")
    code = _run(lambda: steps.save(_ctx(attempt_in), label=name, why=outcome), as_shell)
    if as_shell and document is not None:
        from loopkit.attempt import shell  # the stages: not for the ratchet's steps alone

        sys.stdout.write(shell(document))
        sys.stdout.flush()
    return code


def land(
    *,
    doc: str | None = None,
    document: Attempt | None = None,
    label: str = "",
    stat_cache: bool = False,
    attempt_in: str | None = None,
    as_shell: bool = False,
    end: bool = False,
    owner: int | None = None,
) -> int:
    document = document or _decided(doc)
    label = _label_of(document, label)
    return _run(
        lambda: steps.land(_ctx(attempt_in), document, label=label, fresh_stat=stat_cache),
        as_shell,
        end=_releasing(end, owner),
    )


def park(
    *,
    doc: str | None = None,
    document: Attempt | None = None,
    label: str = "",
    outcome: str = "",
    attempt_in: str | None = None,
    as_shell: bool = False,
    end: bool = False,
    owner: int | None = None,
) -> int:
    document = document or _decided(doc)
    label = _label_of(document, label)
    why = outcome or _outcome_of(document, "failed")
    return _run(
        lambda: steps.park(_ctx(attempt_in), document, label=label, outcome=why),
        as_shell,
        end=_releasing(end, owner),
    )


def cancel(
    *,
    doc: str | None = None,
    label: str = "",
    attempt_in: str | None = None,
    as_shell: bool = False,
    end: bool = False,
    owner: int | None = None,
) -> int:
    _doc(doc)  # read (and checked) when given: the decision that cancelled
    return _run(
        lambda: steps.cancel(_ctx(attempt_in), label=label or "cancelled"),
        as_shell,
        end=_releasing(end, owner),
    )


def settle_step(
    code: int, document: Attempt, *, owner: int | None, as_shell: bool, label: str = ""
) -> int:
    """``lk attempt --settle``: the step the decision's exit ``code`` calls for, in the
    attempt's own process -- complete lands (from lk-decide's fresh stat cache), retry and
    replan save, blocked, failed and exhausted park, cancelled cancels; the last three and
    the landing release the loop's lock (``owner``). The decision's code when the step is
    done; the step's own when it is refused (40) or cannot run (3, 4)."""

    label = _label_of(document, label)
    if code == 0:
        step = land(document=document, stat_cache=True, end=True, owner=owner, as_shell=as_shell)
    elif code in (10, 11):
        why = _outcome_of(document, "retry")
        step = _run(lambda: steps.save(_ctx(), label=label, why=why), as_shell)
    elif code in (20, 21, 22):
        step = park(document=document, label=label, end=True, owner=owner, as_shell=as_shell)
    elif code == 30:
        step = cancel(label=label, end=True, owner=owner, as_shell=as_shell)
    else:
        return code
    return step or code


def note(*, text: str) -> int:
    return _run(lambda: steps.note(_ctx(), text))


def end(*, owner: int | None = None, label: str = "") -> int:
    pid = owner or os.getppid()
    return _run(lambda: steps.end(_ctx(), owner=pid, label=label or "stopped"))
