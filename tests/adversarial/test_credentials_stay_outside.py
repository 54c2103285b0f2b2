"""Every credential stays outside: with the meter on, a hostile command worker in the
real sandbox, its contract passing on every vendor's variables by prefix, hunts its
environment, every process's environ, its home, /tmp and the repository for any of the
person's credentials (each vendor's key and token variables, the providers' login files)
and finds only its run token. A second vendor's key the contract names is refused (exit 4,
one line) unless the contract marks it unmetered; then it is on the run's record."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from loopkit.boundary import sandbox
from tests.helpers import git
from tests.helpers.agents import model_server
from tests.helpers.invoke import Invoked, lk_invoke, write_contract

MARK = "SECRETMARK"
#: The person's credentials, one per variable: each value carries the mark and its name.
PERSON_VARS = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "OPENAI_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "DASHSCOPE_API_KEY",
    "GH_TOKEN",
    "GITHUB_TOKEN",
    "COPILOT_GITHUB_TOKEN",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "OPENROUTER_API_KEY",
)
#: The providers' login files, under the person's home.
LOGIN_FILES = (
    ".claude/.credentials.json",
    ".codex/auth.json",
    ".gemini/oauth_creds.json",
    ".qwen/oauth_creds.json",
    ".local/share/opencode/auth.json",
    ".pi/agent/auth.json",
    ".copilot/config.json",
    ".config/gcloud/application_default_credentials.json",
    ".aws/credentials",
)
#: The contract passes on every vendor's variables, by prefix (a careless env_allow).
PREFIXES = [
    "ANTHROPIC_",
    "CLAUDE_",
    "OPENAI_",
    "AZURE_",
    "GEMINI_",
    "GOOGLE_",
    "DASHSCOPE_",
    "GH_",
    "GITHUB_",
    "COPILOT_",
    "AWS_",
    "OPENROUTER_",
]

HUNT = r"""
import json, os, sys
MARK = b"SECRET" + b"MARK"
found = []
for k, v in os.environ.items():
    if MARK in v.encode():
        found.append("env:" + k)
for pid in filter(str.isdigit, os.listdir("/proc")):
    for part in ("environ", "cmdline"):
        try:
            if MARK in open(f"/proc/{pid}/{part}", "rb").read():
                found.append(f"/proc/{pid}/{part}")
        except OSError:
            pass
seen = 0
for top in {os.environ.get("HOME", "/root"), "/tmp", os.getcwd(), sys.argv[1]}:
    for dirpath, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if d not in ("node_modules", ".git")]
        for f in files:
            path = os.path.join(dirpath, f)
            try:
                with open(path, "rb") as fh:
                    seen += 1
                    if MARK in fh.read(1 << 20):
                        found.append(path)
            except OSError:
                pass
token = os.environ.get("ANTHROPIC_API_KEY", "")
json.dump({"found": found, "seen": seen, "token": token,
           "raw": os.environ.get("OPENAI_API_KEY", "")}, open("found.json", "w"))
"""


def person(home: Path) -> dict[str, str]:
    """The person's environment: every credential variable set, every login file there."""
    for rel in LOGIN_FILES:
        path = home / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"token": f"{MARK}-file-{rel}"}))
    env = dict(os.environ)
    env["HOME"] = str(home)
    env.update({var: f"sk-{MARK}-{var}-0123456789" for var in PERSON_VARS})
    return env


def run_hunter(git_repo: Path, tmp_path: Path, **worker: Any) -> tuple[Invoked, int]:
    (git_repo / "hunt.py").write_text(HUNT)
    git(git_repo, "add", "hunt.py")
    git(git_repo, "commit", "-q", "-m", "the hunter")
    contract = write_contract(
        tmp_path / "loop.yaml",
        worker={"provider": "command", "command": f"python3 hunt.py {tmp_path}", **worker},
        sandbox={"mode": "required"},
    )
    with model_server([{"text": "hello"}]) as server:
        env = person(tmp_path / "person")
        env["ANTHROPIC_BASE_URL"] = server.url
        env["LOOPKIT_HOMES"] = str(tmp_path / "homes")
        r = lk_invoke(["--contract", str(contract)], cwd=git_repo, env=env, timeout=300)
        return r, len(server.model_requests())


@pytest.mark.skipif(not sandbox.probe().available, reason="no working bwrap here")
def test_the_worker_finds_no_credential_but_its_token(git_repo: Path, tmp_path: Path) -> None:
    r, _ = run_hunter(git_repo, tmp_path, env_allow=["ANTHROPIC_API_KEY", *PREFIXES])
    assert r.returncode == 0, r.stderr
    hunted = json.loads((git_repo / "found.json").read_text())
    assert hunted["seen"] > 5
    assert hunted["found"] == [], hunted["found"]
    assert hunted["token"].startswith("lk-run-")
    m = r.run["meter"]
    # Every other credential variable is withheld, and the record names them (no values).
    assert set(PERSON_VARS) - {"ANTHROPIC_API_KEY"} <= set(m["withheld"]), m["withheld"]
    assert m["unmetered"] == []
    assert MARK not in json.dumps(r.run)


@pytest.mark.skipif(not sandbox.probe().available, reason="no working bwrap here")
def test_a_second_vendors_key_is_refused_unless_marked_unmetered(
    git_repo: Path, tmp_path: Path
) -> None:
    both = ["ANTHROPIC_API_KEY", "OPENAI_API_KEY"]
    r, upstream = run_hunter(git_repo, tmp_path, env_allow=both)
    assert r.returncode == 4 and upstream == 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "OPENAI_API_KEY" in lines[0] and "unmetered" in lines[0], lines
    assert "Traceback" not in r.stderr and MARK not in r.stderr
    assert not (git_repo / "found.json").exists()  # the worker never started

    (tmp_path / "loop.yaml").unlink()
    git(git_repo, "rm", "-q", "hunt.py")
    git(git_repo, "commit", "-q", "-m", "again")
    r, _ = run_hunter(git_repo, tmp_path, env_allow=both, unmetered=["OPENAI_API_KEY"])
    assert r.returncode == 0, r.stderr
    hunted = json.loads((git_repo / "found.json").read_text())
    # Marked unmetered, that one key is passed on raw, and listed on the record.
    assert hunted["raw"] == f"sk-{MARK}-OPENAI_API_KEY-0123456789"
    assert hunted["found"] == ["env:OPENAI_API_KEY"] or set(hunted["found"]) <= {
        "env:OPENAI_API_KEY",
        *(f"/proc/{p}/environ" for p in range(1, 100)),
    }
    assert r.run["meter"]["unmetered"] == ["OPENAI_API_KEY"]
