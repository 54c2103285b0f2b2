"""Drive the real claude and codex CLIs against the scripted model server, in tests.

Usage (a test module of any area):

    from tests.helpers.agents import model_server, run_claude, run_codex

    def test_writes_a_file(git_repo, tmp_path):
        turns = [
            {"tools": [{"name": "Write", "input": {"file_path": "{{cwd}}/a.txt", "content": "x\\n"}}]},
            {"text": "Done."},
        ]
        with model_server(turns, log=tmp_path / "requests.jsonl") as server:
            run = run_claude(server, git_repo, "write a.txt", home=tmp_path / "claude-home")
        assert run.returncode == 0 and run.result["is_error"] is False
        assert (git_repo / "a.txt").read_text() == "x\\n"
        assert len(server.model_requests("anthropic")) == 2

    # your own command (e.g. lk-invoke) with a prepared environment:
    env = claude_env_for(server, tmp_path / "claude-home", retries=0)   # whole env, PATH set
    env = codex_env_for(server, tmp_path / "codex-home", retries=0)     # writes config.toml

- A script is a list of turns or a mapping (see loopkit/testing/script.py); ``{{cwd}}`` in
  tool inputs becomes the CLI's working directory (claude's Write/Edit want absolute paths).
- ``claude_bin()`` / ``codex_bin()`` find the CLI on PATH or in .cache/agents, else fail
  under ``make test`` and skip otherwise (``require_tool`` from tests/conftest.py).
- codex's stdin is always /dev/null; claude runs with ``--permission-mode acceptEdits``
  (root refuses --dangerously-skip-permissions). Edit needs an earlier Read.
- ``server.requests`` / ``server.model_requests("anthropic"|"openai")``: every request decoded
  (``turn``, ``served``, ``status``, ``stream``, ``session``, ``body``); ``server.wait_for(n)``
  blocks until n model requests arrived.
- The ``scripted_server`` fixture: ``server = scripted_server(turns)`` -- started, stopped at
  teardown, its log in tmp_path/model-requests-N.jsonl. To use it, import it into the test
  module: ``from tests.helpers.agents import scripted_server_fixture  # noqa: F401``.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from loopkit.boundary import containment
from loopkit.testing import rehearse
from loopkit.testing import script as scripts
from loopkit.testing.server import ModelServer
from loopkit.worker import providers
from loopkit.worker.providers.codex import CODEX_MODEL
from tests.conftest import require_tool

REPO_ROOT = Path(__file__).resolve().parents[2]
AGENTS_BIN = REPO_ROOT / ".cache" / "agents" / "node_modules" / ".bin"

ScriptLike = Any  # a list of turns, a mapping, or a loopkit.testing.script.Script


def as_script(data: ScriptLike) -> scripts.Script:
    if isinstance(data, scripts.Script):
        return data
    return scripts.from_data(data, source="test script")


@contextlib.contextmanager
def model_server(data: ScriptLike, *, log: str | Path | None = None) -> Iterator[ModelServer]:
    """A started scripted model server; stopped when the block ends."""
    server = ModelServer(as_script(data), log=log).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(name="scripted_server")
def scripted_server_fixture(tmp_path: Path) -> Iterator[Callable[[ScriptLike], ModelServer]]:
    """Factory fixture: ``scripted_server(turns)`` -> a started server, stopped at teardown."""
    started: list[ModelServer] = []

    def start(data: ScriptLike) -> ModelServer:
        log = tmp_path / f"model-requests-{len(started) + 1}.jsonl"
        server = ModelServer(as_script(data), log=log).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def _find(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    local = AGENTS_BIN / name
    if local.is_file() and os.access(local, os.X_OK):
        return str(local)
    return require_tool(name)


def agent_bin(name: str) -> str:
    """The CLI of the registry's provider ``name`` (fails under `make test` when missing,
    skips otherwise)."""
    return _find(providers.get(name).binary or name)


def claude_bin() -> str:
    return agent_bin("claude")


def codex_bin() -> str:
    return agent_bin("codex")


def env_for(
    name: str,
    server: ModelServer | str,
    home: str | Path,
    *,
    retries: int | None = 0,
    api_key: str = rehearse.REHEARSAL_KEY,
    model: str | None = None,
    stream_retries: int | None = None,
) -> dict[str, str]:
    """The whole environment for the CLI ``name`` against ``server`` (os.environ without
    the routing variables, its rehearsal on top, PATH with the installed agents); writes
    its settings under ``home`` (``Provider.rehearsal``; ``stream_retries``: codex's)."""
    url = server if isinstance(server, str) else server.url
    env = rehearse.overlay(
        rehearse.env(
            name,
            url,
            home,
            retries=retries,
            api_key=api_key,
            model=model,
            stream_retries=stream_retries,
        )
    )
    for var in ("XDG_STATE_HOME", "XDG_CACHE_HOME"):  # the person's: not the rehearsal's
        env.pop(var, None)
    env["PATH"] = _path_with_agents(env)
    return env


def _path_with_agents(env: Mapping[str, str]) -> str:
    path = env.get("PATH", os.defpath)
    if AGENTS_BIN.is_dir() and str(AGENTS_BIN) not in path.split(os.pathsep):
        path = f"{path}{os.pathsep}{AGENTS_BIN}"
    return path


def claude_env_for(
    server: ModelServer | str, home: str | Path, *, retries: int | None = 0
) -> dict[str, str]:
    """The whole environment for claude against ``server`` (``env_for("claude", ...)``)."""
    return env_for("claude", server, home, retries=retries)


_MOVED_HOMES: list[Path] = []


def codex_home_outside_temp(home: str | Path) -> Path:
    """``home``, or where it goes when it lies in the temporary folder: codex refuses to
    lay out its helper binaries there ("Refusing to create helper binaries under temporary
    dir"), and its apply_patch then fails. Beside loopkit's own provider homes (never in
    the temporary folder); removed when the test process ends. The same ``home`` maps to
    the same folder, so a resume finds its session."""
    home = Path(home)
    if not containment.under_temp(home):
        return home
    name = hashlib.sha256(str(home).encode()).hexdigest()[:20]
    moved = containment.provider_homes() / "test-codex" / f"{os.getpid()}-{name}"
    if not _MOVED_HOMES:
        atexit.register(lambda: [shutil.rmtree(p, ignore_errors=True) for p in _MOVED_HOMES])
    if moved not in _MOVED_HOMES:
        _MOVED_HOMES.append(moved)
    return moved


def codex_env_for(
    server: ModelServer | str,
    home: str | Path,
    *,
    retries: int = 0,
    stream_retries: int | None = None,
    model: str = CODEX_MODEL,
) -> dict[str, str]:
    """The whole environment for codex against ``server``; writes ``home/config.toml``
    (with codex's own ``stream_retries`` and ``model`` beside ``env_for``'s)."""
    return env_for(
        "codex", server, home, retries=retries, stream_retries=stream_retries, model=model
    )


@dataclass
class AgentRun:
    """One finished CLI run: exit status, its JSON lines, and the raw streams."""

    returncode: int
    stdout: str
    stderr: str
    argv: list[str]
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def result(self) -> dict[str, Any]:
        """claude: the final `result` event ({} when none)."""
        for event in reversed(self.events):
            if event.get("type") == "result":
                return event
        return {}

    def of_type(self, *types: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("type") in types]

    @property
    def session_id(self) -> str | None:
        """claude's session_id or codex's thread_id."""
        for event in self.events:
            if event.get("type") == "thread.started":
                return str(event.get("thread_id"))
            if event.get("session_id"):
                return str(event["session_id"])
        return None


def _run(argv: list[str], cwd: Path, env: Mapping[str, str], timeout: float) -> AgentRun:
    proc = subprocess.run(
        argv,
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        start_new_session=True,
    )
    events = []
    for line in proc.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                events.append(json.loads(line))
    return AgentRun(proc.returncode, proc.stdout, proc.stderr, argv, events)


def run_claude(
    server: ModelServer | str,
    cwd: Path,
    prompt: str,
    *,
    home: str | Path,
    retries: int | None = 0,
    args: Sequence[str] = (),
    resume: str | None = None,
    timeout: float = 90,
) -> AgentRun:
    """``claude -p PROMPT --output-format stream-json --verbose`` against ``server``."""
    argv = [
        claude_bin(),
        "-p",
        prompt,
        "--output-format",
        "stream-json",
        "--verbose",
        "--permission-mode",
        "acceptEdits",
        *(["--resume", resume] if resume else []),
        *args,
    ]
    return _run(argv, cwd, claude_env_for(server, home, retries=retries), timeout)


def run_codex(
    server: ModelServer | str,
    cwd: Path,
    prompt: str,
    *,
    home: str | Path,
    retries: int = 0,
    stream_retries: int | None = None,
    sandbox: str = "workspace-write",
    args: Sequence[str] = (),
    resume: str | None = None,
    timeout: float = 90,
) -> AgentRun:
    """``codex exec --json --sandbox SANDBOX PROMPT`` (stdin /dev/null) against ``server``.

    With ``resume``: ``codex exec --json --sandbox SANDBOX resume ID PROMPT`` (the sandbox
    before ``resume`` keeps write access).
    """
    argv = [codex_bin(), "exec", "--json", "--sandbox", sandbox, *args]
    argv += ["resume", resume, prompt] if resume else [prompt]
    home = codex_home_outside_temp(home)
    env = codex_env_for(server, home, retries=retries, stream_retries=stream_retries)
    return _run(argv, cwd, env, timeout)
