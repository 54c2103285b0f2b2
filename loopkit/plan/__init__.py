"""TASKS.md: parse the checklist, check every plan contract, pick the next task, mark one.

A TASKS.md is a Markdown checklist. ``- [ ]`` is open, ``- [x]`` done, ``- [!]`` parked;
``GOAL:`` at the start of an item makes it a judged goal. An item may carry a plan
contract in lines indented under it::

    - [ ] Fix blank-line handling in parse_headers {#blank-line}
      budget: 40 lines / 2 files
      scope: src/parser/headers.py, tests/test_headers.py
      depends: project-setup
      end

Plans over the split threshold hold slices: nested checklist items, each with its own
plan, run in their written order with disjoint scopes. An item's id is its explicit
``{#id}`` or a slug of its text -- never its line number -- so ids survive edits above
it and marking it. This package reads and writes bytes; it never prints.

One module per concept: ``parsing`` (bytes, lines, items: the Plan), ``checking`` (plan
problems: split thresholds, slices, the contract), ``readiness`` (dependencies, the next
task, why none is ready), ``marking`` (rewriting one line -- and the parents it
completes -- under a lock).

The names below are importable from ``loopkit.plan`` itself, each loaded on first use:
a command imports only the modules its path needs (``lk-plan next`` never loads
``marking`` and the file writing behind it). Code inside loopkit imports from the modules.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from loopkit.plan.checking import check as check
    from loopkit.plan.checking import threshold as threshold
    from loopkit.plan.marking import MARKS as MARKS
    from loopkit.plan.marking import Conflict as Conflict
    from loopkit.plan.marking import Edit as Edit
    from loopkit.plan.marking import apply_edit as apply_edit
    from loopkit.plan.marking import clean_reason as clean_reason
    from loopkit.plan.marking import commit_edit as commit_edit
    from loopkit.plan.marking import mark as mark
    from loopkit.plan.marking import plan_edit as plan_edit
    from loopkit.plan.marking import prepare_mark as prepare_mark
    from loopkit.plan.marking import rewrite_line as rewrite_line
    from loopkit.plan.parsing import ID_PATTERN as ID_PATTERN
    from loopkit.plan.parsing import MAX_BUDGET_DIGITS as MAX_BUDGET_DIGITS
    from loopkit.plan.parsing import MAX_SLUG as MAX_SLUG
    from loopkit.plan.parsing import MAX_TASKS_BYTES as MAX_TASKS_BYTES
    from loopkit.plan.parsing import PLAN_KEYS as PLAN_KEYS
    from loopkit.plan.parsing import STATUSES as STATUSES
    from loopkit.plan.parsing import Plan as Plan
    from loopkit.plan.parsing import PlanProblem as PlanProblem
    from loopkit.plan.parsing import Task as Task
    from loopkit.plan.parsing import decode as decode
    from loopkit.plan.parsing import parse as parse
    from loopkit.plan.parsing import parse_item_line as parse_item_line
    from loopkit.plan.parsing import read_bytes as read_bytes
    from loopkit.plan.parsing import slugify as slugify
    from loopkit.plan.parsing import split_body as split_body
    from loopkit.plan.parsing import split_lines as split_lines
    from loopkit.plan.readiness import all_depends as all_depends
    from loopkit.plan.readiness import blocked_by as blocked_by
    from loopkit.plan.readiness import effective_status as effective_status
    from loopkit.plan.readiness import is_ready as is_ready
    from loopkit.plan.readiness import next_task as next_task
    from loopkit.plan.readiness import parked_upstream as parked_upstream
    from loopkit.plan.readiness import ready_tasks as ready_tasks
    from loopkit.plan.readiness import summary as summary

#: The module each name lives in (the same names as the imports above, held together by
#: tests/unit/test_plan.py).
_HOMES = {
    **dict.fromkeys(
        (
            "ID_PATTERN",
            "MAX_BUDGET_DIGITS",
            "MAX_SLUG",
            "MAX_TASKS_BYTES",
            "PLAN_KEYS",
            "STATUSES",
            "Plan",
            "PlanProblem",
            "Task",
            "decode",
            "parse",
            "parse_item_line",
            "read_bytes",
            "slugify",
            "split_body",
            "split_lines",
        ),
        "parsing",
    ),
    **dict.fromkeys(("check", "threshold"), "checking"),
    **dict.fromkeys(
        (
            "all_depends",
            "blocked_by",
            "effective_status",
            "is_ready",
            "next_task",
            "parked_upstream",
            "ready_tasks",
            "summary",
        ),
        "readiness",
    ),
    **dict.fromkeys(
        (
            "MARKS",
            "Conflict",
            "Edit",
            "apply_edit",
            "clean_reason",
            "commit_edit",
            "mark",
            "plan_edit",
            "prepare_mark",
            "rewrite_line",
        ),
        "marking",
    ),
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # once: later lookups never come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})
