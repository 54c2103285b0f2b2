"""The attempt document, its sections, the contract and the ledger's records as typed
dictionaries: what each command writes and reads.

Each ``TypedDict`` lists exactly the properties of its published schema
(``schemas/<name>.json``, or the object at a path inside one); ``tests/unit/test_schemas.py``
holds the two together, so a field added to one and not the other fails a test. Code that
builds or reads a document annotates it with these types (mypy then checks the keys it
uses). Imported for type checking only: nothing here loads at run time.

``JSONObject`` is the one name for a JSON object whose shape loopkit leaves open: what a
schema itself declares a bare ``object`` (a ledger record's ``inputs.document`` and
``history`` as they were recorded, its ``estimate``, ``draft`` and ``pool``; the summaries
of ``run``, ``diff`` and ``verify`` a record keeps), the decision's ``extra`` fields
gathered before the decision is made, the JSON Schema documents loopkit.schema
compiles, and the wire payloads of the model APIs and the
forge that loopkit.testing's servers answer (their vendors' shapes, not loopkit's).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:  # spelled out for type checkers; Python 3.10 has them in typing_extensions
    from typing_extensions import NotRequired, Required

#: A JSON object whose shape is open (see the module's text): the one such name.
JSONObject = dict[str, Any]


class TaskBudget(TypedDict, total=False):
    """schemas/task.json#/properties/budget"""

    lines: int
    files: int


class TaskSource(TypedDict, total=False):
    """schemas/task.json#/properties/source"""

    file: str
    line: int


class Task(TypedDict, total=False):
    """schemas/task.json"""

    kind: Required[str]
    version: NotRequired[int]
    id: Required[str]
    text: Required[str]
    status: NotRequired[str]
    scope: NotRequired[list[str]]
    budget: NotRequired[TaskBudget]
    depends: NotRequired[list[str]]
    allow_empty: NotRequired[bool]
    source: NotRequired[TaskSource]
    slices: NotRequired[list[str]]
    reason: NotRequired[str | None]
    parent: NotRequired[str]
    checks: NotRequired[list[str]]
    ready: NotRequired[bool]
    accept: NotRequired[list[str]]
    notes: NotRequired[list[str]]
    files: NotRequired[list[str]]
    new_files: NotRequired[list[str]]
    issue: NotRequired[str]
    closes: NotRequired[str]
    each: NotRequired[str]
    expanded: NotRequired[bool]


class RunUsage(TypedDict, total=False):
    """schemas/run.json#/properties/usage"""

    input_tokens: int
    output_tokens: int
    turns: int
    tool_calls: int


class Cost(TypedDict, total=False):
    """schemas/run.json#/properties/cost"""

    usd: Required[float | None]
    source: Required[str]
    trusted: Required[bool]
    reported_usd: NotRequired[float | None]


class _Section(TypedDict, total=False):
    """What a section of the attempt document carries when it is printed alone
    (loopkit.document.section): the fields of Run, Diff, Verify, Judge and Decision."""

    kind: NotRequired[str]
    version: NotRequired[int]


class _ModelRun(_Section, total=False):
    """What the worker's run (Run) and the judge's (Judge) both record of the model
    process: its provider and command, session, transcript, spend, time, error and the
    files it wrote."""

    provider: Required[str]
    command: NotRequired[list[Any]]
    session_id: NotRequired[str | None]
    usage: NotRequired[RunUsage]
    cost: NotRequired[Cost]
    duration_s: NotRequired[float]
    transcript: NotRequired[str | None]
    error: NotRequired[str | None]
    files_written: NotRequired[list[Any]]


class Run(_ModelRun, total=False):
    """schemas/run.json"""

    exit_code: NotRequired[int | None]
    is_error: Required[bool]
    stop_reason: Required[str]
    claimed_complete: NotRequired[bool]
    final_message: NotRequired[str | None]
    effective_model: NotRequired[str | None]
    api_retries: NotRequired[int]
    tool_errors: NotRequired[int]
    resume_after: NotRequired[str | None]
    side_effects: NotRequired[list[Any]]
    stuck: NotRequired[Stuck | None]
    attempt_id: NotRequired[Any]
    api_error_status: NotRequired[int | None]
    terminal_reason: NotRequired[str | None]
    handoff: NotRequired[str | None]
    stderr: NotRequired[str | None]
    files_read: NotRequired[list[Any]]
    permission_denials: NotRequired[list[Any]]
    refused: NotRequired[list[JSONObject]]
    base: NotRequired[str]
    carry: NotRequired[JSONObject]
    sandbox: NotRequired[Sandboxed]
    state_seal: NotRequired[StateSeal]
    git_control: NotRequired[GitControl]
    ignored_at_start: NotRequired[list[str]]
    meter: NotRequired[Metered]
    special_files: NotRequired[list[dict[str, str]]]


class DiffFile(TypedDict, total=False):
    """schemas/diff.json#/properties/files/items"""

    path: Required[str]
    status: Required[str]
    added: Required[int]
    deleted: Required[int]
    old_path: NotRequired[str]
    binary: NotRequired[bool]
    old_mode: NotRequired[str]
    new_mode: NotRequired[str]
    symlink: NotRequired[bool]
    symlink_target: NotRequired[str]
    submodule: NotRequired[bool]
    bytes: NotRequired[int]


class ScopeViolation(TypedDict, total=False):
    """schemas/diff.json#/properties/violations/items"""

    rule: Required[str]
    path: Required[str]
    detail: NotRequired[str]


class Diff(_Section, total=False):
    """schemas/diff.json"""

    base: Required[str]
    tree: Required[Any]
    files: Required[list[DiffFile]]
    totals: Required[Totals]
    violations: Required[list[ScopeViolation]]
    within_policy: Required[bool]
    base_ref: NotRequired[str]
    policy: NotRequired[Policy | None]


class TestCounts(TypedDict, total=False):
    """schemas/verify.json#/$defs/tests"""

    source: Required[str]
    failed: Required[list[str]]
    failed_count: Required[int]
    passed_count: NotRequired[int]
    total: NotRequired[int]


class Check(TypedDict, total=False):
    """schemas/verify.json#/properties/checks/items"""

    name: Required[str]
    command: Required[str]
    exit_code: Required[int | None]
    passed: Required[bool]
    duration_s: Required[float]
    output_tail: Required[str]
    output_sha256: Required[str]
    fingerprint: Required[str | None]
    log: NotRequired[str | None]
    timed_out: NotRequired[bool]
    cancelled: NotRequired[bool]
    output_bytes: NotRequired[int]
    changed_tree: NotRequired[bool]
    tree_after: NotRequired[str]
    tests: NotRequired[TestCounts]
    cannot_run: NotRequired[str]
    judged: NotRequired[str]
    regressions: NotRequired[list[str]]
    blocking_tests: NotRequired[list[str]]
    run_on: NotRequired[str]
    per_test_unread: NotRequired[str]


class CannotRun(TypedDict):
    """schemas/verify.json#/$defs/environment/items"""

    name: str
    command: str
    why: str


class Verify(_Section, total=False):
    """schemas/verify.json"""

    tree: Required[Any]
    tree_after: NotRequired[Any]
    passed: Required[bool]
    fingerprint: Required[Any]
    checks: Required[list[Check]]
    tree_changed: NotRequired[bool]
    changed_by_checks: NotRequired[list[Any]]
    attempt_id: NotRequired[Any]
    skipped: NotRequired[list[Any]]
    clean_room: NotRequired[bool]
    debris: NotRequired[list[Any]]
    carry_changed: NotRequired[list[Any]]
    problems: NotRequired[list[Any]]
    baseline: NotRequired[Baseline]
    required: NotRequired[list[Any]]
    known_failures: NotRequired[list[KnownFailure]]
    environment: NotRequired[list[CannotRun]]
    sandbox: NotRequired[Sandboxed]
    carried: NotRequired[list[Any]]
    not_shown: NotRequired[list[Any]]
    hint: NotRequired[str]
    base_tests_tree: NotRequired[Any]
    whole_tree: NotRequired[WholeTree]
    proof: NotRequired[Proof]


class Judge(_ModelRun, total=False):
    """schemas/judge.json"""

    verdict: Required[str]
    grounded: Required[bool]
    trusted: Required[bool]
    files_read: Required[list[Any]]
    feedback: Required[str]
    goal: NotRequired[str]
    reason: NotRequired[str | None]
    said: NotRequired[Any]
    verdict_line: NotRequired[str | None]
    goal_source: NotRequired[str]
    model: NotRequired[str | None]
    stop_reason: NotRequired[str | None]
    denied: NotRequired[list[Any]]
    citations: NotRequired[list[Any]]
    read_only: NotRequired[ReadOnly]
    tool_calls: NotRequired[int]


class Decision(_Section, total=False):
    """schemas/decision.json"""

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


class ContractSource(TypedDict):
    """schemas/attempt.json#/properties/contract_source"""

    path: str
    sha256: str


class GitTime(TypedDict):
    """schemas/common.json#/$defs/timings/items/properties/git"""

    processes: int
    s: float


class CheckTime(TypedDict):
    """schemas/common.json#/$defs/timings/items/properties/checks/items"""

    name: str
    s: float


class Timing(TypedDict, total=False):
    """schemas/common.json#/$defs/timings/items"""

    stage: Required[str]
    s: Required[float]
    git: Required[GitTime]
    worker_s: NotRequired[float]
    checks: NotRequired[list[CheckTime]]


class Scope(TypedDict, total=False):
    """schemas/contract.json#/properties/scope"""

    writable: Required[list[str]]
    protected: NotRequired[list[str]]
    always_allowed: NotRequired[list[str]]
    add_only: NotRequired[list[str]]


class Criterion(TypedDict, total=False):
    """schemas/contract.json#/properties/criteria/items"""

    name: Required[str]
    run: Required[str]
    timeout: NotRequired[float]
    env: NotRequired[dict[str, str]]
    junit: NotRequired[str]


class Budgets(TypedDict, total=False):
    """schemas/contract.json#/properties/budgets"""

    attempts: int
    changed_files: int
    changed_lines: int
    changed_bytes: int
    wall_seconds: float
    cost_usd: float
    tokens: int
    turns: int
    verify_attempts: int
    same_failure: int
    timeouts: int
    verify_reserve_s: float
    transient: int


class Contract(TypedDict, total=False):
    """schemas/contract.json (its sections' settings stay objects of their schema)"""

    kind: NotRequired[str]
    version: Required[int]
    objective: Required[str]
    scope: Required[Scope]
    criteria: Required[list[Criterion]]
    budgets: NotRequired[Budgets]
    backoff: NotRequired[dict[str, float]]
    worker: NotRequired[WorkerSettings]
    judge: NotRequired[JudgeSettings]
    plan: NotRequired[dict[str, int]]
    pool: NotRequired[dict[str, float]]
    verify: NotRequired[VerifySettings]
    sandbox: NotRequired[SandboxSettings]
    artifacts: NotRequired[Artifacts]
    memory: NotRequired[str]
    state_dir: NotRequired[str]
    allow_empty_change: NotRequired[bool]


class Attempt(TypedDict, total=False):
    """schemas/attempt.json: the document every stage reads and adds its section to."""

    kind: Required[str]
    version: Required[int]
    task: NotRequired[Task]
    contract: NotRequired[Contract]
    run: NotRequired[Run]
    diff: NotRequired[Diff]
    verify: NotRequired[Verify]
    judge: NotRequired[Judge]
    decision: NotRequired[Decision]
    attempt_id: NotRequired[str]
    started_at: NotRequired[str]
    contract_source: NotRequired[ContractSource]
    timings: NotRequired[list[Timing]]


class Trigger(TypedDict):
    """schemas/ledger-record.json#/properties/trigger"""

    kind: str
    source: str


class Spent(TypedDict, total=False):
    """schemas/ledger-record.json#/properties/usage: what one attempt spent."""

    cost_usd: NotRequired[float | None]
    cost_source: NotRequired[str | None]
    cost_trusted: NotRequired[bool]
    input_tokens: NotRequired[int]
    output_tokens: NotRequired[int]
    tokens: Required[int]
    turns: Required[int]
    wall_s: Required[float]
    verified: NotRequired[bool]


class Evidence(TypedDict, total=False):
    """schemas/ledger-record.json#/properties/evidence"""

    verified: bool
    passed: bool
    fingerprint: str | None
    stale: bool
    stale_why: list[str]
    reproduction: bool


class Inputs(TypedDict, total=False):
    """schemas/ledger-record.json#/properties/inputs: what a decision was derived from."""

    document: Required[JSONObject]
    history: Required[JSONObject]
    tree_on_disk: NotRequired[str | None]
    cancel: NotRequired[JSONObject | None]
    now: NotRequired[str]
    pool: NotRequired[JSONObject]


class AttestCheck(TypedDict, total=False):
    """schemas/attest-statement.json#/$defs/predicate/properties/checks/items: a check
    that verified the landed tree, its output and tests by digest."""

    name: Required[str]
    command: Required[str]
    runner: Required[str]
    exit_code: NotRequired[int | None]
    passed: Required[bool]
    duration_s: Required[float | None]
    output_sha256: NotRequired[str | None]
    tests_sha256: NotRequired[str | None]


class AttestPredicate(TypedDict, total=False):
    """schemas/attest-statement.json#/$defs/predicate: what verified a landed commit."""

    base: Required[str]
    task: Required[JSONObject]
    contract: Required[JSONObject]
    checks: Required[list[AttestCheck]]
    attempts: Required[list[JSONObject]]
    decision: Required[JSONObject]
    worker: Required[JSONObject]
    judge: Required[JSONObject | None]
    cost: Required[JSONObject]
    loopkit: Required[JSONObject]
    repository: Required[JSONObject]
    bookkeeping: NotRequired[list[str]]


class EvalTrials(TypedDict, total=False):
    """schemas/eval.json#/properties/trials: how many trials the report counts."""

    expected: Required[int]
    finished: Required[int]
    stale: NotRequired[int]


class EvalReport(TypedDict, total=False):
    """schemas/eval.json: ``lk eval report``'s document."""

    kind: Required[str]
    version: Required[int]
    suite: Required[str]
    base: Required[str]
    repeats: Required[int]
    seed: Required[int]
    trials: Required[EvalTrials]
    configs: Required[dict[str, JSONObject]]  # per configuration: its rates and counts
    comparisons: Required[list[JSONObject]]
    bases: NotRequired[dict[str, str]]
    infra_reading: NotRequired[str]


class EvalPlanRow(TypedDict):
    """schemas/eval-plan.json#/properties/plan/items: what one number of repeats needs."""

    repeats: int
    tasks: int
    trials: int


class EvalPlan(TypedDict):
    """schemas/eval-plan.json: ``lk eval plan``'s document."""

    kind: str
    version: int
    effect: float
    rate: float
    spread: float
    configs: int
    power: float
    alpha: float
    plan: list[EvalPlanRow]


class QueueEntry(TypedDict, total=False):
    """schemas/queue.json#/$defs/entry: a task verified and committed, waiting to land
    (loopkit.ratchet.queue keeps one file of it per entry)."""

    kind: Required[str]
    version: Required[int]
    seq: Required[int]
    id: Required[str]
    task: Required[str]
    text: NotRequired[str]
    tree: Required[str]
    base: Required[str]
    commit: Required[str]
    ref: Required[str]
    onto: Required[str]
    tasks: NotRequired[str]
    document: NotRequired[str]
    status: Required[str]  # queued | landed | returned
    landed: NotRequired[JSONObject]
    returned: NotRequired[JSONObject]


class Entry(TypedDict, total=False):
    """A ledger record as loopkit.decision.records makes it, before the ledger numbers it
    (``Record`` less its kind, version and seq)."""

    type: Required[str]
    task_id: Required[str]
    attempt: Required[int]
    attempt_id: NotRequired[str | None]
    trigger: Required[Trigger]
    started_at: NotRequired[str | None]
    recorded_at: Required[str]
    run: NotRequired[JSONObject | None]
    usage: NotRequired[Spent]
    diff: NotRequired[JSONObject | None]
    verify: NotRequired[JSONObject | None]
    judge: NotRequired[JSONObject | None]
    evidence: NotRequired[Evidence]
    admission: NotRequired[Admission]
    decision: Required[Decision | None]
    reason: Required[str]
    inputs: Required[Inputs]
    epoch: NotRequired[int]
    ran: NotRequired[bool]
    pool: NotRequired[JSONObject]
    draft: NotRequired[JSONObject]
    estimate: NotRequired[JSONObject]
    timings: NotRequired[list[Timing]]


class Record(Entry, total=False):
    """schemas/ledger-record.json: one line of the ledger."""

    kind: Required[str]
    version: Required[int]
    seq: Required[int]


class Disagreement(TypedDict, total=False):
    """schemas/replay.json#/properties/disagreements/items"""

    line: Required[int]
    seq: NotRequired[int | None]
    task_id: Required[str | None]
    attempt: NotRequired[int | None]
    field: Required[str]
    recorded: Required[Any]
    derived: Required[Any]


class Stuck(TypedDict, total=False):
    """schemas/run.json#/properties/stuck"""

    tool: Required[str]
    error: Required[str]
    repeats: Required[int]
    example: NotRequired[str]
    input: NotRequired[JSONObject]


class Sandboxed(TypedDict, total=False):
    """schemas/run.json#/properties/sandbox"""

    mode: Required[str]
    used: Required[bool]
    tool: NotRequired[str]
    reason: Required[str]
    network: NotRequired[str | bool]
    egress: NotRequired[JSONObject]


class StateSeal(TypedDict, total=False):
    """schemas/run.json#/properties/state_seal"""

    folder: str
    ledger: str
    index: str
    cancel: bool
    baseline: JSONObject
    task: str
    stat_index: str


class GitControl(TypedDict, total=False):
    """schemas/run.json#/properties/git_control"""

    digest: Required[str]
    paths: Required[JSONObject]
    changed: NotRequired[list[str]]


class Metered(TypedDict, total=False):
    """schemas/run.json#/properties/meter"""

    upstream: Required[str]
    dialect: Required[str]
    requests: Required[int]
    statuses: Required[JSONObject]
    refused: Required[int]
    withheld: NotRequired[list[str]]
    unmetered: NotRequired[list[str]]
    transient: Required[int]
    retried: NotRequired[int]
    last_status: NotRequired[int | None]
    models: Required[list[str]]
    tokens: Required[JSONObject]
    cost: Required[JSONObject]
    latency_ms: NotRequired[JSONObject]
    log: NotRequired[str | None]


class Totals(TypedDict, total=False):
    """schemas/diff.json#/properties/totals"""

    files: Required[int]
    lines: Required[int]
    added: NotRequired[int]
    deleted: NotRequired[int]
    bytes: NotRequired[int]


class Policy(TypedDict, total=False):
    """schemas/diff.json#/properties/policy"""

    writable: list[str]
    protected: list[str]
    always_allowed: list[str]
    add_only: list[str]
    changed_files: int | None
    changed_lines: int | None
    changed_bytes: int | None


class BaseCheck(TypedDict, total=False):
    """schemas/verify.json#/properties/baseline/properties/checks/items"""

    name: str
    passed: bool
    fingerprint: str | None
    tests: TestCounts
    cannot_run: str


class Baseline(TypedDict, total=False):
    """schemas/verify.json#/properties/baseline"""

    tree: str
    checks: list[BaseCheck]


class KnownFailure(TypedDict, total=False):
    """schemas/verify.json#/properties/known_failures/items"""

    name: str
    fingerprint: str | None
    tests: list[str]


class WholeTree(TypedDict, total=False):
    """schemas/verify.json#/properties/whole_tree"""

    checks: Required[list[Check]]
    passed: Required[bool]
    skipped: NotRequired[list[str]]


class Proof(TypedDict, total=False):
    """schemas/verify.json#/properties/proof"""

    proven: Required[bool]
    tree: NotRequired[str]
    tests: Required[list[JSONObject]]
    why: NotRequired[list[str]]


class ReadOnly(TypedDict, total=False):
    """schemas/judge.json#/properties/read_only"""

    checked: Required[bool]
    tree_before: Required[Any]
    tree_after: Required[Any]
    changed: Required[bool]
    changes: Required[list[JSONObject]]


class WorkerSettings(TypedDict, total=False):
    """schemas/contract.json#/properties/worker"""

    provider: str
    model: str
    command: str
    agent: str
    max_turns: int
    max_cost_usd: float
    timeout: float
    sandbox: str
    allowed_tools: list[str]
    permission_mode: str
    env_allow: list[str]
    breaker_repeats: int
    resume: bool
    extra_args: list[str]
    meter: str | bool
    upstream: str
    unmetered: list[str]


class JudgeSettings(TypedDict, total=False):
    """schemas/contract.json#/properties/judge"""

    provider: Required[str]
    model: NotRequired[str]
    command: NotRequired[str]
    agent: NotRequired[str]
    goal: NotRequired[str]
    timeout: NotRequired[float]
    max_turns: NotRequired[int]
    env_allow: NotRequired[list[str]]
    review: NotRequired[bool]


class VerifySettings(TypedDict, total=False):
    """schemas/contract.json#/properties/verify"""

    carry: list[str]
    env_allow: list[str]
    network: str | bool
    prove_new_tests: str | bool


class SandboxSettings(TypedDict, total=False):
    """schemas/contract.json#/properties/sandbox"""

    mode: str | bool
    network: str | bool
    hosts: list[str]
    writable: list[str]
    show: list[str]
    hide: list[str]


class Artifacts(TypedDict, total=False):
    """schemas/contract.json#/properties/artifacts"""

    retention_days: float
    keep_completed: int


class Reservation(TypedDict, total=False):
    """A running worker's share of the budgets, reserved at its admission (a pool's
    share also names its task and attempt, and the task's names its pool)."""

    at: Required[str]
    wall_s: Required[float]
    wall_seconds: float
    cost_usd: float
    tokens: float
    task: str | None
    attempt: int | None
    pool: str


class History(TypedDict):
    """What a task's ledger records fold to (loopkit.decision.budget.fold): what its
    budgets have counted so far. A pool's history has the same shape."""

    attempts: int
    spent_attempts: int
    verify_attempts: int
    cost_usd: float
    cost_untrusted_usd: float
    tokens: int
    turns: int
    wall_s: float
    last_fingerprint: str | None
    same_failure: int
    timeouts: int
    transient_streak: int
    no_op_streak: int
    last_violations: str | None
    same_violation: int
    last_crash: str | None
    same_crash: int
    last_outcome: str | None
    last_class: str | None
    resume_after: str | None
    reserved: list[Reservation]
    epoch: int


class Granted(TypedDict):
    """What an admission grants the next run."""

    timeout_s: float | None
    cost_usd: float | None
    turns: int | None


class PoolAdmission(TypedDict, total=False):
    """One worker's admission to its run's pool (loopkit.decision.budget.admit_pool)."""

    id: Required[Any]
    admitted: Required[bool]
    wait: Required[bool]
    exhausted: Required[list[str]]
    short: Required[list[str]]
    share: Required[dict[str, float]]
    left: Required[dict[str, float]]
    running: Required[int]
    reason: str
    reservation: Reservation


class Admission(TypedDict, total=False):
    """May the next run start (loopkit.decision.budget.admit): the ledger's
    ``admission`` of an admission record."""

    admitted: Required[bool]
    blocked_until: Required[str | None]
    attempt: Required[int]
    exhausted: Required[list[str]]
    granted: Required[Granted]
    verify_reserve_s: Required[float]
    remaining: Required[dict[str, float]]
    reason: Required[str]
    reservation: Reservation
    pool: PoolAdmission


class Summary(TypedDict):
    """A ledger record's readable summary of its attempt (loopkit.decision.records)."""

    run: JSONObject | None
    usage: Spent
    diff: JSONObject | None
    judge: JSONObject | None
    verify: JSONObject | None


class View(Attempt, total=False):
    """The part of an attempt document a decision reads (loopkit.decision.decide.inputs),
    with what lk-decide found beside it: whether lk-verify's own record of the checks
    matches the verify section, and whether the worker changed the state folder."""

    verify_recorded: str | None
    state_tampered: list[str]


class Intent(TypedDict, total=False):
    """A person's request to stop (the state folder's cancel.json; schemas/cancel.json's
    ``intent``): why, when, and the process that asked."""

    reason: Required[str]
    at: str
    pid: int


class Citation(TypedDict, total=False):
    """schemas/judge.json#/properties/citations/items"""

    path: Required[str]
    line: Required[int]
    text: Required[str]
    ok: Required[bool]
    why: NotRequired[str]


class Moment(TypedDict, total=False):
    """schemas/report.json#/properties/tasks/items/properties/timeline/items"""

    attempt: Required[int | None]
    outcome: Required[str | None]
    failure_class: NotRequired[str | None]
    at: NotRequired[str | None]
    reason: NotRequired[str | None]


class TaskReport(TypedDict, total=False):
    """schemas/report.json#/properties/tasks/items"""

    task_id: Required[str]
    attempts: Required[int]
    verify_attempts: Required[int]
    outcome: Required[str | None]
    failure_class: Required[str | None]
    why: Required[str | None]
    cost_usd: Required[float]
    cost_untrusted_usd: Required[float]
    tokens: Required[int]
    wall_s: Required[float]
    first_at: NotRequired[str | None]
    last_at: NotRequired[str | None]
    timeline: Required[list[Moment]]


class DraftTry(TypedDict, total=False):
    """schemas/plan-draft.json#/properties/drafts/items: one answer of the model."""

    draft: Required[int]
    valid: Required[bool]
    problems: Required[list[Mapping[str, Any]]]
    lines: NotRequired[int]
    session_id: NotRequired[str | None]
    transcript: NotRequired[str | None]


class PlanDraft(TypedDict, total=False):
    """schemas/plan-draft.json: what lk-plan draft (and split) did."""

    kind: Required[str]
    version: Required[int]
    issue: Required[str | None]
    tasks_file: Required[str]
    provider: Required[str]
    model: NotRequired[str | None]
    outcome: Required[str]
    written: Required[bool]
    tasks: Required[list[str]]
    repairs: Required[int]
    max_repairs: Required[int]
    drafts: Required[list[DraftTry]]
    split: NotRequired[str]
    estimate: NotRequired[JSONObject]
    commit: NotRequired[str | None]


class NearBudget(TypedDict, total=False):
    """schemas/report.json#/properties/health/properties/runs_near_budget"""

    threshold: Required[float]
    runs: Required[int]
    share: Required[float]
    by_budget: NotRequired[dict[str, int]]


class Dollars(TypedDict, total=False):
    """schemas/report.json#/properties/health/properties/cost_per_completed_task"""

    trusted_usd: Required[float | None]
    untrusted_usd: Required[float | None]


class PullRequests(TypedDict, total=False):
    """schemas/report.json#/properties/health/properties/pull_requests"""

    stacks: Required[int]
    terminal_tasks: Required[int]
    without_pull_request: Required[list[str]]
    share_without: Required[float]
    slo_share: Required[float]
    merged: Required[int]
    cost_per_merged: Required[Dollars]
    landings: Required[int]
    returns: Required[int]
    queue: NotRequired[dict[str, int]]


class DraftRates(TypedDict, total=False):
    """schemas/report.json#/properties/health/properties/plan_drafts"""

    drafts: Required[int]
    valid_first_time: Required[int]
    valid_after_repair: Required[int]
    given_up: Required[int]
    first_time_share: Required[float | None]
    after_repair_share: Required[float | None]
    slo_share: Required[float]


class Estimates(TypedDict, total=False):
    """schemas/report.json#/properties/health/properties/estimates"""

    landed: Required[int]
    within: Required[int]
    within_share: Required[float | None]
    attempts: Required[int]
    over_estimate: Required[int]
    resplit: Required[int]
    median_lines_ratio: Required[float | None]
    median_files_ratio: Required[float | None]


class StageTimes(TypedDict, total=False):
    """schemas/report.json#/properties/health/properties/stages"""

    attempts: Required[int]
    per_stage: Required[dict[str, dict[str, float]]]
    median_git_processes: Required[float | None]


class Health(TypedDict, total=False):
    """schemas/report.json#/properties/health"""

    tasks: Required[int]
    runs: Required[int]
    termination_reasons: Required[dict[str, int]]
    failure_classes: NotRequired[dict[str, int]]
    runs_near_budget: Required[NearBudget]
    p95_verify_attempts: Required[int | None]
    completed_tasks: Required[int]
    cost_per_completed_task: Required[Dollars]
    cost_total: NotRequired[Dollars]
    triggers: NotRequired[dict[str, int]]
    refused_hosts: NotRequired[dict[str, int]]
    verify_refused_hosts: NotRequired[dict[str, int]]
    pull_requests: NotRequired[PullRequests]
    plan_drafts: NotRequired[DraftRates]
    estimates: NotRequired[Estimates]
    stages: NotRequired[StageTimes]


class Report(TypedDict, total=False):
    """schemas/report.json"""

    kind: Required[str]
    version: Required[int]
    ledger: Required[str]
    generated_at: NotRequired[str]
    records: Required[int]
    tasks: Required[list[TaskReport]]
    health: Required[Health]
    problems: Required[list[Mapping[str, Any]]]


class ScriptTool(TypedDict, total=False):
    """schemas/model-script.json#/$defs/tool: a tool call a scripted turn makes."""

    name: Required[str]
    input: NotRequired[JSONObject | str]
    id: NotRequired[str]


class ScriptError(TypedDict, total=False):
    """schemas/model-script.json#/$defs/error/oneOf/1: an error a scripted turn answers."""

    status: Required[int]
    type: NotRequired[str]
    message: NotRequired[str]
    code: NotRequired[str]
    headers: NotRequired[dict[str, str | float | bool]]
    body: NotRequired[Any]
    times: NotRequired[int]
    in_stream: NotRequired[bool]


class ScriptCut(TypedDict, total=False):
    """schemas/model-script.json#/$defs/turn/oneOf/1/properties/cut/oneOf/1"""

    after: int
    times: int


class ScriptTurn(TypedDict, total=False):
    """schemas/model-script.json#/$defs/turn/oneOf/1: one scripted turn."""

    text: str
    tools: list[ScriptTool]
    error: ScriptError
    fail: ScriptError
    cut: ScriptCut | bool
    delay: float
    stop_reason: str
    usage: dict[str, int]
    note: Any


class Derived(TypedDict, total=False):
    """What replay re-derives of a ledger record from its inputs (loopkit.decision.records):
    the fields it then compares with the recorded ones."""

    admission: Admission
    decision: Decision | None
    reason: str
    attempt: int
    evidence: Evidence
    run: JSONObject | None
    usage: Spent
    diff: JSONObject | None
    judge: JSONObject | None
    verify: JSONObject | None
    estimate: JSONObject | None


class PoolAsk(TypedDict):
    """A worker's admission within its run's pool (a ledger record's ``inputs.pool``):
    the pool, its workers, the task asking, and the pool's history it reserves from."""

    id: str
    jobs: int
    task: str
    history: History


class CheckSummary(TypedDict):
    """One check of a verification, as a pull request's body shows it."""

    name: str | None
    passed: bool
    duration_s: float | None


class VerifySummary(TypedDict):
    """What a pull request's body shows of a verification (``proof.summary``)."""

    tree: str | None
    passed: bool
    checks: list[CheckSummary]


class JudgeSummary(TypedDict):
    """The judge's verdict, as a pull request's body shows it."""

    verdict: str | None
    grounded: bool | None
    citations: list[str]


class SliceEvidence(TypedDict, total=False):
    """A slice's ``evidence`` (schemas/stack-step.json#/$defs/slice, described there):
    what its pull request's body shows. Every key may be missing: a record written by
    an older loopkit, or a slice added without a decided document or a ledger."""

    verify: VerifySummary
    task: str  # the task's id, as the decided document named it
    attempt: int
    outcome: str
    judge: JudgeSummary
    attempts: int
    cost_usd: float
    cost_trusted: bool
    outcomes: list[str]
    refused_hosts: dict[str, int]
    restacked_from: str
    addressed_from: str


class Returned(TypedDict):
    """schemas/stack-step.json#/$defs/stack/properties/returned/items"""

    slice: str
    step: str
    why: str


class SliceRecord(TypedDict, total=False):
    """schemas/stack-step.json#/$defs/slice"""

    id: Required[str]
    branch: Required[str]
    title: Required[str]
    fork: Required[str]
    head: Required[str]
    tree: Required[str]
    evidence: Required[SliceEvidence]
    pushed: Required[str]
    pr: Required[int | None]
    issue: Required[int | None]
    merged: Required[str]
    closed: NotRequired[str]
    task: NotRequired[Task | None]
    addressed: NotRequired[list[str]]


class StackRecord(TypedDict, total=False):
    """schemas/stack-step.json#/$defs/stack"""

    kind: Required[str]
    version: Required[int]
    name: Required[str]
    target: Required[str]
    remote: Required[str]
    forge: Required[str]
    repo: Required[str]
    issue: Required[int | None]
    slices: Required[list[SliceRecord]]
    pushed_meta: Required[str]
    returned: NotRequired[list[Returned]]


class Followed(TypedDict, total=False):
    """schemas/stack-step.json#/properties/followed/items"""

    slice: Required[str]
    state: Required[str]
    pr: NotRequired[int | None]
    landed: NotRequired[str]


class PullShown(TypedDict, total=False):
    """schemas/stack-step.json#/properties/pulls/items"""

    slice: str
    number: int
    base: str


class Outcome(TypedDict, total=False):
    """schemas/stack-step.json#/properties/outcomes/items"""

    task: Required[str]
    code: Required[int]
    slice: NotRequired[str]


class RemarkShown(TypedDict):
    """schemas/stack-step.json#/properties/remarks/items"""

    key: str
    who: str
    where: str
    text: str


class StepSaid(TypedDict, total=False):
    """What a step of ``lk stack`` says besides its stack: the optional properties of
    schemas/stack-step.json (``StackStep`` adds the rest)."""

    slice: str
    moved: list[str]
    followed: list[Followed]
    pushed: list[str]
    evidence_refs: list[str]
    pulls: list[PullShown]
    landed: str
    tree: str
    method: str
    outcomes: list[Outcome]
    folded: int
    remarks: list[RemarkShown]
    commit: str
    queued: bool


class StackStep(StepSaid, total=False):
    """schemas/stack-step.json"""

    kind: Required[str]
    version: Required[int]
    step: Required[str]
    stack: Required[StackRecord]


class SliceResult(TypedDict):
    """schemas/slice-result.json"""

    kind: str
    version: int
    task: str
    code: int
    base: str
    head: str
    bundle: bool
    saved: list[str]


class LedgerFold(TypedDict, total=False):
    """schemas/ledger-fold.json"""

    kind: Required[str]
    version: Required[int]
    ledger: Required[str]
    sources: Required[list[str]]
    added: Required[int]
    known: Required[int]
    skipped_lines: NotRequired[int]
