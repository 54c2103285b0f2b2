"""A Ray cluster of real node processes on 127.0.0.1 (a head and workers, one CPU and a
small object store each), for lk eval --ray's tests and bench: every node's processes in
a session of their own, ended with it (never `ray stop`, which ends every Ray on the
machine)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

RAY = str(Path(sys.executable).parent / "ray")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _node(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    """One Ray node, its processes in a session of their own (ended with it), every
    port of its own on 127.0.0.1."""
    ports = [
        "--node-manager-port",
        "--object-manager-port",
        "--dashboard-agent-listen-port",
        "--dashboard-agent-grpc-port",
        "--runtime-env-agent-port",
        "--metrics-export-port",
    ]
    argv = [RAY, "start", *args, "--block", "--num-cpus", "1", "--node-ip-address", "127.0.0.1"]
    argv += ["--object-store-memory", "100000000", "--disable-usage-stats"]
    for p in ports:
        argv += [p, str(free_port())]
    with open(log, "wb") as out:
        return subprocess.Popen(
            argv,
            env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _nodes_alive(address: str) -> int:
    probe = (
        f"import ray; ray.init(address={address!r}, logging_level='ERROR', "
        "log_to_driver=False); print(sum(1 for n in ray.nodes() if n['Alive']))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
    )
    return int(done.stdout.strip() or 0) if done.returncode == 0 else 0


@contextmanager
def cluster() -> Iterator[str]:
    """A head node and a worker node, their address; both ended (their whole sessions)
    after."""
    temp = Path(tempfile.mkdtemp(prefix="lkray-"))  # short: Ray's sockets live in it
    port = free_port()
    address = f"127.0.0.1:{port}"
    nodes: list[subprocess.Popen[bytes]] = []
    try:
        nodes.append(
            _node(
                [
                    "--head",
                    "--port",
                    str(port),
                    "--include-dashboard=false",
                    "--temp-dir",
                    str(temp),
                ],
                temp / "head.log",
            )
        )
        nodes.append(_node(["--address", address], temp / "worker.log"))
        deadline = time.monotonic() + 240
        while _nodes_alive(address) < 2:
            assert time.monotonic() < deadline, (temp / "worker.log").read_text()[-2000:]
            time.sleep(1)
        yield address
    finally:
        for node in nodes:
            try:
                os.killpg(node.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            node.wait()
        shutil.rmtree(temp, ignore_errors=True)
