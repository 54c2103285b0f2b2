"""The meter forwards only the API: a hostile worker in the real sandbox, holding its run
token, asks the meter for paths outside the API's endpoints, sends headers of its own,
sends a 500 MB body without a token (and one with it), and trickles a request's head a
byte at a time. Only the API's endpoint reaches the upstream, with the allowed headers;
loopkit's own memory stays small (its peak, ``VmHWM``); the slow client is cut off while
an honest request on another connection is answered."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from loopkit.boundary import sandbox
from tests.helpers import git
from tests.helpers.agents import model_server
from tests.helpers.invoke import lk_invoke_bin, write_contract

REAL_KEY = "sk-ant-REALKEY-hostile-client-51d04b6a8e"

HOSTILE = r"""
import http.client, json, os, socket, sys, threading, time
from urllib.parse import urlsplit

base = urlsplit(os.environ["ANTHROPIC_BASE_URL"])
host, port, prefix = base.hostname, base.port, base.path.rstrip("/")
token = os.environ["ANTHROPIC_API_KEY"]
auth = {"x-api-key": token, "content-type": "application/json",
        "anthropic-version": "2023-06-01"}
body = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 10,
                   "messages": [{"role": "user", "content": "hi"}]}).encode()
out = {}

def ask(method, path, headers, data=None):
    c = http.client.HTTPConnection(host, port, timeout=60)
    c.request(method, path, data, headers)
    r = c.getresponse()
    r.read()
    c.close()
    return r.status

outside = [("GET", "/"), ("GET", prefix + "/v1/organizations/me"),
           ("POST", prefix + "/v1/messages/../../v1/admin"), ("POST", prefix + "/v1/%6dessages"),
           ("GET", prefix + "/v1/files"), ("POST", prefix + "/api/oauth/token"),
           ("DELETE", prefix + "/v1/messages"), ("POST", prefix + "/v1//messages")]
out["outside"] = {m + " " + p: ask(m, p, auth, body if m == "POST" else None) for m, p in outside}
out["own"] = ask("POST", prefix + "/v1/messages",
                 {**auth, "x-hostile": "1", "cookie": "session=stolen",
                  "x-forwarded-for": "10.0.0.1", "proxy-authorization": "Basic eA=="}, body)

def huge(headers, chunked=False):
    # 500 MB sent as fast as the meter takes it; how much it took, and what it said.
    s = socket.create_connection((host, port), timeout=60)
    head = f"POST {prefix}/v1/messages HTTP/1.1\r\nHost: x\r\n" + "".join(
        f"{k}: {v}\r\n" for k, v in headers.items())
    head += "Transfer-Encoding: chunked\r\n\r\n" if chunked else f"Content-Length: {500 << 20}\r\n\r\n"
    s.sendall(head.encode())
    block = b"x" * (1 << 20)
    if chunked:
        block = b"%x\r\n%s\r\n" % (len(block), block)
    sent = 0
    try:
        while sent < 500 << 20:
            s.sendall(block)
            sent += len(block)
    except OSError:
        pass
    try:
        status = s.recv(64).split(b" ")[1].decode()
    except (OSError, IndexError):
        status = "closed"
    s.close()
    return {"sent": sent, "status": status}

out["huge_no_token"] = huge({})
out["huge_with_token"] = huge({"x-api-key": token})
out["huge_chunked_with_token"] = huge({"x-api-key": token}, chunked=True)

# Slowloris: a request's head one byte at a time, on several connections at once.
slow = [socket.create_connection((host, port), timeout=60) for _ in range(8)]
text = f"POST {prefix}/v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: {token}\r\n" + "x-pad: y\r\n" * 1000
cut = [None] * len(slow)
honest = []
for i in range(len(text)):
    if i == 5:
        honest.append(ask("POST", prefix + "/v1/messages", auth, body))
    for n, s in enumerate(slow):
        if cut[n] is None:
            try:
                s.sendall(text[i].encode())
            except OSError:
                cut[n] = i
    if all(c is not None for c in cut) or i >= 400:
        break
    time.sleep(0.25)
out["slow_cut_at"] = cut
out["honest_during_slow"] = honest
json.dump(out, open("hostile.json", "w"))
open("attacked", "w").close()
for _ in range(1200):  # until the test has read loopkit's peak memory
    if os.path.exists("measured"):
        break
    time.sleep(0.1)
"""


def vm_hwm_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


@pytest.mark.skipif(not sandbox.probe().available, reason="no working bwrap here")
def test_a_hostile_client_reaches_only_the_api_and_cannot_grow_loopkit(
    git_repo: Path, tmp_path: Path
) -> None:
    (git_repo / "hostile.py").write_text(HOSTILE)
    git(git_repo, "add", "hostile.py")
    git(git_repo, "commit", "-q", "-m", "the hostile client")
    contract = write_contract(
        tmp_path / "loop.yaml",
        worker={
            "provider": "command",
            "command": "python3 hostile.py",
            "env_allow": ["ANTHROPIC_API_KEY"],
            "timeout": 600,
        },
        sandbox={"mode": "required"},
        scope={"writable": ["hostile.json", "attacked", "measured"]},
    )
    with model_server([{"text": "hello"}] * 4, log=tmp_path / "upstream.jsonl") as server:
        env = dict(os.environ)
        env["ANTHROPIC_API_KEY"] = REAL_KEY
        env["ANTHROPIC_BASE_URL"] = server.url
        proc = subprocess.Popen(
            [lk_invoke_bin(), "--contract", str(contract)],
            cwd=git_repo,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            for _ in range(6000):
                if (git_repo / "attacked").exists() or proc.poll() is not None:
                    break
                time.sleep(0.1)
            assert (git_repo / "attacked").exists(), proc.communicate(timeout=60)
            peak = vm_hwm_kb(proc.pid)
            (git_repo / "measured").write_text("")
            stdout, stderr = proc.communicate(timeout=120)
        finally:
            proc.kill()
        upstream = server.requests
    assert proc.returncode == 0, stderr
    run = json.loads(stdout.decode().strip().splitlines()[-1])
    run = run.get("run", run)
    hostile = json.loads((git_repo / "hostile.json").read_text())

    # Outside the API: refused at the meter, never forwarded (the token was good).
    assert set(hostile["outside"].values()) == {404}, json.dumps(hostile["outside"])
    assert hostile["own"] == 200 and hostile["honest_during_slow"] == [200]
    paths = [r["path"] for r in upstream]
    assert all(p.split("?")[0].endswith("/v1/messages") for p in paths), paths
    # Only the allowed headers reached the upstream.
    for r in upstream:
        got = set(r["headers"])
        assert not got & {"x-hostile", "cookie", "x-forwarded-for", "proxy-authorization"}, got

    # 500 MB: refused from the head (401 without a token, 413 over the cap); loopkit's
    # own peak memory stays far below the size of what was sent.
    assert hostile["huge_no_token"]["status"] in ("401", "closed")
    assert hostile["huge_with_token"]["status"] in ("413", "closed")
    assert hostile["huge_chunked_with_token"]["status"] in ("413", "closed")
    assert peak < 150 * 1024, f"loopkit's peak memory was {peak} kB"
    log = [json.loads(x) for x in (git_repo / run["meter"]["log"]).read_text().splitlines()]
    refused = [e.get("refused") or "" for e in log]
    assert "no token" in refused and sum("over" in r for r in refused) == 2, refused
    assert sum(r.startswith("not the API") for r in refused) == len(hostile["outside"])

    # The slow heads were all cut off by the meter, each before it was whole.
    assert all(c is not None for c in hostile["slow_cut_at"]), hostile["slow_cut_at"]
