"""The options of the commands the console scripts' door answers, each declared once.

Plain data, importing nothing: the door (loopkit.cli.door) reads a plain call with these
tables without loading click, and the click commands (loopkit.cli.<command>, through
loopkit.cli._entry.declared) are built from the same tables, so the two cannot differ.
Each option's ``kwarg`` is the keyword its function takes (loopkit.stages.<stage>,
loopkit.cli.transactions.attempt and the ``lk task`` steps, loopkit.workspace.report).

Kinds: ``value`` one value; ``repeat`` one value each time, all kept in order; ``flag``
sets ``kwarg`` to True; ``switch`` a ``--yes/--no`` pair setting True or False (None
when neither is given); ``choice`` one of ``choices`` (None: the registered providers);
``positive`` a finite number above 0; ``int`` a whole number (the door takes one above 0,
anything else is click's to refuse).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing stays unloaded at run time (start-up is a feature)
if TYPE_CHECKING:
    from typing import Any


class Opt:
    """One option: its names (``--clean-room/--in-place`` for a switch), its kind, the
    keyword it fills, and what its help shows."""

    __slots__ = ("choices", "default", "help", "kind", "kwarg", "metavar", "names")

    def __init__(
        self,
        names: str,
        kwarg: str,
        kind: str = "value",
        help: str = "",
        *,
        metavar: str | None = None,
        default: Any = None,
        choices: tuple[str, ...] | None = None,
    ) -> None:
        self.names = tuple(names.split())
        self.kwarg = kwarg
        self.kind = kind
        self.help = help
        self.metavar = metavar
        self.default = default
        self.choices = choices


class Arg:
    """One positional argument (``lk task``'s steps): filled in order by bare words."""

    __slots__ = ("metavar", "name", "required")

    def __init__(self, name: str, *, required: bool = False, metavar: str | None = None) -> None:
        self.name = name
        self.required = required
        self.metavar = metavar


CONTRACT = "The loop contract (loop.yaml)."


def _contract(metavar: str = "FILE", help: str = CONTRACT) -> Opt:
    return Opt("--contract", "contract_path", metavar=metavar, help=help)


#: Options more than one command takes, each command with its own help:
#: names -> (kwarg, kind, metavar).
_SHARED = {
    "--resume": ("resume", "value", "ID"),
    "--provider": ("provider", "choice", None),
    "--model": ("model", "value", "M"),
    "--transcript": ("transcript", "value", "FILE"),
}


def _shared(names: str, help: str) -> Opt:
    kwarg, kind, metavar = _SHARED[names]
    return Opt(names, kwarg, kind, help, metavar=metavar)


WORKSPACE = (
    Opt("--contract", "contract", metavar="FILE", help=CONTRACT),
    Opt("--json", "as_json", "flag", "One JSON document instead of NAME=VALUE lines."),
)

ATTEMPT = (
    _contract(),
    Opt("--base", "base", metavar="REF", help="What lk-diff measures the change from (--base)."),
    _shared("--resume", "Continue this worker session (lk-invoke --resume)."),
    Opt(
        "--keep",
        "keep",
        metavar="PREFIX",
        help="Keep every stage's document as PREFIX-<stage>.json and its stderr as "
        "PREFIX-<stage>.err.",
    ),
    Opt(
        "--shell",
        "as_shell",
        "flag",
        "Print the last document's fields the recipes act on as shell assignments "
        "(LK_DOC_*=...), not the document.",
    ),
    Opt(
        "--settle",
        "settle",
        "flag",
        "Then the ratchet's step the decision calls for, in this process: complete lands, "
        "retry and replan save, blocked, failed and exhausted park, cancelled cancels "
        "(lk task land/save/park/cancel; the last three and the landing with --end).",
    ),
    Opt(
        "--owner",
        "owner",
        "int",
        "With --settle: the loop whose lock a last step releases (default: the parent).",
        metavar="PID",
    ),
)

VERIFY = (
    _contract(),
    Opt("--only", "only", "repeat", "Run only the check NAME (repeatable).", metavar="NAME"),
    Opt("--fail-fast", "fail_fast", "flag", "Stop at the first failing check."),
    Opt(
        "--clean-room/--in-place",
        "clean_room",
        "switch",
        "Run the checks in a clean checkout of exactly the working tree's tree (the default "
        "when an attempt document is piped: what a recipe commits), or in the working tree "
        "itself (the default alone, e.g. in a commit hook).",
    ),
    Opt(
        "--summary",
        "summary",
        "flag",
        "For a person (a commit hook): a short summary on stdout -- each check, and the tail "
        "of a failing one -- and the JSON document into the state folder (verify-last.json).",
    ),
    Opt(
        "--ratchet",
        "ratchet",
        "flag",
        "Alone (a commit hook on a project red at HEAD): block only what this change makes "
        "worse than HEAD -- a check that passed there, a test that passed there (per test "
        "where the check gives per-test results) -- not what already failed. HEAD's results "
        "are run once per tree in the clean room and kept.",
    ),
    Opt(
        "--attest",
        "attest",
        "flag",
        "First require HEAD's signed statement to hold (lk attest verify HEAD; a CI job or a "
        "pre-push hook): an unattested commit is refused with its code (60-66) before any "
        "check runs.",
    ),
)

DIFF = (
    _contract(),
    Opt(
        "--base",
        "base",
        metavar="REF",
        help="Compare against REF (default: the worker's starting commit, run.base, else "
        "HEAD). A piped attempt's recorded diff.base wins.",
    ),
)

DECIDE = (
    _contract("F"),
    Opt("--ledger", "ledger_path", metavar="PATH", help="Ledger file [.loopkit/ledger.jsonl]."),
    Opt(
        "--trigger",
        "trigger",
        "choice",
        "What started this loop [detected from CI variables, else manual].",
        choices=("manual", "schedule", "event"),
    ),
    Opt("--admit", "admit", "flag", "Admission: reserve the next run's share (0) or 22."),
    Opt("--replay", "replay_path", metavar="LEDGER", help="Re-derive every recorded decision."),
    Opt(
        "--interrupted",
        "interrupted",
        metavar="TASK",
        help="Record that TASK's attempt never reached a decision (its loop died); the recipes "
        "call it when they recover at the next start.",
    ),
    Opt("--reason", "reason", metavar="TEXT", help="With --interrupted: what was found."),
)

INVOKE = (
    _contract(help="The loop contract."),
    _shared("--provider", "The worker (default: the contract's worker.provider)."),
    Opt(
        "--command",
        "command",
        metavar="CMD",
        help="Shell command for the command worker (acp: the agent's command).",
    ),
    _shared("--model", "Model for the worker (overrides worker.model)."),
    _shared("--resume", "Continue this session (claude/codex; acp: session/load)."),
    Opt(
        "--timeout",
        "timeout",
        "positive",
        "Wall-clock limit in seconds (overrides worker.timeout; default 900).",
        metavar="S",
    ),
    Opt("--dry-run", "dry_run", "flag", "Print argv and handoff as JSON; run nothing."),
    _shared(
        "--transcript",
        "Normalize a saved stream (claude stream-json/json, codex --json, acp); run nothing.",
    ),
    Opt(
        "--quiet -q",
        "quiet",
        "flag",
        "No live progress lines on stderr while the worker runs.",
    ),
)

JUDGE = (
    _contract("F"),
    Opt("--goal", "goal", metavar="TEXT", help="The goal to judge (else the task's GOAL text)."),
    _shared("--provider", "The judge's provider (else the contract's judge.provider)."),
    _shared("--model", "The judge's model (else the contract's judge.model)."),
    _shared(
        "--transcript",
        "Judge a saved judge transcript (claude stream-json/json, codex JSONL); run nothing.",
    ),
)

#: The commands the door answers (``lk NAME`` and, for a stage, ``lk-NAME``).
COMMANDS: dict[str, tuple[Opt, ...]] = {
    "workspace": WORKSPACE,
    "attempt": ATTEMPT,
    "verify": VERIFY,
    "diff": DIFF,
    "decide": DECIDE,
    "invoke": INVOKE,
    "judge": JUDGE,
}

# ------------------------------------------------------------------ lk task's steps

_OWNER = Opt(
    "--owner",
    "owner",
    "int",
    "The loop's process id (default: this command's parent). Pass your loop's own.",
    metavar="PID",
)
_SHELL = Opt("--shell", "as_shell", "flag", "LK_NAME=VALUE lines, not JSON.")
_LABEL = Opt("--label", "label", metavar="NAME", default="", help="The attempt (the ref's name).")
_END = Opt(
    "--end",
    "end",
    "flag",
    "The loop's last step: release its lock too (--owner), no `lk task end` needed.",
)
_IN = Opt(
    "--in",
    "attempt_in",
    metavar="DIR",
    help="The attempt ran in DIR, another worktree of this repository: its tree is saved, "
    "and land fast-forwards this checkout to the commit.",
)
_DOC = Arg("doc", metavar="[DOC]")

#: ``lk task VERB``: its arguments and options, in the order its help lists them.
TASK: dict[str, tuple[Opt | Arg, ...]] = {
    "begin": (
        _DOC,
        Opt(
            "--task-id",
            "task_id",
            metavar="ID",
            help="Begin a task given here instead of a document.",
        ),
        Opt("--task", "task_text", metavar="TEXT", help="The task's text (with --task-id)."),
        Opt("--goal", "goal", "flag", "The task is a GOAL (judged after its checks pass)."),
        _contract(help="The loop contract."),
        Opt("--tasks", "tasks", metavar="FILE", help="The TASKS.md to mark done or parked."),
        Opt(
            "--allow-dirty",
            "allow_dirty",
            "flag",
            "Begin on uncommitted changes: saved as refs/loopkit/<task>/user-start.",
        ),
        Opt(
            "--reset-path",
            "reset_paths",
            "repeat",
            "An ignored path a park resets (repeatable; adds to $RESET_PATHS).",
            metavar="PATH",
        ),
        Opt(
            "--memory", "memory", metavar="FILE", help="The memory file (default: the contract's)."
        ),
        Opt(
            "--attempt",
            "attempt",
            "flag",
            "Then round 1 in this process: lk attempt --settle on the start document "
            "(--keep <run_dir>/1, --base <diff_base>); its output follows begin's, its exit is "
            "the attempt's.",
        ),
        Opt(
            "--reproduce",
            "reproduce",
            "flag",
            "First round 0 in this process: lk-diff and lk-verify on the untouched tree, no "
            "worker; lk-decide when they fail (the ledger holds the failure), settled as "
            "label 0.",
        ),
        _OWNER,
        _SHELL,
    ),
    "save": (
        Arg("label"),
        Opt("--why", "why", metavar="TEXT", default="", help="Said in the saved commit's message."),
        Opt(
            "--doc",
            "doc",
            metavar="FILE",
            help="The decided document: the label is its attempt; --shell adds its LK_DOC_* "
            "fields.",
        ),
        _IN,
        _SHELL,
    ),
    "land": (
        _DOC,
        _LABEL,
        Opt(
            "--stat-cache",
            "stat_cache",
            "flag",
            "lk-decide's stat cache is fresh (no worker ran since): start from it.",
        ),
        _IN,
        _END,
        _OWNER,
        _SHELL,
    ),
    "park": (
        _DOC,
        _LABEL,
        Opt(
            "--outcome",
            "outcome",
            metavar="NAME",
            default="",
            help="Default: the decision's outcome.",
        ),
        _IN,
        _END,
        _OWNER,
        _SHELL,
    ),
    "cancel": (_DOC, _LABEL, _IN, _END, _OWNER, _SHELL),
    "note": (Arg("text", required=True),),
    "end": (_OWNER, _LABEL),
}


def door_table(params: tuple[Opt | Arg, ...]) -> tuple[tuple[str, ...], dict[str, tuple[Any, ...]]]:
    """``(positional keywords, {option: spec})`` as the door reads a call: ``(kind, kwarg)``,
    ``("flag", kwarg, value)`` (a switch is two flags), ``("choice", kwarg, choices)``."""
    positional: list[str] = []
    table: dict[str, tuple[Any, ...]] = {}
    for p in params:
        if isinstance(p, Arg):
            positional.append(p.name)
        elif p.kind == "switch":
            yes, no = p.names[0].split("/")
            table[yes], table[no] = ("flag", p.kwarg, True), ("flag", p.kwarg, False)
        elif p.kind == "flag":
            table.update(dict.fromkeys(p.names, ("flag", p.kwarg, True)))
        elif p.kind == "choice":
            table.update(dict.fromkeys(p.names, ("choice", p.kwarg, p.choices)))
        else:
            table.update(dict.fromkeys(p.names, (p.kind, p.kwarg)))
    return tuple(positional), table
