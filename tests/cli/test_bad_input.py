"""A corpus of bad inputs: each gives exactly one line on stderr, no traceback, and exit 3
(or exit 1 with the problems as JSON on stdout, where `lk-plan check` answers "invalid")."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from loopkit import schema
from loopkit.cli.lk import main as lk
from loopkit.cli.plan import main as lk_plan
from tests.helpers.plan import CONTRACT, CONTRACT_YAML, TASKS_MD

BIG = 50 * 1024 * 1024
CONTRACT_JSON = json.dumps(CONTRACT)
GARBAGE = bytes(range(256)) * 64

#: name -> file content
FILES: dict[str, bytes] = {
    "empty.yaml": b"",
    "blank.yaml": b"  \n\t\n",
    "unclosed.yaml": b"version: 1\nobjective: [unclosed\n",
    "bad-indent.yaml": b"version: 1\n objective: x\n  - y\n",
    "tab-indent.yaml": b"scope:\n\twritable: [a]\n",
    "scalar.yaml": b"just a sentence\n",
    "list.yaml": b"- version: 1\n",
    "python-tag.yaml": b"objective: !!python/object/apply:os.system ['true']\n",
    "wrong-types.yaml": b"version: '1'\nobjective: 3\nscope: [src]\ncriteria: pytest\nbudgets: {attempts: four}\n",
    "null-values.yaml": b"version:\nobjective:\nscope:\ncriteria:\n",
    "trailing-comma.json": b'{"version": 1,}',
    "array.json": b"[1, 2, 3]",
    "deep.json": b"[" * 100_000,
    "deep.yaml": b"[" * 100_000,
    "garbage.yaml": GARBAGE,
    "latin1.yaml": "objective: café\n".encode("latin-1"),
    # a NaN or infinite limit would disable it; a repeated key hides one of two values
    "nan-timeout.yaml": CONTRACT_YAML.replace("timeout: 300", "timeout: .nan").encode(),
    "inf-budget.yaml": CONTRACT_YAML.replace("cost_usd: 5", "cost_usd: .inf").encode(),
    "nan-timeout.json": CONTRACT_JSON.replace('"timeout": 300', '"timeout": NaN').encode(),
    "huge-budget.json": CONTRACT_JSON.replace('"attempts": 4', '"attempts": 1e999').encode(),
    "long-integer.json": CONTRACT_JSON.replace(
        '"attempts": 4', '"attempts": ' + "9" * 5000
    ).encode(),
    "duplicate-key.yaml": CONTRACT_YAML.replace("memory:", "objective: again\nmemory:").encode(),
    "duplicate-key.json": CONTRACT_JSON.replace(
        '"version": 1', '"version": 1, "version": 1'
    ).encode(),
    "utf16.yaml": "version: 1\n".encode("utf-16"),
    "empty.md": b"",
    "garbage.md": GARBAGE,
    "latin1.md": "- [ ] café\n".encode("latin-1"),
    "no-items.md": b"# Tasks\n\nNothing here yet.\n",
    "truncated.md": TASKS_MD.encode()[: TASKS_MD.encode().rindex(b"  end")],
    "no-scope.md": b"- [ ] x\n  budget: 5 lines\n  end\n",
    "bad-status.md": b"- [?] x\n",
    "over-threshold.md": b"- [ ] x\n  budget: 5000 lines / 40 files\n  scope: src/**\n  end\n",
    "escaping-scope.md": b"- [ ] x\n  budget: 5 lines\n  scope: ../../etc/passwd\n  end\n",
    "cycle.md": b"- [ ] a\n  depends: b\n- [ ] b\n  depends: a\n",
}


@dataclass(frozen=True)
class Case:
    id: str
    args: Callable[[Path], list[str]]
    code: int
    stdin: bytes | None = None
    via_lk: bool = False


def _check(name: str) -> Case:
    return Case(f"check-{name}", lambda d: ["check", str(d / name)], 1)


def _next_tasks(name: str) -> Case:
    return Case(
        f"next-tasks-{name}",
        lambda d: ["next", str(d / name), "--contract", str(d / "loop.yaml")],
        3,
    )


def _next_contract(name: str) -> Case:
    return Case(
        f"next-contract-{name}",
        lambda d: ["next", str(d / "TASKS.md"), "--contract", str(d / name)],
        3,
    )


def _guidance(name: str) -> Case:
    return Case(f"guidance-{name}", lambda d: ["guidance", str(d / name)], 3)


CONTRACT_FILES = [n for n in FILES if n.endswith((".yaml", ".json"))]
TASK_FILES = [n for n in FILES if n.endswith(".md")]

CASES: list[Case] = [
    *(_check(n) for n in [*CONTRACT_FILES, *TASK_FILES, "big.yaml", "big.md"]),
    *(_next_tasks(n) for n in [*TASK_FILES, "big.md"]),
    *(_next_contract(n) for n in [*CONTRACT_FILES, "big.yaml", "missing.yaml"]),
    *(_guidance(n) for n in [*CONTRACT_FILES, "big.yaml"]),
    Case("check-missing", lambda d: ["check", str(d / "missing.yaml")], 3),
    Case("check-directory", lambda d: ["check", str(d)], 3),
    Case("next-tasks-missing", lambda d: ["next", str(d / "missing.md"), "--contract", str(d / "loop.yaml")], 3),
    Case("next-tasks-directory", lambda d: ["next", str(d), "--contract", str(d / "loop.yaml")], 3),
    Case("mark-garbage", lambda d: ["mark", str(d / "garbage.md"), "--task", "x", "--status", "done"], 3),
    Case("mark-empty", lambda d: ["mark", str(d / "empty.md"), "--task", "x", "--status", "done"], 3),
    Case("mark-big", lambda d: ["mark", str(d / "big.md"), "--task", "x", "--status", "done"], 3),
    Case("guidance-output-not-utf8", lambda d: ["guidance", str(d / "loop.yaml"), "-o", str(d / "latin1.md")], 3),
    # piped stdin
    Case("stdin-check-garbage", lambda d: ["check", "-"], 1, stdin=GARBAGE),
    Case("stdin-check-empty", lambda d: ["check", "-"], 1, stdin=b""),
    Case("stdin-check-bad-yaml", lambda d: ["check", "-", "--type", "contract"], 1, stdin=b"a: [\n"),
    Case("stdin-guidance-garbage", lambda d: ["guidance"], 3, stdin=GARBAGE),
    Case("stdin-guidance-not-json", lambda d: ["guidance", "-"], 3, stdin=b"version: 1\n"),
    Case("stdin-guidance-empty", lambda d: ["guidance", "-"], 3, stdin=b""),
    Case("stdin-guidance-array", lambda d: ["guidance"], 3, stdin=b"[1]"),
    Case("stdin-guidance-wrong-kind", lambda d: ["guidance"], 3, stdin=b'{"kind": "loopkit/run", "version": 1}'),
    Case("stdin-guidance-bad-section", lambda d: ["guidance"], 3, stdin=b'{"kind": "loopkit/attempt", "version": 1, "task": {"id": 3}}'),
    Case("stdin-guidance-bad-contract", lambda d: ["guidance"], 3, stdin=b'{"kind": "loopkit/attempt", "version": 1, "contract": {"version": 1}}'),
    Case("stdin-guidance-deep", lambda d: ["guidance"], 3, stdin=b"[" * 100_000),
]  # fmt: skip

# The other commands that read a piped attempt document (run from a git repository).
for _cmd in ("invoke", "diff", "verify", "judge", "decide"):
    for _name, _data in (
        ("garbage", GARBAGE),
        ("not-json", b"garbage{"),
        ("array", b"[]"),
        ("wrong-kind", b'{"kind": "x", "version": 1}'),
        ("nan", b'{"kind": "loopkit/attempt", "version": 1, "run": {"duration_s": NaN}}'),
        ("infinity", b'{"kind": "loopkit/attempt", "version": 1, "x": -Infinity}'),
        ("long-integer", b'{"kind": "loopkit/attempt", "version": 1, "x": ' + b"1" * 5000 + b"}"),
        ("duplicate-key", b'{"kind": "loopkit/attempt", "version": 1, "version": 1}'),
    ):
        CASES.append(
            Case(f"stdin-lk-{_cmd}-{_name}", lambda d, c=_cmd: [c], 3, stdin=_data, via_lk=True)
        )


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("corpus")
    for name, data in FILES.items():
        (d / name).write_bytes(data)
    (d / "loop.yaml").write_text(CONTRACT_YAML)
    (d / "TASKS.md").write_text(TASKS_MD)
    line = b"- [ ] " + b"x" * 1000 + b"\n"
    with open(d / "big.md", "wb") as f:
        for _ in range(BIG // len(line) + 1):
            f.write(line)
    with open(d / "big.yaml", "wb") as f:
        f.write(b"objective: '" + b"y" * BIG + b"'\n")
    return d


def test_the_corpus_is_large_enough() -> None:
    assert len({c.id for c in CASES}) == len(CASES)
    assert len(CASES) >= 25


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_bad_input(
    case: Case, corpus: Path, git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(git_repo)
    monkeypatch.setenv("LOOPKIT_STATE_DIR", str(git_repo / ".loopkit"))
    command = lk if case.via_lk else lk_plan
    result = CliRunner().invoke(command, case.args(corpus), input=case.stdin)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    stderr = result.stderr
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    assert len(stderr.splitlines()) == 1, stderr
    assert result.exit_code == case.code, stderr
    if case.code == 1:  # check answers "invalid" with every problem on stdout
        doc = json.loads(result.stdout)
        schema.validate(doc, "problems")
        assert doc["valid"] is False and doc["problems"]
    elif not case.via_lk:
        assert result.stdout == ""


#: A document that parses only with Python's lenient reader, and the JSON path it names.
LENIENT_DOCUMENTS = {
    "nan": (b'{"kind": "loopkit/attempt", "version": 1, "run": {"duration_s": NaN}}', "$.run.duration_s"),
    "infinity": (b'{"kind": "loopkit/attempt", "version": 1, "x": [-Infinity]}', "$.x[0]"),
    "duplicate-key": (b'{"kind": "loopkit/attempt", "version": 1,\n"version": 1}', "$.version"),
}  # fmt: skip


@pytest.mark.parametrize("command", ["invoke", "diff", "verify", "judge", "decide"])
@pytest.mark.parametrize("name", list(LENIENT_DOCUMENTS))
def test_a_refused_number_or_key_is_named_with_its_path(
    command: str, name: str, git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(git_repo)
    monkeypatch.setenv("LOOPKIT_STATE_DIR", str(git_repo / ".loopkit"))
    data, path = LENIENT_DOCUMENTS[name]
    result = CliRunner().invoke(lk, [command], input=data)
    assert result.exit_code == 3, result.stderr
    assert f": error: <stdin>: {path}: " in result.stderr, result.stderr
    assert "line" in result.stderr and len(result.stderr.splitlines()) == 1
    assert result.stdout == ""
    assert not (git_repo / ".loopkit").exists()  # nothing written on the way out


@pytest.mark.parametrize(
    ("name", "path"),
    [
        ("nan-timeout.json", "$.criteria[0].timeout"),
        ("huge-budget.json", "$.budgets.attempts"),
        ("duplicate-key.json", "$.version"),
        ("nan-timeout.yaml", "$.criteria[0].timeout"),
        ("duplicate-key.yaml", "$.objective"),
    ],
)
def test_check_names_the_refused_number_or_key(name: str, path: str, corpus: Path) -> None:
    result = CliRunner().invoke(lk_plan, ["check", str(corpus / name)])
    assert result.exit_code == 1, result.stderr
    problem = json.loads(result.stdout)["problems"][0]
    assert problem["path"] == path
    assert " at line " in problem["message"] and not problem["message"].startswith("$")


@pytest.mark.parametrize("command", ["invoke", "verify", "judge", "decide"])
def test_an_attempt_id_that_is_a_path_writes_nothing(
    command: str, git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The id names the artifact folder: "../../escaped" would be <repo>/escaped.
    monkeypatch.chdir(git_repo)
    monkeypatch.setenv("LOOPKIT_STATE_DIR", str(git_repo / ".loopkit"))
    contract = {**CONTRACT, "criteria": [{"name": "ok", "run": "true", "timeout": 30}]}
    contract["judge"] = {"provider": "command", "command": "echo MET"}
    doc = {
        "kind": "loopkit/attempt",
        "version": 1,
        "attempt_id": "../../escaped",
        "contract": contract,
        "task": {"id": "t", "text": "x", "kind": "goal"},
    }
    before = sorted(p.name for p in git_repo.parent.iterdir())
    result = CliRunner().invoke(lk, [command], input=json.dumps(doc))
    assert result.exit_code == 3, result.stderr
    assert ": error: <stdin>: $.attempt_id: " in result.stderr
    assert len(result.stderr.splitlines()) == 1 and result.stdout == ""
    assert not (git_repo / "escaped").exists()
    assert sorted(p.name for p in git_repo.parent.iterdir()) == before
    assert not (git_repo / ".loopkit").exists()
