"""An eval's trials fanned out on a Ray cluster (``lk eval run --ray ADDRESS``).

Ray is the scheduler: each try of a trial is one Ray task of one CPU (``Runner.once``:
a fresh tree at the pinned base, ``lk attempt``, the hidden checks), placed wherever the
cluster has a CPU free; loopkit keeps no queue of its own. What comes back is the try's
result; this process, the one ``lk eval run`` started, counts the tries
(``trials.Tries``) and appends each finished trial to ``trials.jsonl`` as ``--jobs N``
does, so a resume is the same as on one machine.

A try whose Ray worker or node died never returns: Ray does not run it again by itself
(``max_retries=0``); it is counted as an infrastructure failure and retried whole, like
a provider that was down -- never lost, never counted twice.

Ray is an optional extra (``loopkit-agents[ray]``) and imported only here, only when a
run asks for it.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from loopkit.errors import EnvironmentProblem
from loopkit.eval.trials import Runner, Trial, Tries


def _once(runner: Runner, t: Trial, contract: Path, tries: int) -> object:
    """One try, on whichever node Ray placed it."""
    return runner.once(t, contract, tries)


def check(address: str) -> ModuleType:
    """Ray, once it is installed and something answers at ``address``: before the run
    validates its tasks, not after (Ray itself would try for minutes before it says so)."""
    try:
        import ray
        import ray.exceptions
    except ImportError:
        raise EnvironmentProblem(
            "lk eval run --ray: Ray is not installed (pip install 'loopkit-agents[ray]')"
        ) from None
    host, sep, port = address.rpartition(":")
    if sep and host and port.isdigit() and "://" not in host:  # else "auto", ray://: Ray's
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=10).close()
        except OSError as e:
            why = e.strerror or type(e).__name__
            raise EnvironmentProblem(
                f"lk eval run --ray {address}: no Ray cluster answers there ({why})"
            ) from None
    return ray


def run(runner: Runner, address: str, only: Sequence[str] = ()) -> None:
    """``Runner.run`` on the Ray cluster at ``address`` ("auto": the one this machine is
    in): every trial not finished yet (``only``: these configurations'), each recorded as
    it finishes."""
    ray = check(address)
    todo = runner.todo(only)
    # Ray's driver prints what its cluster reports (a worker that died) on stdout: here
    # that is the report's, so those lines go to stderr, with the progress.
    with contextlib.redirect_stdout(sys.stderr):
        _run(ray, runner, todo, address)


def _run(ray: ModuleType, runner: Runner, todo: Sequence[Trial], address: str) -> None:
    try:
        ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    except (ConnectionError, ValueError, RuntimeError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise EnvironmentProblem(f"lk eval run --ray {address}: {first}") from None
    try:
        remote = ray.remote(num_cpus=1, max_retries=0)(_once)
        shared = ray.put(runner)
        pending: dict[object, tuple[Trial, Path, int, float]] = {}

        def submit(t: Trial, contract: Path, tries: int) -> None:
            pending[remote.remote(shared, t, contract, tries)] = (
                t,
                contract,
                tries,
                time.monotonic(),
            )

        counts: dict[str, Tries] = {}
        for t in todo:
            contract = runner.write_contract(runner.contract_of(t.config, t.task))
            counts[t.key] = Tries(runner.suite.infra_retries)
            submit(t, contract, 1)
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                t, contract, n, started = pending.pop(ref)
                try:
                    result = ray.get(ref)
                except ray.exceptions.RayTaskError as e:
                    # What the try raised, raised here: as it would be on one machine.
                    cause = getattr(e, "cause", None)
                    raise (cause if isinstance(cause, BaseException) else e) from None
                except ray.exceptions.RayError as e:
                    why = f"the Ray worker running it was lost ({type(e).__name__})"
                    result = runner.lost(t, n, why, started)
                done = counts[t.key].add(result)
                if done is None:
                    submit(t, contract, n + 1)
                else:
                    runner.record(done)
    finally:
        ray.shutdown()
