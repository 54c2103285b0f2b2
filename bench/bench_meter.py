"""The meter's added latency per request: the same request to loopkit's scripted model
server directly and through a run's meter (token check, key swap, forwarding, usage
read from the stream), interleaved, on 127.0.0.1.

Two shapes: a streamed Messages answer (SSE; time to the first event and to the end) and
a JSON answer, each on a new connection for both paths. Target: the meter
adds at most 5 ms per request at the median (a model's answer takes seconds; its first
token hundreds of milliseconds). Exit 1 if missed.
Usage: python bench/bench_meter.py [--rounds N]
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import time
from urllib.parse import urlsplit

from loopkit.boundary.meter import KNOWN_APIS, Meter, Upstream
from loopkit.testing import script
from loopkit.testing.server import ModelServer

TARGET_MS = 5.0
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
            records = len(meter.records)
        finally:
            meter.stop()
    print(f"meter: {rounds} interleaved pairs per shape, {records} requests metered")
    worst = 0.0
    for name in ("sse first", "sse end", "json first", "json end"):
        values = figures[name]
        med = statistics.median(values)
        p90 = sorted(values)[int(len(values) * 0.9)]
        worst = max(worst, med)
        print(f"  added {name:<11} median {med:6.2f} ms   p90 {p90:6.2f} ms")
    for kind in ("sse", "json"):
        print(
            f"  direct {kind} request end, median {statistics.median(figures[kind + ' direct end']):.2f} ms"
        )
    ok = worst <= TARGET_MS
    print(
        f"  target: at most {TARGET_MS:.0f} ms added at the median -- {'met' if ok else 'MISSED'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
