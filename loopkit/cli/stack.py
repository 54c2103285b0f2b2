"""lk stack: a branch and a pull request per slice, stacked, each landed as the exact
tree its checks passed on.

Usage:  lk stack add NAME SLICE [--head REV] [--fork REV] [--doc DECIDED.json] [--title T] [--branch B]
                     [--target main] [--remote origin] [--forge github|gitlab|plain]
                     [--repo OWNER/NAME] [--issue N] [--contract loop.yaml]
        lk stack restack NAME [--contract loop.yaml]
        lk stack sync NAME [--contract loop.yaml]
        lk stack address NAME SLICE [--task TEXT] [--rounds N] [--contract loop.yaml]
        lk stack push NAME [--issues]
        lk stack land NAME [--method squash|merge|rebase]
        lk stack show NAME
        lk stack fold LEDGER... [--into FILE]
        lk stack share CONTRACT --jobs N
        lk stack pack OUT --task ID --base REV --code N      (in a fan-out job)
        lk stack collect NAME RESULT... [the add options]    (in the landing job)

add records a slice on top of the stack (or replaces a slice's head: the slices above
move at the next restack): its fork point (the parent's head it was built on) and the
tree its checks passed on -- the decided document's own evidence when --doc names a
complete attempt on that very tree, else lk-verify runs on it. restack moves every slice
whose fork point is no longer its parent's head onto it (the bottom one onto the target's
tip, after a squash merge below as after a change), by plumbing from the recorded fork
point, and verifies each moved tree again; first it follows the forge: a slice whose pull
request was merged there (merge, squash or rebase) or whose change the target already
holds leaves the stack as landed (never replayed as an empty commit), one whose pull
request was closed leaves it unlanded, and a branch someone else pushed is refused (exit
40, nothing moved). sync is restack then push: after a merge on the forge's web page,
the slices above land on what landed, each verified, their pull requests retargeted.
address takes what the forge asks of one slice -- its pull request's review comments
and reviews that are not approvals (by its owner, members and collaborators only),
statuses and check runs failing on its head, those not addressed before -- as feedback: the slice's task (recorded from its decided document, or
--task) runs again through lk attempt in a worktree at its head, the remarks notes under
the task, round after round while the decision is retry (at most --rounds); the verified
tree becomes the slice's new commit, every slice above moves onto it and is verified
there, and only then is the stack pushed. A slice above that fails its checks is the
worker's feedback for its next round. A task that does not complete, or a slice above
still failing when the rounds are spent: exit 1, nothing recorded or pushed (the slice
named; each new commit kept under refs/loopkit/review/); a slice above that does not
apply: 40.
push checks by id, with git alone, that each slice's head is the tree
its checks passed on and sits on the slice below (else 40, nothing pushed), then pushes
every changed branch and the stack's record in one atomic push, each leased on what this stack last pushed there,
plus the saved and parked attempts under refs/loopkit/ (evidence a dead run leaves);
then opens or updates one pull request per slice, each based on the one below, its body
the slice's evidence; the last one says "Closes #N" for --issue. --issues opens a child
issue per slice. land merges the bottom slice through the forge, naming the verified
head (a head that moved is refused), only where the forge lands nothing but up-to-date
heads (GitHub: strict required status checks or a merge queue; GitLab: fast-forward or
semi-linear merges with a passing pipeline, or a merge train), and checks the landed tree
is the verified one. GitHub is reached through `gh api`, GitLab through `glab api`; a
plain remote gets branches only, and its land moves the target itself, leased on the tip
the slice was verified on. fold appends the records of ledgers that CI jobs sent back to
one ledger (each record once). share prints the contract each of N jobs of a fan-out
runs under: the budgets that span runs (cost, tokens, wall-clock) divided between them,
reserved when the plan is made, so the fleet cannot spend more than the contract allows.
pack writes what a fan-out job sends back as an artifact (no push, no credential): the
loop's exit code and commits as a git bundle, its saved attempts, its ledger, its last
decided document; collect, in the one landing job, folds those ledgers into this one,
fetches the saved attempts under refs/loopkit/ and adds each green slice to the stack,
its fork point the base the job was pinned to (then restack stacks them, verified).

Input:  --doc: a decided attempt document (lk attempt's, a file or - for stdin).
Output: one JSON line (schemas/stack-step.json): {"kind": "loopkit/stack-step",
        "version": 1, "step": ..., "stack": {the record}, ...}.
Exit codes: 0 done; 1 a slice's checks failed, or address's task did not complete
        (nothing recorded or moved); 40 refused,
        nothing moved: a lease lost (the remote branch moved, a branch someone else
        pushed), a pull request merged elsewhere than the target, a slice that does not apply
        on its new parent, a head changed after verification, a forge that would land an
        untested tree, a merge the forge refused, a landed tree not the verified one;
        3 bad input; 4 environment (not a git repository, gh or glab missing, the forge's
        API failing).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from loopkit import contract, git
from loopkit.cli._entry import CONTEXT, Group, options
from loopkit.document import emit, parse_attempt
from loopkit.errors import BadInput
from loopkit.exitcodes import SHARED_HELP
from loopkit.forge import address as readdress
from loopkit.forge import fleet, steps
from loopkit.handling import say
from loopkit.sections import StackStep
from loopkit.workspace import for_state_only

EPILOG = (
    "\b\nExit codes of lk stack:\n  0   done\n"
    "  1   a slice's checks failed (or address's task did not complete): nothing\n"
    "      recorded, pushed or landed\n"
    "  40  refused, nothing moved: a lease lost or a branch someone else pushed, a\n"
    "      conflict on restack, a head changed\n"
    "      after verification, a forge that does not demand up-to-date heads, a merge the\n"
    "      forge refused, a landed tree that is not the verified one\n"
    "  4   gh or glab missing, the forge's API failing, not a git repository\n\n" + SHARED_HELP
)


def _emit(result: StackStep) -> int:
    emit(result)
    stack = result["stack"]
    live = [s for s in stack["slices"] if not s["merged"] and not s.get("closed")]
    say("lk stack", f"{stack['name']}: {result['step']} done, {len(live)} slice(s) open")
    return 0


def _root() -> Path:
    return git.locate(Path(".")).root


def _contract(path: str | None, root: Path) -> Path:
    return Path(path).resolve() if path else root / "loop.yaml"


@click.group(cls=Group, context_settings=CONTEXT, epilog=EPILOG)
def main() -> None:
    """A branch and a pull request per slice, stacked, verified, landed exactly."""


_contract_opt = click.option(
    "--contract", "contract_path", metavar="FILE", help="The loop contract (default ./loop.yaml)."
)


#: Where a stack goes, as add and collect record it: target, remote, forge, repo, issue.
_stack_options = options(
    click.option("--target", default="", help="The branch the stack lands on (default main)."),
    click.option("--remote", default="", help="The remote pushed to (a name or a URL)."),
    click.option("--forge", default="", type=click.Choice(["github", "gitlab", "plain", ""])),
    click.option("--repo", default="", metavar="OWNER/NAME", help="The forge's repository."),
    click.option("--issue", type=int, default=None, help="The parent issue the last slice closes."),
)


@main.command(epilog=EPILOG)
@click.argument("name")
@click.argument("slice_id", metavar="SLICE")
@click.option("--head", "head_rev", default="HEAD", show_default=True, metavar="REV")
@click.option(
    "--fork",
    "fork_rev",
    default="",
    metavar="REV",
    help="The commit the slice was built on, when not the slice below's head (slices built "
    "side by side from one base: restack stacks them).",
)
@click.option("--doc", metavar="FILE", help="The decided attempt document (- for stdin).")
@click.option("--title", default="", help="The pull request's title (default: SLICE).")
@click.option("--branch", default="", help="The slice's branch (default stack/NAME/SLICE).")
@_stack_options
@_contract_opt
def add(
    name: str, slice_id: str, head_rev: str, doc: str | None, contract_path: str | None, **kw: Any
) -> int:
    """Record a verified slice on top of the stack (or a slice's new head)."""

    root = _root()
    decided: Any = None  # parse_attempt's answer: an attempt document
    if doc:
        source = "<stdin>" if doc == "-" else doc
        try:
            raw = sys.stdin.read() if doc == "-" else Path(doc).read_text(encoding="utf-8")
        except OSError as e:
            raise BadInput(source, f"cannot read: {e.strerror}") from None
        decided = parse_attempt(raw, source=source)
    ledger = for_state_only().state / "ledger.jsonl"
    return _emit(
        steps.add(
            root,
            name,
            slice_id,
            head_rev,
            contract=_contract(contract_path, root),
            doc=decided,
            ledger=ledger,
            **kw,
        )
    )


def _moving(step: Callable[..., StackStep]) -> Callable[[str, str | None], int]:
    """A step that moves the stack ``name`` (restack, sync) as its command runs it."""

    def run(name: str, contract_path: str | None) -> int:
        root = _root()
        return _emit(step(root, name, contract=_contract(contract_path, root)))

    return run


#: The steps that take the stack's name and the contract alone, and their help.
_MOVES = {
    "restack": "Move each slice onto its parent's head from its fork point; verify each moved tree.",
    "sync": "Follow the forge: drop merged and closed slices, restack the rest (verified), push.",
}
for _step, _help in _MOVES.items():
    main.command(_step, help=_help, epilog=EPILOG)(
        click.argument("name")(_contract_opt(_moving(getattr(steps, _step))))
    )


@main.command(epilog=EPILOG)
@click.argument("name")
@click.argument("slice_id", metavar="SLICE")
@click.option(
    "--task",
    "task_text",
    default="",
    metavar="TEXT",
    help="The slice's task, when it was added without a decided document.",
)
@click.option(
    "--rounds",
    type=click.IntRange(min=1),
    default=readdress.ROUNDS,
    show_default=True,
    help="Attempts at most (the contract's budgets may stop it sooner).",
)
@_contract_opt
def address(
    name: str, slice_id: str, task_text: str, rounds: int, contract_path: str | None
) -> int:
    """Run a slice's task again with its pull request's review; verify it and the slices
    above; push."""
    root = _root()
    result = steps.address(
        root,
        name,
        slice_id,
        contract=_contract(contract_path, root),
        state=for_state_only().state,
        task_text=task_text,
        rounds=rounds,
    )
    if not result["remarks"]:
        say("lk stack", f"{slice_id}: nothing new to address on its pull request")
    return _emit(result)


@main.command(epilog=EPILOG)
@click.argument("name")
@click.option("--issues", is_flag=True, help="Open a child issue per slice (once).")
def push(name: str, issues: bool) -> int:
    """Push every slice atomically with leases; open or update its pull requests."""

    return _emit(steps.push(_root(), name, issues=issues))


@main.command(epilog=EPILOG)
@click.argument("name")
@click.option(
    "--method",
    default="squash",
    show_default=True,
    type=click.Choice(["squash", "merge", "rebase"]),
)
def land(name: str, method: str) -> int:
    """Land the bottom slice: exactly its verified head, only on a forge that demands it."""

    return _emit(steps.land(_root(), name, method=method))


@main.command(epilog=EPILOG)
@click.argument("name")
def show(name: str) -> int:
    """Print the stack's record."""

    return _emit(steps.show(_root(), name))


@main.command(epilog=EPILOG)
@click.argument("ledgers", nargs=-1, required=True, metavar="LEDGER...")
@click.option("--into", metavar="FILE", help="The ledger to fold into (default: this one's).")
def fold(ledgers: tuple[str, ...], into: str | None) -> int:
    """Append the records of ledgers CI jobs sent back to one ledger, each record once."""

    target = Path(into) if into else for_state_only().state / "ledger.jsonl"
    result = fleet.fold(target, [Path(p) for p in ledgers])
    emit(result)
    say("lk stack", f"fold: {result['added']} record(s) added, {result['known']} already there")
    return 0


@main.command(epilog=EPILOG)
@click.argument("contract_path", metavar="CONTRACT")
@click.option("--jobs", type=int, required=True, help="How many jobs share the budgets.")
def share(contract_path: str, jobs: int) -> int:
    """Print the contract each of N fan-out jobs runs under: spanning budgets divided."""

    raw = contract.read_file(contract_path)
    contract.checked(raw, contract_path)  # exit 3 on the first problem
    emit(fleet.share(raw, jobs), schema_name="contract")
    return 0


@main.command(epilog=EPILOG)
@click.argument("out", metavar="OUT")
@click.option("--task", "task_id", required=True, metavar="ID", help="The job's task.")
@click.option("--base", required=True, metavar="REV", help="The commit the job was pinned to.")
@click.option("--code", type=int, required=True, help="The loop's exit code.")
def pack(out: str, task_id: str, base: str, code: int) -> int:
    """Write what a fan-out job sends back (result, bundle, ledger, decided document)."""

    ws = for_state_only()
    result = fleet.pack(ws.root, Path(out), task=task_id, base=base, code=code, state=ws.state)
    emit(result)
    say("lk stack", f"pack: {task_id} (exit {code}) into {out}")
    return 0


@main.command(epilog=EPILOG)
@click.argument("name")
@click.argument("results", nargs=-1, required=True, metavar="RESULT...")
@_stack_options
@_contract_opt
def collect(name: str, results: tuple[str, ...], contract_path: str | None, **kw: Any) -> int:
    """Fold the fan-out's results in: ledgers, saved attempts, each green slice added."""

    root = _root()
    ledger = for_state_only().state / "ledger.jsonl"
    return _emit(
        steps.collect(
            root,
            name,
            [Path(r) for r in results],
            contract=_contract(contract_path, root),
            ledger=ledger,
            **kw,
        )
    )
