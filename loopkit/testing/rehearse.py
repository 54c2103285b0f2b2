"""The rehearsal kit: the environment and configuration that point the real worker CLIs
at a scripted model server instead of a vendor's API. Each provider holds its own
(``Provider.rehearsal``); this module reaches them through the registry.

    env = rehearse.env("claude", server.url, tmp / "claude-home", retries=2)
    env = rehearse.env("codex", server.url, tmp / "codex-home")   # writes config.toml
    rehearse.agents()   # the CLIs there is a rehearsal for (the registry's ``agents()``)

The published names stay: ``claude_env``, ``codex_home``, ``gemini_env``, ``qwen_env``,
``opencode_home``, ``pi_home``, ``copilot_env`` (``env`` with the CLI's name given),
``codex_config``, ``CODEX_MODEL`` and ``REHEARSAL_KEY``.

They return only the variables to set; lay them over a copy of ``os.environ`` with
``overlay()``, which also drops the variables that would send the CLIs elsewhere.
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from loopkit.worker import providers
from loopkit.worker.providers.base import REHEARSAL_KEY, Rehearsal

__all__ = ["REHEARSAL_KEY", "agents", "env", "overlay", "routing_vars"]


def agents() -> list[str]:
    """The CLIs a scripted model server can rehearse, in the registry's order."""
    return providers.agents()


def env(
    name: str,
    base_url: str,
    home: str | Path,
    *,
    retries: int | None = None,
    api_key: str = REHEARSAL_KEY,
    model: str | None = None,
    stream_retries: int | None = None,
) -> dict[str, str]:
    """The variables that point the CLI ``name`` at ``base_url``, its settings written
    under ``home`` (``retries``: the CLI's own, None its default; ``model``: None the
    provider's choice; ``stream_retries``: codex's reconnects); KeyError when the registry
    has no such CLI."""
    r = Rehearsal(base_url, Path(home), retries, api_key, model, stream_retries)
    found = providers.get(name).rehearsal(r)
    if found is None:
        raise KeyError(f"no rehearsal for {name!r}; one of: {', '.join(agents())}")
    return found


def routing_vars() -> tuple[str, ...]:
    """Variables that would route a CLI to another backend or account (each provider's
    ``routes``); ``overlay`` drops them."""
    seen: dict[str, None] = {}
    for name in agents():
        seen.update(dict.fromkeys(providers.get(name).routes))
    return tuple(seen)


def overlay(env: Mapping[str, str], *, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default ``os.environ``) without the routing variables, then ``env`` on top."""
    drop = frozenset(routing_vars())
    merged = {k: v for k, v in (os.environ if base is None else base).items() if k not in drop}
    merged.update(env)
    return merged


#: The published per-CLI names: each is its provider's ``rehearsal``.
_PUBLISHED = {
    "claude_env": "claude",
    "codex_home": "codex",
    "gemini_env": "gemini",
    "qwen_env": "qwen",
    "opencode_home": "opencode",
    "pi_home": "pi",
    "copilot_env": "copilot",
}


def __getattr__(name: str) -> Any:
    if name in _PUBLISHED:
        return functools.partial(env, _PUBLISHED[name])
    if name in ("codex_config", "CODEX_MODEL"):
        codex = importlib.import_module("loopkit.worker.providers.codex")
        return codex.rehearsal_config if name == "codex_config" else codex.CODEX_MODEL
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
