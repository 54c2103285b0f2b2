"""What a worker (or a judge) may reach: the sandbox policy of one run.

``loopkit.sandbox`` knows how to start bubblewrap; this module decides what goes in it,
from the contract's ``sandbox`` section (published keys)::

    sandbox:
      mode: auto        # auto (the default): a sandbox where one can start, else none,
                        #   and run.sandbox says why; required: refuse to run without
                        #   one (exit 4); off: no sandbox
      network: true     # the agents need their API; false cuts the network
      writable: []      # more paths the worker may write (a cache, a scratch folder)

Inside: the repository read-write (read-only for a judge); ``.git`` (the repository's
and a linked worktree's) read-only; the contract file, TASKS.md and the memory file
read-only; the state folder (ledger, cancellation, artifacts) not visible; a private
``/tmp``; a PID namespace of its own (nothing outlives the run, no ancestor's
``/proc/PID/environ``); the allow-listed environment only. What each provider needs to
write (claude's config folder, ``CODEX_HOME``) it declares itself
(``Provider.contained``). The record (``run.sandbox``) says what was used and why.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from loopkit.errors import EnvironmentProblem

MODES = ("auto", "required", "off")
DEFAULTS: dict[str, Any] = {"mode": "auto", "network": True, "writable": []}


class Policy:
    """The sandbox a run asks for (the contract's ``sandbox`` with its defaults)."""

    mode: str
    network: bool
    writable: list[str]

    def __init__(
        self,
        mode: str = "auto",
        network: bool = True,
        writable: list[str] | None = None,
    ) -> None:
        self.mode = mode
        self.network = network
        self.writable = [] if writable is None else writable

    @classmethod
    def of(cls, contract: Mapping[str, Any] | None) -> Policy:
        section = dict(DEFAULTS)
        section.update((contract or {}).get("sandbox") or {})
        return cls(
            mode=str(section["mode"]),
            network=bool(section["network"]),
            writable=[str(p) for p in section.get("writable") or []],
        )


class Contained:
    """The command to start, the environment to start it with, and the record."""

    argv: list[str]
    env: dict[str, str]
    record: dict[str, Any]
    #: Files made for the run outside the hidden state folder (removed afterwards).
    scratch: Path | None

    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        record: dict[str, Any],
        scratch: Path | None = None,
    ) -> None:
        self.argv = argv
        self.env = env
        self.record = record
        self.scratch = scratch


def contain(
    argv: Sequence[str],
    env: Mapping[str, str],
    *,
    policy: Policy,
    root: Path,
    git_dirs: Sequence[Path],
    state: Path,
    writable: Sequence[Path] = (),
    read_only: Sequence[Path] = (),
    visible: Mapping[str, Path] | None = None,
    repo_writable: bool = True,
) -> Contained:
    """``argv`` wrapped as the policy says, or as it is (with the reason) when no sandbox
    is asked for or can start. ``visible`` maps environment variables to files in the
    hidden state folder the worker must read (the command provider's handoff): each is
    copied to a scratch folder shown read-only, and the variable points at the copy."""
    from loopkit import sandbox

    record: dict[str, Any] = {"mode": policy.mode, "network": policy.network}
    if policy.mode == "off":
        return Contained(list(argv), dict(env), {**record, "used": False, "reason": "mode: off"})
    found = sandbox.probe()
    if not found.available:
        if policy.mode == "required":
            raise EnvironmentProblem(
                f"sandbox required (sandbox.mode: required), but {found.reason}"
            )
        return Contained(list(argv), dict(env), {**record, "used": False, "reason": found.reason})
    inner = dict(env)
    scratch: Path | None = None
    shown: list[Path] = []
    for var, path in (visible or {}).items():
        if scratch is None:
            scratch = Path(tempfile.mkdtemp(prefix="loopkit-run-"))
        copy = scratch / path.name
        copy.write_bytes(path.read_bytes())
        inner[var] = str(copy)
        shown.append(copy)
    extra = [Path(p) if os.path.isabs(p) else root / p for p in policy.writable]
    for p in extra:
        p.mkdir(parents=True, exist_ok=True)
    wrapped = sandbox.wrap(
        argv,
        root=root,
        git_dir=None,
        state_dir=state,
        env=inner,
        writable_extra=[p for p in (*writable, *extra) if p.exists()],
        read_only_extra=[
            *(p for p in (*git_dirs, *read_only) if os.path.lexists(p)),
            *shown,
        ],
        network=policy.network,
        repo_writable=repo_writable,
    )
    record.update(used=True, tool="bwrap", reason=found.reason)
    return Contained(wrapped.argv, wrapped.env, record, scratch)
