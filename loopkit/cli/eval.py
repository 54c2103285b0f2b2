"""lk eval: which agent, model or configuration is better, on your own tasks.

Usage:  lk eval run SUITE.yaml [--jobs N] [--state DIR] [--json | --html FILE]
                               [--compare CANDIDATE BASELINE] [--no-validate]
        lk eval report SUITE.yaml [--state DIR] [--json | --html FILE]
                               [--compare CANDIDATE BASELINE]

The same tasks across agent x model configurations x N repeats (the suite file: see
docs/eval.md and loopkit/eval/suite.py). Each trial runs in a fresh git worktree at the
pinned base commit, through lk attempt, and is scored by loopkit's decision (verified
completion, scope, the ratchet), never by the agent's word. Tasks are validated first
(their checks fail at the base; a reference solution passes). Trials are interleaved in
time (seeded). A trial the infrastructure failed (the provider's 5xx or 429 after its
retries, a usage limit, credentials, a missing CLI, a check that could not run) is
retried whole in a fresh tree, then set apart: pass rates are reported with and without
them. Every finished trial is appended to <state>/trials.jsonl; a rerun skips those.

Output: the report for a person on stdout (per configuration: pass@1 with a 95%
        task-level bootstrap interval, with and without infrastructure failures, pass@k,
        pass^k, false claims, scope violations, cost per verified success, wall time; then
        each configuration against the first, paired by task); --json one loopkit/eval
        document (schemas/eval.json); --html FILE a page with a plot. Progress on stderr.
Exit codes: 0 done (with --compare: the candidate is better); 50 no difference; 51
        inconclusive (the sample cannot tell); 52 worse -- the verdict of --compare, for a
        CI gate; 3 bad input (the suite is invalid, or a task fails validation: its checks
        pass at the base, or its reference does not pass).
"""

from __future__ import annotations

from pathlib import Path

import click

from loopkit.cli._entry import CONTEXT, Group
from loopkit.exitcodes import SHARED_HELP, ExitCode

EPILOG = (
    "\b\nExit codes of lk eval:\n"
    "  0   done; with --compare: the candidate is better than the baseline\n"
    "  50  --compare: no difference (the sample could have seen one of the margin)\n"
    "  51  --compare: inconclusive (the sample cannot tell)\n"
    "  52  --compare: the candidate is worse\n"
    "  3   the suite is invalid, or a task fails validation\n\n" + SHARED_HELP
)


@click.group(cls=Group, context_settings=CONTEXT, epilog=EPILOG)
def main() -> None:
    """Evals: the same tasks across configurations x repeats, scored by loopkit."""


_state_option = click.option(
    "--state",
    "state_dir",
    metavar="DIR",
    help="Where results go [<suite's folder>/.loopkit/eval/<name>].",
)
_json = click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
_html = click.option(
    "--html", "html_path", metavar="FILE", help="Also write a page with a plot to FILE."
)
_compare = click.option(
    "--compare",
    nargs=2,
    metavar="CANDIDATE BASELINE",
    default=None,
    help="Compare these two configurations; the exit code is the verdict.",
)


@main.command(epilog=EPILOG)
@click.argument("suite_path", metavar="SUITE")
@click.option("--jobs", type=click.IntRange(min=1), default=1, help="Trials at once [1].")
@click.option("--no-validate", is_flag=True, help="Skip checking the tasks against their base.")
@_state_option
@_json
@_html
@_compare
def run(
    suite_path: str,
    jobs: int,
    no_validate: bool,
    state_dir: str | None,
    as_json: bool,
    html_path: str | None,
    compare: tuple[str, str] | None,
) -> int:
    """Run the suite's trials (those not finished yet), then report."""
    from loopkit.errors import BadInput
    from loopkit.eval import suite as suites
    from loopkit.eval import trials
    from loopkit.handling import say

    s = suites.load(Path(suite_path))
    _check_compare(s, compare)
    runner = trials.Runner(s, _state_of(s, state_dir), say=lambda m: say("lk eval", m))
    runner.prepare()
    if not no_validate:
        problems = runner.validate()
        if problems:
            raise BadInput(suite_path, "; ".join(problems))
        say("lk eval", f"{len(s.tasks)} task(s) valid at {runner.base[:12]}")
    results = runner.run(jobs=jobs)
    return _report(s, runner.base, results, as_json, html_path, compare)


@main.command(epilog=EPILOG)
@click.argument("suite_path", metavar="SUITE")
@_state_option
@_json
@_html
@_compare
def report(
    suite_path: str,
    state_dir: str | None,
    as_json: bool,
    html_path: str | None,
    compare: tuple[str, str] | None,
) -> int:
    """Report what the trials finished so far show (nothing runs)."""
    from loopkit import git
    from loopkit.errors import BadInput
    from loopkit.eval import suite as suites
    from loopkit.eval import trials

    s = suites.load(Path(suite_path))
    _check_compare(s, compare)
    results = trials.read_results(_state_of(s, state_dir))
    if not results:
        raise BadInput(suite_path, "no finished trials yet: run `lk eval run` first")
    try:
        base = git.out(["rev-parse", "--verify", f"{s.base}^{{commit}}"], cwd=s.repo).strip()
    except git.GitError:
        base = s.base
    return _report(s, base, results, as_json, html_path, compare)


def _state_of(s: object, state_dir: str | None) -> Path:
    from loopkit.eval.suite import Suite

    assert isinstance(s, Suite)
    return Path(state_dir) if state_dir else s.path.parent / ".loopkit" / "eval" / s.name


def _check_compare(s: object, compare: tuple[str, str] | None) -> None:
    from loopkit.eval.suite import Suite

    assert isinstance(s, Suite)
    for name in compare or ():
        s.config(name)


VERDICT_CODES = {
    "better": ExitCode.OK,
    "no difference": ExitCode.NO_DIFFERENCE,
    "inconclusive": ExitCode.INCONCLUSIVE,
    "worse": ExitCode.WORSE,
}


def _report(
    s: object,
    base: str,
    results: list[dict[str, object]],
    as_json: bool,
    html_path: str | None,
    compare: tuple[str, str] | None,
) -> int:
    from loopkit.document import emit
    from loopkit.eval import report as reports
    from loopkit.files import atomic_write

    doc = reports.summarize(results, suite=s, base=base, compare=compare)
    if as_json:
        emit(doc, schema_name="eval")
    else:
        click.echo(reports.text(doc), nl=False)
    if html_path:
        atomic_write(Path(html_path), reports.html(doc))
    if compare is None:
        return 0
    return int(VERDICT_CODES[str(doc["comparisons"][0]["verdict"])])
