"""The meter's added latency per request: the same request to loopkit's scripted model
server directly and through a run's meter (token check, key swap, forwarding, usage
read from the stream), interleaved, on 127.0.0.1.

Two shapes: a streamed Messages answer (SSE; time to the first event and to the end) and
a JSON answer, each on a new connection for both paths. Target: the meter adds at most
2 ms per streamed request at the median (5 ms for a JSON answer; a model's answer takes
seconds, its first token hundreds of milliseconds). Exit 1 if missed.

Then the egress mode (loopkit.boundary.egress): the same streamed request through the
bridge a sandbox without a network runs (a loopback port relayed to the meter's unix
socket), and the cost per attempt of that mode: ``bwrap ... true`` with the network
shared, paired with the same sandbox given its own network namespace, the gate and the
bridge in front of the command.
Usage: python bench/bench_meter.py [--rounds N]
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

from loopkit.boundary import egress, sandbox
from loopkit.boundary.dialects import KNOWN_APIS, Upstream
from loopkit.boundary.meter import Meter
from loopkit.testing import script
from loopkit.testing.server import ModelServer

TARGET_MS = {"sse": 2.0, "json": 5.0}
BODY = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 100,
    "messages": [{"role": "user", "content": "hello " * 200}],
}


def once(url: str, headers: dict[str, str], stream: bool) -> tuple[float, float]:
    """(first byte of the first event, end) in ms for one request on a new connection."""
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    body = json.dumps({**BODY, "stream": stream}).encode()
    start = time.perf_counter()
    conn.request("POST", u.path + "/v1/messages", body, headers)
    r = conn.getresponse()
    first = r.read1(1)
    t_first = time.perf_counter()
    rest = r.read()
    end = time.perf_counter()
    conn.close()
    assert r.status == 200 and first and (rest or first), r.status
    return (t_first - start) * 1000, (end - start) * 1000


def bridged(meter: Meter) -> tuple[subprocess.Popen[bytes], str, Path]:
    """The bridge a sandbox runs, here outside one: a loopback port relayed to the
    meter's unix socket; its URL."""
    folder = Path(tempfile.mkdtemp(prefix="loopkit-bench-"))
    meter.listen(folder / "meter.sock")
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    bridge = str(Path(egress.__file__).with_name("bridge.py"))
    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", bridge, f"{port}={folder}/meter.sock", "--", "sleep", "3600"]
    )
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.02)
    return proc, f"http://127.0.0.1:{port}", folder


def attempt_cost(rounds: int) -> None:
    """bwrap ... true, network shared vs the egress mode, interleaved."""
    if not sandbox.probe().available:
        print("egress per attempt: no working bwrap here, skipped")
        return
    root = Path(tempfile.mkdtemp(prefix="loopkit-bench-repo-"))

    def run(way: egress.Way | None) -> float:
        argv, env = ["true"], {"PATH": "/usr/bin:/bin"}
        start = time.perf_counter()
        if way is not None:
            argv, env = way.inside(argv, env)
        wrapped = sandbox.wrap(
            argv, root=root, git_dir=None, state_dir=None, env=env,
            egress=way.folder if way is not None else None,
        )  # fmt: skip
        subprocess.run(wrapped.argv, env=wrapped.env, check=True)
        return (time.perf_counter() - start) * 1000

    shared: list[float] = []
    added: list[float] = []
    for _ in range(rounds):
        s = run(None)
        t0 = time.perf_counter()
        way = egress.Way.start([])
        run(way)
        e = (time.perf_counter() - t0) * 1000
        way.stop()
        shared.append(s)
        added.append(e - s)
    print(
        f"egress per attempt ({rounds} pairs): bwrap with the network shared, median "
        f"{statistics.median(shared):.1f} ms; the egress mode adds, median "
        f"{statistics.median(added):.1f} ms (gate, namespace, bridge start-up)"
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=200)
    rounds = ap.parse_args().rounds
    data = script.from_data(
        {"turns": [{"text": "Done. " * 50}], "exhausted": "repeat_last"}, source="bench"
    )
    with ModelServer(data) as server:
        meter = Meter.start(
            Upstream(server.url, "bench-key-0123456789", "ANTHROPIC_API_KEY", KNOWN_APIS[0]),
            ttl_s=3600,
        )
        bridge, bridge_url, folder = bridged(meter)
        try:
            direct_h = {"x-api-key": "bench-key-0123456789", "content-type": "application/json"}
            via_h = {"x-api-key": meter.token, "content-type": "application/json"}
            figures: dict[str, list[float]] = {}
            for stream in (True, False):
                for _ in range(5):  # warm both paths
                    once(server.url, direct_h, stream)
                    once(meter.url, via_h, stream)
                for _ in range(rounds):
                    d = once(server.url, direct_h, stream)
                    v = once(meter.url, via_h, stream)
                    kind = "sse" if stream else "json"
                    figures.setdefault(f"{kind} first", []).append(v[0] - d[0])
                    figures.setdefault(f"{kind} end", []).append(v[1] - d[1])
                    figures.setdefault(f"{kind} direct end", []).append(d[1])
            for _ in range(rounds):
                d = once(server.url, direct_h, True)
                b = once(bridge_url, via_h, True)
                figures.setdefault("sse bridged", []).append(b[1] - d[1])
            records = len(meter.records)
        finally:
            bridge.kill()
            bridge.wait()
            meter.stop()
            import shutil

            shutil.rmtree(folder, ignore_errors=True)
    print(f"meter: {rounds} interleaved pairs per shape, {records} requests metered")
    ok = True
    for name in ("sse first", "sse end", "json first", "json end", "sse bridged"):
        values = figures[name]
        med = statistics.median(values)
        p90 = sorted(values)[int(len(values) * 0.9)]
        if name.endswith("end"):
            ok = ok and med <= TARGET_MS[name.split()[0]]
        print(f"  added {name:<11} median {med:6.2f} ms   p90 {p90:6.2f} ms")
    for kind in ("sse", "json"):
        print(
            f"  direct {kind} request end, median {statistics.median(figures[kind + ' direct end']):.2f} ms"
        )
    print(
        f"  target: at most {TARGET_MS['sse']:.0f} ms added per streamed request, "
        f"{TARGET_MS['json']:.0f} ms per JSON answer, at the median -- "
        f"{'met' if ok else 'MISSED'}"
    )
    attempt_cost(max(5, rounds // 20))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
