"""lk-verify in a loop: the checks' sandbox as the contract asks for it (auto, required,
off), and a failure that explains itself when the checks did not see an ignored path."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from loopkit.boundary import sandbox
from tests.helpers.recipes import make_project, recipe_env

needs_sandbox = pytest.mark.skipif(not sandbox.probe().available, reason="no sandbox here")

FIXTURE_CHECK = {"name": "fixtures", "run": "test -f data/fixtures/rows.csv", "timeout": 30}


def _verify(p, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """lk-invoke | lk-diff | lk-verify on the project (the worker does nothing)."""
    doc = json.dumps(
        {"kind": "loopkit/attempt", "version": 1, "task": {"id": "t", "text": "t", "kind": "task"}}
    )
    pipe = "lk-invoke --contract loop.yaml | lk-diff | lk-verify"
    return subprocess.run(
        ["bash", "-c", pipe],
        input=doc,
        cwd=p.root,
        env=recipe_env(env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def _project(tmp_path: Path, **kw):
    p = make_project(
        tmp_path, "pass\n", gitignore="data/\n", checks=[FIXTURE_CHECK], writable=["src/**"], **kw
    )
    (p.root / "data/fixtures").mkdir(parents=True)
    (p.root / "data/fixtures/rows.csv").write_text("a,b\n")
    return p


@needs_sandbox
def test_a_check_that_needs_an_ignored_path_says_which_and_the_key_that_shows_it(
    tmp_path: Path,
) -> None:
    p = _project(tmp_path)
    proc = _verify(p)
    assert proc.returncode == 1, proc.stderr
    body = json.loads(proc.stdout)["verify"]
    assert body["sandbox"]["used"] is True
    assert body["not_shown"] == ["data/"]
    assert "data/" in body["hint"] and "verify.carry" in body["hint"]
    assert sum("verify.carry" in line for line in proc.stderr.splitlines()) == 1


@needs_sandbox
def test_a_path_named_in_verify_carry_is_shown_read_only(tmp_path: Path) -> None:
    p = _project(tmp_path, verify={"carry": ["data/"]})
    proc = _verify(p)
    assert proc.returncode == 0, proc.stderr
    body = json.loads(proc.stdout)["verify"]
    assert body["carried"] == [{"path": "data", "why": "verify.carry"}]
    assert "hint" not in body


def test_without_a_sandbox_the_record_says_why(tmp_path: Path) -> None:
    p = _project(tmp_path, verify={"carry": ["data/"]}, sandbox={"mode": "off"})
    proc = _verify(p)
    assert proc.returncode == 0, proc.stderr
    body = json.loads(proc.stdout)["verify"]
    assert body["sandbox"] == {"mode": "off", "network": True, "used": False, "reason": "mode: off"}


def test_mode_required_refuses_to_run_the_checks_without_a_sandbox(tmp_path: Path) -> None:
    p = _project(tmp_path, sandbox={"mode": "required"})
    proc = subprocess.run(
        ["lk-verify", "--clean-room", "--contract", "loop.yaml"],
        cwd=p.root,
        env=recipe_env({"LOOPKIT_BWRAP": str(tmp_path / "no-bwrap")}),
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 4, proc.stderr
    assert proc.stdout == ""
    lines = [line for line in proc.stderr.splitlines() if "sandbox required" in line]
    assert len(lines) == 1 and "Traceback" not in proc.stderr


NET_CHECK = {
    "name": "net",
    "run": 'python3 -c \'import socket; socket.create_connection(("127.0.0.1", int(open("port").read())), 2)\'',
    "timeout": 30,
}


@needs_sandbox
@pytest.mark.parametrize(
    ("settings", "reaches"),
    [
        ({}, True),
        ({"sandbox": {"network": False}}, False),
        ({"verify": {"network": False}}, False),
        ({"sandbox": {"network": False}, "verify": {"network": True}}, True),
    ],
)
def test_the_checks_network_follows_the_contract(tmp_path: Path, settings, reaches) -> None:
    """A check's code that phones out (here: to a server on 127.0.0.1) reaches it only
    where the contract lets the checks share the network."""
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(5)
    settings = {k: {**v} for k, v in settings.items()}
    settings.setdefault("sandbox", {})["writable"] = [str(tmp_path / "worker")]
    p = make_project(
        tmp_path,
        "pass\n",
        checks=[NET_CHECK],
        writable=["src/**"],
        files={"port": str(server.getsockname()[1])},
        **settings,
    )
    try:
        proc = _verify(p)
    finally:
        server.close()
    body = json.loads(proc.stdout)["verify"]
    assert body["sandbox"]["network"] is reaches
    assert (proc.returncode == 0) is reaches, proc.stderr
