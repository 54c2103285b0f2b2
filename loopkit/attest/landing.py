"""The statement a landing makes: built, signed and stored as the landed commit's note
before the branch moves to it, so no commit lands without one while signing works.

Policy (git config ``loopkit.attest``): ``sign`` (the default) signs each landing and, if
signing fails, lands with a warning; ``require`` refuses the landing instead (40);
``off`` makes no statement."""

from __future__ import annotations

import json
from pathlib import Path

from loopkit import git
from loopkit.attest import envelope, statement, store
from loopkit.errors import EnvironmentProblem, LoopkitError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any


def policy(root: Path) -> str:
    value = (git.config_value(root, "loopkit.attest") or "").strip().lower()
    return value if value in ("off", "require") else "sign"


def _inside(root: Path, path: object) -> str | None:
    if not isinstance(path, str) or not path:
        return None
    try:
        return (root / path).resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return None


def record(
    root: Path,
    document: Mapping[str, Any],
    *,
    commit: str,
    tree: str,
    base: str,
    state: Path,
    bookkeeping: Sequence[str] = (),
    say: Callable[[str], None],
) -> str | None:
    """Attest ``commit``; the note's blob id, or None (policy off, or signing failed and
    the policy lets the landing go on). Raises LoopkitError when the policy requires it."""
    rule = policy(root)
    if rule == "off":
        return None
    try:
        made = statement.build(
            document,
            root=root,
            commit=commit,
            tree=tree,
            base=base,
            state=state,
            contract_path=_inside(root, (document.get("contract_source") or {}).get("path")),
            bookkeeping=[p for p in (_inside(root, b) for b in bookkeeping) if p],
        )
        roots = made["predicate"]["repository"]["roots"]
        who = envelope.signer(root, identity=roots[0] if roots else "repository")
        sealed = envelope.seal(statement.canonical(made), who)
        blob = store.put(root, commit, json.dumps(sealed, indent=1).encode() + b"\n")
    except (LoopkitError, OSError) as e:
        problem = (
            e if isinstance(e, LoopkitError) else EnvironmentProblem(f"{e.filename}: {e.strerror}")
        )
        if rule == "require":
            raise problem from None
        say(f"warning: {commit[:12]} lands without a signed statement: {problem}")
        return None
    return blob
