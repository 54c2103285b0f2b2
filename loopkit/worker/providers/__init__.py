"""Worker providers: ``get(name)`` returns the adapter for claude, codex, command, acp,
gemini, qwen, opencode, pi or copilot.

Adding a provider is one module with a :class:`~loopkit.worker.providers.base.Provider`
subclass -- what differs: its command line (``build``), its stream's reading (``parser``,
``classify``, ``sniff``), its home and credential set-up (``api``, ``upstream``,
``contained``, ``rehearsal``) -- and one line in ``_REGISTRY``. Everything else follows
the registry: the commands' ``--provider`` choices, transcript sniffing, the sandbox's
writable homes, the model server's ``--env`` choices and environments (``agents()``,
``Provider.rehearsal``), the variables a rehearsal drops (``Provider.routes``) -- and tests
hold the schemas' provider enums (which the contract is checked against), the docs'
tables and the end-to-end runs to it. The interface is documented in ``loopkit.worker.providers.base``.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing stays unloaded at run time (start-up is a feature)
if TYPE_CHECKING:
    from loopkit.worker.providers.base import Provider

#: name -> "module:Class" (imported on first use, so a CLI starts fast)
_REGISTRY: dict[str, str] = {
    "claude": "loopkit.worker.providers.claude:ClaudeProvider",
    "codex": "loopkit.worker.providers.codex:CodexProvider",
    "command": "loopkit.worker.providers.command:CommandProvider",
    "acp": "loopkit.worker.providers.acp:AcpProvider",
    "gemini": "loopkit.worker.providers.gemini:GeminiProvider",
    "qwen": "loopkit.worker.providers.qwen:QwenProvider",
    "opencode": "loopkit.worker.providers.opencode:OpencodeProvider",
    "pi": "loopkit.worker.providers.pi:PiProvider",
    "copilot": "loopkit.worker.providers.copilot:CopilotProvider",
}


def names() -> list[str]:
    return list(_REGISTRY)


def get(name: str) -> Provider:
    """The provider called ``name``; KeyError naming the known ones otherwise."""
    try:
        target = _REGISTRY[name]
    except KeyError:
        raise KeyError(f"no provider {name!r}; one of: {', '.join(_REGISTRY)}") from None
    module, cls = target.split(":")
    provider: Provider = getattr(importlib.import_module(module), cls)()
    return provider


def agents() -> list[str]:
    """The providers with a CLI of their own: those a scripted model server rehearses
    (``Provider.rehearsal``); command and acp run whatever they are given."""
    base = importlib.import_module("loopkit.worker.providers.base").Provider.rehearsal
    return [name for name in _REGISTRY if type(get(name)).rehearsal is not base]
