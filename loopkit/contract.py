"""The loop contract (``loop.yaml`` or JSON): load, validate, apply a task's plan.

Validation lists every problem at once, each with the JSON path it concerns, before any
model is called. The rules are table-driven: a new key is one line in ``_FIELDS``.
"""

from __future__ import annotations

import copy
import functools
import math
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from loopkit import loader
from loopkit.document import vouched
from loopkit.errors import BadInput
from loopkit.evidence import globs
from loopkit.evidence.basetests import TASK_CHECK_PREFIX, is_task_check

TYPE_CHECKING = False  # typing stays unloaded at run time (start-up is a feature)
if TYPE_CHECKING:
    from typing import Any

    from loopkit.sections import Contract

CONTRACT_VERSION = 1
SANDBOXES = ("read-only", "workspace-write", "danger-full-access")
DEFAULT_FILENAMES = ("loop.yaml", "loop.yml", "loop.json")
#: Contracts larger than this are refused before parsing (no sane contract is this big).
MAX_CONTRACT_BYTES = 1_000_000


class Problem:
    """One problem in a contract: a JSON path (e.g. ``$.budgets.attempts``) and a message.
    A plain class, like plan.parsing's PlanProblem: ``lk workspace`` and every stage that
    meets a task import this module, and ``dataclasses`` (with ``inspect``) would be most
    of its cost."""

    __slots__ = ("message", "path")

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Problem):
            return NotImplemented
        return (self.path, self.message) == (other.path, other.message)

    def __hash__(self) -> int:
        return hash((self.path, self.message))

    def __repr__(self) -> str:
        return f"Problem(path={self.path!r}, message={self.message!r})"

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "message": self.message}

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


if TYPE_CHECKING:
    Check = Callable[[Any, str, list[Problem]], None]


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    # NaN compares false with every limit, so a NaN limit would be no limit at all.
    if isinstance(v, float):
        return math.isfinite(v)
    return isinstance(v, int) and not isinstance(v, bool)


def positive_int(v: Any, where: str, out: list[Problem]) -> None:
    if not _is_int(v):
        out.append(Problem(where, f"expected an integer >= 1, got {_show(v)}"))
    elif v < 1:
        out.append(Problem(where, f"limit must be >= 1, got {v}"))


def non_negative_int(v: Any, where: str, out: list[Problem]) -> None:
    if not _is_int(v) or v < 0:
        out.append(Problem(where, f"expected an integer >= 0, got {_show(v)}"))


def positive_number(v: Any, where: str, out: list[Problem]) -> None:
    if not _is_number(v):
        out.append(Problem(where, f"expected a number > 0, got {_show(v)}"))
    elif v <= 0:
        out.append(Problem(where, f"limit must be > 0, got {v}"))


def text(v: Any, where: str, out: list[Problem]) -> None:
    if not isinstance(v, str) or not v.strip():
        out.append(Problem(where, f"expected a non-empty string, got {_show(v)}"))


def boolean(v: Any, where: str, out: list[Problem]) -> None:
    if not isinstance(v, bool):
        out.append(Problem(where, f"expected true or false, got {_show(v)}"))


def network(v: Any, where: str, out: list[Problem]) -> None:
    """true (shared), false (cut) or egress (loopkit.boundary.egress)."""
    if not isinstance(v, bool) and v != "egress":
        out.append(Problem(where, f"expected true, false or egress, got {_show(v)}"))


def host_ports(v: Any, where: str, out: list[Problem]) -> None:
    """A list of ``host:port`` (the egress gate's allowed hosts)."""
    from loopkit.boundary.egress import host_port

    if not isinstance(v, list):
        out.append(Problem(where, f"expected a list of host:port, got {_show(v)}"))
        return
    for i, item in enumerate(v):
        if not isinstance(item, str) or host_port(item) is None or ":" not in item:
            out.append(Problem(f"{where}[{i}]", f"expected host:port, got {_show(item)}"))


def string_list(v: Any, where: str, out: list[Problem]) -> None:
    if not isinstance(v, list):
        out.append(Problem(where, f"expected a list of strings, got {_show(v)}"))
        return
    for i, item in enumerate(v):
        text(item, f"{where}[{i}]", out)


def glob_list(v: Any, where: str, out: list[Problem]) -> None:
    if not isinstance(v, list):
        out.append(Problem(where, f"expected a list of globs, got {_show(v)}"))
        return
    for i, item in enumerate(v):
        p = f"{where}[{i}]"
        if not isinstance(item, str) or not item.strip():
            out.append(Problem(p, f"expected a non-empty glob, got {_show(item)}"))
            continue
        reason = globs.escape_reason(item)
        if reason:
            out.append(Problem(p, f"glob {item!r} {reason}"))


@functools.cache
def allowed(key: str) -> tuple[str, ...]:
    """The names a contract may give ``worker.KEY`` and ``judge.KEY`` (``provider``,
    ``agent``): the published schema's (``tests/unit/test_schemas.py`` holds them to the
    providers' registry and the ACP agents' table, so a new provider is still one module
    and one registry line)."""
    from loopkit import schema  # read when a contract is checked, not for one met before

    node = schema.load("contract")["properties"]["worker"]["properties"][key]
    return tuple(node["enum"])


def allowed_name(key: str) -> Check:
    """One of the names ``allowed(key)`` lists."""

    def check(v: Any, where: str, out: list[Problem]) -> None:
        one_of(*allowed(key))(v, where, out)

    return check


def one_of(*choices: str) -> Check:
    def check(v: Any, where: str, out: list[Problem]) -> None:
        if v not in choices:
            out.append(Problem(where, f"expected one of {', '.join(choices)}, got {_show(v)}"))

    return check


def _did_you_mean(key: object, known: Iterable[str]) -> str:
    """``; did you mean 'budgets'?`` for a near miss, else nothing."""
    import difflib

    if not isinstance(key, str):
        return ""
    close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _show(v: Any) -> str:
    if isinstance(v, str):
        return repr(v[:60])
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    return (
        type(v).__name__
        if not isinstance(v, (list, dict))
        else ("a list" if isinstance(v, list) else "a mapping")
    )


#: The keys the worker and the judge share: which model runs, how, and within what.
_MODEL_RUN: dict[str, Check] = {
    "provider": allowed_name("provider"),
    "model": text,
    "command": text,
    "agent": allowed_name("agent"),
    "max_turns": positive_int,
    "timeout": positive_number,
    "env_allow": string_list,
}

# Section -> key -> check. A key absent here is an unknown key.
_SECTIONS: dict[str, dict[str, Check]] = {
    "scope": {
        "writable": glob_list,
        "protected": glob_list,
        "always_allowed": glob_list,
        # add, never change or delete: new files allowed, the base's files kept as they are
        "add_only": glob_list,
    },
    "budgets": {
        "attempts": positive_int,
        "changed_files": positive_int,
        "changed_lines": positive_int,
        "changed_bytes": positive_int,
        "wall_seconds": positive_number,
        "cost_usd": positive_number,
        "tokens": positive_int,
        "turns": positive_int,
        "verify_attempts": positive_int,
        "same_failure": positive_int,
        "timeouts": positive_int,
        "transient": positive_int,
        "verify_reserve_s": positive_number,
    },
    # transient failures wait base_s, doubling, up to max_s (with jitter)
    "backoff": {"base_s": positive_number, "max_s": positive_number},
    "worker": {
        **_MODEL_RUN,
        "max_cost_usd": positive_number,
        "sandbox": one_of(*SANDBOXES),
        "allowed_tools": string_list,
        "permission_mode": text,
        "breaker_repeats": positive_int,
        "resume": boolean,
        "extra_args": string_list,
        # the credential and metering proxy (loopkit.boundary.meter); YAML reads a bare
        # on/off as true/false
        "meter": lambda v, w, o: (
            None
            if v in ("auto", "on", "off") or isinstance(v, bool)
            else o.append(Problem(w, f"expected one of auto, on, off, got {_show(v)}"))
        ),
        "upstream": lambda v, w, o: (
            None
            if isinstance(v, str) and v.startswith(("http://", "https://"))
            else o.append(Problem(w, f"expected an http(s) URL, got {_show(v)}"))
        ),
        # credentials passed on raw beside the meter (each named in env_allow too)
        "unmetered": string_list,
    },
    "judge": {
        **_MODEL_RUN,
        "goal": text,
        # the review gate: every task's change is judged before it lands, not only a GOAL's
        "review": boolean,
    },
    "plan": {"split_lines": positive_int, "split_files": positive_int},
    # what the workers of one run side by side (recipes/parallel.sh) may spend together:
    # each reserves its share before it starts (loopkit.decision.budget.admit_pool)
    "pool": {"cost_usd": positive_number, "tokens": positive_int, "wall_seconds": positive_number},
    # carry: ignored paths (a virtualenv, node_modules) the clean room links in
    "verify": {
        "carry": glob_list,
        "env_allow": string_list,
        "network": network,
        # a task's change must be shown by a test that fails without it and passes with it
        # (loopkit.evidence.basetests.proof): every task, or those whose text says "fix"
        "prove_new_tests": lambda v, w, o: (
            None
            if isinstance(v, bool) or v == "fixes"
            else o.append(Problem(w, f"expected true, false or fixes, got {_show(v)}"))
        ),
    },
    "sandbox": {
        # YAML reads a bare `off` as false: false means "off" too
        "mode": lambda v, w, o: (
            None
            if v in ("auto", "required", "off") or v is False
            else o.append(Problem(w, f"expected one of auto, required, off, got {_show(v)}"))
        ),
        "network": network,
        # the hosts the egress gate lets through (sandbox.network: egress)
        "hosts": host_ports,
        "writable": string_list,
        # what the private home shows (read-only), and more paths hidden from workers
        # and checks
        "show": string_list,
        "hide": string_list,
    },
    "artifacts": {"retention_days": positive_number, "keep_completed": non_negative_int},
}
_TOP: dict[str, Check] = {
    "version": lambda v, w, o: (
        None
        if _is_int(v) and v == CONTRACT_VERSION  # `version: true` is not 1
        else o.append(Problem(w, f"expected {CONTRACT_VERSION}, got {_show(v)}"))
    ),
    "kind": lambda v, w, o: (
        None
        if v == "loopkit/contract"
        else o.append(Problem(w, f"expected 'loopkit/contract', got {_show(v)}"))
    ),
    "objective": text,
    "memory": text,
    "state_dir": text,
    "allow_empty_change": boolean,
}


def _relative_path(v: Any, where: str, out: list[Problem]) -> None:
    if not isinstance(v, str) or not v.strip():
        out.append(
            Problem(where, f"expected a path relative to the repository root, got {_show(v)}")
        )
    elif v.startswith("/") or ".." in v.replace("\\", "/").split("/"):
        out.append(
            Problem(where, f"expected a path inside the repository (relative, no ..), got {v!r}")
        )


_CRITERION: dict[str, Check] = {
    "name": text,
    "run": text,
    "timeout": positive_number,
    # The JUnit XML report(s) the check writes (a path or a glob, relative to the
    # repository root): its per-test results (loopkit.evidence.testresults).
    "junit": _relative_path,
    "env": lambda v, w, o: (
        None
        if isinstance(v, dict)
        and all(isinstance(k, str) and isinstance(x, str) for k, x in v.items())
        else o.append(Problem(w, "expected a mapping of strings to strings"))
    ),
}

DEFAULTS: dict[str, Any] = {
    "scope": {"protected": [], "always_allowed": []},
    # No default provider: a contract used only for checks (pre-commit) names no worker;
    # lk-invoke falls back to the command provider and asks for a command.
    "worker": {"timeout": 900, "breaker_repeats": 3},
    "plan": {"split_lines": 600, "split_files": 8},
    # changed_bytes: the new content a change may add (binary files too), 5 MB; task plans
    # estimate lines and files, so this one is the contract's alone.
    "budgets": {"same_failure": 2, "changed_bytes": 5_000_000},
}
DEFAULT_CHECK_TIMEOUT = 300


def validate(data: Any) -> list[Problem]:
    """Every problem in a contract document, in document order. Empty means valid."""
    out: list[Problem] = []
    if not isinstance(data, Mapping):
        return [Problem("$", f"expected a mapping (the loop contract), got {_show(data)}")]
    for key, value in data.items():
        where = f"$.{key}"
        if key in _TOP:
            _TOP[key](value, where, out)
        elif key in _SECTIONS:
            _check_section(value, where, _SECTIONS[key], out)
        elif key == "criteria":
            _check_criteria(value, out)
        else:
            known = [*_TOP, *_SECTIONS, "criteria"]
            out.append(Problem(where, f"unknown key {key!r}{_did_you_mean(key, known)}"))
    if "version" not in data:
        out.append(Problem("$.version", f"missing: expected {CONTRACT_VERSION}"))
    if "objective" not in data:
        out.append(Problem("$.objective", "missing: say what the loop is for"))
    if "criteria" not in data:
        out.append(Problem("$.criteria", "missing: at least one acceptance check is required"))
    scope = data.get("scope")
    if not isinstance(scope, Mapping) or not scope.get("writable"):
        if isinstance(scope, Mapping) or scope is None:
            out.append(
                Problem(
                    "$.scope.writable", "no writable scope: list the globs the worker may change"
                )
            )
    sandbox = data.get("sandbox")
    if isinstance(sandbox, Mapping):
        for key in _HOME_PATHS:
            _unexpandable(sandbox.get(key), f"$.sandbox.{key}", out)
    _unexpandable(data.get("state_dir"), "$.state_dir", out)
    worker = data.get("worker")
    if isinstance(worker, Mapping):
        if worker.get("provider") == "command" and "command" not in worker:
            out.append(Problem("$.worker.command", "provider 'command' needs a command to run"))
    judge = data.get("judge")
    if isinstance(judge, Mapping):
        if "provider" not in judge:
            out.append(
                Problem(
                    "$.judge.provider", "missing: expected one of " + ", ".join(allowed("provider"))
                )
            )
        elif judge.get("provider") == "command" and "command" not in judge:
            out.append(Problem("$.judge.command", "provider 'command' needs a command to run"))
    return out


def _check_section(value: Any, where: str, fields: dict[str, Check], out: list[Problem]) -> None:
    if not isinstance(value, Mapping):
        out.append(Problem(where, f"expected a mapping, got {_show(value)}"))
        return
    for key, v in value.items():
        if key in fields:
            fields[key](v, f"{where}.{key}", out)
        else:
            out.append(
                Problem(f"{where}.{key}", f"unknown key {key!r}{_did_you_mean(key, fields)}")
            )


def _check_criteria(value: Any, out: list[Problem]) -> None:
    if not isinstance(value, list):
        out.append(Problem("$.criteria", f"expected a list of checks, got {_show(value)}"))
        return
    if not value:
        out.append(Problem("$.criteria", "no criteria: at least one acceptance check is required"))
    seen: set[str] = set()
    for i, item in enumerate(value):
        where = f"$.criteria[{i}]"
        if not isinstance(item, Mapping):
            out.append(Problem(where, f"expected a mapping with name and run, got {_show(item)}"))
            continue
        for key in ("name", "run"):
            if key not in item:
                out.append(Problem(f"{where}.{key}", "missing"))
        for key, v in item.items():
            if key in _CRITERION:
                _CRITERION[key](v, f"{where}.{key}", out)
            else:
                out.append(
                    Problem(
                        f"{where}.{key}", f"unknown key {key!r}{_did_you_mean(key, _CRITERION)}"
                    )
                )
        name = item.get("name")
        if isinstance(name, str):
            if name in seen:
                out.append(Problem(f"{where}.name", f"duplicate check name {name!r}"))
            seen.add(name)


def control_warnings(data: Mapping[str, Any], *, contract_file: str) -> list[dict[str, str]]:
    """Writable globs that cover a file steering the loop (the contract itself, TASKS.md,
    the memory file, the state folder): in a loop a change there is a violation anyway,
    so such a glob promises the worker what it will not get."""
    scope = data.get("scope") if isinstance(data.get("scope"), Mapping) else {}
    writable = [g for g in (scope or {}).get("writable") or [] if isinstance(g, str)]
    names = {
        "the contract file": os.path.basename(contract_file) if contract_file != "-" else None,
        "TASKS.md": "TASKS.md",
        "the memory file": data.get("memory") if isinstance(data.get("memory"), str) else None,
        "the state folder": (data.get("state_dir") or ".loopkit") + "/ledger.jsonl",
    }
    out = []
    for i, glob in enumerate(writable):
        for what, path in names.items():
            if path and globs.matches(path, [glob]):
                out.append(
                    {
                        "path": f"$.scope.writable[{i}]",
                        "message": f"{glob!r} covers {what} ({path}); a worker may not change it",
                    }
                )
    return out


def with_defaults(data: Mapping[str, Any]) -> Contract:
    """A validated contract with every default filled in (a new dict)."""
    out = copy.deepcopy(dict(data))
    out.pop("kind", None)
    for section, defaults in DEFAULTS.items():
        merged = dict(defaults)
        merged.update(out.get(section) or {})
        out[section] = merged
    out.setdefault("budgets", {})
    out.setdefault("allow_empty_change", False)
    for check in out.get("criteria", []):
        check.setdefault("timeout", DEFAULT_CHECK_TIMEOUT)
    sandbox = out.get("sandbox")
    if isinstance(sandbox, dict) and sandbox.get("mode") is False:
        sandbox["mode"] = "off"
    # Paths on this machine: `~` is the user's home, never a folder named `~` in the
    # repository (validate refused the ones that cannot expand).
    if isinstance(sandbox, dict):
        for key in _HOME_PATHS:
            if isinstance(sandbox.get(key), list):
                sandbox[key] = [_home(p) for p in sandbox[key]]
    if isinstance(out.get("state_dir"), str):
        out["state_dir"] = _home(out["state_dir"])
    filled: Contract = vouched(out)
    return filled


#: The sandbox's path lists, where ``~`` is expanded.
_HOME_PATHS = ("writable", "show", "hide")


def _home(path: Any) -> Any:
    return os.path.expanduser(path) if isinstance(path, str) and path.startswith("~") else path


def _unexpandable(value: Any, where: str, out: list[Problem]) -> None:
    """A ``~`` path with no home to expand to (``~nobody/x``, or no HOME): refused."""
    for i, path in enumerate(value if isinstance(value, list) else [value]):
        if isinstance(path, str) and path.startswith("~") and _home(path) == path:
            at = f"{where}[{i}]" if isinstance(value, list) else where
            out.append(Problem(at, f"{path!r}: no home folder to expand '~' to"))


def parse_text(raw: bytes, source: str) -> Any:
    """Parse a contract file's bytes (YAML, or JSON which YAML also reads)."""
    body = loader.file_text(
        raw, source, "a YAML or JSON loop contract", most=MAX_CONTRACT_BYTES, noun="a contract"
    )
    try:
        if source.endswith(".json") or body.lstrip().startswith("{"):
            return loader.json_loads(body)
        return loader.yaml_load(body)
    except loader.LoadError as e:
        raise BadInput(source, str(e), path=e.path) from None


def read_file(path: str | os.PathLike[str]) -> Any:
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise BadInput(str(path), "no such file") from None
    except IsADirectoryError:
        raise BadInput(str(path), "is a directory, expected a contract file") from None
    except OSError as e:
        raise BadInput(str(path), f"cannot read: {e.strerror}") from None
    return parse_text(raw, str(path))


def checked(data: Any, source: str, *, prefix: str = "$") -> Contract:
    """A parsed contract validated and with its defaults; BadInput naming the first
    problem (exit 3) otherwise. ``prefix`` places the paths (``$.contract`` in a document)."""
    problems = validate(data)
    if problems:
        first = problems[0]
        more = f" (and {len(problems) - 1} more; run lk-plan check)" if len(problems) > 1 else ""
        raise BadInput(source, f"{prefix}{first.path[1:]}: {first.message}{more}")
    return with_defaults(data)


def load(path: str | os.PathLike[str]) -> Contract:
    """Read and validate a contract file (exit 3 on the first problem)."""
    return checked(read_file(path), str(path))


def apply_task(contract: Mapping[str, Any], task: Mapping[str, Any]) -> Contract:
    """The contract narrowed to one task: its scope replaces writable, its budget caps the diff."""
    out = copy.deepcopy(dict(contract))
    scope = task.get("scope") or []
    if scope:
        out["scope"] = dict(out.get("scope") or {})
        out["scope"]["writable"] = list(scope)
    budget = task.get("budget") or {}
    budgets = dict(out.get("budgets") or {})
    for src, dst in (("lines", "changed_lines"), ("files", "changed_files")):
        if budget.get(src):
            budgets[dst] = min(budgets.get(dst, budget[src]), budget[src])
    out["budgets"] = budgets
    if task.get("allow_empty"):
        out["allow_empty_change"] = True
    # The task's own acceptance checks (TASKS.md `check:` lines) run beside the criteria,
    # named task-1, task-2, ...; they must pass whatever the criteria did at the base.
    own = [c for c in task.get("checks") or [] if isinstance(c, str) and c.strip()]
    if own:
        criteria = [c for c in out.get("criteria") or [] if not is_task_check(c.get("name"))]
        criteria += [
            {"name": f"{TASK_CHECK_PREFIX}{i}", "run": cmd, "timeout": DEFAULT_CHECK_TIMEOUT}
            for i, cmd in enumerate(own, 1)
        ]
        out["criteria"] = criteria
    narrowed: Contract = vouched(out)
    return narrowed
