"""Every published schema: valid against the 2020-12 metaschema, and its examples.

Examples live in tests/examples/{valid,invalid}/<schema>/*.json. For ``common`` (which only
holds shared ``$defs``) a file named ``<def>.<case>.json`` is checked against that def.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from loopkit import schema

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
NAMES = schema.names()


def _registry() -> Registry[Any]:
    return Registry().with_resources(
        (schema.BASE_URI + f"{n}.json", Resource.from_contents(schema.load(n))) for n in NAMES
    )


def _validator(name: str, file: Path) -> Draft202012Validator:
    if name == "common":
        target = {"$ref": f"{schema.BASE_URI}common.json#/$defs/{file.name.split('.')[0]}"}
        return Draft202012Validator(target, registry=_registry())
    return Draft202012Validator(schema.load(name), registry=_registry())


def _examples(kind: str) -> list[Any]:
    return [
        pytest.param(p.parent.name, p, id=f"{p.parent.name}/{p.stem}")
        for p in sorted((EXAMPLES / kind).glob("*/*.json"))
    ]


@pytest.mark.parametrize("name", NAMES)
def test_schema_passes_the_metaschema(name: str) -> None:
    doc = schema.load(name)
    Draft202012Validator.check_schema(doc)
    assert doc["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert doc["$id"] == f"{schema.BASE_URI}{name}.json"


@pytest.mark.parametrize("name", [n for n in NAMES if n != "common"])
def test_message_schemas_pin_kind_and_version(name: str) -> None:
    props = schema.load(name).get("properties", {})
    if "_type" in props:  # an in-toto statement: its _type and predicateType pin both
        assert props["_type"]["const"].endswith("/v1")
        assert props["predicateType"]["const"].endswith("/v1")
        return
    assert props.get("version") == {"const": 1}
    assert "kind" in props


@pytest.mark.parametrize("name", NAMES)
def test_every_schema_has_valid_and_invalid_examples(name: str) -> None:
    for kind in ("valid", "invalid"):
        assert list((EXAMPLES / kind / name).glob("*.json")), f"add tests/examples/{kind}/{name}/"


@pytest.mark.parametrize(("name", "file"), _examples("valid"))
def test_valid_examples(name: str, file: Path) -> None:
    assert name in NAMES, f"examples for a schema that does not exist: {name}"
    doc = json.loads(file.read_text(encoding="utf-8"))
    errors = list(_validator(name, file).iter_errors(doc))
    assert errors == [], [e.message for e in errors]


@pytest.mark.parametrize(("name", "file"), _examples("invalid"))
def test_invalid_examples(name: str, file: Path) -> None:
    assert name in NAMES, f"examples for a schema that does not exist: {name}"
    doc = json.loads(file.read_text(encoding="utf-8"))
    assert list(_validator(name, file).iter_errors(doc)), f"{file.name} should be invalid"


def test_refs_resolve_locally() -> None:
    # Validating a full attempt walks every $ref; nothing may be fetched over the network.
    doc = json.loads((EXAMPLES / "valid/attempt/every-section.json").read_text())
    schema.validate(doc, "attempt")
    assert schema.errors({"kind": "loopkit/attempt", "version": 1, "task": {}}, "attempt")


def test_the_spec_field_names_are_published() -> None:
    """The names of SPEC.md's published surface exist in the section schemas."""
    fields = {
        "task": ["id", "text", "kind", "scope", "budget", "depends"],
        "run": [
            "provider", "command", "session_id", "exit_code", "is_error", "stop_reason",
            "claimed_complete", "final_message", "effective_model", "usage", "cost",
            "api_retries", "tool_errors", "duration_s", "transcript",
        ],
        "diff": ["base", "tree", "files", "totals", "violations", "within_policy"],
        "verify": ["tree", "passed", "fingerprint", "checks"],
        "judge": ["verdict", "grounded", "trusted", "files_read", "feedback", "provider"],
        "decision": ["outcome", "reason", "failure_class", "backoff_s", "resume_after", "feedback", "attempt"],
    }  # fmt: skip
    for name, names in fields.items():
        props = schema.load(name)["properties"]
        missing = [f for f in names if f not in props]
        assert not missing, f"{name}.json lacks {missing}"
    run = schema.load("run")["properties"]
    assert set(run["usage"]["properties"]) >= {
        "input_tokens",
        "output_tokens",
        "turns",
        "tool_calls",
    }
    assert set(run["cost"]["properties"]) >= {"usd", "source", "trusted"}
    check = schema.load("verify")["properties"]["checks"]["items"]["properties"]
    assert set(check) >= {
        "name", "command", "exit_code", "passed", "duration_s", "output_tail",
        "output_sha256", "fingerprint", "log",
    }  # fmt: skip
    assert set(run["stop_reason"]["enum"]) >= {
        "completed", "max_turns", "timeout", "api_error", "rate_limited", "usage_limit",
        "auth_error", "permission_denied", "stuck", "cancelled", "crashed",
    }  # fmt: skip
    assert schema.load("judge")["properties"]["verdict"]["enum"] == ["MET", "NOT_MET"]
    outcomes = schema.load("decision")["properties"]["outcome"]["enum"]
    assert outcomes == [
        "complete", "retry", "replan", "blocked", "failed", "budget_exhausted", "cancelled",
    ]  # fmt: skip


def test_every_provider_list_follows_the_registry() -> None:
    """Contract validation, the click choices and the schema enums name the registered
    providers: a new provider is one module and one registry line."""
    from loopkit import contract
    from loopkit.cli import invoke, judge
    from loopkit.worker import providers

    names = providers.names()
    assert list(contract.allowed("provider")) == names
    for cmd in (invoke.main, judge.main):
        choice = next(p for p in cmd.params if p.name == "provider").type
        assert list(choice.choices) == names  # type: ignore[attr-defined]

    def enums(node: Any, key: str = "") -> list[list[Any]]:
        found = []
        if isinstance(node, dict):
            # acp's `agent` names agents (claude among them), not providers.
            if "enum" in node and "claude" in node["enum"] and key != "agent":
                found.append([v for v in node["enum"] if v is not None])
            for k, v in node.items():
                found += enums(v, k)
        elif isinstance(node, list):
            for v in node:
                found += enums(v, key)
        return found

    seen = [e for n in ("contract", "run", "judge") for e in enums(schema.load(n))]
    assert seen and all(e == names for e in seen), seen
    # The ACP agents a contract may name are the table's (loopkit.worker.acp.agents).
    from loopkit.worker.acp import agents

    sections = schema.load("contract")["properties"]
    for section in ("worker", "judge"):
        assert sections[section]["properties"]["agent"]["enum"] == agents.names()
    assert list(contract.allowed("agent")) == agents.names()


@pytest.mark.parametrize(
    "path",
    sorted((Path(__file__).resolve().parents[1] / "golden").glob("*.jsonl")),
    ids=lambda p: p.stem,
)
def test_each_provider_recognises_its_own_saved_stream(path: Path) -> None:
    """Transcript sniffing is each provider's own (Provider.sniff), over the registry."""
    from loopkit.worker import providers
    from loopkit.worker.providers.base import detect

    owner = path.name.split("_", 1)[0]
    assert detect(path) == (owner if owner in providers.names() else "command")


#: loopkit.sections' typed dictionaries and the schema objects they spell out.
TYPED = [
    ("task", "Task"),
    ("run", "Run"),
    ("diff", "Diff"),
    ("verify", "Verify"),
    ("judge", "Judge"),
    ("decision", "Decision"),
    ("attempt", "Attempt"),
    ("contract", "Contract"),
    ("ledger-record", "Record"),
    ("queue#/$defs/entry", "QueueEntry"),
    ("eval", "EvalReport"),
    ("eval#/properties/trials", "EvalTrials"),
    ("eval-plan", "EvalPlan"),
    ("eval-plan#/properties/plan/items", "EvalPlanRow"),
    ("attest-statement#/$defs/predicate", "AttestPredicate"),
    ("attest-statement#/$defs/predicate/properties/checks/items", "AttestCheck"),
    ("task#/properties/budget", "TaskBudget"),
    ("task#/properties/source", "TaskSource"),
    ("run#/properties/usage", "RunUsage"),
    ("run#/properties/cost", "Cost"),
    ("run#/properties/stuck", "Stuck"),
    ("run#/properties/sandbox", "Sandboxed"),
    ("run#/properties/state_seal", "StateSeal"),
    ("run#/properties/git_control", "GitControl"),
    ("run#/properties/meter", "Metered"),
    ("diff#/properties/totals", "Totals"),
    ("diff#/properties/policy", "Policy"),
    ("diff#/properties/files/items", "DiffFile"),
    ("diff#/properties/violations/items", "ScopeViolation"),
    ("verify#/properties/baseline", "Baseline"),
    ("verify#/properties/whole_tree", "WholeTree"),
    ("verify#/properties/proof", "Proof"),
    ("verify#/properties/checks/items", "Check"),
    ("verify#/$defs/tests", "TestCounts"),
    ("verify#/$defs/environment/items", "CannotRun"),
    ("verify#/properties/baseline/properties/checks/items", "BaseCheck"),
    ("verify#/properties/known_failures/items", "KnownFailure"),
    ("judge#/properties/read_only", "ReadOnly"),
    ("attempt#/properties/contract_source", "ContractSource"),
    ("common#/$defs/timings/items", "Timing"),
    ("common#/$defs/timings/items/properties/git", "GitTime"),
    ("common#/$defs/timings/items/properties/checks/items", "CheckTime"),
    ("contract#/properties/scope", "Scope"),
    ("contract#/properties/criteria/items", "Criterion"),
    ("contract#/properties/budgets", "Budgets"),
    ("contract#/properties/worker", "WorkerSettings"),
    ("contract#/properties/judge", "JudgeSettings"),
    ("contract#/properties/verify", "VerifySettings"),
    ("contract#/properties/sandbox", "SandboxSettings"),
    ("contract#/properties/artifacts", "Artifacts"),
    ("ledger-record#/properties/trigger", "Trigger"),
    ("ledger-record#/properties/usage", "Spent"),
    ("ledger-record#/properties/evidence", "Evidence"),
    ("ledger-record#/properties/inputs", "Inputs"),
    ("replay#/properties/disagreements/items", "Disagreement"),
    ("judge#/properties/citations/items", "Citation"),
    ("plan-draft", "PlanDraft"),
    ("model-script#/$defs/tool", "ScriptTool"),
    ("model-script#/$defs/error/oneOf/1", "ScriptError"),
    ("model-script#/$defs/turn/oneOf/1", "ScriptTurn"),
    ("model-script#/$defs/turn/oneOf/1/properties/cut/oneOf/1", "ScriptCut"),
    ("report", "Report"),
    ("report#/properties/health", "Health"),
    ("report#/properties/health/properties/runs_near_budget", "NearBudget"),
    ("report#/properties/health/properties/cost_per_completed_task", "Dollars"),
    ("report#/properties/health/properties/pull_requests", "PullRequests"),
    ("report#/properties/health/properties/plan_drafts", "DraftRates"),
    ("report#/properties/health/properties/estimates", "Estimates"),
    ("report#/properties/health/properties/stages", "StageTimes"),
    ("plan-draft#/properties/drafts/items", "DraftTry"),
    ("report#/properties/tasks/items", "TaskReport"),
    ("report#/properties/tasks/items/properties/timeline/items", "Moment"),
    ("stack-step", "StackStep"),
    ("stack-step#/$defs/stack", "StackRecord"),
    ("stack-step#/$defs/slice", "SliceRecord"),
    ("stack-step#/$defs/stack/properties/returned/items", "Returned"),
    ("stack-step#/properties/followed/items", "Followed"),
    ("stack-step#/properties/pulls/items", "PullShown"),
    ("stack-step#/properties/outcomes/items", "Outcome"),
    ("stack-step#/properties/remarks/items", "RemarkShown"),
    ("slice-result", "SliceResult"),
    ("ledger-fold", "LedgerFold"),
]


@pytest.mark.parametrize(("name", "typed"), TYPED)
def test_each_typed_section_is_its_schema(name: str, typed: str) -> None:
    """loopkit.sections and schemas/<name>.json (or the object at a path inside it) list
    the same fields, and agree on which are required."""
    from loopkit import sections

    cls = getattr(sections, typed)
    file, _, pointer = name.partition("#")
    doc = schema.load(file)
    for step in pointer.strip("/").split("/") if pointer else []:
        doc = doc[int(step)] if isinstance(doc, list) else doc[step]
    annotations = cls.__annotations__
    assert set(annotations) == set(doc["properties"]), name
    spelled = {k: str(getattr(v, "__forward_arg__", v)) for k, v in annotations.items()}
    required = {
        k
        for k, text in spelled.items()
        if text.startswith("Required[") or (cls.__total__ and not text.startswith("NotRequired["))
    }
    assert required == set(doc.get("required", [])), name
