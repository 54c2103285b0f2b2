"""Rehearse loops offline: a scripted model server for the real worker CLIs (every
provider with a ``rehearsal``: claude, codex, gemini, qwen, opencode, pi, copilot).

    from loopkit.testing import ModelServer, from_data, claude_env, codex_home

    with ModelServer(from_data([{"text": "Hello"}])) as server:
        env = claude_env(server.url, home="/tmp/claude-home", retries=0)
        ...  # run `claude -p ...` with env laid over os.environ (see ``overlay``)

Names are loaded on first use, so ``lk-model-server --help`` stays quick.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "ModelServer": "loopkit.testing.server",
    "Script": "loopkit.testing.script",
    "Turn": "loopkit.testing.script",
    "load": "loopkit.testing.script",
    "parse": "loopkit.testing.script",
    "from_data": "loopkit.testing.script",
    "claude_env": "loopkit.testing.rehearse",
    "codex_home": "loopkit.testing.rehearse",
    "codex_config": "loopkit.testing.rehearse",
    "gemini_env": "loopkit.testing.rehearse",
    "qwen_env": "loopkit.testing.rehearse",
    "opencode_home": "loopkit.testing.rehearse",
    "pi_home": "loopkit.testing.rehearse",
    "copilot_env": "loopkit.testing.rehearse",
    "overlay": "loopkit.testing.rehearse",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'loopkit.testing' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
