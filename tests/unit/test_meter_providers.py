"""Where opencode, pi and copilot find their key and endpoint, and what a metered run of
each gets instead: the meter's URL and the run's token, in the environment and in the
private copy of its config, never the person's key."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from loopkit.boundary.dialects import credential
from loopkit.worker import providers
from loopkit.worker.providers.base import RunSpec

KEY = "sk-ant-person-0123456789"
URL = "http://127.0.0.1:1/v1"
TOKEN = "lk-run-token"


@pytest.fixture(autouse=True)
def homes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LOOPKIT_HOMES", str(tmp_path / "homes"))
    return tmp_path / "homes"


def spec(tmp: Path, env: dict[str, str], **kw: object) -> RunSpec:
    repo = tmp / "repo"
    if not (repo / ".git").exists():
        repo.mkdir(exist_ok=True)
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return RunSpec("do it", cwd=repo, environ={"HOME": str(tmp / "home"), **env}, **kw)  # type: ignore[arg-type]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def tree_holds(top: Path, needle: str) -> list[Path]:
    return [p for p in top.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


# ------------------------------------------------------------------------------ opencode


def test_opencode_finds_the_key_in_the_persons_config_never_the_projects(tmp_path: Path) -> None:
    oc = providers.get("opencode")
    config = tmp_path / "home" / ".config" / "opencode"
    # A project's opencode.json is the worker's to write: never where the key comes from.
    write(
        tmp_path / "repo" / "opencode.json",
        json.dumps({"provider": {"anthropic": {"options": {"apiKey": KEY, "baseURL": URL}}}}),
    )
    assert oc.upstream(spec(tmp_path, {})) is None
    write(
        config / "opencode.jsonc",
        """{
      // the person's own endpoint
      "provider": {"anthropic": {"options": {
        "baseURL": "http://127.0.0.1:2/v1", /* a gateway */ "apiKey": "{env:MY_KEY}",
      }}},
    }""",
    )
    up = oc.upstream(spec(tmp_path, {"MY_KEY": KEY}))
    assert up is not None and up.key == KEY and up.url == "http://127.0.0.1:2/v1"
    assert up.dialect == "anthropic" and credential(up) == {"x-api-key": KEY}
    # The environment's key first; worker.upstream over the config's endpoint.
    up = oc.upstream(spec(tmp_path, {"ANTHROPIC_API_KEY": "env-key", "MY_KEY": KEY}, upstream=URL))
    assert up is not None and up.key == "env-key" and up.url == URL.rstrip("/")
    # Another provider's model: nothing of anthropic's to meter.
    assert oc.upstream(spec(tmp_path, {"MY_KEY": KEY}, model="openai/gpt-5")) is None


def test_opencode_finds_its_login_and_meters_without_it(tmp_path: Path, homes: Path) -> None:
    oc = providers.get("opencode")
    data = tmp_path / "home" / ".local" / "share" / "opencode"
    write(data / "auth.json", json.dumps({"anthropic": {"type": "api", "key": KEY}}))
    config = tmp_path / "home" / ".config" / "opencode"
    write(config / "opencode.json", json.dumps({"model": "anthropic/claude-sonnet-4-5",
        "provider": {"openai": {"options": {"apiKey": "other-key"}}}}))  # fmt: skip
    s = spec(tmp_path, {"OPENCODE_CONFIG_CONTENT": '{"provider":{"anthropic":{"options":'
                        f'{{"apiKey":"{KEY}","timeout":5}}}}}}}}'})  # fmt: skip
    up = oc.upstream(s)
    assert up is not None and up.key == KEY and up.url == "https://api.anthropic.com/v1"
    inv = oc.metered(oc.build(s), URL, TOKEN, up)
    content = json.loads(inv.env["OPENCODE_CONFIG_CONTENT"])
    assert content["provider"]["anthropic"]["options"] == {
        "apiKey": TOKEN, "baseURL": URL, "timeout": 5}  # fmt: skip
    assert KEY not in json.dumps(inv.env) and inv.metered
    _, writable = oc.contained(inv)
    assert writable and not tree_holds(homes, KEY) and not tree_holds(homes, "other-key")
    private = json.loads((writable[0] / "config" / "opencode" / "opencode.json").read_text())
    assert private["model"] == "anthropic/claude-sonnet-4-5"  # the rest of it kept
    assert not (writable[0] / "data" / "opencode" / "auth.json").exists()
    # Unmetered, the login is seeded as before.
    oc.contained(oc.build(s))
    assert (writable[0] / "data" / "opencode" / "auth.json").exists()


# ------------------------------------------------------------------------------ pi


def test_pi_finds_the_key_where_pi_does(tmp_path: Path) -> None:
    pi = providers.get("pi")
    agent = tmp_path / "home" / ".pi" / "agent"
    assert pi.upstream(spec(tmp_path, {})) is None
    write(
        agent / "models.json",
        json.dumps(
            {"providers": {"anthropic": {"baseUrl": "http://127.0.0.1:3", "apiKey": "MY_KEY"}}}
        ),
    )
    up = pi.upstream(spec(tmp_path, {"MY_KEY": KEY}))  # apiKey names a variable
    assert up is not None and up.key == KEY and up.url == "http://127.0.0.1:3"
    write(agent / "auth.json", json.dumps({"anthropic": {"type": "api_key", "key": "login"}}))
    assert pi.upstream(spec(tmp_path, {"MY_KEY": KEY})).key == "login"  # type: ignore[union-attr]
    assert pi.upstream(spec(tmp_path, {"ANTHROPIC_API_KEY": "env"})).key == "env"  # type: ignore[union-attr]
    assert pi.upstream(spec(tmp_path, {"MY_KEY": KEY}, model="openai/gpt-5")) is None
    write(agent / "auth.json", "{}")
    write(agent / "models.json", json.dumps({"providers": {"anthropic": {"apiKey": "!pass x"}}}))
    assert pi.upstream(spec(tmp_path, {})) is None  # a key command is not run here


def test_pi_metered_moves_to_its_private_folder_sandbox_or_not(tmp_path: Path, homes: Path) -> None:
    pi = providers.get("pi")
    agent = tmp_path / "home" / ".pi" / "agent"
    write(agent / "models.json", json.dumps({"providers": {
        "anthropic": {"baseUrl": "http://127.0.0.1:3", "apiKey": KEY},
        "openai": {"apiKey": "other-key", "baseUrl": "http://x"}}}))  # fmt: skip
    write(agent / "auth.json", json.dumps({"openai": {"type": "api_key", "key": "other-key"}}))
    write(agent / "settings.json", '{"defaultProvider": "anthropic"}')
    s = spec(tmp_path, {"ANTHROPIC_OAUTH_TOKEN": "oauth"})
    up = pi.upstream(s)
    assert up is not None and up.key == KEY
    inv = pi.metered(pi.build(s), URL, TOKEN, up)
    private = Path(inv.env["PI_CODING_AGENT_DIR"])
    assert private.is_relative_to(homes) and inv.env["ANTHROPIC_API_KEY"] == TOKEN
    assert "ANTHROPIC_OAUTH_TOKEN" not in inv.env
    models = json.loads((private / "models.json").read_text())["providers"]
    assert models["anthropic"] == {"baseUrl": URL, "apiKey": TOKEN}
    assert models["openai"] == {"baseUrl": "http://x"}
    assert not (private / "auth.json").exists() and (private / "settings.json").exists()
    assert not tree_holds(homes, KEY) and not tree_holds(homes, "other-key")
    # In the sandbox: the same folder, not seeded again from itself.
    inner, writable = pi.contained(inv)
    assert writable == [private] and inner.env == inv.env
    assert (
        json.loads((private / "models.json").read_text())["providers"]["anthropic"]["apiKey"]
        == TOKEN
    )


# ------------------------------------------------------------------------------ copilot


def test_copilot_meters_its_own_endpoint_only(tmp_path: Path) -> None:
    cp = providers.get("copilot")
    byok = {"COPILOT_PROVIDER_BASE_URL": "http://127.0.0.1:4", "COPILOT_PROVIDER_API_KEY": KEY}
    assert cp.upstream(spec(tmp_path, {"COPILOT_PROVIDER_API_KEY": KEY})) is None  # GitHub's
    up = cp.upstream(spec(tmp_path, byok))
    assert up is not None and up.dialect == "openai" and up.url == "http://127.0.0.1:4"
    assert credential(up) == {"Authorization": f"Bearer {KEY}"}
    up = cp.upstream(spec(tmp_path, {**byok, "COPILOT_PROVIDER_TYPE": "anthropic"}))
    assert up is not None and credential(up) == {"x-api-key": KEY}
    bearer = {**byok, "COPILOT_PROVIDER_TYPE": "anthropic", "COPILOT_PROVIDER_BEARER_TOKEN": "b"}
    up = cp.upstream(spec(tmp_path, bearer))
    assert up is not None and credential(up) == {"Authorization": "Bearer b"}
    assert cp.upstream(spec(tmp_path, {**byok, "COPILOT_PROVIDER_TYPE": "azure"})) is None
    assert cp.upstream(spec(tmp_path, {**byok, "COPILOT_PROVIDER_API_KEY_COMMAND": "x"})) is None
    s = spec(tmp_path, bearer)
    inv = cp.metered(cp.build(s), URL, TOKEN, cp.upstream(s))  # type: ignore[arg-type]
    assert inv.env["COPILOT_PROVIDER_BEARER_TOKEN"] == TOKEN
    assert inv.env["COPILOT_PROVIDER_BASE_URL"] == URL
    assert "COPILOT_PROVIDER_API_KEY" not in inv.env and KEY not in json.dumps(inv.env)


def test_opencode_metered_carries_the_named_config_without_its_keys(tmp_path: Path) -> None:
    oc = providers.get("opencode")
    text = """{
      "instructions": ["a, }// not a comment"], // a comment
      "provider": {"anthropic": {"options": {"apiKey": "KEY", "timeout": 7,},},},
    }"""
    named = write(tmp_path / "elsewhere" / "oc.jsonc", text.replace("KEY", KEY))
    s = spec(tmp_path, {"OPENCODE_CONFIG": str(named)})
    up = oc.upstream(s)
    assert up is not None and up.key == KEY
    inv = oc.metered(oc.build(s), URL, TOKEN, up)
    assert "OPENCODE_CONFIG" not in inv.env and KEY not in json.dumps(inv.env)
    content = json.loads(inv.env["OPENCODE_CONFIG_CONTENT"])
    assert content["instructions"] == ["a, }// not a comment"]
    assert content["provider"]["anthropic"]["options"] == {
        "apiKey": TOKEN, "baseURL": URL, "timeout": 7}  # fmt: skip
    assert content["agent"]["build"]["steps"]  # loopkit's own settings kept
