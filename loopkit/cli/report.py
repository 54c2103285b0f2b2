"""lk report: summarize the ledger for a person.

Usage:  lk report [--ledger PATH] [--json | --html FILE | --otlp URL]

Input:  the ledger (.loopkit/ledger.jsonl, or under the state_dir ./loop.yaml names, unless
        --ledger names another).
Output: a terminal table per task (attempts, outcome, why it stopped, cost, tokens, time)
        and the loop's health (with the stacks lk stack recorded here: runs that ended
        without a pull request against the 5% SLO, cost per merged pull request,
        landings vs returns of the stacks and of lk queue); --json prints a loopkit/report document (schemas/report.json);
        --html FILE writes one self-contained page with a timeline of attempts;
        --otlp URL sends the runs, attempts and stages as OpenTelemetry spans to an
        OTLP/HTTP receiver (JSON; URL/v1/traces when the URL names no path).
Exit codes: 0 reported (torn or damaged ledger lines are reported and skipped);
        3 --ledger names no file, or --otlp no http(s) URL;
        4 the OTLP receiver could not be reached or refused the spans.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from loopkit import git
from loopkit.cli._entry import command, say
from loopkit.decision import ledger
from loopkit.document import emit
from loopkit.errors import BadInput, LoopkitError
from loopkit.exitcodes import SHARED_HELP, ExitCode
from loopkit.files import atomic_write
from loopkit.forge.stack import read_all
from loopkit.ratchet.queue import Queue
from loopkit.views import otlp, report
from loopkit.workspace import for_state_only

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from loopkit.sections import QueueEntry

EPILOG = (
    "\b\nExit codes of lk report:\n  0   reported (torn or damaged ledger lines are skipped, "
    "with a warning)\n  3   --ledger names no file, or --otlp no http(s) URL\n"
    "  4   the OTLP receiver could not be reached or refused the spans\n\n" + SHARED_HELP
)


def _landings() -> tuple[list[dict[str, Any]] | None, list[QueueEntry]]:
    """The stacks lk stack recorded here and the merge queue's entries (the pull-request
    panel); None and nothing outside git."""

    try:
        root = git.locate().root
    except LoopkitError:
        return None, []

    return [dict(s.to_json()) for s in read_all(root)], Queue(root).entries()


@command(epilog=EPILOG)
@click.option(
    "--ledger", "ledger_path", metavar="PATH", help="Ledger file [.loopkit/ledger.jsonl]."
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--html", "html_path", metavar="FILE", help="Write a self-contained HTML page.")
@click.option(
    "--otlp",
    "otlp_url",
    metavar="URL",
    help="Send the runs, attempts and stages as spans to an OTLP/HTTP receiver.",
)
def main(
    ledger_path: str | None, as_json: bool, html_path: str | None, otlp_url: str | None
) -> int:
    """Summarize the ledger: per task, and the loop's health."""

    if sum(map(bool, (as_json, html_path, otlp_url))) > 1:
        raise click.UsageError("--json, --html and --otlp exclude each other")
    traces_url = otlp.endpoint(otlp_url) if otlp_url else None
    if otlp_url and traces_url is None:
        raise BadInput(otlp_url, "--otlp needs an http(s) URL of an OTLP/HTTP receiver")
    if ledger_path:
        path = Path(ledger_path)
        if not path.is_file():
            raise BadInput(ledger_path, "no such ledger file")
    else:
        path = for_state_only().state / ledger.DEFAULT_NAME
    records, problems = ledger.read(path)
    for p in problems:
        say("lk report", f"warning: {path}: {p}")
    if traces_url:
        body = otlp.request(r for _, r in records)
        why = otlp.send(traces_url, body)
        if why:
            say("lk report", f"error: {traces_url}: {why}")
            return int(ExitCode.ENVIRONMENT)
        say("lk report", f"sent {otlp.span_count(body)} spans to {traces_url}")
        return 0
    stacks, queue = _landings()
    doc = report.build(
        records,
        [p.as_dict() for p in problems],
        ledger=str(path),
        generated_at=ledger.now_iso(),
        stacks=stacks,
        queue=queue,
    )
    if as_json:
        emit(doc, schema_name="report")
    elif html_path:
        atomic_write(Path(html_path), report.page(doc))
        mask = os.umask(0)  # a page to share: the usual mode, not the temp file's 0600
        os.umask(mask)
        os.chmod(html_path, 0o666 & ~mask)
        say("lk report", f"wrote {html_path}")
    else:
        click.echo(report.text(doc), nl=False)
    return 0
