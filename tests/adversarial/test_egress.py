"""The egress mode: the worker's sandbox has no network but its loopback, the meter and
the gate to the hosts the contract allows.

A hostile command worker, through the real lk-invoke, in the real sandbox: its network
namespace holds ``lo`` alone, with no route (``/proc/net/dev``, ``/proc/net/route``); a
test host standing in for the outside world -- a server in a network namespace this test
creates, which the host itself reaches -- is unreachable from inside, by a direct
connection and by a raw socket; no name resolves. Real clients (curl, git over HTTP, pip)
reach an allowed local server through the gate; another local server is refused with a
clear error and listed on the run's record. Traffic goes only to 127.0.0.0/8 and to the
test's own namespace.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from loopkit.boundary import sandbox
from tests.helpers import git
from tests.helpers.agents import model_server
from tests.helpers.invoke import Invoked, lk_invoke, write_contract

pytestmark = pytest.mark.skipif(not sandbox.probe().available, reason="no working bwrap here")


def serve(folder: Path, address: str) -> ThreadingHTTPServer:
    """A static server of ``folder`` on ``address`` (a 127.0.0.0/8 address)."""

    class Files(SimpleHTTPRequestHandler):
        def __init__(self, *a: Any, **k: Any) -> None:
            super().__init__(*a, directory=str(folder), **k)

        def log_message(self, *a: Any) -> None:
            pass

    server = ThreadingHTTPServer((address, 0), Files)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture(name="outside")
def outside_fixture() -> Iterator[str]:
    """A test host in a network namespace this test makes (a veth pair to it), serving
    HTTP: the host reaches it; it stands in for any address outside."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("making a network namespace needs root and ip(8)")
    name = f"lkeg{os.getpid() % 10000}{random.randrange(100)}"
    net = random.randrange(1, 250)
    here, there = f"10.251.{net}.1", f"10.251.{net}.2"

    def ip(*args: str) -> None:
        subprocess.run(["ip", *args], check=True, capture_output=True)

    ip("netns", "add", name)
    server = None
    try:
        ip("link", "add", f"{name}a", "type", "veth", "peer", "name", f"{name}b")
        ip("link", "set", f"{name}b", "netns", name)
        ip("addr", "add", f"{here}/30", "dev", f"{name}a")
        ip("link", "set", f"{name}a", "up")
        ip("netns", "exec", name, "ip", "addr", "add", f"{there}/30", "dev", f"{name}b")
        ip("netns", "exec", name, "ip", "link", "set", f"{name}b", "up")
        server = subprocess.Popen(
            [
                *("ip", "netns", "exec", name, sys.executable, "-m", "http.server", "8080"),
                *("--bind", there),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(200):
            try:
                socket.create_connection((there, 8080), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail("the namespaced test host did not start")
        yield there
    finally:
        if server is not None:
            server.kill()
            server.wait()
        subprocess.run(["ip", "link", "del", f"{name}a"], capture_output=True)
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


def lk(git_repo: Path, tmp_path: Path, script: str, **sandbox_: Any) -> Invoked:
    (git_repo / "probe.sh").write_text(script)
    git(git_repo, "add", "probe.sh")
    git(git_repo, "commit", "-q", "-m", "probe")
    contract = write_contract(
        tmp_path / "loop.yaml",
        worker={
            "provider": "command",
            "command": "sh probe.sh",
            "env_allow": ["ANTHROPIC_API_KEY"],
        },
        sandbox={"mode": "required", **sandbox_},
    )
    with model_server([{"text": "hello"}]) as server:
        env = dict(os.environ)
        env["ANTHROPIC_API_KEY"] = "sk-ant-egress-test-key-0123456789"
        env["ANTHROPIC_BASE_URL"] = server.url
        return lk_invoke(["--contract", str(contract)], cwd=git_repo, env=env, timeout=300)


REACH = r"""
import json, os, socket, sys, urllib.request
there = sys.argv[1]
out = {"dev": [l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:]],
       "routes": open("/proc/net/route").read().splitlines()[1:]}
try:
    socket.create_connection((there, 8080), timeout=10).close()
    out["direct"] = "connected"
except OSError as e:
    out["direct"] = e.strerror or str(e)
try:
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    s.sendto(b"\x08\x00\xf7\xff\x00\x00\x00\x00", (there, 0))
    out["raw"] = "sent"
except OSError as e:
    out["raw"] = e.strerror or str(e)
try:
    socket.getaddrinfo("loopkit-egress-test.example", 80)
    out["dns"] = "resolved"
except OSError as e:
    out["dns"] = "failed"
# The meter is the way to the model API: the run's token works through it.
req = urllib.request.Request(os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages",
    data=json.dumps({"model": "m", "max_tokens": 5,
                     "messages": [{"role": "user", "content": "hi"}]}).encode(),
    headers={"x-api-key": os.environ["ANTHROPIC_API_KEY"], "content-type": "application/json",
             "anthropic-version": "2023-06-01"})
out["meter"] = urllib.request.urlopen(req, timeout=60).status
json.dump(out, open("reach.json", "w"))
"""


def test_no_route_but_the_loopback_by_construction(
    git_repo: Path, tmp_path: Path, outside: str
) -> None:
    (git_repo / "reach.py").write_text(REACH)
    # A metered worker gets the egress mode by default: nothing in the contract asks.
    r = lk(git_repo, tmp_path, f"python3 reach.py {outside}\n")
    assert r.returncode == 0, r.stderr
    got = json.loads((git_repo / "reach.json").read_text())
    assert r.run["sandbox"]["network"] == "egress"
    assert got["dev"] == ["lo"] and got["routes"] == [], got
    assert got["direct"] == "Network is unreachable", got
    assert got["raw"] != "sent" and got["dns"] == "failed", got
    assert got["meter"] == 200 and r.run["meter"]["statuses"] == {"200": 1}


def test_the_shared_network_reaches_the_test_host(
    git_repo: Path, tmp_path: Path, outside: str
) -> None:
    """The same probe with the network shared (as before the egress mode) reaches the
    namespaced host: the test above can fail."""
    (git_repo / "reach.py").write_text(REACH)
    r = lk(git_repo, tmp_path, f"python3 reach.py {outside}\n", network=True)
    assert r.returncode == 0, r.stderr
    assert json.loads((git_repo / "reach.json").read_text())["direct"] == "connected"


def wheel(folder: Path) -> None:
    """A tiny package index (PEP 503) with one wheel."""
    (folder / "simple" / "demo").mkdir(parents=True)
    name = "demo-1.0-py3-none-any.whl"
    with zipfile.ZipFile(folder / "simple" / "demo" / name, "w") as z:
        z.writestr("demo/__init__.py", "")
        z.writestr(
            "demo-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n"
        )
        z.writestr(
            "demo-1.0.dist-info/WHEEL",
            "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        z.writestr("demo-1.0.dist-info/RECORD", "")
    (folder / "simple" / "demo" / "index.html").write_text(f'<a href="{name}">{name}</a>\n')


def test_real_clients_reach_the_allowed_host_only(git_repo: Path, tmp_path: Path) -> None:
    www = tmp_path / "www"
    www.mkdir()
    (www / "hello.txt").write_text("allowed\n")
    wheel(www)
    bare = www / "repo.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    git(git_repo, "push", "-q", str(bare), "HEAD:refs/heads/main")
    git(bare, "update-server-info")
    allowed, other = serve(www, "127.0.0.2"), serve(www, "127.0.0.3")
    a = f"127.0.0.2:{allowed.server_address[1]}"
    o = f"127.0.0.3:{other.server_address[1]}"
    script = f"""
exec > probe.out 2>&1
curl -fsS http://{a}/hello.txt; echo "curl-allowed=$?"
curl -fsS -p http://{a}/hello.txt; echo "curl-connect-allowed=$?"
curl -fsS http://{o}/hello.txt; echo "curl-other=$?"
curl -fsS -p http://{o}/hello.txt; echo "curl-connect-other=$?"
curl -fsS --noproxy '*' http://{a}/hello.txt; echo "curl-direct=$?"
git ls-remote http://{a}/repo.git; echo "git-allowed=$?"
git ls-remote http://{o}/repo.git; echo "git-other=$?"
{sys.executable} -m pip download -q --no-deps --disable-pip-version-check --no-cache-dir \
  -d /tmp/dl --index-url http://{a}/simple/ demo; echo "pip-allowed=$?"
{sys.executable} -m pip download -q --no-deps --disable-pip-version-check --no-cache-dir \
  --retries 0 -d /tmp/dl2 --index-url http://{o}/simple/ demo; echo "pip-other=$?"
"""
    try:
        r = lk(git_repo, tmp_path, script, network="egress", hosts=[a])
    finally:
        allowed.shutdown()
        other.shutdown()
    assert r.returncode == 0, r.stderr
    out = (git_repo / "probe.out").read_text()
    codes = dict(
        line.split("=")
        for line in out.splitlines()
        if line.endswith(("=0", "=1", "=7", "=22", "=128"))
    )
    assert codes["curl-allowed"] == "0" and codes["curl-connect-allowed"] == "0", out
    assert codes["git-allowed"] == "0" and codes["pip-allowed"] == "0", out
    for refused in ("curl-other", "curl-connect-other", "curl-direct", "git-other", "pip-other"):
        assert codes[refused] != "0", (refused, out)
    # The refusal says what and why, in the client's own words.
    assert "returned error: 403" in out, out
    assert f"loopkit egress: {o} is not allowed (the contract's sandbox.hosts)" in out, out
    egress = r.run["sandbox"]["egress"]
    assert egress["allowed"] == [a] and egress["used"][a] >= 4
    assert egress["refused"][o] >= 4, egress
    assert set(egress["refused"]) == {o}


@pytest.mark.parametrize(("network", "passes"), [("egress", True), (True, False)])
def test_the_checks_get_the_egress_mode_from_verify_network(
    tmp_path: Path, network: Any, passes: bool
) -> None:
    """A check (the worker's code) reaches the allowed host through the gate and nothing
    else: with ``verify.network: egress`` it passes; with the network shared its direct
    connection goes through, and it fails."""
    from tests.helpers.recipes import make_project, recipe_env

    www = tmp_path / "www"
    www.mkdir()
    (www / "hello.txt").write_text("allowed\n")
    allowed, other = serve(www, "127.0.0.2"), serve(www, "127.0.0.3")
    a = f"127.0.0.2:{allowed.server_address[1]}"
    o = f"127.0.0.3:{other.server_address[1]}"
    check = (
        f"curl -fsS http://{a}/hello.txt && ! curl -fsS http://{o}/hello.txt"
        f" && ! curl -fsS --noproxy '*' http://{a}/hello.txt"
    )
    p = make_project(
        tmp_path,
        "pass\n",
        checks=[{"name": "net", "run": check, "timeout": 60}],
        writable=["src/**"],
        sandbox={"writable": [str(tmp_path / "worker")], "hosts": [a]},
        verify={"network": network},
    )
    doc = json.dumps(
        {"kind": "loopkit/attempt", "version": 1, "task": {"id": "t", "text": "t", "kind": "task"}}
    )
    try:
        proc = subprocess.run(
            ["bash", "-c", "lk-invoke --contract loop.yaml | lk-diff | lk-verify"],
            input=doc,
            cwd=p.root,
            env=recipe_env(None),
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        allowed.shutdown()
        other.shutdown()
    body = json.loads(proc.stdout)["verify"]
    assert body["sandbox"]["network"] == network
    assert (proc.returncode == 0) is passes, proc.stderr


def test_the_hosts_refused_to_the_checks_are_in_the_verify_record_and_lk_show(
    tmp_path: Path,
) -> None:
    """A check under ``verify.network: egress`` that reaches for a host the contract does
    not list is refused -- and the refusal is no secret: the verify record
    (``verify.sandbox.egress.refused``), the ledger's record of the attempt, ``lk show``
    and ``lk report`` name the host, as they do for the worker's."""
    from tests.adversarial.helpers import loop
    from tests.helpers.recipes import fail_message, make_project, recipe_env

    www = tmp_path / "www"
    www.mkdir()
    (www / "hello.txt").write_text("out\n")
    other = serve(www, "127.0.0.3")
    o = f"127.0.0.3:{other.server_address[1]}"
    check = f"! curl -fsS http://{o}/hello.txt && grep -qx good src/value.txt"
    p = make_project(
        tmp_path,
        'Path("src/value.txt").write_text("good\\n")\n',
        files={"src/value.txt": "bad\n"},
        checks=[{"name": "net", "run": check, "timeout": 60}],
        writable=["src/**"],
        sandbox={"writable": [str(tmp_path / "worker")], "network": True},
        verify={"network": "egress"},
    )
    try:
        proc = loop(p)
    finally:
        other.shutdown()
    assert proc.returncode == 0, fail_message(proc)
    verify = p.docs("fix-value", "verify")[-1]["verify"]
    assert verify["sandbox"]["egress"]["refused"] == {o: 1}, verify["sandbox"]
    decided = [r for r in p.ledger() if r.get("decision")]
    assert decided[-1]["verify"]["refused_hosts"] == {o: 1}
    shown = subprocess.run(
        ["lk", "show", "fix-value"], cwd=p.root, env=recipe_env(), capture_output=True, text=True
    )
    assert f"#1 hosts refused to the checks: {o}" in shown.stdout, shown.stdout + shown.stderr
    report = subprocess.run(
        ["lk", "report"], cwd=p.root, env=recipe_env(), capture_output=True, text=True
    )
    assert f"hosts the egress gate refused the checks: {o}" in report.stdout, report.stdout
