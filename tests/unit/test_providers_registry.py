"""A provider is its differences: its module and its line in the registry are all a new
agent needs. The model server's ``--env`` choices and environments, the variables a
rehearsal drops and the checks on the docs and the pins all follow the registry -- shown
with a toy agent registered from a temporary folder."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

from loopkit.testing import rehearse
from loopkit.worker import providers

ROOT = Path(__file__).resolve().parents[2]

TOY = """
from loopkit.worker.providers.base import Provider


class ToyProvider(Provider):
    name = "toy"
    binary = "toy"
    install_hint = "install the toy agent: npm install -g toy-agent"
    routes = ("TOY_ROUTE",)

    def rehearsal(self, r):
        return {"TOY_URL": r.base_url, "TOY_HOME": str(r.home), "TOY_KEY": r.api_key}
"""


def undocumented(names: Iterable[str]) -> list[str]:
    """The agents some published table or pin does not name: the README's provider table,
    `lk-invoke --provider` in docs/invoke.md, the pinned package in the Makefile (the one
    its install hint names)."""
    readme = (ROOT / "README.md").read_text()
    invoke = (ROOT / "docs" / "invoke.md").read_text()
    makefile = (ROOT / "Makefile").read_text()
    provider_line = next(line for line in invoke.splitlines() if "`--provider NAME`" in line)
    missing = []
    for name in names:
        hint = providers.get(name).install_hint
        package = re.search(r"npm install -g (\S+)", hint)
        if (
            f"| `{name}` |" not in readme
            or not re.search(rf"\b{name}\b", provider_line)
            or package is None
            or f"{package.group(1)}@" not in makefile
        ):
            missing.append(name)
    return missing


def test_the_agents_are_the_providers_with_a_cli_of_their_own() -> None:
    agents = providers.agents()
    assert agents == [n for n in providers.names() if n not in ("command", "acp")]
    assert {"claude", "codex", "copilot"} <= set(agents)


def test_every_agent_is_in_the_docs_table_and_pinned() -> None:
    assert undocumented(providers.agents()) == []


def test_every_agent_rehearses_and_names_what_routes_it_elsewhere(tmp_path: Path) -> None:
    for name in providers.agents():
        env = rehearse.env(name, "http://127.0.0.1:9", tmp_path / name)
        assert rehearse.REHEARSAL_KEY in json.dumps(env) or any(
            rehearse.REHEARSAL_KEY in p.read_text()
            for p in (tmp_path / name).rglob("*")
            if p.is_file()
        ), name
        assert providers.get(name).routes, name
    assert "OPENAI_BASE_URL" in rehearse.routing_vars()
    with pytest.raises(KeyError, match="no rehearsal for 'command'"):
        rehearse.env("command", "http://127.0.0.1:9", tmp_path / "c")


def test_the_published_rehearsal_names_are_the_providers_own(tmp_path: Path) -> None:
    env = rehearse.claude_env("http://127.0.0.1:9/", tmp_path / "h", retries=1)
    assert env == rehearse.env("claude", "http://127.0.0.1:9/", tmp_path / "h", retries=1)
    assert rehearse.codex_config("http://x").startswith(f'model = "{rehearse.CODEX_MODEL}"')


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A toy agent in a temporary package, registered by its one line."""
    (tmp_path / "toy_agent.py").write_text(TOY)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(providers._REGISTRY, "toy", "toy_agent:ToyProvider")
    return tmp_path


def test_a_registered_toy_agent_is_rehearsed_checked_and_offered(toy: Path) -> None:
    from loopkit.testing.cli import main

    assert providers.agents()[-1] == "toy"
    env = rehearse.env("toy", "http://127.0.0.1:9", toy / "home", api_key="k")
    assert env == {"TOY_URL": "http://127.0.0.1:9", "TOY_HOME": str(toy / "home"), "TOY_KEY": "k"}
    assert "TOY_ROUTE" not in rehearse.overlay({}, base={"TOY_ROUTE": "x", "PATH": "/bin"})
    # the docs' check covers it: a new agent without its row and its pin is reported
    assert undocumented(["claude", "toy"]) == ["toy"]
    # lk-model-server offers it (its --env choices are the registry's)
    env_option = next(p for p in main.params if p.name == "client")
    assert "toy" in env_option.type.choices  # type: ignore[attr-defined]


def test_lk_model_server_serves_a_registered_toy_agents_environment(toy: Path) -> None:
    """Through the real command: the toy's registration is all `--env toy` needs."""
    script = toy / "script.json"
    script.write_text(json.dumps([{"text": "hi"}]))
    code = (
        "import sys; from loopkit.worker import providers; "
        "providers._REGISTRY['toy'] = 'toy_agent:ToyProvider'; "
        "from loopkit.testing.cli import main; sys.exit(main())"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(toy), str(ROOT)])}
    argv = [sys.executable, "-c", code, str(script), "--env", "toy", "--home", str(toy / "h")]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) as p:
        try:
            line = p.stdout.readline() if p.stdout else b""
        finally:
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=30)
    ready = json.loads(line)
    assert ready["env"] == {
        "TOY_URL": ready["url"],
        "TOY_HOME": str(toy / "h"),
        "TOY_KEY": rehearse.REHEARSAL_KEY,
    }
    # ...and an unregistered name is refused as before: a usage error naming the choices
    bad = subprocess.run(
        [*argv[:-4], str(script), "--env", "nope", "--home", str(toy / "h")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert bad.returncode == 2 and "'nope' is not one of" in bad.stderr and "toy" in bad.stderr
