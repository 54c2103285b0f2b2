"""The attempt document's sections as typed dictionaries: what each command writes.

Each ``TypedDict`` lists exactly the properties of its published schema
(``schemas/<name>.json``); ``tests/unit/test_schemas.py`` holds the two together, so a
field added to one and not the other fails a test. Code that builds a section can annotate
it with these types (mypy then checks the keys it uses).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:  # spelled out for type checkers; Python 3.10 has them in typing_extensions
    from typing_extensions import NotRequired, Required


class Task(TypedDict, total=False):
    """schemas/task.json"""

    kind: Required[str]
    version: NotRequired[int]
    id: Required[str]
    text: Required[str]
    status: NotRequired[str]
    scope: NotRequired[list[Any]]
    budget: NotRequired[dict[str, Any]]
    depends: NotRequired[list[Any]]
    allow_empty: NotRequired[bool]
    source: NotRequired[dict[str, Any]]
    slices: NotRequired[list[Any]]
    reason: NotRequired[str | None]
    parent: NotRequired[str]
    checks: NotRequired[list[Any]]
    ready: NotRequired[bool]
    accept: NotRequired[list[Any]]
    notes: NotRequired[list[Any]]
    files: NotRequired[list[Any]]
    new_files: NotRequired[list[Any]]
    issue: NotRequired[str]
    closes: NotRequired[str]
    each: NotRequired[str]
    expanded: NotRequired[bool]


class Run(TypedDict, total=False):
    """schemas/run.json"""

    kind: NotRequired[str]
    version: NotRequired[int]
    provider: Required[str]
    command: NotRequired[list[Any]]
    session_id: NotRequired[str | None]
    exit_code: NotRequired[int | None]
    is_error: Required[bool]
    stop_reason: Required[str]
    claimed_complete: NotRequired[bool]
    final_message: NotRequired[str | None]
    effective_model: NotRequired[str | None]
    usage: NotRequired[dict[str, Any]]
    cost: NotRequired[dict[str, Any]]
    api_retries: NotRequired[int]
    tool_errors: NotRequired[int]
    duration_s: NotRequired[float]
    transcript: NotRequired[str | None]
    resume_after: NotRequired[str | None]
    error: NotRequired[str | None]
    side_effects: NotRequired[list[Any]]
    stuck: NotRequired[dict[str, Any] | None]
    attempt_id: NotRequired[Any]
    api_error_status: NotRequired[int | None]
    terminal_reason: NotRequired[str | None]
    handoff: NotRequired[str | None]
    stderr: NotRequired[str | None]
    files_read: NotRequired[list[Any]]
    files_written: NotRequired[list[Any]]
    permission_denials: NotRequired[list[Any]]
    refused: NotRequired[list[dict[str, Any]]]
    base: NotRequired[str]
    carry: NotRequired[dict[str, Any]]
    sandbox: NotRequired[dict[str, Any]]
    state_seal: NotRequired[dict[str, Any]]
    git_control: NotRequired[dict[str, Any]]
    ignored_at_start: NotRequired[list[str]]
    meter: NotRequired[dict[str, Any]]
    special_files: NotRequired[list[dict[str, str]]]


class Diff(TypedDict, total=False):
    """schemas/diff.json"""

    kind: NotRequired[str]
    version: NotRequired[int]
    base: Required[str]
    tree: Required[Any]
    files: Required[list[Any]]
    totals: Required[dict[str, Any]]
    violations: Required[list[Any]]
    within_policy: Required[bool]
    base_ref: NotRequired[str]
    policy: NotRequired[dict[str, Any] | None]


class Verify(TypedDict, total=False):
    """schemas/verify.json"""

    kind: NotRequired[str]
    version: NotRequired[int]
    tree: Required[Any]
    tree_after: NotRequired[Any]
    passed: Required[bool]
    fingerprint: Required[Any]
    checks: Required[list[Any]]
    tree_changed: NotRequired[bool]
    changed_by_checks: NotRequired[list[Any]]
    attempt_id: NotRequired[Any]
    skipped: NotRequired[list[Any]]
    clean_room: NotRequired[bool]
    debris: NotRequired[list[Any]]
    carry_changed: NotRequired[list[Any]]
    problems: NotRequired[list[Any]]
    baseline: NotRequired[dict[str, Any]]
    required: NotRequired[list[Any]]
    known_failures: NotRequired[list[Any]]
    environment: NotRequired[list[Any]]
    sandbox: NotRequired[dict[str, Any]]
    carried: NotRequired[list[Any]]
    not_shown: NotRequired[list[Any]]
    hint: NotRequired[str]
    base_tests_tree: NotRequired[Any]
    whole_tree: NotRequired[dict[str, Any]]
    proof: NotRequired[dict[str, Any]]


class Judge(TypedDict, total=False):
    """schemas/judge.json"""

    kind: NotRequired[str]
    version: NotRequired[int]
    verdict: Required[str]
    grounded: Required[bool]
    trusted: Required[bool]
    files_read: Required[list[Any]]
    feedback: Required[str]
    provider: Required[str]
    goal: NotRequired[str]
    reason: NotRequired[str | None]
    said: NotRequired[Any]
    verdict_line: NotRequired[str | None]
    goal_source: NotRequired[str]
    model: NotRequired[str | None]
    session_id: NotRequired[str | None]
    stop_reason: NotRequired[str | None]
    error: NotRequired[str | None]
    denied: NotRequired[list[Any]]
    files_written: NotRequired[list[Any]]
    citations: NotRequired[list[Any]]
    read_only: NotRequired[dict[str, Any]]
    duration_s: NotRequired[float]
    transcript: NotRequired[str | None]
    command: NotRequired[list[Any]]
    tool_calls: NotRequired[int]
    usage: NotRequired[dict[str, Any]]
    cost: NotRequired[dict[str, Any]]


class Decision(TypedDict, total=False):
    """schemas/decision.json"""

    kind: NotRequired[str]
    version: NotRequired[int]
    outcome: Required[str]
    reason: Required[str]
    failure_class: Required[str | None]
    backoff_s: NotRequired[float | None]
    resume_after: NotRequired[str | None]
    feedback: NotRequired[str]
    attempt: Required[int]
    exit_code: NotRequired[Any]
    exhausted: NotRequired[list[Any]]
    cause: NotRequired[str | None]
    violations: NotRequired[list[Any]]
    crash: NotRequired[str | None]
