"""The meter: the real claude and codex CLIs talk to their API through lk-invoke's
per-run proxy, with a token and never the key, and every request is metered."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers.agents import claude_bin, claude_env_for, codex_bin, codex_env_for, model_server
from tests.helpers.invoke import lk_invoke, write_contract

pytestmark = pytest.mark.agents

#: What the person's environment holds: the meter must keep it outside the sandbox.
REAL_KEY = "sk-ant-real-0123456789-do-not-leak"

WRITE = {"name": "Write", "input": {"file_path": "{{cwd}}/hello.py", "content": "print('hello')\n"}}
PATCH = {
    "name": "apply_patch",
    "input": "*** Begin Patch\n*** Add File: hello.py\n+print('hello')\n*** End Patch\n",
}


def prices(tmp: Path, model: str, host: str) -> Path:
    path = tmp / "prices.yaml"
    entry = {"input": 3.0, "output": 15.0, "as_of": "2026-01-01", "source": "test table"}
    path.write_text(yaml.safe_dump({"models": {model: {**entry, "hosts": [host]}}}))
    return path


def test_the_shipped_prices_do_not_hold_for_another_host(git_repo: Path, tmp_path: Path) -> None:
    """The shipped table is the vendor's: answers from a local server are priced, but
    that figure is not trusted, and the CLI's own figure stays the run's (untrusted)."""
    claude_bin()
    contract = write_contract(
        tmp_path / "loop.yaml", worker={"provider": "claude", "model": "claude-sonnet-4-5"}
    )
    with model_server([{"text": "Done."}]) as server:
        env = claude_env_for(server, tmp_path / "home")
        env["ANTHROPIC_API_KEY"] = REAL_KEY
        r = lk_invoke(["--contract", str(contract)], cwd=git_repo, env=env)
    assert r.returncode == 0, r.stderr
    m = r.run["meter"]
    assert m["cost"]["usd"] and m["cost"]["trusted"] is False
    assert "anthropic.com/pricing" in m["cost"]["source"]
    assert r.run["cost"]["trusted"] is False
    assert r.run["cost"]["source"] == "claude-code price table"


def meter_log(repo: Path, run: dict[str, Any]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (repo / run["meter"]["log"]).read_text().splitlines()]


def test_claude_through_the_meter(git_repo: Path, tmp_path: Path) -> None:
    claude_bin()
    turns = [
        {
            "text": "Creating.",
            "tools": [WRITE],
            "usage": {"input_tokens": 1000, "output_tokens": 50},
        },
        {"text": "Done.", "usage": {"input_tokens": 1200, "output_tokens": 20}},
    ]
    contract = write_contract(
        tmp_path / "loop.yaml", worker={"provider": "claude", "model": "claude-sonnet-4-5"}
    )
    with model_server(turns) as server:
        env = claude_env_for(server, tmp_path / "home")
        env["ANTHROPIC_API_KEY"] = REAL_KEY
        # The scripted server stands in for the vendor: a table whose entry names its host.
        env["LOOPKIT_PRICES"] = str(prices(tmp_path, "claude-sonnet-4-5", "127.0.0.1"))
        r = lk_invoke(["--contract", str(contract)], cwd=git_repo, env=env)
        seen = server.model_requests("anthropic")
    assert r.returncode == 0, r.stderr
    run = r.run
    assert (git_repo / "hello.py").exists()
    m = run["meter"]
    assert m["dialect"] == "anthropic" and m["upstream"] == server.url.rstrip("/")
    assert m["refused"] == 0 and m["statuses"].get("200", 0) >= 2
    # Every model request the server answered went through the meter (and was metered).
    model_calls = [e for e in meter_log(git_repo, run) if e["path"].endswith("/v1/messages")]
    assert len(model_calls) == len(seen) >= 2
    assert m["tokens"]["output"] >= 70 and m["tokens"]["input"] >= 2200
    assert m["models"] == ["claude-sonnet-4-5"], m
    # The meter's cost is the run's cost: usage at the table's prices, trusted.
    assert run["cost"]["trusted"] is True and run["cost"]["source"].startswith("loopkit meter")
    tokens = m["tokens"]
    expected = (tokens["input"] * 3 + tokens["output"] * 15) / 1e6
    assert m["cost"]["usd"] == pytest.approx(expected) and expected > 0
    assert m["cost"]["trusted"] is True
    assert run["cost"]["usd"] == pytest.approx(expected)
    assert "test table" in run["cost"]["source"] and "2026-01-01" in run["cost"]["source"]
    assert run["cost"]["reported_usd"] is not None  # the CLI's own figure, kept beside
    # The CLI never held the key: the transcript, the handoff, the stderr hold no copy.
    for name in ("transcript", "stderr", "handoff"):
        assert REAL_KEY not in (git_repo / run[name]).read_text()


def test_codex_through_the_meter(git_repo: Path, tmp_path: Path) -> None:
    codex_bin()
    turns = [
        {
            "text": "Creating.",
            "tools": [PATCH],
            "usage": {"input_tokens": 500, "output_tokens": 40},
        },
        {
            "text": "Done.",
            "usage": {"input_tokens": 600, "output_tokens": 10, "cached_tokens": 100},
        },
    ]
    contract = write_contract(tmp_path / "loop.yaml", worker={"provider": "codex"})
    with model_server(turns) as server:
        env = codex_env_for(server, tmp_path / "codex-home")
        env["LOOPKIT_MODEL_KEY"] = REAL_KEY  # the config's env_key
        r = lk_invoke(["--contract", str(contract)], cwd=git_repo, env=env)
    assert r.returncode == 0, r.stderr
    run = r.run
    assert (git_repo / "hello.py").read_text() == "print('hello')\n"
    m = run["meter"]
    assert m["dialect"] == "openai" and m["refused"] == 0
    calls = [e for e in meter_log(git_repo, run) if e["path"].endswith("/responses")]
    assert len(calls) == 2 and all(c["stream"] for c in calls)
    # Responses usage: input counts its cached part; the meter keeps them apart.
    assert m["tokens"]["output"] == 50 and m["tokens"]["cache_read"] == 100
    assert m["tokens"]["input"] == 1000
    # gpt-5.5 is in no price table: the cost says so rather than guess.
    assert m["cost"]["usd"] is None and m["cost"]["unpriced"] == ["gpt-5.5"]
    assert run["cost"]["trusted"] is False
    assert "-c" in run["command"]  # the config's base_url pointed at the meter


def test_a_429_retried_in_silence_is_on_the_record(git_repo: Path, tmp_path: Path) -> None:
    """Claude Code retries a 429 itself; the meter sees it on the wire whatever the CLI
    says, and the run's api_retries carry it to the decision."""
    claude_bin()
    turns = [
        {"error": {"status": 429, "times": 2}, "text": "Done.", "tools": []},
    ]
    contract = write_contract(tmp_path / "loop.yaml", worker={"provider": "claude"})
    with model_server(turns) as server:
        env = claude_env_for(server, tmp_path / "home", retries=3)
        env["ANTHROPIC_API_KEY"] = REAL_KEY
        r = lk_invoke(["--contract", str(contract)], cwd=git_repo, env=env, timeout=180)
    assert r.returncode == 0, r.stderr
    run = r.run
    assert run["stop_reason"] == "completed"
    assert run["meter"]["statuses"].get("429") == 2 and run["meter"]["transient"] == 2
    assert run["api_retries"] >= 2


def test_a_429_forever_is_rate_limited_and_transient(git_repo: Path, tmp_path: Path) -> None:
    """A 429 that never clears: Claude Code gives up and names no status; the meter's
    record says 429, so the decision sees a transient failure (retry with backoff, no
    attempt spent) rather than a crash."""
    claude_bin()
    turns = [{"error": {"status": 429, "times": 100}, "text": "never"}]
    contract = write_contract(tmp_path / "loop.yaml", worker={"provider": "claude"})
    with model_server(turns) as server:
        env = claude_env_for(server, tmp_path / "home", retries=1)
        env["ANTHROPIC_API_KEY"] = REAL_KEY
        r = lk_invoke(["--contract", str(contract)], cwd=git_repo, env=env, timeout=180)
    assert r.returncode == 1
    run = r.run
    assert run["meter"]["statuses"].get("429", 0) >= 2
    assert run["stop_reason"] == "rate_limited" and run["api_error_status"] == 429
    from loopkit.decision.classify import classify_run

    assert classify_run(run) == "transient"


@pytest.mark.parametrize("name", ["gemini", "qwen"])
def test_gemini_and_qwen_through_the_meter(git_repo: Path, tmp_path: Path, name: str) -> None:
    # Their key variable and base URL are declared once (Provider.api): the CLI gets the
    # run's token and the meter's URL; the key stays outside, every request is metered.
    from tests.helpers import agents

    agents.agent_bin(name)
    tool = "write_file"
    turns = [
        {"text": "Creating.", "tools": [{"name": tool, "input": {
            "file_path": "{{cwd}}/hello.py", "content": "print(1)\n"}}],
         "usage": {"input_tokens": 400, "output_tokens": 30}},
        {"text": "Done.", "usage": {"input_tokens": 450, "output_tokens": 5}},
    ]  # fmt: skip
    contract = write_contract(tmp_path / "loop.yaml", worker={"provider": name})
    with model_server(turns) as server:
        env = agents.env_for(name, server, tmp_path / "home")
        key_var = "GEMINI_API_KEY" if name == "gemini" else "OPENAI_API_KEY"
        env[key_var] = REAL_KEY
        r = lk_invoke(["--contract", str(contract)], cwd=git_repo, env=env)
    assert r.returncode == 0, r.stderr
    run = r.run
    assert (git_repo / "hello.py").read_text() == "print(1)\n"
    m = run["meter"]
    assert m["dialect"] == ("gemini" if name == "gemini" else "openai") and m["refused"] == 0
    assert m["statuses"].get("200", 0) >= 2 and m["tokens"]["output"] >= 35
    for what in ("transcript", "stderr", "handoff"):
        assert REAL_KEY not in (git_repo / run[what]).read_text()


#: Each CLI's tool that writes a new file, as the scripted server asks for it.
WRITES = {
    "opencode": {"name": "write", "input": {"filePath": "{{cwd}}/hello.py", "content": "print(1)\n"}},
    "pi": {"name": "write", "input": {"path": "hello.py", "content": "print(1)\n"}},
    "copilot": {
        "name": "create", "input": {"path": "{{cwd}}/hello.py", "file_text": "print(1)\n"}},
}  # fmt: skip


def files_under(top: Path) -> list[Path]:
    return [p for p in top.rglob("*") if p.is_file() and not p.is_symlink()]


@pytest.mark.parametrize("name", ["opencode", "pi", "copilot"])
def test_opencode_pi_and_copilot_through_the_meter(
    git_repo: Path, tmp_path: Path, name: str
) -> None:
    # The key where each CLI finds it: opencode's opencode.json (provider.anthropic.options),
    # pi's models.json (providers.anthropic), copilot's COPILOT_PROVIDER_API_KEY. The run's
    # private copy of that config talks to the meter with the token; the key stays outside.
    from tests.helpers import agents

    agents.agent_bin(name)
    turns = [
        {"text": "Creating.", "tools": [WRITES[name]],
         "usage": {"input_tokens": 400, "output_tokens": 30}},
        {"text": "Done.", "usage": {"input_tokens": 450, "output_tokens": 5}},
    ]  # fmt: skip
    contract = write_contract(tmp_path / "loop.yaml", worker={"provider": name})
    person = tmp_path / "person"
    with model_server(turns) as server:
        env = agents.env_for(name, server, person, api_key=REAL_KEY)
        env.pop("ANTHROPIC_API_KEY", None)
        env["LOOPKIT_HOMES"] = str(tmp_path / "homes")
        r = lk_invoke(["--contract", str(contract)], cwd=git_repo, env=env, timeout=240)
        seen = server.model_requests("anthropic")
    assert r.returncode == 0, r.stderr
    run = r.run
    assert (git_repo / "hello.py").read_text() == "print(1)\n"
    m = run["meter"]
    assert m["dialect"] == "anthropic" and m["refused"] == 0
    assert m["upstream"] == server.url.rstrip("/")
    # Every model request the server answered went through the meter, and was metered.
    calls = [e for e in meter_log(git_repo, run) if e["path"].endswith("/messages")]
    assert len(calls) == len(seen) >= 2 and all(c["status"] == 200 for c in calls)
    assert m["statuses"].get("200", 0) >= 2 and m["tokens"]["output"] >= 35
    assert m["tokens"]["input"] >= 850
    assert run["cost"]["trusted"] is False
    # The key is in no file of the run and nowhere under the private home it used.
    for what in ("transcript", "stderr", "handoff"):
        assert REAL_KEY not in (git_repo / run[what]).read_text()
    homes = files_under(tmp_path / "homes")
    assert homes, "the run used no private home"
    for path in homes:
        assert REAL_KEY.encode() not in path.read_bytes(), path
    assert REAL_KEY not in json.dumps(run)
    if name != "copilot":  # the person's own config is left as it was, their key in it
        assert any(REAL_KEY.encode() in p.read_bytes() for p in files_under(person))


def test_opencode_through_the_meter_ignores_a_project_config(
    git_repo: Path, tmp_path: Path
) -> None:
    """A project opencode.json (the worker's to write) naming another endpoint and key
    is neither where the meter finds the key nor where the CLI's requests go: the run's
    config, merged last, points the provider at the meter."""
    from tests.helpers import git
    from tests.helpers.agents import agent_bin, env_for

    agent_bin("opencode")
    elsewhere = "http://127.0.0.1:9/v1"
    project = {"provider": {"anthropic": {"options": {"baseURL": elsewhere, "apiKey": "x"}}}}
    (git_repo / "opencode.json").write_text(json.dumps(project))
    git(git_repo, "add", "opencode.json")
    git(git_repo, "commit", "-q", "-m", "a project config")
    contract = write_contract(tmp_path / "loop.yaml", worker={"provider": "opencode"})
    with model_server([{"text": "Done."}]) as server:
        env = env_for("opencode", server, tmp_path / "person", api_key=REAL_KEY)
        env.pop("ANTHROPIC_API_KEY", None)
        env["LOOPKIT_HOMES"] = str(tmp_path / "homes")
        r = lk_invoke(["--contract", str(contract)], cwd=git_repo, env=env, timeout=180)
        seen = server.model_requests("anthropic")
    assert r.returncode == 0, r.stderr
    m = r.run["meter"]
    assert m["upstream"] == server.url.rstrip("/")
    assert m["statuses"] == {"200": len(seen)} and len(seen) >= 1
    assert [e["path"] for e in meter_log(git_repo, r.run)] == ["/v1/messages"] * len(seen)


#: What a person sets for each CLI with no settings file at all: the key's variable (and
#: copilot's own-endpoint variables); the endpoint is the contract's worker.upstream.
ORDINARY = {
    "gemini": ({"GEMINI_API_KEY": REAL_KEY}, "", "gemini"),
    "qwen": ({"OPENAI_API_KEY": REAL_KEY, "OPENAI_MODEL": "qwen3-coder-plus"}, "/v1", "openai"),
    "opencode": ({"ANTHROPIC_API_KEY": REAL_KEY}, "/v1", "anthropic"),
    "pi": ({"ANTHROPIC_API_KEY": REAL_KEY}, "", "anthropic"),
    "copilot": (
        {"COPILOT_PROVIDER_API_KEY": REAL_KEY, "COPILOT_PROVIDER_TYPE": "anthropic",
         "COPILOT_OFFLINE": "true", "COPILOT_MODEL": "claude-sonnet-4.5"},
        "",
        "anthropic",
    ),
}  # fmt: skip
#: Each CLI's tool that writes a new file.
WRITE_TOOLS = {
    **WRITES,
    "gemini": {"name": "write_file", "input": {"file_path": "{{cwd}}/hello.py", "content": "print(1)\n"}},
    "qwen": {"name": "write_file", "input": {"file_path": "{{cwd}}/hello.py", "content": "print(1)\n"}},
}  # fmt: skip


@pytest.mark.parametrize("name", list(ORDINARY))
def test_metered_from_no_settings_of_loopkits_making(
    git_repo: Path, tmp_path: Path, name: str
) -> None:
    """A person's ordinary set-up: an empty home (no settings file of any CLI), the key in
    its variable, the endpoint in the contract. loopkit itself writes whatever the CLI
    needs to talk to the meter with the token (gemini: API-key auth), and the run
    completes metered."""
    from tests.helpers import agents

    agents.agent_bin(name)
    person, suffix, dialect = ORDINARY[name]
    turns = [
        {"text": "Creating.", "tools": [WRITE_TOOLS[name]],
         "usage": {"input_tokens": 400, "output_tokens": 30}},
        {"text": "Done.", "usage": {"input_tokens": 450, "output_tokens": 5}},
    ]  # fmt: skip
    home = tmp_path / "home"
    home.mkdir()
    with model_server(turns) as server:
        upstream = server.url.rstrip("/") + suffix
        if name == "copilot":
            person = {**person, "COPILOT_PROVIDER_BASE_URL": upstream}
        contract = write_contract(
            tmp_path / "loop.yaml", worker={"provider": name, "upstream": upstream}
        )
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("ANTHROPIC_", "OPENAI_", "GEMINI_", "GOOGLE_", "COPILOT_"))
        }
        env.update(person, HOME=str(home), LOOPKIT_HOMES=str(tmp_path / "homes"))
        env["PATH"] = agents._path_with_agents(env)
        r = lk_invoke(["--contract", str(contract)], cwd=git_repo, env=env, timeout=300)
    assert list(home.iterdir()) == []  # nothing was written into the person's home
    assert r.returncode == 0, r.stderr
    run = r.run
    assert run["stop_reason"] == "completed", run["error"]
    assert (git_repo / "hello.py").read_text() == "print(1)\n"
    m = run["meter"]
    assert m["dialect"] == dialect and m["statuses"].get("200", 0) >= 2
    assert REAL_KEY not in json.dumps(run)
