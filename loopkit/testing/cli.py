"""lk-model-server: serve a model script to the real worker CLIs (every provider with a
CLI of its own: claude, codex, gemini, qwen, opencode, pi, copilot), offline.

Usage:  lk-model-server SCRIPT [--port 0] [--host 127.0.0.1] [--log FILE]
                        [--env AGENT --home DIR]
                        [--retries N]
        lk-model-server SCRIPT --check

Input:  SCRIPT, a YAML or JSON model script (a list of turns, or a mapping with
        `anthropic` / `openai` turn lists; schemas/model-script.json); `-` reads it from
        stdin. See docs/model-server.md.
Output: one JSON line on stdout once the server listens:
        {"url": "http://127.0.0.1:PORT", "port": PORT, "pid": PID, "log": FILE|null}
        With --env, the line also holds "env": the variables that point that CLI at the
        server (for codex, DIR/config.toml is written too; for gemini and qwen, their
        settings.json under DIR; for opencode and pi their config files). Every request is
        appended to --log as one JSON line. --check prints {"ok": true, "turns": {...}}
        and exits.
Exit codes: 0 stopped by SIGTERM or SIGINT (or --check passed); 3 bad script or options;
        4 the port cannot be bound.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from types import FrameType

import click

from loopkit.cli._entry import command
from loopkit.errors import BadInput, EnvironmentProblem
from loopkit.exitcodes import SHARED_HELP
from loopkit.testing import rehearse, script
from loopkit.testing.server import ModelServer
from loopkit.worker import providers


class _Agents(click.Choice[str]):
    """The registry's agents (``providers.agents()``), read when a value or the help
    needs them: the providers load only then."""

    def __init__(self) -> None:
        super().__init__([])

    @property  # type: ignore[override]
    def choices(self) -> list[str]:
        return providers.agents()

    @choices.setter
    def choices(self, value: object) -> None:
        pass


EPILOG = (
    """\b
Exit codes:
  0   stopped by SIGTERM or SIGINT (or --check passed)
  3   the script is invalid (file, JSON path, what was expected)
  4   the port cannot be bound

"""
    + SHARED_HELP
)


@command(epilog=EPILOG)
@click.argument("script_path", metavar="SCRIPT")
@click.option(
    "--port", type=int, default=0, show_default=True, help="Port to listen on; 0 picks a free one."
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--log",
    "log_path",
    type=click.Path(dir_okay=False),
    help="Append every request to FILE (JSON lines).",
)
@click.option(
    "--env",
    "client",
    type=_Agents(),
    help="Also print the environment that points this CLI at the server.",
)
@click.option(
    "--home",
    type=click.Path(file_okay=False),
    help=(
        "With --env: HOME for claude, gemini, qwen, opencode and copilot (their settings"
        " written there), CODEX_HOME for codex, PI_CODING_AGENT_DIR for pi."
    ),
)
@click.option(
    "--retries", type=int, default=0, show_default=True, help="With --env: the CLI's retry cap."
)
@click.option("--check", is_flag=True, help="Validate SCRIPT and exit.")
def main(
    script_path: str,
    port: int,
    host: str,
    log_path: str | None,
    client: str | None,
    home: str | None,
    retries: int,
    check: bool,
) -> int:
    """Serve SCRIPT as the Anthropic Messages API and the OpenAI Responses API on HOST:PORT.

    Prints one JSON line ({"url", "port", ...}) when ready, then answers
    `POST /v1/messages` (claude) and `POST /v1/responses` (codex) turn by turn until
    SIGTERM or SIGINT. The turn is read from the conversation, so `--resume` continues
    the script.
    """
    if script_path == "-":
        scr = script.parse(sys.stdin.read(), source="<stdin>")
    else:
        scr = script.load(script_path)
    if check:
        turns = {api: len(scr.turns(api)) for api in script.APIS}
        click.echo(json.dumps({"ok": True, "turns": turns}))
        return 0
    if client is not None and home is None:
        raise BadInput(
            "--home",
            "--env needs --home DIR (HOME, CODEX_HOME for codex, PI_CODING_AGENT_DIR for pi)",
        )
    if retries < 0:
        raise BadInput("--retries", f"expected a number >= 0, got {retries}")
    try:
        server = ModelServer(scr, host=host, port=port, log=log_path)
    except OSError as e:
        raise EnvironmentProblem(f"cannot listen on {host}:{port}: {e.strerror or e}") from None

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server.start()
    try:
        ready: dict[str, object] = {
            "url": server.url,
            "port": server.port,
            "pid": os.getpid(),
            "log": log_path,
        }
        if client is not None and home is not None:
            ready["env"] = rehearse.env(client, server.url, home, retries=retries)
        click.echo(json.dumps(ready))
        while not stop.wait(0.1):
            pass
    finally:
        server.stop()
    return 0
