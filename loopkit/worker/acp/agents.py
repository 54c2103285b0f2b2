"""The ACP agents loopkit knows by name: ``worker: {provider: acp, agent: NAME}``.

Each is the command that starts the agent speaking ACP on its stdio, and the environment
names (exact, or prefixes ending in ``_``) it needs passed on. Any other agent runs with
``worker: {provider: acp, command: "its command"}``.
"""

from __future__ import annotations

#: What Claude Code reads from the environment (its CLI reads a few more: claude.py).
CLAUDE_ENV = (
    "ANTHROPIC_",
    "CLAUDE_CODE_",
    "CLAUDE_CONFIG_DIR",
    "DISABLE_AUTOUPDATER",
    "DISABLE_TELEMETRY",
    "DISABLE_ERROR_REPORTING",
    "MAX_THINKING_TOKENS",
)

#: name -> (argv, environment names, the home its sessions live in: a provider's name)
AGENTS: dict[str, tuple[tuple[str, ...], tuple[str, ...], str | None]] = {
    # npm @zed-industries/claude-agent-acp (Claude Code through the Claude Agent SDK).
    # IS_SANDBOX is left out on purpose: set, the adapter offers a bypass mode that the
    # CLI refuses to start in as root.
    "claude": (
        ("claude-agent-acp",),
        CLAUDE_ENV,
        "claude",
    ),
    # npm @zed-industries/codex-acp
    "codex": (("codex-acp",), ("OPENAI_", "CODEX_", "RUST_LOG"), "codex"),
    "gemini": (("gemini", "--experimental-acp"), ("GEMINI_", "GOOGLE_"), None),
    "qwen": (("qwen", "--experimental-acp"), ("OPENAI_", "DASHSCOPE_", "QWEN_"), None),
    "goose": (("goose", "acp"), ("GOOSE_", "OPENAI_", "ANTHROPIC_"), None),
    "opencode": (("opencode", "acp"), ("OPENCODE_", "OPENAI_", "ANTHROPIC_"), None),
}


def names() -> list[str]:
    return list(AGENTS)
