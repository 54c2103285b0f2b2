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
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from loopkit import git, loader, proc
from loopkit.errors import BadInput
from loopkit.eval import identity
from loopkit.eval.suite import Config, Suite, Task
from loopkit.files import atomic_write
from loopkit.worker import providers

RESULTS = "trials.jsonl"
#: The commit each (repository, base) was pinned to by the eval's first run.
PINS = "pins.json"
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
        #: What defines it (``Runner.identify``): set before it runs.
        self.hashes: identity.Hashes | None = None

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
        #: The first task's pinned base (the suite's, unless every task has its own).
        self.base = ""
        #: Each task's pinned base commit.
        self.bases: dict[str, str] = {}
        self._contracts: dict[tuple[Path, str], dict[str, Any]] = {}
        self._configs: dict[str, tuple[str, dict[str, object]]] = {}
        #: The prefix of this eval's trees in the system's temporary folder (hidden
        #: tests' tasks): a rerun removes those a killed run left, and no other eval's.
        self.temp_prefix = f"loopkit-eval-{identity.digest(str(state.resolve()))}-"

    def __getstate__(self) -> dict[str, object]:
        """What a Ray task gets (``loopkit.eval.cluster``): all but the locks and the
        progress line, which stay with the run that started it."""
        return {
            k: v for k, v in self.__dict__.items() if k not in ("_git_lock", "_write_lock", "say")
        }

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._git_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self.say = lambda _line: None

    def repo_of(self, task: Task) -> Path:
        return task.repo or self.suite.repo

    # -- set-up ---------------------------------------------------------------------
    def prepare(self, *, clear: bool = True) -> None:
        """Pin each task's base, read the contract there, clear what a killed run left.

        A base is pinned once per eval: the first run writes ``pins.json`` and every
        rerun starts from the same commits, wherever the branch has moved since (a
        report reads them too). ``clear=False``: only read (``lk eval report``)."""

        pins = self._read_pins()
        fresh = False
        for task in self.suite.tasks:
            repo, ref = self.repo_of(task), task.base or self.suite.base
            key = f"{repo}@{ref}"
            if key not in pins:
                pins[key] = self._resolve(repo, ref)
                fresh = True
            self.bases[task.id] = pins[key]
            self._contract_at(repo, pins[key])
        self.base = self.bases[self.suite.tasks[0].id]
        if not clear:
            return
        self.state.mkdir(parents=True, exist_ok=True)
        if fresh:
            atomic_write(self.state / PINS, json.dumps(pins, indent=2, sort_keys=True) + "\n")
        self._clear_trees()
        for folder in ("contracts", "configs", "documents"):
            (self.state / folder).mkdir(exist_ok=True)

    def _read_pins(self) -> dict[str, str]:
        try:
            data = json.loads((self.state / PINS).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}

    def _resolve(self, repo: Path, ref: str) -> str:

        try:
            return git.out(["rev-parse", "--verify", f"{ref}^{{commit}}"], cwd=repo).strip()
        except git.GitError:
            raise BadInput(
                str(self.suite.path), f"$.base: {ref!r} is no commit of {repo}"
            ) from None

    def _contract_at(self, repo: Path, base: str) -> dict[str, Any]:
        """The suite's contract as it is at ``base`` ({} without one)."""

        if (repo, base) in self._contracts:
            return self._contracts[(repo, base)]
        found: dict[str, Any] = {}
        if self.suite.contract:
            try:
                data = loader.yaml_load(
                    git.out(["show", f"{base}:{self.suite.contract}"], cwd=repo)
                )
            except (git.GitError, ValueError) as e:
                raise BadInput(
                    str(self.suite.path), f"$.contract: {self.suite.contract} at {base[:12]}: {e}"
                ) from None
            found = dict(data) if isinstance(data, dict) else {}
        self._contracts[(repo, base)] = found
        return found

    def _clear_trees(self) -> None:
        """Remove the worktrees a killed run left: a kill during ``git worktree add``
        leaves its entry locked ("initializing"), which a prune keeps."""

        trees = (self.state / "trees").resolve()
        for repo in dict.fromkeys(self.repo_of(t) for t in self.suite.tasks):
            listed = self._git(["worktree", "list", "--porcelain"], repo)
            for line in listed.splitlines():
                path = line.removeprefix("worktree ").strip()
                if line.startswith("worktree ") and path.startswith(str(trees) + os.sep):
                    try:
                        self._git(["worktree", "unlock", path], repo)
                    except git.GitError:
                        pass  # not locked
            if trees.exists():
                shutil.rmtree(trees, ignore_errors=True)
            self._git(["worktree", "prune"], repo)
        for left in Path(tempfile.gettempdir()).glob(self.temp_prefix + "*"):
            shutil.rmtree(left, ignore_errors=True)

    def _git(self, args: list[str], repo: Path) -> str:

        with self._git_lock:
            return git.out(args, cwd=repo)

    # -- what defines a trial -------------------------------------------------------
    def contract_of(self, config: Config | None, task: Task) -> dict[str, Any]:
        """The trial's contract: the suite's at the task's base, with the task's checks
        and scope and the configuration's worker."""
        base = self._contract_at(self.repo_of(task), self.bases[task.id])
        c: dict[str, Any] = json.loads(json.dumps(base))  # a copy
        c.setdefault("version", 1)
        c.setdefault("objective", task.text)
        if task.criteria is not None:
            c["criteria"] = task.criteria
        scope = dict(c.get("scope") or {})
        if task.scope is not None:
            scope["writable"] = task.scope
        scope.setdefault("writable", ["**"])
        c["scope"] = scope
        if task.hidden is not None:
            # The hidden tests' paths and pytest's conftest files are not the agent's to
            # write: what it leaves there would run beside the hidden tests.
            scope["protected"] = sorted(
                {*scope.get("protected", []), *task.hidden.paths, "conftest.py", "**/conftest.py"}
            )
            # Where the hidden tests are: the repository (its later commits), the eval's
            # folder (other tasks' trees, their documents) and the suite file. A trial
            # without a sandbox to hide them does not run.
            box = dict(c.get("sandbox") or {})
            box["mode"] = "required"
            box["hide"] = sorted(
                {
                    *box.get("hide", []),
                    str(self.repo_of(task)),
                    str(self.state.resolve()),
                    str(self.suite.path),
                }
            )
            c["sandbox"] = box
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
        return c

    def write_contract(self, contract: Mapping[str, Any]) -> Path:
        """The contract's file, named by its hash: the log keeps every one that ran."""

        path = self.state / "contracts" / f"{identity.digest(contract)}.json"
        if not path.exists():
            atomic_write(path, json.dumps(contract, indent=2, sort_keys=True) + "\n")
        return path

    def config_of(self, config: Config) -> tuple[str, dict[str, object]]:
        """The configuration's hash and its record (the provider's executable hashed)."""
        if config.name not in self._configs:
            exe = identity.config_executable(providers.get(config.provider).binary, config.worker)
            path_var = config.env.get("PATH", self.environ.get("PATH"))
            record = identity.config_record(
                provider=config.provider,
                model=config.model,
                worker=config.worker,
                env=config.env,
                version=identity.executable_version(exe, path_var),
            )
            self._configs[config.name] = (identity.digest(record), record)
        return self._configs[config.name]

    def task_hash(self, task: Task) -> str:
        return identity.digest(
            {
                "id": task.id,
                "text": task.text,
                "criteria": task.criteria,
                "scope": task.scope,
                "repo": str(self.repo_of(task)),
                "hidden": None
                if task.hidden is None
                else [task.hidden.source, task.hidden.paths, task.hidden.criteria],
            }
        )

    def identify(self, t: Trial) -> identity.Hashes:
        config, record = self.config_of(t.config)
        t.hashes = identity.trial(
            config=config,
            task=self.task_hash(t.task),
            contract=identity.digest(self.contract_of(t.config, t.task)),
            version=record["provider_version"]
            if isinstance(record["provider_version"], str)
            else None,
            base=self.bases[t.task.id],
            repeat=t.repeat,
        )
        return t.hashes

    def trials(self) -> list[Trial]:
        """Every trial of the suite, in the order they start, each identified."""
        order = schedule(self.suite)
        for t in order:
            self.identify(t)
        return order

    def current(
        self, results: list[dict[str, Any]], order: list[Trial] | None = None
    ) -> tuple[list[dict[str, Any]], int]:
        """The results of the suite as it is now (the last line of each trial), and how
        many lines in the log are of a configuration, task or base it no longer has."""
        wanted = {t.hashes.id for t in (order or self.trials()) if t.hashes}
        mine: dict[str, dict[str, Any]] = {}
        stale = 0
        for r in results:
            if r.get("id") in wanted:
                mine[str(r["id"])] = r
            else:
                stale += 1
        return list(mine.values()), stale

    def cells(
        self, results: list[dict[str, Any]], folder: Path
    ) -> dict[str, dict[str, list[tuple[str, str | None]]]]:
        """Per configuration and task, each trial's status and a link (relative to
        ``folder``) to its transcript, else its documents."""
        out: dict[str, dict[str, list[tuple[str, str | None]]]] = {}
        for r in sorted(results, key=lambda r: (r["config"], r["task"], r["repeat"])):
            kept = [*(r.get("transcripts") or []), r.get("document")]
            href = next((str(k) for k in kept if k), None)
            link = os.path.relpath(self.state.resolve() / href, folder) if href else None
            out.setdefault(r["config"], {}).setdefault(r["task"], []).append((r["status"], link))
        return out

    # -- worktrees ------------------------------------------------------------------
    def fresh_tree(self, slug: str, task: Task) -> Path:
        if task.hidden is not None:
            return self._bare_tree(slug, task)
        tree = self.state / "trees" / slug
        if tree.exists():
            self.drop_tree(tree, task)
        tree.parent.mkdir(parents=True, exist_ok=True)
        self._git(
            ["worktree", "add", "--detach", "--quiet", str(tree), self.bases[task.id]],
            self.repo_of(task),
        )
        return tree

    def _bare_tree(self, slug: str, task: Task) -> Path:
        """A task with hidden tests starts in a repository of its own holding the base
        commit alone (fetched shallow): none of the repository's later commits -- the
        fix, its tests -- is in its objects. It lies in a folder of the system's temporary
        folder, which no other trial's sandbox shows."""

        tree = Path(tempfile.mkdtemp(prefix=self.temp_prefix)) / slug
        tree.mkdir()
        url = self.repo_of(task).resolve().as_uri()
        git.out(["init", "--quiet"], cwd=tree)
        git.out(["fetch", "--quiet", "--depth=1", url, self.bases[task.id]], cwd=tree)
        git.out(["checkout", "--quiet", "--detach", "FETCH_HEAD"], cwd=tree)
        return tree

    def drop_tree(self, tree: Path, task: Task) -> None:
        """Remove a trial's tree and the loopkit state folders beside it."""

        for beside in (".state", ".score"):
            shutil.rmtree(tree.parent / (tree.name + beside), ignore_errors=True)
        if task.hidden is not None:
            shutil.rmtree(tree.parent, ignore_errors=True)
            return
        repo = self.repo_of(task)
        try:
            self._git(["worktree", "remove", "--force", str(tree)], repo)
        except git.GitError:
            shutil.rmtree(tree, ignore_errors=True)
            self._git(["worktree", "prune"], repo)

    def scoring_contract(self, task: Task) -> Path:
        """The contract a task's hidden checks run under (lk verify, hidden tests in)."""
        assert task.hidden is not None
        body = self.contract_of(None, task)
        body["criteria"] = task.hidden.criteria
        return self.write_contract(body)

    def write_hidden(self, tree: Path, task: Task) -> None:
        from loopkit.eval import mine

        assert task.hidden is not None
        mine.write_hidden(self.repo_of(task), task.hidden.source, task.hidden.paths, tree)

    def score(self, tree: Path, task: Task) -> int | None:
        """lk verify's exit code on the hidden checks, the hidden tests written over what
        the trial left (0: they pass)."""
        self.write_hidden(tree, task)
        code, _ = self._verify(tree, self.scoring_contract(task), ".score")
        return code

    # -- validation -----------------------------------------------------------------
    def _validate_hidden(self, task: Task) -> list[str]:
        """Its hidden checks fail at the base (the hidden tests in) and pass with the
        reference."""
        out: list[str] = []
        tree = self.fresh_tree(f"validate--{task.id}", task)
        try:
            code = self.score(tree, task)
            if code == 0:
                out.append(f"task {task.id}: its hidden checks already pass at the base")
            elif code != 1:
                out.append(
                    f"task {task.id}: its hidden checks could not run (lk-verify exit {code})"
                )
        finally:
            self.drop_tree(tree, task)
        if task.reference is None:
            return out
        tree = self.fresh_tree(f"validate--{task.id}--reference", task)
        try:
            why = self._apply_reference(tree, task)
            if why:
                out.append(f"task {task.id}: reference {task.reference}: {why}")
            elif self.score(tree, task) != 0:
                out.append(
                    f"task {task.id}: its reference solution does not pass its hidden checks"
                )
        finally:
            self.drop_tree(tree, task)
        return out

    def validate(self, *, jobs: int = 1) -> list[str]:
        """Each task fails at its base, and its reference (if any) passes: the problems
        (``jobs`` tasks at once)."""

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            return [p for found in pool.map(self._validate, self.suite.tasks) for p in found]

    def _validate(self, task: Task) -> list[str]:
        problems: list[str] = []
        if task.hidden is not None:
            return self._validate_hidden(task)
        body = self.contract_of(None, task)
        if not body.get("criteria"):
            return [f"task {task.id}: no criteria (the task's or the contract's)"]
        contract = self.write_contract(body)
        tree = self.fresh_tree(f"validate--{task.id}", task)
        try:
            code, _ = self._verify(tree, contract)
            if code == 0:
                problems.append(
                    f"task {task.id}: its checks already pass at the base "
                    f"{self.bases[task.id][:12]}"
                )
            elif code != 1:
                problems.append(
                    f"task {task.id}: its checks could not run at the base (lk-verify exit {code})"
                )
            if task.reference is not None:
                why = self._apply_reference(tree, task)
                if why:
                    problems.append(f"task {task.id}: reference {task.reference}: {why}")
                else:
                    code, _ = self._verify(tree, contract)
                    if code != 0:
                        problems.append(
                            f"task {task.id}: its reference solution does not pass its checks"
                        )
        finally:
            self.drop_tree(tree, task)
        return problems

    def _verify(
        self, tree: Path, contract: Path, state: str = ".state"
    ) -> tuple[int | None, bytes]:

        env = {**self.environ, "LOOPKIT_STATE_DIR": str(tree.parent / (tree.name + state))}
        done = proc.run(
            [*lk_argv(), "verify", "--contract", str(contract)], cwd=tree, env=env, timeout=3600
        )
        return done.exit_code, done.output

    def _apply_reference(self, tree: Path, task: Task) -> str | None:

        reference = str(task.reference)
        patch = (self.suite.path.parent / reference).resolve()
        if patch.is_file():
            done = git.git(["apply", "--whitespace=nowarn", str(patch)], cwd=tree, check=False)
            return (
                None if done.exit_code == 0 else done.stderr.decode(errors="replace").strip()[:300]
            )
        try:
            # The diff whole, its last newline too (a patch without it is corrupt).
            diff = git.git(
                ["diff", "--binary", self.bases[task.id], reference], cwd=self.repo_of(task)
            ).stdout
        except git.GitError:
            return "neither a patch file nor a commit"
        done = git.git(["apply", "--whitespace=nowarn", "-"], cwd=tree, input=diff, check=False)
        return None if done.exit_code == 0 else done.stderr.decode(errors="replace").strip()[:300]

    # -- the trials -----------------------------------------------------------------
    def todo(self, only: Sequence[str] = ()) -> list[Trial]:
        """The trials not finished yet, in the order they start (the suite's as it is now:
        a trial of a changed configuration is a new one); ``only``: these configurations'
        alone (a CI matrix's share)."""
        order = self.trials()
        for t in order:
            self.config_log(t.config)
        finished, stale = self.current(read_results(self.state), order)
        done = {r["id"] for r in finished}
        todo = [t for t in order if t.hashes and t.hashes.id not in done]
        if only:
            todo = [t for t in todo if t.config.name in only]
        if done:
            self.say(f"resuming: {len(done)} of {len(order)} trials finished before")
        if stale:
            self.say(
                f"{stale} trial(s) in the log are of another configuration, task or base: not used"
            )
        return todo

    def run(self, *, jobs: int = 1, only: Sequence[str] = ()) -> list[dict[str, Any]]:
        """Run every trial not finished yet, ``jobs`` at once (on a Ray cluster instead:
        ``loopkit.eval.cluster``); the results of all of them."""
        todo = self.todo(only)
        if jobs <= 1:
            for t in todo:
                self.record(self.trial(t))
        else:
            with ThreadPoolExecutor(max_workers=jobs) as pool:
                for result in pool.map(self.trial, todo):
                    self.record(result)
        return read_results(self.state)

    def config_log(self, config: Config) -> None:
        """The configuration's record, named by its hash, in the eval log's folder."""

        digest, record = self.config_of(config)
        path = self.state / "configs" / f"{digest}.json"
        if not path.exists():
            atomic_write(path, json.dumps(record, indent=2, sort_keys=True) + "\n")

    def record(self, result: dict[str, Any]) -> None:
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
        """One trial, its infrastructure failures retried whole in a fresh tree; what every
        try spent is the trial's."""
        contract = self.write_contract(self.contract_of(t.config, t.task))
        tries = Tries(self.suite.infra_retries)
        while True:
            done = tries.add(self.once(t, contract, tries.count + 1))
            if done is not None:
                return done

    def lost(self, t: Trial, tries: int, why: str, started: float) -> dict[str, Any]:
        """The result of a try whose process was lost (a Ray worker or node died): an
        infrastructure failure, its tree removed if it is still there."""
        slug = f"{t.slug}--{tries}"
        if t.task.hidden is None:
            left = [self.state / "trees" / slug]
        else:
            left = list(Path(tempfile.gettempdir()).glob(f"{self.temp_prefix}*/{slug}"))
        for tree in left:
            self.drop_tree(tree, t.task)
        return self._result(t, [], None, started, infra=why)

    def once(self, t: Trial, contract: Path, tries: int) -> dict[str, Any]:
        """The trial's try number ``tries``, in a fresh tree removed after it."""
        slug = f"{t.slug}--{tries}"
        tree = self.fresh_tree(slug, t.task)
        started = time.monotonic()
        try:
            return self._attempts(t, contract, tree, slug, started)
        finally:
            self.drop_tree(tree, t.task)

    def _attempts(
        self, t: Trial, contract: Path, tree: Path, slug: str, started: float
    ) -> dict[str, Any]:

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

        atomic_write(self.state / "documents" / f"{slug}.json", json.dumps(rounds) + "\n")
        saved = self._keep_transcripts(tree, rounds, slug)
        last = rounds[-1]
        infra = _infra(last, code)
        hidden: bool | None = None
        complete = (last.get("decision") or {}).get("outcome") == "complete"
        if t.task.hidden is not None and not infra and complete:
            scored = self.score(tree, t.task)
            if scored not in (0, 1):
                infra = f"the hidden checks could not run (lk-verify exit {scored})"
            hidden = scored == 0
        result = self._result(t, rounds, code, started, infra=infra, hidden=hidden)
        result["document"] = f"documents/{slug}.json"
        result["transcripts"] = saved
        return result

    def _keep_transcripts(self, tree: Path, rounds: list[dict[str, Any]], slug: str) -> list[str]:
        """Each round's transcript, copied beside the trial's documents before its tree
        goes (paths relative to the state folder)."""
        kept: list[str] = []
        for i, doc in enumerate(rounds, 1):
            raw = (doc.get("run") or {}).get("transcript")
            if not isinstance(raw, str) or not raw:
                continue
            source = (tree / raw).resolve()
            name = f"documents/{slug}.{i}.transcript.jsonl"
            try:
                shutil.copyfile(source, self.state / name)
            except OSError:
                continue
            kept.append(name)
        return kept

    def _result(
        self,
        t: Trial,
        rounds: list[dict[str, Any]],
        code: int | None,
        started: float,
        *,
        infra: str | None,
        hidden: bool | None = None,
    ) -> dict[str, Any]:
        """The trial's line; ``hidden``: whether its hidden checks passed (None: the task
        has none, or the decision was not complete)."""
        wall = time.monotonic() - started
        last = rounds[-1] if rounds else {}
        decision = last.get("decision") or {}
        runs = [r.get("run") or {} for r in rounds]
        agent_s = sum(float(r.get("duration_s") or 0) for r in runs)
        spent = [_spent(r) for r in runs]
        costs = [c for c, _, _ in spent]
        passed = decision.get("outcome") == "complete" and not infra and hidden is not False
        if t.task.hidden is not None and hidden is None:
            passed = False
        claimed = any(bool(r.get("claimed_complete")) for r in runs)
        assert t.hashes is not None
        return {
            "key": t.key,
            **t.hashes.record(),
            "config": t.config.name,
            "task": t.task.id,
            "repeat": t.repeat,
            "status": "infra" if infra else ("passed" if passed else "failed"),
            "infra": infra,
            "outcome": decision.get("outcome"),
            "hidden_checks": None if hidden is None else ("passed" if hidden else "failed"),
            "failure_class": decision.get("failure_class"),
            "exit_code": code,
            "rounds": len(rounds),
            "claimed": claimed,
            "false_claim": bool(claimed and not passed and not infra),
            "scope_violation": any(
                (r.get("diff") or {}).get("within_policy") is False for r in rounds
            ),
            # No document, no knowing what the worker spent: unknown, never zero.
            "cost_usd": round(sum(c or 0.0 for c in costs), 6)
            if rounds and None not in costs
            else None,
            "tokens": sum(n for _, n, _ in spent),
            "tokens_from": sorted({src for _, _, src in spent}),
            "wall_s": round(wall, 3),
            "agent_s": round(agent_s, 3),
            "overhead_s": round(max(0.0, wall - agent_s), 3),
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }


class Tries:
    """A trial's tries so far: each infrastructure failure is retried whole, up to
    ``retries`` times; what every try spent is the trial's."""

    def __init__(self, retries: int) -> None:
        self.retries = retries
        self.count = 0
        self.infra: list[str] = []
        self.spent: list[float | None] = []
        self.tokens = 0

    def add(self, result: dict[str, Any]) -> dict[str, Any] | None:
        """Count one try's result: the trial's line when it is the last try, else None
        (one more try is due)."""
        self.count += 1
        self.spent.append(result["cost_usd"])
        self.tokens += int(result["tokens"])
        if result.get("infra"):
            self.infra.append(str(result["infra"]))
            if self.count <= self.retries:
                return None
        result["tries"] = self.count
        result["infra_failures"] = self.infra
        spent = self.spent
        result["cost_usd"] = None if None in spent else round(sum(c or 0.0 for c in spent), 6)
        result["tokens"] = self.tokens
        return result


def _spent(run: Mapping[str, Any]) -> tuple[float | None, int, str]:
    """A run's cost and tokens: the meter's where it ran (what went over the wire,
    whichever CLI or command made the requests), else the CLI's own usage; a run that
    spent no token cost nothing."""
    meter = run.get("meter")
    if isinstance(meter, dict):
        counts = meter.get("tokens") or {}
        tokens = sum(
            int(counts.get(k) or 0) for k in ("input", "output", "cache_read", "cache_write")
        )
        source = "meter"
    else:
        usage = run.get("usage") or {}
        tokens = int(usage.get("input_tokens") or 0) + int(usage.get("output_tokens") or 0)
        source = "cli" if tokens else "none"
    cost = _cost(run)
    if cost is None and tokens == 0:
        cost = 0.0
    return cost, tokens, source


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
