"""lk-plan guidance: the agent guidance rendered as Markdown, to stdout or into a file."""

from __future__ import annotations

from pathlib import Path

import click

from loopkit import contract as contracts
from loopkit import guidance
from loopkit.cli.plan import SETTINGS, plan_say
from loopkit.document import read_attempt
from loopkit.errors import BadInput
from loopkit.files import atomic_write
from loopkit.workspace import resolve_contract


@click.command("guidance", context_settings=SETTINGS)
@click.argument("contract_file", metavar="[CONTRACT]", required=False)
@click.option(
    "--output",
    "-o",
    metavar="FILE",
    help="Write into FILE (AGENTS.md, CLAUDE.md) instead of stdout.",
)
def guidance_cmd(contract_file: str | None, output: str | None) -> int:
    """Render the agent guidance (objective, scope, required checks) as Markdown.

    Budgets are left out: the loop enforces them, not the agent. With --output, only the
    block between loopkit's marker comments is replaced; the rest of the file is kept.
    """
    task = None
    if contract_file in (None, "-"):
        doc = read_attempt()
        if doc is None and contract_file == "-":
            raise BadInput("<stdin>", "empty: expected an attempt document (JSON)")
        contract = resolve_contract(None, doc, start=Path("."), root=None).contract
        if contract is None:
            raise BadInput(
                "--contract", "no contract: name a contract file, pipe a document, or add loop.yaml"
            )
        task = doc.get("task") if doc else None
    else:
        contract = contracts.load(contract_file)
    block = guidance.render(contract, task=task)
    if output is None:
        click.echo(block, nl=False)
        return 0
    _write_guidance(Path(output), block)
    plan_say(f"wrote guidance to {output}")
    return 0


def _write_guidance(path: Path, block: str) -> None:
    try:
        existing = path.read_bytes().decode("utf-8") if path.exists() else None
    except UnicodeDecodeError:
        raise BadInput(str(path), "not UTF-8 text: will not rewrite it") from None
    except OSError as e:
        raise BadInput(str(path), f"cannot read: {e.strerror}") from None
    text = guidance.update(existing, block)
    try:
        atomic_write(path, text, keep_mode=True)
    except OSError as e:
        raise BadInput(str(path), f"cannot write here: {e.strerror}") from None
