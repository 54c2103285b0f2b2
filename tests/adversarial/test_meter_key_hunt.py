"""Credentials stay outside: a hostile worker in the real sandbox hunts for the person's
API key -- its environment, every process's environ and cmdline, its home, /tmp, the
repository, the usual places under / -- and finds only its per-run token; a request
with any other token is refused by the meter, and recorded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from loopkit.boundary import sandbox
from tests.helpers import git
from tests.helpers.agents import model_server
from tests.helpers.invoke import lk_invoke, write_contract

REAL_KEY = "sk-ant-REALKEY-7f3a9c2e51d04b6a8e"
MARK = "REALKEY"  # what the hunter knows of the key's shape

HUNT = r"""
import json, os, sys, urllib.request, urllib.error
MARK = b"REAL" + b"KEY"  # not spelled whole here: this file is in the tree it walks
found = []

def look(where, data):
    if MARK in data:
        found.append(where)

for k, v in os.environ.items():
    look("env:" + k, v.encode())
for pid in os.listdir("/proc"):
    if pid.isdigit():
        for part in ("environ", "cmdline"):
            try:
                look(f"/proc/{pid}/{part}", open(f"/proc/{pid}/{part}", "rb").read())
            except OSError:
                pass
roots = [os.environ.get("HOME", "/root"), "/tmp", "/root", "/home", "/etc", "/run", "/var/tmp",
         os.getcwd(), os.environ.get("TMPDIR", "/tmp"), sys.argv[1]]
seen = 0
walked = set()
for top in roots:
    for dirpath, dirs, files in os.walk(top):
        real = os.path.realpath(dirpath)
        if real in walked:
            dirs[:] = []
            continue
        walked.add(real)
        dirs[:] = [d for d in dirs if d not in ("proc", "sys", "node_modules", "lib", "cache")]
        for f in files:
            path = os.path.join(dirpath, f)
            try:
                if os.path.islink(path) or os.path.getsize(path) > 1 << 20:
                    continue
                with open(path, "rb") as fh:
                    look(path, fh.read())
                seen += 1
            except OSError:
                pass

def ask(token):
    url = os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages"
    body = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 10,
                       "messages": [{"role": "user", "content": "hi"}]}).encode()
    headers = {"content-type": "application/json", "anthropic-version": "2023-06-01"}
    if token is not None:
        headers["x-api-key"] = token
    req = urllib.request.Request(url, data=body, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())

token = os.environ.get("ANTHROPIC_API_KEY", "")
out = {
    "found": found,
    "files_seen": seen,
    "token": token,
    "own": ask(token),
    "wrong": ask(token[:-4] + "AAAA"),
    "none": ask(None),
    "bearer": ask("Bearer " + token[::-1]),
}
open("found.json", "w").write(json.dumps(out))
"""


def hunt(git_repo: Path, tmp_path: Path, **worker: Any) -> tuple[Any, dict[str, Any], int]:
    """Run the hunter through lk-invoke in the real sandbox; its findings, the record and
    how many requests reached the upstream."""
    (git_repo / "hunt.py").write_text(HUNT)
    git(git_repo, "add", "hunt.py")
    git(git_repo, "commit", "-q", "-m", "the hunter")
    # The key where people keep it: the environment, and a file in their home.
    home = Path.home()
    (home / ".config").mkdir(exist_ok=True)
    (home / ".config" / "anthropic-key").write_text(REAL_KEY + "\n")
    contract = write_contract(
        tmp_path / "loop.yaml",
        worker={
            "provider": "command",
            "command": f"python3 hunt.py {tmp_path}",
            "env_allow": ["ANTHROPIC_API_KEY"],
            **worker,
        },
        sandbox={"mode": "required"},
    )
    with model_server([{"text": "hello"}], log=tmp_path / "upstream.jsonl") as server:
        import os

        env = dict(os.environ)
        env["ANTHROPIC_API_KEY"] = REAL_KEY
        env["ANTHROPIC_BASE_URL"] = server.url
        r = lk_invoke(["--contract", str(contract)], cwd=git_repo, env=env, timeout=400)
        upstream = len(server.model_requests("anthropic"))
    assert r.returncode == 0, r.stderr
    return r, json.loads((git_repo / "found.json").read_text()), upstream


@pytest.mark.skipif(not sandbox.probe().available, reason="no working bwrap here")
def test_the_worker_finds_only_its_token(git_repo: Path, tmp_path: Path) -> None:
    r, hunted, upstream = hunt(git_repo, tmp_path)
    run = r.run
    assert run["sandbox"]["used"] is True
    assert hunted["files_seen"] > 50  # it did look
    assert hunted["found"] == [], hunted["found"]
    token = hunted["token"]
    assert token.startswith("lk-run-") and MARK not in token
    # Its own token works: the meter put the real key in and the upstream answered.
    assert hunted["own"][0] == 200 and upstream == 1
    # Anything else is refused in the API's own error shape, before the upstream.
    for case in ("wrong", "none", "bearer"):
        status, body = hunted[case]
        assert status == 401 and body["error"]["type"] == "authentication_error", (case, body)
    m = run["meter"]
    assert m["requests"] == 4 and m["refused"] == 3 and m["statuses"] == {"200": 1, "401": 3}
    log = [json.loads(x) for x in (git_repo / m["log"]).read_text().splitlines()]
    assert sorted(e.get("refused") or "" for e in log) == [
        "",
        "no token",
        "wrong token",
        "wrong token",
    ]
    # Nothing loopkit wrote holds the key either.
    assert REAL_KEY not in r.stdout and REAL_KEY not in r.stderr
    assert REAL_KEY not in (git_repo / m["log"]).read_text()


@pytest.mark.skipif(not sandbox.probe().available, reason="no working bwrap here")
def test_without_the_meter_the_hunter_finds_the_key(git_repo: Path, tmp_path: Path) -> None:
    """The same hunter, the meter off: the key is in its environment (and so in the
    environ of every process it starts). The hunt above can fail."""
    r, hunted, upstream = hunt(
        git_repo, tmp_path, meter="off", env_allow=["ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"]
    )
    assert "env:ANTHROPIC_API_KEY" in hunted["found"]
    assert "meter" not in r.run
    assert hunted["own"][0] == 200 and upstream >= 1  # the key went straight to the API


#: What a worker CLI's own shell tool runs: the key's mark in its environment, every
#: process's environ and cmdline, its private home, the person's folder, /tmp.
CLI_HUNT = r"""
import os, sys
MARK = b"REAL" + b"KEY"
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
for top in {os.environ.get(v) for v in ("HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
            "PI_CODING_AGENT_DIR")} | {"/tmp", os.getcwd(), sys.argv[1]}:
    for dirpath, dirs, files in os.walk(top or "/nonexistent"):
        dirs[:] = [d for d in dirs if d != "node_modules"]
        for f in files:
            try:
                with open(os.path.join(dirpath, f), "rb") as fh:
                    seen += 1
                    if MARK in fh.read(1 << 20):
                        found.append(os.path.join(dirpath, f))
            except OSError:
                pass
open("found.txt", "w").write("\n".join(found) + f"\nseen {seen}\n")
"""


@pytest.mark.agents
@pytest.mark.skipif(not sandbox.probe().available, reason="no working bwrap here")
@pytest.mark.parametrize("name", ["opencode", "pi"])
def test_a_cli_worker_finds_no_key_in_its_private_home(
    git_repo: Path, tmp_path: Path, name: str
) -> None:
    """opencode and pi keep the person's key in their own config files; metered, their
    shell tool -- inside the real sandbox -- finds it nowhere: not in the private copy of
    that config, not in any environment, not in the person's folder."""
    from tests.helpers import agents

    agents.agent_bin(name)
    (git_repo / "hunt.py").write_text(CLI_HUNT)
    git(git_repo, "add", "hunt.py")
    git(git_repo, "commit", "-q", "-m", "the hunter")
    person = tmp_path / "person"
    command = f"python3 hunt.py {person}"
    tool = (
        {"command": command, "description": "hunt"} if name == "opencode" else {"command": command}
    )
    turns = [{"tools": [{"name": "bash", "input": tool}]}, {"text": "Done."}]
    contract = write_contract(
        tmp_path / "loop.yaml", worker={"provider": name}, sandbox={"mode": "required"}
    )
    with model_server(turns) as server:
        env = agents.env_for(name, server, person, api_key=REAL_KEY)
        env.pop("ANTHROPIC_API_KEY", None)
        env["LOOPKIT_HOMES"] = str(tmp_path / "homes")
        r = lk_invoke(["--contract", str(contract)], cwd=git_repo, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.run["sandbox"]["used"] is True and r.run["meter"]["statuses"].get("200", 0) >= 2
    lines = (git_repo / "found.txt").read_text().splitlines()
    assert lines[-1].startswith("seen ") and int(lines[-1].split()[1]) > 3  # it did look
    assert [x for x in lines[:-1] if x] == []
    # Outside the sandbox the person's config still holds it: the hunt could have found it.
    assert any(MARK.encode() in p.read_bytes() for p in person.rglob("*.json"))
