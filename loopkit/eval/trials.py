"""Running an eval's trials: each in a fresh git worktree at the pinned base, through
loopkit's own attempt (``lk attempt``), scored by loopkit's own decision.

- **Validated first.** Each task's checks must fail at the base (else there is nothing
  to do), and its reference solution, when given, must make them pass.
- **Interleaved in time.** Trials run in rounds: per repeat, the tasks in a shuffled
  order, and per task the configurations in a shuffled order (seeded), so that a slow
  afternoon or a provider's bad hour falls on every configuration alike.
- **Infrastructure apart.** A trial whose run failed for reasons that are not the
  agent's -- the provider's 5xx/429 after its retries, a usage limit, credentials, a
  missing CLI or sandbox, a check that could not run -- is retried whole in a fresh tree
  (``infra_retries``), and if it never gets through it is recorded as ``infra``: the
  report shows pass rates with and without those trials.
- **Resumable.** Each finished trial is one line appended to ``trials.jsonl`` under the
  eval's state folder; a rerun skips the trials already there. What a killed run left
  (worktrees, half a trial) is cleared at the start.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from loopkit.errors import BadInput
from loopkit.eval.suite import Config, Suite, Task

RESULTS = "trials.jsonl"
#: lk attempt's exit codes that end a trial with a decision (0 complete, 10 retry, 11
#: replan, 20 blocked, 21 failed, 22 budget exhausted).
DECIDED = (0, 10, 11, 20, 21, 22)
#: The run's failure classes and stop reasons that are the infrastructure's, not the agent's.
INFRA_CLASSES = ("transient", "usage_limit", "auth", "environment", "tampered")
INFRA_STOPS = ("api_error", "rate_limited", "usage_limit", "auth_error")


class Trial:
    def __init__(self, config: Config, task: Task, repeat: int) -> None:
        self.config = config
        self.task = task
        self.repeat = repeat

    @property
    def key(self) -> str:
        return f"{self.config.name}/{self.task.id}/{self.repeat}"

    @property
    def slug(self) -> str:
        return f"{self.config.name}--{self.task.id}--{self.repeat}"


def schedule(suite: Suite) -> list[Trial]:
    """Every trial, in the order they start: round-robin over shuffled orders (seeded)."""
    rng = random.Random(suite.seed)
    order: list[Trial] = []
    for r in range(suite.repeats):
        tasks = list(suite.tasks)
        rng.shuffle(tasks)
        for task in tasks:
            configs = list(suite.configs)
            rng.shuffle(configs)
            order += [Trial(c, task, r) for c in configs]
    return order


def read_results(state: Path) -> list[dict[str, Any]]:
    """The finished trials (a torn last line, from a kill, is skipped)."""
    path = state / RESULTS
    out: list[dict[str, Any]] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return out
    for line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and isinstance(rec.get("key"), str):
            out.append(rec)
    return out


def lk_argv() -> list[str]:
    """How to start loopkit's own ``lk`` with this interpreter."""
    beside = Path(sys.executable).parent / "lk"
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)]
    return [sys.executable, "-c", "from loopkit.cli.door import main; main()"]


class Runner:
    """One eval run: the suite, its state folder, the environment the trials start from."""

    def __init__(
        self,
        suite: Suite,
        state: Path,
        *,
        environ: Mapping[str, str] | None = None,
        say: Callable[[str], None] | None = None,
    ) -> None:
        self.suite = suite
        self.state = state
        self.environ = dict(os.environ if environ is None else environ)
        self.say = say or (lambda _line: None)
        self._git_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self.base = ""
        self.contract: dict[str, Any] = {}

    # -- set-up ---------------------------------------------------------------------
    def prepare(self) -> None:
        """Pin the base, read the contract there, clear what a killed run left."""
        from loopkit import git, loader

        self.state.mkdir(parents=True, exist_ok=True)
        try:
            self.base = git.out(
                ["rev-parse", "--verify", f"{self.suite.base}^{{commit}}"], cwd=self.suite.repo
            ).strip()
        except git.GitError:
            raise BadInput(
                str(self.suite.path),
                f"$.base: {self.suite.base!r} is no commit of {self.suite.repo}",
            ) from None
        if self.suite.contract:
            try:
                raw = git.out(["show", f"{self.base}:{self.suite.contract}"], cwd=self.suite.repo)
                data = loader.yaml_load(raw)
            except (git.GitError, ValueError) as e:
                raise BadInput(
                    str(self.suite.path), f"$.contract: {self.suite.contract} at the base: {e}"
                ) from None
            self.contract = dict(data) if isinstance(data, dict) else {}
        self._clear_trees()
        (self.state / "contracts").mkdir(exist_ok=True)
        (self.state / "documents").mkdir(exist_ok=True)

    def _clear_trees(self) -> None:
        """Remove the worktrees a killed run left: a kill during ``git worktree add``
        leaves its entry locked ("initializing"), which a prune keeps."""
        from loopkit import git

        trees = (self.state / "trees").resolve()
        listed = self._git(["worktree", "list", "--porcelain"])
        for line in listed.splitlines():
            path = line.removeprefix("worktree ").strip()
            if line.startswith("worktree ") and path.startswith(str(trees) + os.sep):
                try:
                    self._git(["worktree", "unlock", path])
                except git.GitError:
                    pass  # not locked
        if trees.exists():
            shutil.rmtree(trees, ignore_errors=True)
        self._git(["worktree", "prune"])

    def _git(self, args: list[str]) -> str:
        from loopkit import git

        with self._git_lock:
            return git.out(args, cwd=self.suite.repo)

    def contract_for(self, config: Config | None, task: Task) -> Path:
        """The trial's contract: the suite's, with the task's checks and scope and the
        configuration's worker."""
        c = json.loads(json.dumps(self.contract))  # a copy
        c.setdefault("version", 1)
        c.setdefault("objective", task.text)
        if task.criteria is not None:
            c["criteria"] = task.criteria
        scope = dict(c.get("scope") or {})
        if task.scope is not None:
            scope["writable"] = task.scope
        scope.setdefault("writable", ["**"])
        c["scope"] = scope
        budgets = dict(c.get("budgets") or {})
        budgets["attempts"] = self.suite.attempts
        c["budgets"] = budgets
        if config is not None:
            worker = {**dict(c.get("worker") or {}), **config.worker}
            worker["provider"] = config.provider
            if config.model:
                worker["model"] = config.model
            worker.setdefault("timeout", self.suite.timeout)
            c["worker"] = worker
        name = f"{config.name if config else 'checks'}--{task.id}.json"
        path = self.state / "contracts" / name
        from loopkit.files import atomic_write

        atomic_write(path, json.dumps(c, indent=2) + "\n")
        return path

    def fresh_tree(self, slug: str) -> Path:
        tree = self.state / "trees" / slug
        if tree.exists():
            self.drop_tree(tree)
        tree.parent.mkdir(parents=True, exist_ok=True)
        self._git(["worktree", "add", "--detach", "--quiet", str(tree), self.base])
        return tree

    def drop_tree(self, tree: Path) -> None:
        from loopkit import git

        try:
            self._git(["worktree", "remove", "--force", str(tree)])
        except git.GitError:
            shutil.rmtree(tree, ignore_errors=True)
            self._git(["worktree", "prune"])

    # -- validation -----------------------------------------------------------------
    def validate(self) -> list[str]:
        """Each task fails at its base, and its reference (if any) passes: the problems."""
        problems: list[str] = []
        for task in self.suite.tasks:
            contract = self.contract_for(None, task)
            if not (json.loads(contract.read_text()).get("criteria")):
                problems.append(f"task {task.id}: no criteria (the task's or the contract's)")
                continue
            tree = self.fresh_tree(f"validate--{task.id}")
            try:
                code, _ = self._verify(tree, contract)
                if code == 0:
                    problems.append(
                        f"task {task.id}: its checks already pass at the base {self.base[:12]}"
                    )
                elif code != 1:
                    problems.append(
                        f"task {task.id}: its checks could not run at the base (lk-verify exit {code})"
                    )
                if task.reference is not None:
                    why = self._apply_reference(tree, task.reference)
                    if why:
                        problems.append(f"task {task.id}: reference {task.reference}: {why}")
                    else:
                        code, _ = self._verify(tree, contract)
                        if code != 0:
                            problems.append(
                                f"task {task.id}: its reference solution does not pass its checks"
                            )
            finally:
                self.drop_tree(tree)
        return problems

    def _verify(self, tree: Path, contract: Path) -> tuple[int | None, bytes]:
        from loopkit import proc

        env = {**self.environ, "LOOPKIT_STATE_DIR": str(tree.parent / (tree.name + ".state"))}
        done = proc.run(
            [*lk_argv(), "verify", "--contract", str(contract)], cwd=tree, env=env, timeout=3600
        )
        return done.exit_code, done.output

    def _apply_reference(self, tree: Path, reference: str) -> str | None:
        from loopkit import git, proc

        patch = (self.suite.path.parent / reference).resolve()
        if patch.is_file():
            done = proc.capture(["git", "apply", "--whitespace=nowarn", str(patch)], cwd=tree)
            return (
                None if done.exit_code == 0 else done.stderr.decode(errors="replace").strip()[:300]
            )
        try:
            diff = git.out(["diff", "--binary", self.base, reference], cwd=self.suite.repo)
        except git.GitError:
            return "neither a patch file nor a commit"
        done = proc.capture(
            ["git", "apply", "--whitespace=nowarn", "-"], cwd=tree, input=diff.encode()
        )
        return None if done.exit_code == 0 else done.stderr.decode(errors="replace").strip()[:300]

    # -- the trials -----------------------------------------------------------------
    def run(self, *, jobs: int = 1) -> list[dict[str, Any]]:
        """Run every trial not finished yet; the results of all of them."""
        done = {r["key"] for r in read_results(self.state)}
        todo = [t for t in schedule(self.suite) if t.key not in done]
        total = len(schedule(self.suite))
        if done:
            self.say(f"resuming: {len(done)} of {total} trials finished before")
        if jobs <= 1:
            for t in todo:
                self._record(self.trial(t))
        else:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=jobs) as pool:
                for result in pool.map(self.trial, todo):
                    self._record(result)
        return read_results(self.state)

    def _record(self, result: dict[str, Any]) -> None:
        line = json.dumps(result, sort_keys=True) + "\n"
        with self._write_lock, open(self.state / RESULTS, "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
        self.say(
            f"{result['key']}: {result['status']}"
            + (f" ({result['infra']})" if result.get("infra") else "")
            + f", {result['wall_s']:.1f}s"
        )

    def trial(self, t: Trial) -> dict[str, Any]:
        """One trial, its infrastructure failures retried whole in a fresh tree."""
        contract = self.contract_for(t.config, t.task)
        tries = 0
        infra_seen: list[str] = []
        while True:
            tries += 1
            result = self._once(t, contract, tries)
            if not result.get("infra"):
                break
            infra_seen.append(str(result["infra"]))
            if tries > self.suite.infra_retries:
                break
        result["tries"] = tries
        result["infra_failures"] = infra_seen
        return result

    def _once(self, t: Trial, contract: Path, tries: int) -> dict[str, Any]:
        slug = f"{t.slug}--{tries}"
        tree = self.fresh_tree(slug)
        started = time.monotonic()
        try:
            return self._attempts(t, contract, tree, slug, started)
        finally:
            self.drop_tree(tree)
            shutil.rmtree(tree.parent / (tree.name + ".state"), ignore_errors=True)

    def _attempts(
        self, t: Trial, contract: Path, tree: Path, slug: str, started: float
    ) -> dict[str, Any]:
        from loopkit import proc

        doc: dict[str, Any] = {
            "kind": "loopkit/attempt",
            "version": 1,
            "task": {"id": t.task.id, "text": t.task.text, "kind": "task"},
        }
        env = {**self.environ, **t.config.env}
        env["LOOPKIT_STATE_DIR"] = str(tree.parent / (tree.name + ".state"))
        rounds: list[dict[str, Any]] = []
        code: int | None = None
        err_path = self.state / "documents" / f"{slug}.err"
        for _ in range(self.suite.attempts):
            running = proc.spawn(
                [*lk_argv(), "attempt", "--contract", str(contract)],
                cwd=tree,
                env=env,
                stdin=json.dumps(doc).encode(),
                stderr_path=err_path,
                timeout=self.suite.timeout * 2 + 600,
            )
            out = b"".join(running.lines())
            code = running.wait().exit_code
            try:
                after = json.loads(out) if out.strip() else None
            except ValueError:
                after = None
            if not isinstance(after, dict):
                return self._result(
                    t, rounds, code, started, infra=f"lk attempt exit {code}, no document"
                )
            rounds.append(after)
            if code not in (10, 11) or _infra(after, code):
                break
            doc = after
        from loopkit.files import atomic_write

        atomic_write(self.state / "documents" / f"{slug}.json", json.dumps(rounds) + "\n")
        last = rounds[-1]
        return self._result(t, rounds, code, started, infra=_infra(last, code))

    def _result(
        self,
        t: Trial,
        rounds: list[dict[str, Any]],
        code: int | None,
        started: float,
        *,
        infra: str | None,
    ) -> dict[str, Any]:
        wall = time.monotonic() - started
        last = rounds[-1] if rounds else {}
        decision = last.get("decision") or {}
        runs = [r.get("run") or {} for r in rounds]
        agent_s = sum(float(r.get("duration_s") or 0) for r in runs)
        costs = [_cost(r) for r in runs]
        known = [c for c in costs if c is not None]
        passed = decision.get("outcome") == "complete" and not infra
        claimed = any(bool(r.get("claimed_complete")) for r in runs)
        return {
            "key": t.key,
            "config": t.config.name,
            "task": t.task.id,
            "repeat": t.repeat,
            "status": "infra" if infra else ("passed" if passed else "failed"),
            "infra": infra,
            "outcome": decision.get("outcome"),
            "failure_class": decision.get("failure_class"),
            "exit_code": code,
            "rounds": len(rounds),
            "claimed": claimed,
            "false_claim": bool(claimed and not passed and not infra),
            "scope_violation": any(
                (r.get("diff") or {}).get("within_policy") is False for r in rounds
            ),
            "cost_usd": round(sum(known), 6) if known and len(known) == len(costs) else None,
            "tokens": sum(
                int((r.get("usage") or {}).get("input_tokens") or 0)
                + int((r.get("usage") or {}).get("output_tokens") or 0)
                for r in runs
            ),
            "wall_s": round(wall, 3),
            "agent_s": round(agent_s, 3),
            "overhead_s": round(max(0.0, wall - agent_s), 3),
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }


def _cost(run: Mapping[str, Any]) -> float | None:
    """The run's trusted cost: the meter's when its price table holds for the host that
    answered, else the CLI's own figure when trusted; None when neither is."""
    meter = (run.get("meter") or {}).get("cost") or {}
    if meter.get("trusted") and isinstance(meter.get("usd"), (int, float)):
        return float(meter["usd"])
    cost = run.get("cost") or {}
    if cost.get("trusted") and isinstance(cost.get("usd"), (int, float)):
        return float(cost["usd"])
    return None


def _infra(doc: Mapping[str, Any], code: int | None) -> str | None:
    """Why a finished attempt is the infrastructure's failure, not the agent's; None
    when it is the agent's to answer for (or a success)."""
    if code in (3, 4, 70) or code is None:
        return f"lk attempt exit {code}"
    decision = doc.get("decision") or {}
    run = doc.get("run") or {}
    cls = decision.get("failure_class")
    if cls in INFRA_CLASSES:
        return str(cls)
    stop = run.get("stop_reason")
    if stop in INFRA_STOPS and decision.get("outcome") != "complete":
        return str(stop)
    return None
