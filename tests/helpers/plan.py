"""Shared inputs for the plan area's tests: a contract, TASKS.md texts, small builders."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loopkit import plan

CONTRACT_YAML = """\
version: 1
objective: Fix blank-line handling in parse_headers and add a regression test.
scope:
  writable: ["src/**", "tests/**", "docs/**"]
  protected: ["migrations/**"]
  always_allowed: ["tests/**"]
criteria:
  - {name: regression, run: "pytest tests -q", timeout: 300}
budgets: {attempts: 4, changed_files: 4, changed_lines: 200, wall_seconds: 3600, cost_usd: 5, same_failure: 2}
worker: {provider: command, command: "true"}
memory: MEMORY.md
"""

CONTRACT: dict[str, Any] = {
    "version": 1,
    "objective": "Fix blank-line handling in parse_headers and add a regression test.",
    "scope": {
        "writable": ["src/**", "tests/**", "docs/**"],
        "protected": ["migrations/**"],
        "always_allowed": ["tests/**"],
    },
    "criteria": [{"name": "regression", "run": "pytest tests -q", "timeout": 300}],
    "budgets": {"attempts": 4, "changed_files": 4, "changed_lines": 200},
    "worker": {"provider": "command", "command": "true"},
}

TASKS_MD = """\
# Tasks

- [x] Set up the project {#setup}
  budget: 20 lines / 2 files
  scope: src/parser/__init__.py, tests/conftest.py
  end
- [ ] Fix blank-line handling in parse_headers
  budget: 40 lines / 2 files
  scope:
    - src/parser/headers.py
    - tests/test_headers.py
  depends: setup
  end
- [ ] GOAL: the parser module is documented {#docs}
  depends: fix-blank-line-handling-in-parse-headers
  - [ ] Reference pages {#docs-ref}
    budget: 300 lines / 4 files
    scope: docs/reference/**
    end
  - [ ] Tutorial {#docs-tutorial}
    budget: 300 lines / 4 files
    scope: docs/tutorial/*.md
    end
  end
"""


def parsed(text: str) -> plan.Plan:
    return plan.parse(text.encode("utf-8"))


def problems(text: str, contract: dict[str, Any] | None = None) -> list[str]:
    return [p.message for p in plan.check(parsed(text), contract=contract)]


def item(text: str, *, mark: str = " ", plan_lines: tuple[str, ...] = (), indent: str = "") -> str:
    """One checklist item with its plan (end added when there is a plan)."""
    out = f"{indent}- [{mark}] {text}\n"
    for line in plan_lines:
        out += f"{indent}  {line}\n"
    if plan_lines:
        out += f"{indent}  end\n"
    return out


def small(text: str, scope: str = "src/a.py", **kw: Any) -> str:
    return item(text, plan_lines=("budget: 10 lines / 1 files", f"scope: {scope}"), **kw)


def write(tmp: Path, name: str, text: str | bytes) -> Path:
    p = tmp / name
    if isinstance(text, str):
        p.write_text(text, encoding="utf-8", newline="")
    else:
        p.write_bytes(text)
    return p


def chain(
    n: int, *, backwards: bool = False, parked: int | None = None, cycle: bool = False
) -> str:
    """A TASKS.md of ``n`` tasks t0..t{n-1}, each depending on the one before it.

    ``backwards``: each depends on the one after it instead (the ready task is the last);
    ``parked``: that task is marked [!]; ``cycle``: the first also depends on the last.
    """
    out = []
    for i in range(n):
        dep = i + 1 if backwards else i - 1
        lines = ["budget: 5 lines / 1 file", f"scope: src/f{i}.py"]
        if 0 <= dep < n:
            lines.append(f"depends: t{dep}")
        elif cycle:
            lines.append(f"depends: t{n - 1 if not backwards else 0}")
        out.append(
            item(f"Task {i} {{#t{i}}}", mark="!" if i == parked else " ", plan_lines=tuple(lines))
        )
    return "".join(out)
