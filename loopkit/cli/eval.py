"""lk eval: which agent, model or configuration is better, on your own tasks.

Usage:  lk eval run SUITE.yaml [--jobs N | --ray ADDRESS] [--config NAME]... [--state DIR]
                               [--json | --html FILE]
                               [--compare CANDIDATE BASELINE] [--no-validate]
                               [--infra strict|counted|excluded]
        lk eval report SUITE.yaml [--state DIR] [--json | --html FILE]
                               [--compare CANDIDATE BASELINE] [--infra ...]
        lk eval plan --effect D [--rate P] [--spread S] [--configs N] [--json]
        lk eval mine REPO --out SUITE.yaml [--rev REV] [--look N] [--tasks N]
                               [--test-command CMD]
        lk eval mine --instances FILE.jsonl --repos DIR --out SUITE.yaml

The same tasks across agent x model configurations x N repeats (the suite file: see
docs/eval.md and loopkit/eval/suite.py). Each trial runs in a fresh git worktree at the
pinned base commit, through lk attempt, and is scored by loopkit's decision (verified
completion, scope, the ratchet), never by the agent's word. Tasks are validated first
(their checks fail at the base; a reference solution passes). Trials are interleaved in
time (seeded). A trial the infrastructure failed (the provider's 5xx or 429 after its
retries, a usage limit, credentials, a missing CLI, a check that could not run) is
retried whole in a fresh tree, then set apart: pass rates are reported with and without
them. Every finished trial is appended to <state>/trials.jsonl, named by a hash of all
that defines it (configuration, provider version, contract, task, base, loopkit's
version); a rerun skips those, and never reuses a trial of a configuration changed under
the same name. The bases are pinned by the first run (<state>/pins.json). --ray ADDRESS
fans the trials out on a Ray cluster (the extra loopkit-agents[ray]): each try one Ray
task, the results the same as with --jobs, the resume the same; a try whose Ray worker
died is an infrastructure failure, retried whole.

Output: the report for a person on stdout (per configuration: pass@1 with a 95%
        task-level bootstrap interval, with and without infrastructure failures, pass@k,
        pass^k, false claims, scope violations, cost per verified success, wall time; then
        each configuration against the first, paired by task, Holm-corrected when there
        are several comparisons; each comparison reads infrastructure failures the
        stricter way unless --infra says otherwise); --json one loopkit/eval
        document (schemas/eval.json); --html FILE a page with a plot. Progress on stderr.
Exit codes: 0 done (with --compare: the candidate is better); 50 no difference; 51
        inconclusive (the sample cannot tell); 52 worse -- the verdict of --compare, for a
        CI gate; 3 bad input (the suite is invalid, or a task fails validation: its checks
        pass at the base, or its reference does not pass).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import click

from loopkit.cli._entry import group, options
from loopkit.exitcodes import SHARED_HELP, ExitCode

EPILOG = (
    "\b\nExit codes of lk eval:\n"
    "  0   done; with --compare: the candidate is better than the baseline\n"
    "  50  --compare: no difference (the sample could have seen one of the margin)\n"
    "  51  --compare: inconclusive (the sample cannot tell)\n"
    "  52  --compare: the candidate is worse\n"
    "  3   the suite is invalid, or a task fails validation; lk eval mine: no task\n"
    "      validated, or a bad instance\n"
    "  4   --ray: Ray is not installed, or no cluster answers at ADDRESS\n\n" + SHARED_HELP
)


@group(epilog=EPILOG)
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
_infra = click.option(
    "--infra",
    "reading",
    type=click.Choice(["strict", "counted", "excluded"]),
    default="strict",
    help="How comparisons count infrastructure failures: as the agent's (counted), left "
    "out (excluded), or per comparison the less favourable to the candidate [strict].",
)
_compare = click.option(
    "--compare",
    nargs=2,
    metavar="CANDIDATE BASELINE",
    default=None,
    help="Compare these two configurations; the exit code is the verdict.",
)


class Shown(NamedTuple):
    """What lk eval run and report share: where the trials are kept, how the report shows.
    (A named tuple: typing is loaded with click already, dataclasses is not.)"""

    state_dir: str | None
    as_json: bool
    html_path: str | None
    compare: tuple[str, str] | None
    reading: str


def _shown(command: Callable[..., int]) -> Callable[..., int]:
    """``command`` with the options of ``Shown`` (after its own), handed to it as one."""

    @functools.wraps(command)
    def call(
        *,
        state_dir: str | None,
        as_json: bool,
        html_path: str | None,
        compare: tuple[str, str] | None,
        reading: str,
        **own: object,
    ) -> int:
        return command(shown=Shown(state_dir, as_json, html_path, compare, reading), **own)

    shared: Callable[..., int] = options(_state_option, _json, _html, _compare, _infra)(call)
    return shared


@main.command(epilog=EPILOG)
@click.argument("suite_path", metavar="SUITE")
@click.option("--jobs", type=click.IntRange(min=1), default=1, help="Trials at once [1].")
@click.option(
    "--ray",
    "ray_address",
    metavar="ADDRESS",
    help="Fan the trials out on the Ray cluster at ADDRESS (host:port, or auto): each try "
    "one Ray task of one CPU; --jobs then applies to validation. Needs loopkit-agents[ray].",
)
@click.option(
    "--config",
    "only",
    metavar="NAME",
    multiple=True,
    help="Run only this configuration's trials (repeatable): one CI job per configuration, "
    "their trials.jsonl joined for lk eval report (docs/ci-fanout.md).",
)
@click.option("--no-validate", is_flag=True, help="Skip checking the tasks against their base.")
@_shown
def run(
    suite_path: str,
    jobs: int,
    ray_address: str | None,
    only: tuple[str, ...],
    no_validate: bool,
    shown: Shown,
) -> int:
    """Run the suite's trials (those not finished yet), then report."""
    from loopkit.errors import BadInput
    from loopkit.eval import cluster, trials
    from loopkit.eval import suite as suites
    from loopkit.handling import say

    s = suites.load(Path(suite_path))
    _check_compare(s, shown.compare)
    for name in only:
        s.config(name)
    if ray_address is not None:
        cluster.check(ray_address)
    runner = trials.Runner(s, _state_of(s, shown.state_dir), say=lambda m: say("lk eval", m))
    runner.prepare()
    if not no_validate:
        problems = runner.validate(jobs=jobs)
        if problems:
            raise BadInput(suite_path, "; ".join(problems))
        say("lk eval", f"{len(s.tasks)} task(s) valid at {runner.base[:12]}")
    if ray_address is not None:
        cluster.run(runner, ray_address, only)
        results = trials.read_results(runner.state)
    else:
        results = runner.run(jobs=jobs, only=only)
    return _report(runner, results, shown)


@main.command(epilog=EPILOG)
@click.argument("suite_path", metavar="SUITE")
@_shown
def report(suite_path: str, shown: Shown) -> int:
    """Report what the trials finished so far show (nothing runs)."""
    from loopkit.errors import BadInput
    from loopkit.eval import suite as suites
    from loopkit.eval import trials

    s = suites.load(Path(suite_path))
    _check_compare(s, shown.compare)
    runner = trials.Runner(s, _state_of(s, shown.state_dir))
    results = trials.read_results(runner.state)
    if not results:
        raise BadInput(suite_path, "no finished trials yet: run `lk eval run` first")
    runner.prepare(clear=False)
    return _report(runner, results, shown)


@main.command(epilog=EPILOG)
@click.option(
    "--effect",
    type=click.FloatRange(0, 1, min_open=True),
    required=True,
    help="The difference of pass rates to detect (0.1 = 10 points).",
)
@click.option(
    "--rate", type=click.FloatRange(0, 1), default=0.5, help="The baseline's pass rate [0.5]."
)
@click.option(
    "--spread",
    type=click.FloatRange(0, 1),
    default=0.0,
    help="How much the true difference varies from task to task (its SD) [0].",
)
@click.option(
    "--configs",
    type=click.IntRange(min=2),
    default=2,
    help="Configurations compared (each against the first, Holm-corrected) [2].",
)
@click.option("--power", type=click.FloatRange(0.5, 1, max_open=True), default=0.8, help="[0.8]")
@_json
def plan(
    effect: float, rate: float, spread: float, configs: int, power: float, as_json: bool
) -> int:
    """Tasks x repeats needed to detect a difference of EFFECT (5% two-sided)."""
    from loopkit.document import emit
    from loopkit.eval import report as reports

    doc = reports.plan(effect=effect, rate=rate, spread=spread, configs=configs, power=power)
    if as_json:
        emit(doc, schema_name="eval-plan")
    else:
        click.echo(reports.plan_text(doc), nl=False)
    return 0


@main.command(epilog=EPILOG)
@click.argument("repo_path", metavar="REPO", required=False)
@click.option("--out", "out_path", metavar="FILE", required=True, help="The suite to write.")
@click.option("--rev", default="HEAD", help="Mine the history before this commit [HEAD].")
@click.option("--look", type=click.IntRange(min=1), default=200, help="Commits looked at [200].")
@click.option("--tasks", type=click.IntRange(min=1), default=20, help="Tasks wanted [20].")
@click.option(
    "--test-command",
    default="python3 -m pytest",
    metavar="CMD",
    help="How the repository's tests run: pytest, or unittest (a command with unittest in "
    "it) [python3 -m pytest].",
)
@click.option(
    "--instances",
    metavar="FILE",
    help="Import SWE-bench-style instances (JSON lines) instead of mining REPO.",
)
@click.option(
    "--repos",
    metavar="DIR",
    help="With --instances: the folder of their repositories' clones (<name> or <owner>__<name>).",
)
def mine(
    repo_path: str | None,
    out_path: str,
    rev: str,
    look: int,
    tasks: int,
    test_command: str,
    instances: str | None,
    repos: str | None,
) -> int:
    """Tasks from REPO's history: commits that changed source and tests together, the
    source change to make again at the parent, the commit's tests hidden from the agent.
    Each is validated (a test fails before and passes after) before it is written. With
    --instances: SWE-bench-style instances, each at its own repository and base."""
    import shlex

    from loopkit import git
    from loopkit.errors import BadInput
    from loopkit.eval import mine as mining
    from loopkit.files import atomic_write
    from loopkit.handling import say

    command = shlex.split(test_command)
    out = Path(out_path)
    if instances is not None:
        if not repos:
            raise BadInput(instances, "--instances needs --repos DIR (where their clones are)")
        try:
            where, found = mining.instances(Path(instances), Path(repos))
        except (OSError, ValueError, git.GitError) as e:
            raise BadInput(
                instances, str(e).splitlines()[0] if str(e) else type(e).__name__
            ) from None
        if not found:
            raise BadInput(instances, "no instance in the file")
        atomic_write(out, mining.suite(where[0], out, found, command, where))
        click.echo(f"{len(found)} instance(s) written to {out}")
        return 0
    if repo_path is None:
        raise BadInput("lk eval mine", "give REPO, or --instances FILE --repos DIR")
    repo = Path(repo_path).resolve()
    try:
        if not (repo / ".git").exists():
            raise git.GitError("not a repository")
        git.out(["rev-parse", "--verify", f"{rev}^{{commit}}"], cwd=repo)
    except (git.GitError, OSError):
        raise BadInput(repo_path, f"not a git repository with a commit {rev!r}") from None
    found = mining.mine(
        repo, rev=rev, look=look, want=tasks, command=command, say=lambda m: say("lk eval", m)
    )
    if not found:
        raise BadInput(
            repo_path,
            f"none of the last {look} commits changed source and tests together with a test "
            "that fails before it and passes after",
        )
    atomic_write(out, mining.suite(repo, out, found, command))
    click.echo(f"{len(found)} validated task(s) written to {out}")
    return 0


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


def _report(runner: object, results: list[dict[str, object]], shown: Shown) -> int:
    from loopkit.document import emit
    from loopkit.eval import report as reports
    from loopkit.eval.trials import Runner
    from loopkit.files import atomic_write

    assert isinstance(runner, Runner)
    current, stale = runner.current(list(results))
    doc = reports.summarize(
        current,
        suite=runner.suite,
        base=runner.base,
        bases=runner.bases,
        compare=shown.compare,
        reading=shown.reading,
        stale=stale,
    )
    if shown.as_json:
        emit(doc, schema_name="eval")
    else:
        click.echo(reports.text(doc), nl=False)
    if shown.html_path:
        page = Path(shown.html_path)
        atomic_write(page, reports.html(doc, runner.cells(current, page.resolve().parent)))
    if shown.compare is None:
        return 0
    return int(VERDICT_CODES[str(doc["comparisons"][0]["verdict"])])
