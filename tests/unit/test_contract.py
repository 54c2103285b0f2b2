"""The loop contract: every problem listed at once, defaults, parsing, applying a task."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from loopkit import contract, schema
from loopkit.errors import BadInput
from tests.helpers.plan import CONTRACT, CONTRACT_YAML, write


def _with(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(CONTRACT)
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    return data


def _paths(data: Any) -> list[str]:
    return [p.path for p in contract.validate(data)]


def test_the_example_contract_is_valid() -> None:
    assert contract.validate(CONTRACT) == []
    schema.validate(contract.with_defaults(CONTRACT), "contract")


@pytest.mark.parametrize(
    ("changes", "path", "message"),
    [
        ({"objective": ""}, "$.objective", "non-empty string"),
        ({"objective": "   "}, "$.objective", "non-empty string"),
        ({"objective": None}, "$.objective", "missing"),
        ({"criteria": []}, "$.criteria", "no criteria"),
        ({"criteria": None}, "$.criteria", "missing"),
        ({"criteria": "pytest"}, "$.criteria", "expected a list"),
        ({"criteria": [{"name": "x"}]}, "$.criteria[0].run", "missing"),
        (
            {"criteria": [{"name": "x", "run": "a"}, {"name": "x", "run": "b"}]},
            "$.criteria[1].name",
            "duplicate",
        ),
        ({"criteria": [{"name": "x", "run": "a", "timeout": 0}]}, "$.criteria[0].timeout", "> 0"),
        ({"criteria": [{"name": "x", "run": "a", "when": 1}]}, "$.criteria[0].when", "unknown key"),
        ({"scope": {"writable": []}}, "$.scope.writable", "no writable scope"),
        ({"scope": None}, "$.scope.writable", "no writable scope"),
        ({"scope": {"writable": ["/etc/**"]}}, "$.scope.writable[0]", "is absolute"),
        ({"scope": {"writable": ["~/x"]}}, "$.scope.writable[0]", "is absolute"),
        ({"scope": {"writable": ["C:/x"]}}, "$.scope.writable[0]", "is absolute"),
        ({"scope": {"writable": ["src/../../x"]}}, "$.scope.writable[0]", "escapes"),
        (
            {"scope": {"writable": ["src/**"], "protected": ["..\\x"]}},
            "$.scope.protected[0]",
            "escapes",
        ),
        ({"scope": {"writable": ["src/**"], "readonly": []}}, "$.scope.readonly", "unknown key"),
        ({"budgets": {"attempts": 0}}, "$.budgets.attempts", ">= 1"),
        ({"budgets": {"attempts": -3}}, "$.budgets.attempts", ">= 1"),
        ({"budgets": {"attempts": 1.5}}, "$.budgets.attempts", "integer"),
        ({"budgets": {"attempts": True}}, "$.budgets.attempts", "integer"),
        ({"budgets": {"cost_usd": 0}}, "$.budgets.cost_usd", "> 0"),
        ({"budgets": {"dollars": 5}}, "$.budgets.dollars", "unknown key"),
        ({"budgets": [1, 2]}, "$.budgets", "expected a mapping"),
        (
            {"worker": {"provider": "aider"}},
            "$.worker.provider",
            "expected one of claude, codex, command, acp, gemini, qwen, opencode, pi, copilot",
        ),
        ({"worker": {"provider": "command"}}, "$.worker.command", "needs a command"),
        ({"judge": {"model": "x"}}, "$.judge.provider", "missing"),
        ({"judge": {"provider": "command"}}, "$.judge.command", "needs a command"),
        ({"plan": {"split_lines": 0}}, "$.plan.split_lines", ">= 1"),
        ({"version": 2}, "$.version", "expected 1"),
        ({"version": True}, "$.version", "expected 1"),
        ({"version": "1"}, "$.version", "expected 1"),
        ({"version": None}, "$.version", "missing"),
        ({"kind": "loopkit/attempt"}, "$.kind", "loopkit/contract"),
        ({"colour": "blue"}, "$.colour", "unknown key"),
        ({"sandbox": {"network": "open"}}, "$.sandbox.network", "true, false or egress"),
        ({"verify": {"network": "yes"}}, "$.verify.network", "true, false or egress"),
        ({"sandbox": {"hosts": "pypi:443"}}, "$.sandbox.hosts", "list of host:port"),
        ({"sandbox": {"hosts": ["pypi.example"]}}, "$.sandbox.hosts[0]", "host:port"),
        ({"sandbox": {"hosts": ["a/b:443"]}}, "$.sandbox.hosts[0]", "host:port"),
        ({"worker": {"provider": "claude", "unmetered": "X"}}, "$.worker.unmetered", "list"),
    ],
)
def test_each_problem(changes: dict[str, Any], path: str, message: str) -> None:
    found = contract.validate(_with(**changes))
    assert any(p.path == path and message in p.message for p in found), found


def test_every_problem_is_listed_at_once() -> None:
    bad = {
        "version": 1,
        "objective": "",
        "scope": {"writable": [], "protected": ["../x"]},
        "criteria": [],
        "budgets": {"attempts": 0, "changed_files": -1},
        "worker": {"provider": "command"},
        "extra": 1,
    }
    paths = _paths(bad)
    for expected in (
        "$.objective",
        "$.scope.protected[0]",
        "$.scope.writable",
        "$.criteria",
        "$.budgets.attempts",
        "$.budgets.changed_files",
        "$.worker.command",
        "$.extra",
    ):
        assert expected in paths
    assert len(paths) >= 8


@pytest.mark.parametrize("data", [None, [], "text", 3])
def test_not_a_mapping(data: Any) -> None:
    assert _paths(data) == ["$"]


def test_hand_written_validator_agrees_with_the_schema_on_valid_documents() -> None:
    # Whatever the validator accepts, the published schema accepts too (with defaults).
    for changes in (
        {},
        {"judge": {"provider": "codex", "model": "m"}},
        {"worker": {"provider": "claude", "max_turns": 3}},
        {"plan": {"split_lines": 100, "split_files": 2}},
        {"allow_empty_change": True, "memory": "MEMORY.md"},
        {"sandbox": {"network": "egress", "hosts": ["pypi.example:443", "127.0.0.2:8080"]}},
        {"verify": {"network": "egress"}},
        {"worker": {"provider": "command", "command": "x", "unmetered": ["OPENAI_API_KEY"]}},
    ):
        data = _with(**changes)
        assert contract.validate(data) == []
        schema.validate(data, "contract")
        schema.validate(contract.with_defaults(data), "contract")


def test_with_defaults_fills_in() -> None:
    out = contract.with_defaults({**CONTRACT, "kind": "loopkit/contract"})
    assert "kind" not in out
    assert out["plan"] == {"split_lines": 600, "split_files": 8}
    assert out["scope"]["protected"] == ["migrations/**"]
    assert out["criteria"][0]["timeout"] == 300
    assert out["allow_empty_change"] is False
    assert out["budgets"]["same_failure"] == 2
    assert CONTRACT["budgets"] == {"attempts": 4, "changed_files": 4, "changed_lines": 200}


@pytest.mark.parametrize(
    ("raw", "name", "message"),
    [
        (b"", "loop.yaml", "empty file"),
        (b"\x00\x01", "loop.yaml", "binary data"),
        (b"\xc3\x28", "loop.yaml", "not UTF-8"),
        (b"a: [1, 2\n", "loop.yaml", "not YAML"),
        (b'{"a": 1,}', "loop.json", "not JSON"),
        (b"x" * (contract.MAX_CONTRACT_BYTES + 1), "loop.yaml", "at most"),
    ],
)
def test_parse_text_errors(raw: bytes, name: str, message: str) -> None:
    with pytest.raises(BadInput, match=message) as e:
        contract.parse_text(raw, name)
    assert str(e.value).startswith(name)


def test_json_contract_accepted(tmp_path: Path) -> None:
    import json

    path = write(tmp_path, "loop.json", json.dumps(CONTRACT))
    assert contract.load(path)["objective"] == CONTRACT["objective"]


def test_load_names_the_first_problem_and_counts_the_rest(tmp_path: Path) -> None:
    path = write(tmp_path, "loop.yaml", "version: 1\nobjective: ''\ncriteria: []\n")
    with pytest.raises(BadInput) as e:
        contract.load(path)
    assert e.value.code == 3
    assert str(e.value).startswith(f"{path}: $.objective")
    assert "more; run lk-plan check" in str(e.value)


def test_load_missing_and_directory(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="no such file"):
        contract.load(tmp_path / "nope.yaml")
    with pytest.raises(BadInput, match="is a directory"):
        contract.load(tmp_path)


def test_resolve_order(tmp_path: Path) -> None:
    from loopkit.workspace import resolve_contract

    assert resolve_contract(None, None, start=tmp_path, root=None).contract is None
    write(tmp_path, "loop.yaml", CONTRACT_YAML)
    found = resolve_contract(None, None, start=tmp_path, root=None)
    assert found.contract is not None and found.contract["memory"] == "MEMORY.md"
    doc = {"contract": {**CONTRACT, "objective": "from the document"}}
    piped = resolve_contract(None, doc, start=tmp_path, root=None).contract
    assert piped is not None and piped["objective"] == "from the document"
    # A piped contract is checked once, against its schema, when the document is read.
    import json

    from loopkit.document import parse_attempt

    bad = {"kind": "loopkit/attempt", "version": 1, "contract": {**CONTRACT, "objective": ""}}
    with pytest.raises(BadInput, match=r"contract"):
        parse_attempt(json.dumps(bad))


def test_apply_task_narrows_scope_and_caps_budgets() -> None:
    base = contract.with_defaults(CONTRACT)
    out = contract.apply_task(
        base,
        {"scope": ["src/parser/a.py"], "budget": {"lines": 40, "files": 9}, "allow_empty": True},
    )
    assert out["scope"]["writable"] == ["src/parser/a.py"]
    assert out["scope"]["protected"] == ["migrations/**"]
    assert out["budgets"]["changed_lines"] == 40  # the smaller of 200 and 40
    assert out["budgets"]["changed_files"] == 4  # the smaller of 4 and 9
    assert out["allow_empty_change"] is True
    assert base["scope"]["writable"] == ["src/**", "tests/**", "docs/**"]  # not mutated
    schema.validate(out, "contract")
    assert contract.apply_task(base, {"scope": [], "budget": {}}) == base


def test_defaults_never_invent_a_worker_provider() -> None:
    # A checks-only contract (pre-commit) names no worker; filling in "command" without
    # a command would make the emitted contract fail its own schema downstream.
    from loopkit import contract as c
    from loopkit import schema

    data = {
        "version": 1,
        "objective": "x",
        "scope": {"writable": ["a/**"]},
        "criteria": [{"name": "t", "run": "true"}],
    }
    full = c.with_defaults(data)
    assert "provider" not in full["worker"]
    assert schema.errors(full, "contract") == []
    assert c.validate({**data, "worker": {}}) == []


def test_resolve_finds_loop_yaml_where_it_is_told(tmp_path: Path) -> None:
    # A caller working on another folder (lk-judge's cwd=) must find that folder's contract,
    # not the one in the process's current directory.
    from loopkit.workspace import resolve_contract

    (tmp_path / "loop.yaml").write_text(
        "version: 1\nobjective: elsewhere\nscope: {writable: ['a/**']}\n"
        "criteria: [{name: t, run: 'true'}]\n"
    )
    found = resolve_contract(None, None, start=tmp_path, root=None).contract
    assert found is not None and found["objective"] == "elsewhere"
    assert resolve_contract(None, None, start=tmp_path / "missing", root=None).contract is None


# --------------------------------------------------------------------------- the two validators

_EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _schema_problems(data: Any) -> list[str]:
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    from loopkit import schema

    registry: Registry[Any] = Registry().with_resources(
        (schema.BASE_URI + f"{n}.json", Resource.from_contents(schema.load(n)))
        for n in schema.names()
    )
    validator = Draft202012Validator(schema.load("contract"), registry=registry)
    return [e.message for e in validator.iter_errors(data)]


@pytest.mark.parametrize(
    ("kind", "path"),
    [
        (kind, p)
        for kind in ("valid", "invalid")
        for p in sorted((_EXAMPLES / kind / "contract").glob("*.json"))
    ],
    ids=lambda v: v if isinstance(v, str) else v.stem,
)
def test_the_hand_written_validator_and_the_schema_agree(kind: str, path: Path) -> None:
    """Both doors a contract comes through -- a file (contract.validate) and a piped
    document (its JSON Schema) -- accept and refuse the same contracts."""
    import json

    data = json.loads(path.read_text())
    by_hand = contract.validate(data)
    by_schema = _schema_problems(data)
    if kind == "valid":
        assert by_hand == [] and by_schema == [], (by_hand, by_schema)
    else:
        assert by_hand and by_schema, (by_hand, by_schema)


def test_a_bare_yaml_off_turns_the_sandbox_off() -> None:
    data = contract.parse_text(
        b"version: 1\nobjective: o\nscope: {writable: ['**']}\n"
        b"criteria: [{name: t, run: 'true'}]\nsandbox: {mode: off}\n",
        "loop.yaml",
    )
    assert data["sandbox"]["mode"] is False  # how YAML reads it
    assert contract.checked(data, "loop.yaml")["sandbox"]["mode"] == "off"


@pytest.mark.parametrize(
    ("raw", "name", "where", "message"),
    [
        # A NaN limit compares false with everything: it would be no limit at all.
        (b"version: 1\nworker:\n  timeout: .nan\n", "loop.yaml", "$.worker.timeout", "line 3"),
        (b"budgets: {cost_usd: .inf}\n", "loop.yaml", "$.budgets.cost_usd", "line 1"),
        (b"budgets: {wall_seconds: -.Inf}\n", "loop.yaml", "$.budgets.wall_seconds", "finite"),
        (b"budgets: {wall_seconds: 1.0e+400}\n", "loop.yaml", "$.budgets.wall_seconds", "finite"),
        (
            b'{"version": 1,\n "worker": {"timeout": NaN}}',
            "loop.json",
            "$.worker.timeout",
            "line 2 column 24",
        ),
        (b'{"budgets": {"cost_usd": Infinity}}', "loop.json", "$.budgets.cost_usd", "finite"),
        (b'{"budgets": {"cost_usd": 1e400}}', "loop.json", "$.budgets.cost_usd", "finite"),
        # A key given twice: the reader keeps one value, the reviewer reads the other.
        (b"version: 1\nbudgets:\n  attempts: 2\n  attempts: 50\n", "loop.yaml", "$.budgets.attempts", "duplicate key 'attempts' at line 4"),
        (b"objective: a\nobjective: b\n", "loop.yaml", "$.objective", "duplicate key 'objective' at line 2"),
        (b'{"budgets": {"attempts": 2,\n "attempts": 50}}', "loop.json", "$.budgets.attempts", "duplicate key 'attempts' at line 2"),
    ],
)  # fmt: skip
def test_parse_text_refuses_non_finite_numbers_and_repeated_keys(
    raw: bytes, name: str, where: str, message: str
) -> None:
    with pytest.raises(BadInput) as e:
        contract.parse_text(raw, name)
    assert e.value.code == 3
    assert str(e.value).startswith(f"{name}: {where}: "), str(e.value)
    assert message in str(e.value)


def test_changed_bytes_budget_defaults_to_5_mb_and_is_the_contracts_alone() -> None:
    assert contract.with_defaults(CONTRACT)["budgets"]["changed_bytes"] == 5_000_000
    own = contract.with_defaults(_with(budgets={"changed_bytes": 1024}))
    assert own["budgets"]["changed_bytes"] == 1024
    schema.validate(own, "contract")
    task = {"budget": {"lines": 10, "files": 1}}
    assert contract.apply_task(own, task)["budgets"]["changed_bytes"] == 1024
    for bad in (0, -1, 1.5, "5MB"):
        assert "$.budgets.changed_bytes" in _paths(_with(budgets={"changed_bytes": bad}))


def test_yaml_merge_keys_may_still_be_overridden() -> None:
    raw = b"base: &b {timeout: 5}\nworker:\n  <<: *b\n  timeout: 9\n"
    assert contract.parse_text(raw, "loop.yaml")["worker"] == {"timeout": 9}


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_a_non_finite_limit_from_a_document_is_a_problem(value: float) -> None:
    # Documents are parsed strictly too; this is the validator's own guard.
    data = _with(budgets={"cost_usd": value}, worker={"provider": "claude", "timeout": value})
    assert {"$.budgets.cost_usd", "$.worker.timeout"} <= set(_paths(data))


@pytest.mark.parametrize(
    ("doc", "where", "hint"),
    [
        ({"budget": {"attempts": 3}}, "$.budget", "did you mean 'budgets'?"),
        ({"budgets": {"atempts": 3}}, "$.budgets.atempts", "did you mean 'attempts'?"),
        (
            {"criteria": [{"name": "t", "run": "true", "timout": 5}]},
            "$.criteria[0].timout",
            "did you mean 'timeout'?",
        ),
    ],
)
def test_an_unknown_key_suggests_the_near_miss(doc: dict, where: str, hint: str) -> None:  # type: ignore[type-arg]
    data = {**CONTRACT, **doc}
    problems = contract.validate(data)
    assert any(p.path == where and p.message.endswith(hint) for p in problems), problems


@pytest.mark.parametrize(
    ("junit", "problem"),
    [
        ("reports/junit.xml", None),
        ("target/surefire-reports/TEST-*.xml", None),
        ("/tmp/junit.xml", "a path inside the repository"),
        ("../junit.xml", "a path inside the repository"),
        ("", "a path relative to the repository root"),
        (3, "a path relative to the repository root"),
    ],
)
def test_a_criterions_junit_report_is_a_path_inside_the_repository(
    junit: Any, problem: str | None
) -> None:
    data = copy.deepcopy(CONTRACT)
    data["criteria"][0]["junit"] = junit
    found = [p for p in contract.validate(data) if p.path == "$.criteria[0].junit"]
    if problem is None:
        assert found == []
        schema.validate(data, "contract")
    else:
        assert len(found) == 1 and problem in found[0].message
        with pytest.raises(BadInput):
            schema.validate(data, "contract")


def test_home_paths_expand_tilde_and_unexpandable_ones_are_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    data = copy.deepcopy(CONTRACT)
    data["sandbox"] = {"writable": ["~/.cache", "build"], "show": ["~"], "hide": ["/etc/x"]}
    data["state_dir"] = "~/state"
    got = contract.checked(data, "loop.yaml")
    home = str(tmp_path / "home")
    assert got["sandbox"]["writable"] == [f"{home}/.cache", "build"]
    assert got["sandbox"]["show"] == [home] and got["sandbox"]["hide"] == ["/etc/x"]
    assert got["state_dir"] == f"{home}/state"
    data["sandbox"]["writable"] = ["~no-such-user-here/x"]
    with pytest.raises(BadInput) as refused:
        contract.checked(data, "loop.yaml")
    assert "$.sandbox.writable[0]" in str(refused.value) and "expand" in str(refused.value)
