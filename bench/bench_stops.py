"""How fast loopkit stops what it was told to stop: the timing targets the tests leave out.

The tests assert the property (the process tree is gone, nothing waited out the sleep it
was given); how quickly it happens is a figure, and a loaded machine moves figures. Here:

- ``proc.run`` with a 0.5 s timeout on a shell whose grandchild sleeps 60 s: the time to
  return (target: under 5 s);
- ``memory.one_line`` on a 1 MB reason of worker-chosen paths (target: under 2 s, linear);
- the scripted model server's stop while an answer is held back 60 s (target: under 3 s).

Best of 3 rounds, wall-clock seconds.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from loopkit import proc  # noqa: E402
from loopkit.ratchet import memory  # noqa: E402

TARGETS = {"proc timeout": 5.0, "one_line 1 MB": 2.0, "server stop": 3.0}


def _proc_timeout() -> float:
    start = time.monotonic()
    proc.run(f"sleep 60.{time.monotonic_ns() % 10**9:09d} & wait", shell=True, timeout=0.5)
    return time.monotonic() - start


def _one_line() -> float:
    text = ("p/" + "x" * 60 + " ") * 16000
    start = time.perf_counter()
    memory.one_line(text, 300)
    return time.perf_counter() - start


def _server_stop() -> float:
    from tests.e2e.test_model_server_http import USER, messages, post
    from tests.helpers.agents import model_server

    cm = model_server([{"delay": 60, "text": "never"}])
    server = cm.__enter__()
    threading.Thread(
        target=post, args=(server.url, "/v1/messages", messages(USER, stream=False)), daemon=True
    ).start()
    time.sleep(0.3)
    start = time.monotonic()
    cm.__exit__(None, None, None)
    return time.monotonic() - start


def main() -> int:
    failed = 0
    for name, fn in (("proc timeout", _proc_timeout), ("one_line 1 MB", _one_line),
                     ("server stop", _server_stop)):  # fmt: skip
        best = min(fn() for _ in range(3))
        ok = best < TARGETS[name]
        failed += not ok
        print(
            f"{name:16} {best:7.3f} s  (target < {TARGETS[name]:.0f} s) {'ok' if ok else 'MISSED'}"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
