"""The merge queue: green attempts land one at a time, each verified on top of what landed
before it.

Workers never move the target branch. A complete attempt is *queued* (``add``): its
verified tree is kept as a commit on the commit it started from, under
``refs/loopkit/queue/<entry>``, and an entry file records it. One *lander* (``land``,
holding the queue's lock) takes the entries in order and, for each:

1. rebuilds it on the branch's current tip: the entry's tree as it stands when the tip is
   its base, else a 3-way merge of the entry's commit onto the tip (``git merge-tree
   --write-tree``: plumbing, no work tree, no index);
2. verifies exactly that tree as ``lk-verify`` does for an attempt, in this process
   (``stages.verify_tree``): the repository's clean room synced to it, every check in the
   checks' sandbox -- unless the tree was verified already: the entry's own verification
   when the merge gave back its tree unchanged, or an earlier run's for the same tree and
   contract;
3. moves the branch by compare-and-swap (``git update-ref BRANCH NEW TIP``): the verified
   commit, then, when the entry names a checklist, a commit marking its task done. A tip
   that moved meanwhile is not a failure: the entry is rebuilt on the new tip.

A conflicting or red entry is *returned*: never resolved by a model, never landed. Its
task gets a decided document (``decision.outcome: retry``, the lander's checks and a
feedback naming what landed since) that the task's next attempt reads as its previous
attempt, so the handoff carries the failure.

Every step is journaled (``<common git dir>/loopkit/queue/lander.json``) before it acts,
and every step can be done again: a lander stopped anywhere (kill -9 included) is finished
by the plain rerun -- a landing whose compare-and-swap went through is recorded as landed,
one that did not is rebuilt, a verification that finished is reused.

Layout, in the repository's common git folder (shared by every worktree, read-only to a
sandboxed worker): ``loopkit/queue/entries/<id>.json`` (the entries),
``docs/<id>.json`` (each entry's decided document), ``returned/<id>.json`` (the document
a returned entry hands its task), ``verified/<tree>-<contract>.json`` (verifications by
tree), ``lander.json`` (the journal), ``lander.flock`` and ``loop.lock`` (the lander's lock:
the flock its process holds, the pid it names). Landers before this one kept a worktree
``room/`` there for their checks; none is made now.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from pathlib import Path

from loopkit import digest, git, gitstore
from loopkit.errors import BadInput, EnvironmentProblem, LoopkitError
from loopkit.exitcodes import ExitCode
from loopkit.files import atomic_write
from loopkit.ratchet import lock, trees

TYPE_CHECKING = False  # typing stays unloaded at run time (start-up is a feature)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping
    from typing import Any

    from loopkit.sections import QueueEntry

    #: lk-verify's run of a tree in the clean room: (checkout, tree, contract path) to
    #: the verify section.
    Verifier = Callable[[Path, str, str], dict[str, Any]]

REFS = "refs/loopkit/queue/"
#: Per branch, the last tip the lander trusts: one it landed, or one it verified green.
TRUSTED = "refs/loopkit/trusted/"
#: The record of tips refused (one JSON object a line, in the queue's folder).
UNTRUSTED = "untrusted.jsonl"
ENTRY_KIND = "loopkit/queue-entry"
JOURNAL_KIND = "loopkit/queue-journal"
#: How often one entry is rebuilt because the tip moved under the lander before it gives up.
MAX_REBUILDS = 20


class Untrusted(LoopkitError):
    """The branch's tip is a commit the queue did not land and its checks fail: exit 40."""

    code = ExitCode.NOT_LANDED


class NotQueued(LoopkitError):
    """An attempt the queue does not take (not complete, no verified tree): exit 40."""

    code = ExitCode.NOT_LANDED


def _quiet(_: str) -> None:
    return None


class Queue:
    """The queue of the repository at ``root`` (any of its worktrees)."""

    def __init__(self, root: Path, *, say: Callable[[str], None] = _quiet) -> None:
        self.root = root
        self.folder = git.git_dirs(root).common / "loopkit" / "queue"
        self.say = say

    # ------------------------------------------------------------------ the files

    def _dir(self, name: str) -> Path:
        path = self.folder / name
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise EnvironmentProblem(f"cannot write {e.filename or path}: {e.strerror}") from None
        return path

    def _write(self, path: Path, data: Mapping[str, Any]) -> None:
        try:
            atomic_write(path, json.dumps(data, indent=1) + "\n", sync=True)
        except OSError as e:
            raise EnvironmentProblem(f"cannot write {e.filename or path}: {e.strerror}") from None

    def _read(self, path: Path) -> dict[str, Any] | None:
        try:
            data = json.loads(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def _read_entry(self, path: Path) -> QueueEntry | None:
        """An entry's file as ``_save_entry`` wrote it (None when missing or unreadable)."""
        try:
            data: QueueEntry = json.loads(path.read_bytes())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def entries(self) -> list[QueueEntry]:
        """Every entry, oldest first."""
        folder = self.folder / "entries"
        if not folder.is_dir():
            return []
        out = []
        for p in sorted(folder.glob("*.json")):
            data = self._read_entry(p)
            if data and data.get("kind") == ENTRY_KIND:
                out.append(data)
        return sorted(out, key=lambda e: int(e.get("seq") or 0))

    def _save_entry(self, entry: Mapping[str, Any]) -> None:
        self._write(self._dir("entries") / f"{entry['id']}.json", entry)

    def out(self, args: list[str], **kw: Any) -> str:
        return git.out(args, cwd=self.root, **kw)

    def ok(self, args: list[str]) -> bool:
        return git.git(args, cwd=self.root, check=False).exit_code == 0

    def tip(self, onto: str) -> str:
        done = git.git(
            ["rev-parse", "-q", "--verify", f"{onto}^{{commit}}"], cwd=self.root, check=False
        )
        if done.exit_code != 0:
            raise EnvironmentProblem(f"the branch {onto} has no commit in {self.root}")
        return done.stdout.decode().strip()

    # ------------------------------------------------------------------ add

    def add(
        self,
        document: Mapping[str, Any],
        *,
        onto: str | None = None,
        tasks: str | None = None,
        source: str = "<stdin>",
        worktree: Path | None = None,
    ) -> QueueEntry:
        """Queue a complete attempt: its verified tree as a commit on its base, under a ref,
        and an entry. Adding the same task's same tree again returns the entry there is.
        ``worktree``: where it ran, the document being the one ``lk attempt --keep`` kept
        (``source``): an attempt with ``intruders`` is refused (40), nothing queued."""
        decision = document.get("decision") or {}
        verify = document.get("verify") or {}
        task = document.get("task") or {}
        task_id = str(task.get("id") or "")
        if not task_id:
            raise BadInput(source, "no task.id: expected a decided attempt document", path="$.task")
        if decision.get("outcome") != "complete":
            raise NotQueued(
                f"{task_id}: only a complete attempt is queued (decision.outcome is "
                f"{decision.get('outcome')!r})"
            )
        tree = str(verify.get("tree") or "")
        if not verify.get("passed") or not git.is_object_id(tree):
            raise NotQueued(f"{task_id}: no verified tree (verify.tree, verify.passed)")
        run = document.get("run") or {}
        diff = document.get("diff") or {}
        base = str(run.get("base") or diff.get("base") or "")
        if not git.is_object_id(base) or not self.ok(["cat-file", "-e", f"{base}^{{commit}}"]):
            raise NotQueued(f"{task_id}: the attempt's base commit ({base or 'none'}) is not here")
        if not self.ok(["cat-file", "-e", f"{tree}^{{tree}}"]):
            raise NotQueued(f"{task_id}: the verified tree {tree} is not in this repository")
        if worktree is not None:
            found = self.intruders(Path(source), worktree, base)
            if found:
                raise NotQueued(
                    f"{task_id}: refused, written by a process not its worker's: "
                    + "; ".join(found)
                )
        onto = onto or self._branch()
        if not onto.startswith("refs/"):
            onto = f"refs/heads/{onto}"
        self.tip(onto)

        with lock.guard(self._dir("")):
            for e in self.entries():
                if e["task"] == task_id and e["tree"] == tree and e["status"] == "queued":
                    return e
            seq = max((int(e.get("seq") or 0) for e in self.entries()), default=0) + 1
            entry_id = f"{seq:06d}-{git.ref_component(task_id)}"
            message = f"loopkit queue: {task_id}\n\n{str(task.get('text') or '')[:400]}"
            commit = self.out(["commit-tree", tree, "-p", base, "-m", message])
            ref = REFS + entry_id
            # No old value: a ref without an entry is one a stopped ``add`` left (under the
            # guard, no other add is writing it).
            self.out(["update-ref", "-m", "loopkit: queue", ref, commit])
            doc_path = self._dir("docs") / f"{entry_id}.json"
            self._write(doc_path, document)
            entry: QueueEntry = {
                "kind": ENTRY_KIND,
                "version": 1,
                "seq": seq,
                "id": entry_id,
                "task": task_id,
                "text": str(task.get("text") or ""),
                "tree": tree,
                "base": base,
                "commit": commit,
                "ref": ref,
                "onto": onto,
                "tasks": _repo_path(self.root, tasks) if tasks else "",
                "document": str(doc_path),
                "status": "queued",
            }
            self._save_entry(entry)
        return entry

    def _branch(self) -> str:
        done = git.git(["symbolic-ref", "-q", "HEAD"], cwd=self.root, check=False)
        if done.exit_code != 0:
            raise EnvironmentProblem(
                f"HEAD is detached in {self.root}: name the branch to land on (--onto)"
            )
        return done.stdout.decode().strip()

    # ------------------------------------------------------------------ land

    def land(
        self,
        contract: Path,
        *,
        verify: Verifier,
        owner: int | None = None,
        wait: bool = False,
    ) -> dict[str, Any]:
        """Land every queued entry in order (see the module's docstring); returns what
        landed and what was returned. Refused (exit 4) while another lander runs.
        ``verify`` is lk-verify's run of a tree (``stages.verify_tree``, handed down by
        the command so this layer does not reach up to the stages)."""

        try:
            contract_sha = digest.sha256(contract.read_bytes()).hexdigest()
        except OSError as e:
            raise EnvironmentProblem(f"cannot read {contract}: {e.strerror}") from None
        landed: list[dict[str, Any]] = []
        returned: list[dict[str, Any]] = []
        with self._lander(owner, wait=wait):
            self.contract, self.contract_sha, self.verify = contract, contract_sha, verify
            recovered = self._recover()
            if recovered is not None:
                landed.append(recovered)
            here = git.git(["symbolic-ref", "-q", "HEAD"], cwd=self.root, check=False)
            if here.exit_code == 0:  # the first lander here trusts the tip it finds
                self._first_trust(here.stdout.decode().strip())
            for entry in self.entries():
                if entry["status"] != "queued":
                    continue
                result = self._land_one(entry)
                (landed if result["status"] == "landed" else returned).append(result)
        return {"landed": landed, "returned": returned}

    @contextlib.contextmanager
    def _lander(self, owner: int | None, *, wait: bool) -> Iterator[None]:
        """Hold the queue's lock (one lander at a time); ``wait`` while another holds it,
        else refuse (exit 4). What tells a live lander is an ``flock`` on ``lander.flock``
        that the lander's process holds while it lands: a dead process holds none -- a
        zombie no parent reaps, a pid used again by another process. ``loop.lock`` names
        the holder (its pid) for a person."""

        folder = self._dir("")
        pid = owner or os.getpid()
        try:
            live = os.open(folder / "lander.flock", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as e:
            raise EnvironmentProblem(f"cannot write {e.filename}: {e.strerror}") from None
        try:
            while True:
                try:
                    fcntl.flock(live, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    pass
                if not wait:
                    other = lock.read(folder / lock.LOCK_NAME)[0] or "unknown"
                    raise EnvironmentProblem(
                        f"another lander (pid {other}) is landing this repository's queue: "
                        f"one lander at a time. Wait for it to end, or stop it (kill {other})"
                    )
                time.sleep(0.2)  # --wait: the other lander lands what this one would have
            with lock.guard(folder):
                gone = lock.read(folder / lock.LOCK_NAME)[0]
                if gone and gone != pid:  # its flock is free: that lander is gone
                    lock.release(folder, gone)
                lock.take(folder, pid, self.root)
            if gone and gone != pid:
                self.say(f"took over the queue's lock from a lander that is gone (pid {gone})")
            try:
                yield
            finally:
                with lock.guard(folder):
                    lock.release(folder, pid)
        finally:
            os.close(live)  # the flock goes with it

    # ------------------------------------------------------------------ plants

    def sweep(self, state: Path, *, owner: int | None = None) -> list[dict[str, Any]]:
        """What appeared in this checkout that no lander wrote: saved under
        ``refs/loopkit/planted/``, recorded, the checkout brought back to its commit
        (``loopkit.ratchet.plants``). Holds the queue's lock: never beside a landing."""
        from loopkit.ratchet import plants

        # Nothing there (the usual case): no wait for a landing in progress. A plant stays
        # until swept, so this look, which only reads, never misses one.
        if not plants.changed(self.root, "HEAD", refresh=False):
            return []
        with self._lander(owner, wait=True):
            found = plants.sweep(self._dir(""), self.root, state)
        if found:
            paths = ", ".join(str(p["path"]) for p in found)
            self.say(
                f"written into the checkout by no lander: {paths}; saved as {found[0]['ref']}, "
                "the checkout brought back to its commit"
            )
        return found

    def intruders(self, kept: Path, worktree: Path, base: str) -> list[str]:
        """Why the attempt kept as ``kept`` (by ``lk attempt --keep``), run in
        ``worktree`` from ``base``, is not its own worker's work alone (none: it is)."""
        from loopkit.ratchet import plants

        ran = plants.span(kept)
        if ran is None:
            raise BadInput(
                str(kept),
                "not a document lk attempt --keep P kept (no P-admit.json beside it): "
                "--worktree reads when its worker ran from P-worker and P-invoke.json",
            )
        return plants.intruders(worktree, base, ran, plants.read(self.folder))

    def _journal(self) -> Path:
        return self.folder / "lander.json"

    def _note(self, data: dict[str, Any]) -> None:
        data["kind"] = JOURNAL_KIND
        data["version"] = 1
        self._write(self._journal(), data)

    def _forget(self) -> None:
        try:
            self._journal().unlink()
        except FileNotFoundError:
            pass

    def _recover(self) -> dict[str, Any] | None:
        """Finish what a stopped lander left: a landing whose compare-and-swap went through
        is recorded as landed (and the checkout brought along); anything else is done
        again from the start (verifications already made are reused)."""
        j = self._read(self._journal())
        if not j or j.get("kind") != JOURNAL_KIND:
            self._forget()
            return None
        entry = self._read_entry(self.folder / "entries" / f"{j.get('entry')}.json")
        if entry is None or entry.get("status") != "queued" or j.get("phase") != "landing":
            self._forget()
            return None
        commit = str(j["commit"])
        now = self.tip(str(entry["onto"]))
        if now == commit or self.ok(["merge-base", "--is-ancestor", commit, now]):
            self.say(f"{entry['task']}: finishing a landing a stopped lander left ({commit[:12]})")
            return self._landed(entry, j)
        self._forget()
        return None

    def _land_one(self, entry: QueueEntry) -> dict[str, Any]:
        onto = str(entry["onto"])
        for _ in range(MAX_REBUILDS):
            tip = self.tip(onto)
            self._trusted(onto, tip)
            tree, conflicts = self._rebuild(entry, tip)
            if conflicts is not None:
                return self._return(entry, tip, conflicts=conflicts)
            self._note({"entry": entry["id"], "phase": "verifying", "tip": tip, "tree": tree})
            verify, how = self._verification(entry, tree, tip)
            if not verify.get("passed"):
                return self._return(entry, tip, verify=verify)
            verified = self.out(
                [
                    "commit-tree",
                    tree,
                    "-p",
                    tip,
                    "-m",
                    f"loopkit: {entry['task']}: {_subject(entry['text'])}\n\n"
                    f"Landed through the queue ({entry['id']}): verified on top of {tip[:12]}.",
                ]
            )
            self._attest(entry, verify, verified, tip)
            final = self._mark(entry, verified)
            j = {
                "entry": entry["id"],
                "phase": "landing",
                "tip": tip,
                "tree": tree,
                "verified": verified,
                "commit": final,
                "verification": how,
            }
            self._note(j)
            if self.ok(["update-ref", "-m", f"loopkit: land {entry['id']}", onto, final, tip]):
                return self._landed(entry, j)
            self.say(
                f"{entry['task']}: {onto} moved while it was verified; rebuilding on the new tip"
            )
            self._forget()
        raise EnvironmentProblem(f"{onto} kept moving: {entry['id']} rebuilt {MAX_REBUILDS} times")

    def _attest(
        self, entry: Mapping[str, Any], verify: Mapping[str, Any], commit: str, tip: str
    ) -> None:
        """The landing's signed statement, ``commit``'s note (loopkit.attest.landing)."""
        from loopkit.attest import landing

        doc = dict(self._read(Path(str(entry["document"]))) or {})
        doc["verify"] = verify
        landing.record(
            self.root,
            doc,
            commit=commit,
            tree=str(verify.get("tree") or ""),
            base=tip,
            state=self.root / ".loopkit",
            bookkeeping=[str(entry.get("tasks") or "")],
            say=self.say,
        )

    def _first_trust(self, onto: str) -> None:
        """Trust ``onto``'s tip when nothing is trusted there yet (the first lander): no
        check here -- a tip moved since is verified when an entry lands on it."""
        ref = TRUSTED + onto.removeprefix("refs/heads/")

        def exists(name: str) -> bool:
            done = git.git(["rev-parse", "-q", "--verify", name], cwd=self.root, check=False)
            return done.exit_code == 0

        if not exists(ref) and exists(onto):  # an unborn branch has nothing to trust
            self._trust(onto, self.tip(onto))

    def _trust(self, onto: str, commit: str) -> None:
        ref = TRUSTED + onto.removeprefix("refs/heads/")
        self.out(["update-ref", "-m", "loopkit: a tip the queue trusts", ref, commit])

    def _trusted(self, onto: str, tip: str) -> None:
        """Build only on a tip the queue trusts: one it landed, or a commit made outside it
        (a person's) whose checks pass -- verified here before anything is built on it. A
        tip whose checks fail (a worker without a sandbox moving the branch, say) is
        refused (exit 40), recorded in ``untrusted.jsonl``, and nothing lands on it. The
        first lander of a branch trusts the tip it finds."""
        ref = TRUSTED + onto.removeprefix("refs/heads/")
        done = git.git(["rev-parse", "-q", "--verify", ref], cwd=self.root, check=False)
        known = done.stdout.decode().strip()
        if done.exit_code != 0 or known == tip:
            if done.exit_code != 0:
                self._trust(onto, tip)
            return
        # Verified afresh, never from the cache: what put the tip there could write it too.
        tree = self.out(["rev-parse", f"{tip}^{{tree}}"])
        self.say(f"{onto} is at {tip[:12]}, a commit the queue did not land: verifying it")
        verify = self._run_verify(tree)
        if verify.get("passed"):
            self.say(f"{onto}: {tip[:12]} (not landed by the queue) is green: landing on it")
            self._trust(onto, tip)
            return
        failed = [str(c.get("name")) for c in verify.get("checks") or () if not c.get("passed")]
        with open(self.folder / UNTRUSTED, "a", encoding="utf-8") as f:
            f.write(json.dumps({"branch": onto, "tip": tip, "trusted": known, "failed": failed})
                    + "\n")  # fmt: skip
        raise Untrusted(
            f"{onto} is at {tip[:12]}, a commit the queue did not land, and its checks fail "
            f"({', '.join(failed) or 'lk-verify'}): nothing lands on it; the queue last landed "
            f"{known[:12]} (to go back: git update-ref {onto} {known} {tip})"
        )

    def _rebuild(self, entry: Mapping[str, Any], tip: str) -> tuple[str, list[str] | None]:
        """The entry's tree on ``tip``, or the paths that conflict."""
        if entry["base"] == tip:
            return str(entry["tree"]), None
        done = git.git(
            [
                "merge-tree",
                "--write-tree",
                "--name-only",
                "--no-messages",
                tip,
                str(entry["commit"]),
            ],
            cwd=self.root,
            check=False,
        )
        lines = done.stdout.decode("utf-8", "surrogateescape").splitlines()
        if done.exit_code == 0 and lines and git.is_object_id(lines[0]):
            return lines[0], None
        if done.exit_code == 1 and lines:
            return lines[0], sorted({p for p in lines[1:] if p})
        msg = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise git.GitError(
            f"git merge-tree failed for {entry['id']}: {msg[-1] if msg else done.exit_code}"
        )

    def _verification(
        self, entry: Mapping[str, Any], tree: str, tip: str
    ) -> tuple[dict[str, Any], str]:
        """The verification of ``tree`` and how it was had: ``entry`` (the attempt's own,
        the tree unchanged by the rebuild), ``cache`` (verified before) or ``ran``."""
        if tree == entry["tree"]:
            doc = self._read(Path(str(entry["document"]))) or {}
            verify = doc.get("verify") or {}
            if verify.get("tree") == tree and verify.get("passed"):
                return verify, "entry"
        cache = self._dir("verified") / f"{tree}-{self.contract_sha[:16]}.json"
        known = self._read(cache)
        if known and known.get("tree") == tree:
            return known, "cache"
        self.say(f"{entry['task']}: verifying {tree[:12]} (on top of {tip[:12]})")
        verify = self._run_verify(tree)
        self._write(cache, verify)
        return verify, "ran"

    def _run_verify(self, tree: str) -> dict[str, Any]:
        """lk-verify's run of ``tree`` in the repository's clean room, in the checks'
        sandbox (``stages.verify_tree``, in this process): the room synced to ``tree`` from
        the object store and shown at this checkout's path, the checkout's carried paths
        (``verify.carry``) linked in read-only, as for an attempt."""
        try:
            verify = self.verify(self.root, tree, str(self.contract))
        except BadInput as e:  # the contract: lk-verify could not run (exit 4, as ever)
            raise EnvironmentProblem(f"lk-verify could not verify {tree[:12]}: {e}") from None
        if verify.get("tree") != tree:
            raise EnvironmentProblem(
                f"the clean room did not hold {tree[:12]} when it was verified "
                f"(it held {str(verify.get('tree'))[:12]})"
            )
        return verify

    def _mark(self, entry: Mapping[str, Any], commit: str) -> str:
        """A commit on ``commit`` marking the entry's task done in its checklist (when it
        names one and the line is not marked yet), else ``commit``."""
        tasks = str(entry.get("tasks") or "")
        if not tasks:
            return commit
        done = git.git(
            ["rev-parse", "-q", "--verify", f"{commit}:{tasks}"], cwd=self.root, check=False
        )
        if done.exit_code != 0:
            return commit
        from loopkit.plan.marking import apply_edit, plan_edit

        raw = git.blob(self.root, done.stdout.decode().strip())
        try:
            edit = plan_edit(raw, Path(tasks), str(entry["task"]), "done", None, source=tasks)
        except LoopkitError as e:
            self.say(f"{entry['task']}: not marked in {tasks}: {e}")
            return commit
        if not edit.changed:
            return commit
        blob = gitstore.write_blob(self.root, apply_edit(edit, raw))

        where = trees.Where(self.root, git.git_dirs(self.root).own, self.root / ".loopkit")
        with trees.scratch_index(where) as index:
            env = {"GIT_INDEX_FILE": str(index)}
            self.out(["read-tree", commit], env=env)
            mode = self.out(["ls-tree", commit, "--", tasks]).split(" ", 1)[0] or "100644"
            self.out(["update-index", "--cacheinfo", f"{mode},{blob},{tasks}"], env=env)
            tree = self.out(["write-tree"], env=env)
        return self.out(
            ["commit-tree", tree, "-p", commit, "-m", f"loopkit: mark {entry['task']} done"]
        )

    def _landed(self, entry: QueueEntry, j: Mapping[str, Any]) -> dict[str, Any]:
        self._bring_checkout(str(entry["onto"]), str(j["tip"]), str(j["commit"]))
        entry["status"] = "landed"
        entry["landed"] = {
            "commit": j["commit"],
            "verified": j.get("verified") or j["commit"],
            "tree": j["tree"],
            "tip": j["tip"],
            "verification": j.get("verification") or "ran",
        }
        self._trust(str(entry["onto"]), str(j["commit"]))
        self._save_entry(entry)
        self._forget()
        self.say(
            f"{entry['task']}: landed as {str(j['commit'])[:12]} on {entry['onto']} "
            f"(verification {entry['landed']['verification']})"
        )
        return {"id": entry["id"], "task": entry["task"], "status": "landed", **entry["landed"]}

    def _bring_checkout(self, onto: str, old: str, new: str) -> None:
        """The checkout the lander runs in, when it is on ``onto``: its index and files
        brought from ``old`` to ``new`` as a fast-forward would (a two-tree read-tree,
        which refuses to overwrite a local change)."""
        done = git.git(["symbolic-ref", "-q", "HEAD"], cwd=self.root, check=False)
        if done.exit_code != 0 or done.stdout.decode().strip() != onto:
            return
        # Stat data first: an index whose entries look changed (a copied or touched checkout)
        # makes read-tree refuse what is only a stale stat.
        git.git(["update-index", "-q", "--refresh"], cwd=self.root, check=False)
        if git.git(["read-tree", "-u", "-m", old, new], cwd=self.root, check=False).exit_code != 0:
            self.say(
                f"{onto} landed at {new[:12]}; this checkout's files were left as they were "
                f"(local changes): `git status` shows them against the new tip"
            )

    def _return(
        self,
        entry: QueueEntry,
        tip: str,
        *,
        conflicts: list[str] | None = None,
        verify: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Hand the entry back to its task: a decided document (retry, with the failure as
        feedback) its next attempt reads as the previous one."""
        doc = self._read(Path(str(entry["document"]))) or {"kind": "loopkit/attempt", "version": 1}
        since = self.out(["log", "--format=%h %s", "-n", "10", f"{entry['base']}..{tip}"])
        landed = (
            f" What landed since it began ({entry['base'][:12]}..{tip[:12]}):\n{since}"
            if since
            else ""
        )
        if conflicts is not None:
            reason = f"queue: conflicts with what landed on {entry['onto']} since it began"
            feedback = (
                "Your change passed its checks alone, but it conflicts with what landed "
                f"before it in: {', '.join(conflicts[:20])}.{landed}\nStart again from the "
                "new tip and make your change on top of it."
            )
        else:
            assert verify is not None
            failed = [c.get("name") for c in verify.get("checks") or [] if not c.get("passed")]
            reason = f"queue: red on top of {tip[:12]} ({', '.join(map(str, failed)) or 'checks'} failed)"
            feedback = (
                "Your change passed its checks alone, but on top of what landed before it "
                f"the checks fail: {', '.join(map(str, failed))}.{landed}\nMake your change "
                "work together with what landed."
            )
            doc["verify"] = dict(verify)
        # The next attempt begins afresh on the new tip, not in place: what the first run
        # found at its start (its base, HEAD, the control state of .git) is not carried.
        doc.pop("run", None)
        doc.pop("diff", None)
        decision = dict(doc.get("decision") or {})
        decision.update(
            outcome="retry",
            reason=reason,
            failure_class="verification_failure",
            feedback=feedback,
            backoff_s=None,
        )
        decision.pop("exit_code", None)
        doc["decision"] = decision
        path = self._dir("returned") / f"{entry['id']}.json"
        self._write(path, doc)
        entry["status"] = "returned"
        entry["returned"] = {
            "reason": reason,
            "tip": tip,
            "conflicts": conflicts or [],
            "document": str(path),
        }
        self._save_entry(entry)
        self._forget()
        self.say(f"{entry['task']}: returned to its task -- {reason}")
        return {"id": entry["id"], "task": entry["task"], "status": "returned", **entry["returned"]}


def _subject(text: str) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= 60 else line[:57] + "..."


def _repo_path(root: Path, path: str) -> str:
    """``path`` (a checklist) relative to the repository's root, as git names it."""
    full = Path(path)
    if not full.is_absolute():
        full = Path.cwd() / full
    try:
        return full.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        raise BadInput(path, f"not inside the repository {root}") from None
