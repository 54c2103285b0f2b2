"""lk-plan check: validate a loop contract or a TASKS.md and list every problem."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import click

from loopkit import contract as contracts
from loopkit import git
from loopkit.cli.plan import SETTINGS, plan_say
from loopkit.document import emit
from loopkit.errors import BadInput
from loopkit.evidence.testresults import missing_programs
from loopkit.plan.checking import check
from loopkit.plan.checking import warnings as goal_warnings
from loopkit.plan.expanding import folders_of, prepare
from loopkit.plan.parsing import MAX_TASKS_BYTES, parse
from loopkit.plan.readiness import is_ready
from loopkit.workspace import resolve_contract


def _read_input(file: str) -> tuple[bytes, str, int]:
    """(bytes, source name, size); OS-level failures are bad input (exit 3)."""
    if file == "-":
        raw = sys.stdin.buffer.read(MAX_TASKS_BYTES + 1) if hasattr(sys.stdin, "buffer") else b""
        return raw, "<stdin>", len(raw)
    p = Path(file)
    try:
        if p.is_dir():
            raise BadInput(file, "is a directory, expected a file")
        size = p.stat().st_size
        if size > MAX_TASKS_BYTES:
            # Not read at all: the size alone answers.
            return b"", file, size
        return p.read_bytes(), file, size
    except FileNotFoundError:
        raise BadInput(file, "no such file") from None
    except OSError as e:
        raise BadInput(file, f"cannot read: {e.strerror}") from None


def _looks_like_tasks(name: str, raw: bytes) -> bool:
    lower = name.lower()
    if lower.endswith((".md", ".markdown", ".txt")):
        return True
    if lower.endswith((".yaml", ".yml", ".json")):
        return False

    return re.search(rb"(?m)^[ \t]*[-*+][ \t]+\[[ xX!]\]", raw[:65536]) is not None


@click.command("check", context_settings=SETTINGS)
@click.argument("file")
@click.option(
    "--contract",
    "contract_path",
    metavar="FILE",
    help="For a TASKS.md: the contract whose split threshold and scope the plans must respect "
    "(default ./loop.yaml when there is one, as for next).",
)
@click.option(
    "--type",
    "kind",
    type=click.Choice(["auto", "contract", "tasks"]),
    default="auto",
    show_default=True,
    help="What FILE is (auto: by extension, else by content).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="The JSON document on stdout even on a terminal (it always is when piped).",
)
def check_cmd(file: str, contract_path: str | None, kind: str, as_json: bool = False) -> int:
    """Validate a loop contract or a TASKS.md and list every problem.

    On a terminal, one line per problem (FILE:LINE: message); piped, or with --json, the
    problems as one JSON document on stdout. Exit 0 valid, 1 invalid, 3 the file cannot
    be read.
    """
    raw, source, size = _read_input(file)
    if kind == "auto":
        kind = "tasks" if _looks_like_tasks(source, raw) else "contract"
    problems: list[dict[str, Any]] = []
    warnings: list[dict[str, Any]] = []
    tasks: list[dict[str, Any]] | None = None
    used: str | None = None
    limit = MAX_TASKS_BYTES if kind == "tasks" else contracts.MAX_CONTRACT_BYTES
    if size > limit:
        what = "a TASKS.md" if kind == "tasks" else "a contract"
        problems.append(
            {"path": "$", "message": f"file is {size} bytes; {what} is at most {limit}"}
        )
    elif kind == "contract":
        try:
            data = contracts.parse_text(raw, source)
        except BadInput as e:
            problems.append({"path": e.path or "$", "message": _content_message(e, source)})
        else:
            problems = [p.as_dict() for p in contracts.validate(data)]
            if not problems:
                warnings = contracts.control_warnings(data, contract_file=source)
                warnings += _missing_programs(data.get("criteria"))
    else:
        # The same contract `next` would use, so check and next never disagree.
        # cache_root: the repository's git folder remembers checked contracts, so a YAML
        # contract is parsed once, not at every turn (found without starting git).
        found = resolve_contract(
            contract_path, None, start=Path("."), root=None, cache_root=git.plain_root(".")
        )
        contract = found.contract
        used = found.source
        try:
            parsed = parse(raw, source=source)
        except BadInput as e:
            problems.append({"path": "$", "message": _content_message(e, source)})
        else:
            tree = prepare(parsed, source)
            problems = [
                p.as_dict()
                for p in check(parsed, contract=contract, tree=tree, is_folder=folders_of(source))
            ]
            warnings = goal_warnings(parsed, contract=contract)
            warnings += _missing_programs(contract.get("criteria") if contract else None)
            ids = parsed.by_id()
            tasks = []
            for t in parsed.tasks:
                d = t.as_dict(source=source)
                d["ready"] = is_ready(t, ids)
                tasks.append(d)
    doc: dict[str, Any] = {
        "kind": "loopkit/problems",
        "version": 1,
        "file": source,
        "type": kind,
        "valid": not problems,
        "problems": problems,
    }
    if warnings:
        doc["warnings"] = warnings
        if not problems:  # the problems come first; warnings only for a valid file
            for w in warnings:
                plan_say(f"{source}: warning: {w['path']}: {w['message']}")
    if tasks is not None:
        doc["contract"] = used
        doc["tasks"] = tasks
    if as_json or not sys.stdout.isatty():
        emit(doc, schema_name="problems")
    else:  # a person at a terminal: the problems as lines (the JSON: --json, or piped)
        for p in problems:
            where = f"{p['line']}:" if "line" in p else f" {p['path']}:"
            sys.stdout.write(f"{source}:{where} {p['message']}\n")
    if problems:
        first = problems[0]
        where = f"line {first['line']}: " if "line" in first else f"{first['path']}: "
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        plan_say(f"{source}: invalid {kind}: {where}{first['message']}{more}")
        return 1
    what = f"{len(tasks)} tasks" if tasks is not None else "contract"
    plan_say(f"{source}: valid ({what})")
    return 0


def _content_message(e: BadInput, source: str) -> str:
    """The message without the source and JSON path its ``problems`` entry names apart."""
    msg = str(e)
    for prefix in (source, e.path):
        if prefix and msg.startswith(prefix + ": "):
            msg = msg[len(prefix) + 2 :]
    return msg


def _missing_programs(criteria: Any) -> list[dict[str, Any]]:
    """A warning for each criterion whose program is not on PATH here: such a check
    cannot run, and a loop would block on it (the ``environment`` class)."""

    return [
        {
            "path": f"$.criteria[{name}]",
            "message": f"`{program}` is not on PATH: the check cannot run here "
            "(install it, or change the criterion's `run`)",
        }
        for name, program in missing_programs(criteria, path=os.environ.get("PATH"))
    ]
