"""lk schema: print a published JSON Schema.

Usage:  lk schema NAME      print schemas/NAME.json
        lk schema --list    the names, one per line

Exit codes: 0 printed; 3 no schema of that name.
"""

from __future__ import annotations

import json

import click

from loopkit import schema as schemas
from loopkit.cli._entry import command
from loopkit.errors import BadInput
from loopkit.exitcodes import SHARED_HELP


@command(epilog=SHARED_HELP)
@click.argument("name", required=False)
@click.option("--list", "list_", is_flag=True, help="List the schema names.")
def main(name: str | None, list_: bool) -> int:
    """Print the JSON Schema NAME (attempt, contract, task, run, diff, verify, judge, decision, ...)."""
    if list_ or not name:
        click.echo("\n".join(schemas.names()))
        return 0
    try:
        doc = schemas.load(name.removesuffix(".json"))
    except KeyError:
        raise BadInput(
            "NAME", f"no schema {name!r}; one of: {', '.join(schemas.names())}"
        ) from None
    click.echo(json.dumps(doc, indent=2))
    return 0
