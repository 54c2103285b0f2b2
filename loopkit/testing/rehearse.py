"""The rehearsal kit: the environment and configuration that point the real worker CLIs
(``claude``, ``codex``, ``gemini``, ``qwen``, ``opencode``, ``pi``, ``copilot``) at a
scripted model server instead of a vendor's API.

    env = claude_env(server.url, home=tmp / "claude-home", retries=2)
    env = codex_home(server.url, tmp / "codex-home", retries=0)
    env = gemini_env(server.url, home=tmp / "gemini-home", retries=0)
    env = qwen_env(server.url, home=tmp / "qwen-home", retries=0)
    env = opencode_home(server.url, tmp / "opencode-home")
    env = pi_home(server.url, tmp / "pi-agent", retries=1)
    env = copilot_env(server.url, tmp / "copilot-home")

Both return only the variables to set; lay them over a copy of ``os.environ`` with
``overlay()``, which also drops the variables that would send the CLIs elsewhere.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from loopkit.files import atomic_write

#: The API key both CLIs are given: the scripted server accepts anything.
REHEARSAL_KEY = "loopkit-rehearsal"

#: The model slug codex is told to use: it must be one of codex's own catalog or codex
#: warns and offers no ``apply_patch`` tool.
CODEX_MODEL = "gpt-5.5"

#: Variables that would route a CLI to another backend or account; ``overlay`` drops them.
ROUTING_VARS = (
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_MODEL",
    "ANTHROPIC_SMALL_FAST_MODEL",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
    "CLAUDE_CODE_USE_FOUNDRY",
    "CLAUDE_CONFIG_DIR",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_MODEL",
    "CODEX_API_KEY",
    "GEMINI_API_KEY",
    "GEMINI_CLI_HOME",
    "GEMINI_DEFAULT_AUTH_TYPE",
    "GOOGLE_API_KEY",
    "GOOGLE_GEMINI_BASE_URL",
    "GOOGLE_GENAI_USE_VERTEXAI",
    "GOOGLE_CLOUD_PROJECT",
    "QWEN_HOME",
    "OPENCODE_CONFIG",
    "OPENCODE_CONFIG_CONTENT",
    "OPENCODE_CONFIG_DIR",
    "PI_CODING_AGENT_DIR",
    "PI_CODING_AGENT_SESSION_DIR",
    "COPILOT_HOME",
    "COPILOT_GITHUB_TOKEN",
)

#: The model name qwen is told to use (any name: the scripted server answers them all).
QWEN_MODEL = "qwen3-coder-plus"


def claude_env(
    base_url: str,
    home: str | Path,
    *,
    retries: int | None = None,
    api_key: str = REHEARSAL_KEY,
) -> dict[str, str]:
    """Environment for ``claude -p`` talking to ``base_url`` with a private ``home``.

    ``retries`` caps Claude Code's own retries of failed requests (its default, 10 with
    backoff, makes an error that never clears take about three minutes).
    """
    home_path = Path(home)
    home_path.mkdir(parents=True, exist_ok=True)
    env = {
        "HOME": str(home_path),
        "ANTHROPIC_BASE_URL": base_url.rstrip("/"),
        "ANTHROPIC_API_KEY": api_key,
        # Without it the CLI reaches for outside hosts and makes an extra title request.
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
    }
    if retries is not None:
        env["CLAUDE_CODE_MAX_RETRIES"] = str(retries)
    return env


def codex_config(
    base_url: str,
    *,
    model: str = CODEX_MODEL,
    retries: int = 0,
    stream_retries: int | None = None,
    provider: str = "loopkit",
    env_key: str = "LOOPKIT_MODEL_KEY",
) -> str:
    """The ``config.toml`` text that sends codex to ``base_url`` over the Responses API."""
    url = base_url.rstrip("/")
    if not url.endswith("/v1"):
        url += "/v1"
    streams = retries if stream_retries is None else stream_retries
    return (
        f"model = {_toml(model)}\n"
        f"model_provider = {_toml(provider)}\n"
        "\n"
        f"[model_providers.{provider}]\n"
        f"name = {_toml(provider)}\n"
        f"base_url = {_toml(url)}\n"
        f"env_key = {_toml(env_key)}\n"
        'wire_api = "responses"\n'
        f"request_max_retries = {int(retries)}\n"
        f"stream_max_retries = {int(streams)}\n"
        "\n"
        "# Offline, analytics cost about 5 s a run and plugins reach for outside hosts.\n"
        "[analytics]\n"
        "enabled = false\n"
        "\n"
        "[features]\n"
        "plugins = false\n"
    )


def codex_home(
    base_url: str,
    dir: str | Path,
    *,
    model: str = CODEX_MODEL,
    retries: int = 0,
    stream_retries: int | None = None,
    api_key: str = REHEARSAL_KEY,
) -> dict[str, str]:
    """Write ``dir/config.toml`` for ``codex exec`` against ``base_url``; return its env.

    ``retries`` caps codex's request retries and (unless ``stream_retries`` is given)
    its stream reconnects.
    """
    home = Path(dir)
    home.mkdir(parents=True, exist_ok=True)
    env_key = "LOOPKIT_MODEL_KEY"
    text = codex_config(
        base_url, model=model, retries=retries, stream_retries=stream_retries, env_key=env_key
    )
    atomic_write(home / "config.toml", text)
    return {"CODEX_HOME": str(home), env_key: api_key}


def gemini_env(
    base_url: str,
    home: str | Path,
    *,
    retries: int = 0,
    api_key: str = REHEARSAL_KEY,
) -> dict[str, str]:
    """Environment for ``gemini -p`` talking to ``base_url`` with a private ``home``;
    writes ``home/.gemini/settings.json``: API-key auth and ``general.maxAttempts``
    (``retries`` + 1; its default, 10 with backoff, makes an error that never clears take
    minutes)."""
    folder = Path(home) / ".gemini"
    folder.mkdir(parents=True, exist_ok=True)
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "general": {"maxAttempts": max(1, min(10, int(retries) + 1))},
    }
    atomic_write(folder / "settings.json", json.dumps(settings, indent=2) + "\n")
    return {
        "HOME": str(home),
        "GEMINI_API_KEY": api_key,
        "GOOGLE_GEMINI_BASE_URL": base_url.rstrip("/"),
    }


def qwen_env(
    base_url: str,
    home: str | Path,
    *,
    retries: int = 0,
    model: str = QWEN_MODEL,
    api_key: str = REHEARSAL_KEY,
) -> dict[str, str]:
    """Environment for ``qwen`` talking to ``base_url`` (Chat Completions) with a private
    ``home``; writes ``home/.qwen/settings.json`` with the request retry cap
    (``model.generationConfig.maxRetries``) and the background memory agent off."""
    folder = Path(home) / ".qwen"
    folder.mkdir(parents=True, exist_ok=True)
    settings = {
        "model": {"generationConfig": {"maxRetries": int(retries)}},
        # Its background memory agent talks to the model after the run, with tools, and
        # would take turns of the script.
        "memory": {"enableManagedAutoMemory": False, "enableAutoSkill": False},
    }
    atomic_write(folder / "settings.json", json.dumps(settings, indent=2) + "\n")
    url = base_url.rstrip("/")
    return {
        "HOME": str(home),
        "OPENAI_API_KEY": api_key,
        "OPENAI_BASE_URL": url if url.endswith("/v1") else url + "/v1",
        "OPENAI_MODEL": model,
    }


#: The model opencode is told to use: ``provider/model``, the provider's base URL redirected.
OPENCODE_MODEL = "anthropic/claude-sonnet-4-5"


def opencode_home(
    base_url: str,
    dir: str | Path,
    *,
    model: str = OPENCODE_MODEL,
    api_key: str = REHEARSAL_KEY,
) -> dict[str, str]:
    """Write ``dir/.config/opencode/opencode.json`` sending ``opencode`` to ``base_url``
    (the Anthropic Messages API, ``options.baseURL``); return its env (``HOME`` and the
    XDG folders under ``dir``, the catalog fetch and autoupdate off)."""
    home = Path(dir)
    provider = model.split("/", 1)[0]
    config = {
        "model": model,
        "autoupdate": False,
        "share": "disabled",
        "provider": {
            provider: {"options": {"baseURL": base_url.rstrip("/") + "/v1", "apiKey": api_key}}
        },
    }
    target = home / ".config" / "opencode" / "opencode.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(target, json.dumps(config, indent=2) + "\n")
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
    }


#: The model pi is told to use (its built-in anthropic provider, the base URL redirected).
PI_MODEL = "anthropic/claude-sonnet-4-5"


def pi_home(
    base_url: str,
    dir: str | Path,
    *,
    retries: int = 0,
    api_key: str = REHEARSAL_KEY,
) -> dict[str, str]:
    """Write pi's ``models.json`` (the anthropic provider's ``baseUrl`` set to
    ``base_url``) and ``settings.json`` (``retries`` agent-level retries, 10 ms apart;
    the SDK's own retries off) into ``dir``; return its env (``PI_CODING_AGENT_DIR``)."""
    home = Path(dir)
    home.mkdir(parents=True, exist_ok=True)
    models = {"providers": {"anthropic": {"baseUrl": base_url.rstrip("/"), "apiKey": api_key}}}
    settings = {
        "defaultProvider": "anthropic",
        "defaultModel": PI_MODEL.split("/", 1)[1],
        "retry": {
            "enabled": retries > 0,
            "maxRetries": retries,
            "baseDelayMs": 10,
            "provider": {"maxRetries": 0},
        },
    }
    atomic_write(home / "models.json", json.dumps(models, indent=2) + "\n")
    atomic_write(home / "settings.json", json.dumps(settings, indent=2) + "\n")
    return {"PI_CODING_AGENT_DIR": str(home), "PI_OFFLINE": "1", "PI_TELEMETRY": "0"}


#: The model Copilot is told to use over its own-endpoint (BYOK) settings.
COPILOT_MODEL = "claude-sonnet-4.5"


def copilot_env(base_url: str, home: str | Path, *, api_key: str = REHEARSAL_KEY) -> dict[str, str]:
    """Environment for ``copilot -p`` talking to ``base_url`` (the Anthropic Messages API,
    its ``COPILOT_PROVIDER_*`` settings) offline, with ``COPILOT_HOME`` under ``home``."""
    home_path = Path(home)
    home_path.mkdir(parents=True, exist_ok=True)
    return {
        "HOME": str(home_path),
        "COPILOT_HOME": str(home_path / ".copilot"),
        "COPILOT_OFFLINE": "true",
        "COPILOT_AUTO_UPDATE": "false",
        "COPILOT_PROVIDER_BASE_URL": base_url.rstrip("/"),
        "COPILOT_PROVIDER_TYPE": "anthropic",
        "COPILOT_PROVIDER_API_KEY": api_key,
        "COPILOT_MODEL": COPILOT_MODEL,
    }


def overlay(env: Mapping[str, str], *, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default ``os.environ``) without the routing variables, then ``env`` on top."""
    merged = {
        k: v for k, v in (os.environ if base is None else base).items() if k not in ROUTING_VARS
    }
    merged.update(env)
    return merged


def _toml(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'
