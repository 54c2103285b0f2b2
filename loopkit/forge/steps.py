"""What each ``lk stack`` step does, without click: add (or replace) a verified slice,
restack (move slices onto their new parents, each moved tree verified again), address
(a slice's task run again with its pull request's review, the slices above verified on
it, then pushed), push (every branch at once, atomic with leases, then the pull
requests), land (the bottom slice, by the forge's merge of exactly the verified head),
show."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from loopkit import git
from loopkit.attest import store
from loopkit.document import parse_attempt
from loopkit.errors import BadInput, EnvironmentProblem
from loopkit.forge import address as readdress
from loopkit.forge import body, clients, fleet, onto, proof
from loopkit.forge import push as pushing
from loopkit.forge.stack import (
    FORGES,
    PUSHING,
    Refused,
    Slice,
    Stack,
    Unverified,
    check_name,
    note_return,
    pending,
    read,
    record,
    ref,
    resolve,
    tree_of,
    write,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from loopkit.sections import (
        Attempt,
        Followed,
        Outcome,
        PullShown,
        RemarkShown,
        SliceEvidence,
        StackStep,
        StepSaid,
        VerifySummary,
    )


def _result(step: str, stack: Stack, **extra: Unpack[StepSaid]) -> StackStep:
    return {
        "kind": "loopkit/stack-step",
        "version": 1,
        "step": step,
        "stack": stack.to_json(),
        **extra,
    }


def _ancestor(root: Path, old: str, new: str) -> bool:
    return git.git(["merge-base", "--is-ancestor", old, new], cwd=root, check=False).exit_code == 0


def target_tip(root: Path, stack: Stack) -> str:
    """The target branch now: the remote's (fetched) when the stack has a remote."""
    if stack.remote:
        return pushing.fetch(root, stack.remote, stack.target)
    return resolve(root, f"refs/heads/{stack.target}")


def _verified(root: Path, commit: str, contract: Path, what: str) -> VerifySummary:
    section = proof.verify(root, commit, contract=contract)
    if not section.get("passed"):
        failed = [c.get("name") for c in section.get("checks") or [] if not c.get("passed")]
        why = ", ".join(str(f) for f in failed) or "; ".join(section.get("problems") or []) or "?"
        raise Unverified(f"{what}: its checks failed on tree {section.get('tree')}: {why}")
    return proof.summary(section)


def add(
    root: Path,
    name: str,
    slice_id: str,
    head_rev: str,
    *,
    contract: Path,
    title: str = "",
    branch: str = "",
    target: str = "",
    remote: str = "",
    forge: str = "",
    repo: str = "",
    issue: int | None = None,
    doc: Attempt | None = None,
    ledger: Path | None = None,
    fork_rev: str = "",
) -> StackStep:
    """``fork_rev``: the commit the slice was built on when it is not its parent's head --
    slices built side by side from one base (a CI fan-out) are stacked by restack, each
    moved from that base onto the slice below it."""
    check_name(name)
    if not slice_id or git.ref_component(slice_id) != slice_id:
        raise BadInput("SLICE", f"{slice_id!r}: a slice's id is letters, digits, '-', '_', '.'")
    if forge and forge not in FORGES:
        raise BadInput("--forge", f"{forge!r}: one of {', '.join(FORGES)}")
    stack, old = read(root, name)
    if stack is None:
        stack = Stack(name=name, target=target or "main", remote=remote, forge=forge or "plain")
    for key, value in (("target", target), ("remote", remote), ("forge", forge), ("repo", repo)):
        if value:
            setattr(stack, key, value)
    if issue is not None:
        stack.issue = issue
    if stack.forge != "plain" and not stack.repo:
        raise BadInput("--repo", f"a {stack.forge} stack needs --repo OWNER/NAME")
    head = resolve(root, head_rev)
    tree = tree_of(root, head)
    known = stack.find(slice_id)
    live = stack.live()
    if known is not None and known.merged:
        raise BadInput("SLICE", f"{slice_id} has landed already ({known.merged[:12]})")
    if known is not None and known.closed:
        raise BadInput("SLICE", f"{slice_id} left the stack: {known.closed}")
    if fork_rev:
        fork = resolve(root, fork_rev)
    elif known is not None:
        fork = known.fork
    elif live:
        fork = live[-1].head
    else:
        fork = git.out(["merge-base", target_tip(root, stack), head], cwd=root)
    if not _ancestor(root, fork, head):
        raise Refused(f"{slice_id}: {head[:12]} is not built on its parent {fork[:12]}")
    evidence: SliceEvidence = {}
    section = doc.get("verify") if doc else None
    decision = doc.get("decision") if doc else None
    decided = decision is not None and decision.get("outcome") == "complete"
    if decided and section and section.get("passed") and section.get("tree") == tree:
        evidence["verify"] = proof.summary(section)  # the attempt's own evidence, this tree
    else:
        evidence["verify"] = _verified(root, head, contract, slice_id)
    if doc:
        evidence.update(body.from_document(doc))
    if ledger is not None and evidence.get("task"):
        evidence.update(body.from_ledger(ledger, str(evidence["task"])))
    task = (doc.get("task") if doc else None) or None
    if known is None:
        stack.slices.append(
            Slice(
                id=slice_id,
                branch=branch or f"stack/{name}/{slice_id}",
                title=title or slice_id,
                fork=fork,
                head=head,
                tree=tree,
                evidence=evidence,
                task=task,
            )
        )
    else:
        known.head, known.tree, known.evidence = head, tree, evidence
        known.title = title or known.title
        known.task = task or known.task
    write(root, stack, old, message=f"{'replace' if known else 'add'} {slice_id} at {head[:12]}")
    return _result("add", stack, slice=slice_id)


def _load(root: Path, name: str) -> tuple[Stack, str]:
    stack, old = read(root, check_name(name))
    if stack is None:
        raise BadInput("NAME", f"no stack {name!r} here ({ref(name)} does not exist)")
    if (
        git.git(["rev-parse", "-q", "--verify", pending(name)], cwd=root, check=False).exit_code
        == 0
    ):
        _settle(root, stack, old)
        stack, old = _load(root, name)
    return stack, old


def _settle(root: Path, stack: Stack, old: str) -> None:
    """A push that stopped before it ended (its pending ref left): when the remote holds
    the record it pushed, the local record becomes the pushed one; else the push did not
    happen (it is atomic) and the record stays as it is."""
    current = git.out(["rev-parse", pending(stack.name)], cwd=root)
    meta = git.out(["rev-parse", f"{current}^"], cwd=root)
    said = git.git(
        ["ls-remote", stack.remote, ref(stack.name)], cwd=root, env=pushing.token_env()
    )  # the remote's record now (an unreachable remote: exit 4, settled on the rerun)
    theirs = said.stdout.decode().split("\t", 1)[0].strip()
    if theirs == meta and git.out(["rev-parse", f"{meta}^"], cwd=root) == old:
        _moved(root, stack.name, current, old)
    else:
        git.git(["update-ref", "-d", pending(stack.name)], cwd=root, check=False)


def _moved(root: Path, name: str, current: str, old: str) -> None:
    """The local record moved from ``old`` to the pushed ``current``; the pending ref gone."""
    done = git.git(["update-ref", ref(name), current, old], cwd=root, check=False)
    git.git(["update-ref", "-d", pending(name)], cwd=root, check=False)
    if done.exit_code != 0:
        raise Refused(f"stack {name}: its record moved while it was pushed; run it again")


def _follow(root: Path, stack: Stack, tip: str, *, foreign: bool) -> list[Followed]:
    """What the forge shows of each live slice's pull request, applied to the record: a
    merged one is marked landed (the commit the forge names, which the target must hold),
    a closed one leaves the stack (never reopened); with ``foreign``, an open one whose
    head is not what this stack pushed there was pushed by someone else: Refused, nothing
    changed (else the push's lease refuses it later)."""
    forge = clients.client(stack.forge, stack.repo)
    if forge is None:
        return []
    followed: list[Followed] = []
    for s in stack.live():
        if s.pr is not None:
            try:
                followed += _follow_one(root, stack, s, forge.get_pull(s.pr), tip, foreign)
            except Refused as e:
                note_return(root, stack.name, s.id, "restack", e.message)
                raise
    return followed


def _follow_one(
    root: Path, stack: Stack, s: Slice, pr: clients.Pull, tip: str, foreign: bool
) -> list[Followed]:
    """One slice's pull request followed (``_follow``)."""
    if pr.state == "merged":
        landed = pr.merge_commit
        if not landed:  # a fast-forward merge names no commit: git says what landed
            held = onto.move(root, fork=s.fork, head=s.head, onto=tip)
            landed = tip if tree_of(root, held) == tree_of(root, tip) else ""
        if pr.base != stack.target:
            raise Refused(
                f"{s.id}: #{s.pr} was merged into {pr.base}, not {stack.target}: "
                "not followed, nothing moved"
            )
        if not landed or not _ancestor(root, landed, tip):
            raise Refused(
                f"{s.id}: #{s.pr} merged as {landed[:12] or '?'}, which {stack.target} "
                f"({tip[:12]}) does not hold: nothing moved"
            )
        s.merged = landed
        return [{"slice": s.id, "state": "merged", "pr": s.pr, "landed": landed}]
    if pr.state == "closed":
        s.closed = f"#{s.pr} closed on the forge without merging"
        return [{"slice": s.id, "state": "closed", "pr": s.pr}]
    if foreign and s.pushed and pr.head_sha != s.pushed:
        raise Refused(
            f"{s.id}: {s.branch} is at {pr.head_sha[:12]} on the forge, not the "
            f"{s.pushed[:12]} this stack pushed (someone else pushed it): not overwritten, "
            "nothing moved"
        )
    return []


def restack(root: Path, name: str, *, contract: Path, foreign: bool = False) -> StackStep:
    """First the forge is followed: a slice whose pull request merged (merge, squash or
    rebase) is marked landed, one whose pull request was closed leaves the stack, and a
    bottom slice whose change the target already holds is landed too -- never replayed
    as an empty commit. Then each live slice whose recorded fork point is no longer its
    parent's head moves onto it (``_move``); all or nothing: one that fails its checks,
    does not apply, or a branch someone else pushed (``foreign``: sync's, which pushes
    next) leaves the stack as it was."""
    stack, old = _load(root, name)
    tip = target_tip(root, stack)
    followed = _follow(root, stack, tip, foreign=foreign)
    moved = _move(root, stack, tip, contract, followed)
    if moved or followed:
        gone = [f"{f['slice']} {f['state']}" for f in followed]
        write(root, stack, old, message="restack " + " ".join([*gone, *moved]))
    return _result("restack", stack, moved=moved, followed=followed)


def _move(
    root: Path, stack: Stack, tip: str, contract: Path, followed: list[Followed]
) -> list[str]:
    """Each live slice whose recorded fork point is no longer its parent's head moves onto
    it (the bottom one onto the target's tip) and its new tree is verified; a bottom slice
    with nothing left to apply is landed (added to ``followed``). The record in memory
    only: a slice that fails its checks or does not apply raises (noted against it in the
    record, nothing else written)."""
    parent = tip
    moved: list[str] = []
    at = ""  # the slice being moved (a refusal is noted against it)
    try:
        for s in stack.live():
            at = s.id
            if s.fork != parent:
                new = onto.move(root, fork=s.fork, head=s.head, onto=parent)
                if tree_of(root, new) == tree_of(root, parent):  # nothing of it left to apply
                    if parent != tip:
                        raise Refused(f"{s.id}: its change is already in the slice below it")
                    s.merged = tip
                    followed.append({"slice": s.id, "state": "merged", "pr": s.pr, "landed": tip})
                    continue
                verify = _verified(root, new, contract, f"{s.id} moved onto {parent[:12]}")
                s.evidence = {**s.evidence, "verify": verify, "restacked_from": s.head}
                s.fork, s.head, s.tree = parent, new, tree_of(root, new)
                moved.append(s.id)
            parent = s.head
    except (Refused, Unverified) as e:
        note_return(root, stack.name, at, "restack", e.message)
        raise
    return moved


def address(
    root: Path,
    name: str,
    slice_id: str,
    *,
    contract: Path,
    state: Path,
    task_text: str = "",
    rounds: int = readdress.ROUNDS,
) -> StackStep:
    """The forge's review of one slice addressed: its review comments, reviews and failing
    checks (those not addressed before) become its task's notes and feedback, the task
    runs again (``readdress.rerun``: ``lk attempt`` at the slice's head, the recipes'
    path), the verified tree becomes the slice's new commit, every slice above moves onto
    it and is verified there, and only then is anything pushed (``push``, leased). A
    slice above that fails its checks (exit 1) or does not apply (40): nothing recorded,
    nothing pushed; the new commit is kept under ``refs/loopkit/review/``. A slice above
    that fails is the worker's feedback for its next round, while ``rounds`` are left.
    Stopped after the record was written, the rerun (nothing new to address) pushes what
    it holds."""
    stack, old = _load(root, name)
    s = stack.find(slice_id)
    if s is None:
        raise BadInput("SLICE", f"no slice {slice_id!r} in stack {name}")
    forge = clients.client(stack.forge, stack.repo)
    if not isinstance(forge, clients.GitHub):
        raise BadInput(
            "SLICE",
            f"stack {name} is on a {stack.forge} forge: review comments are read from GitHub",
        )
    tip = target_tip(root, stack)
    followed = _follow(root, stack, tip, foreign=True)  # a branch someone else pushed: refused
    pr = _open_pull(s, name)
    remarks = [r for r in forge.remarks(pr, s.head) if r.key not in s.addressed]
    shown: list[RemarkShown] = [
        {"key": r.key, "who": r.who, "where": r.where, "text": r.text} for r in remarks
    ]
    if not remarks:
        return _nothing_to_address(root, name, stack, old, s.id, followed)
    task = readdress.task_for(s, remarks, pr, text=task_text)
    document = readdress.first(s, task, pr)
    before = Stack.from_json(stack.to_json(), ref(name))  # the forge followed, nothing changed
    left = rounds
    while True:
        try:
            fix = readdress.rerun(
                root, s, document, pr, contract=contract, state=state, rounds=left
            )
        except Unverified as e:
            note_return(root, name, s.id, "address", e.message)
            raise
        left -= fix.rounds
        kept = f"refs/loopkit/review/{stack.name}/{s.id}/{fix.commit[:12]}"
        git.out(["update-ref", kept, fix.commit], cwd=root)
        stack = Stack.from_json(before.to_json(), ref(name))
        mine = stack.find(slice_id)
        assert mine is not None
        mine.evidence = {
            **mine.evidence,
            **body.from_document(fix.decided),
            "verify": proof.summary(fix.decided["verify"]),
            "addressed_from": s.head,
        }
        mine.head, mine.tree, mine.task = fix.commit, fix.tree, task
        mine.addressed = [*mine.addressed, *(r.key for r in remarks)]
        landed = list(followed)
        try:
            moved = _move(root, stack, tip, contract, landed)
        except (Refused, Unverified) as e:
            said = f"{e.message}; after {s.id}'s change for #{pr} (kept as {kept})"
            fresh, old = read(root, name)  # the refusal noted in the record meanwhile
            before.returned = fresh.returned if fresh else before.returned
            if isinstance(e, Refused) or left <= 0:
                raise type(e)(f"{said}: nothing pushed") from None
            document = readdress.broke(fix.decided, e.message)  # the worker is told, again
            continue
        followed = landed
        break
    write(root, stack, old, message=f"address {slice_id} (#{pr}) as {fix.commit[:12]}")
    pushed: StepSaid = {}
    if stack.remote:
        sent = push(root, name)
        stack, pushed = Stack.from_json(sent["stack"], ref(name)), sent
    return _result(
        "address",
        stack,
        slice=slice_id,
        remarks=shown,
        commit=fix.commit,
        moved=moved,
        followed=followed,
        pushed=pushed.get("pushed", []),
        pulls=pushed.get("pulls", []),
    )


def _open_pull(s: Slice, name: str) -> int:
    """The pull request of a slice still in the stack (after the forge was followed)."""
    if s.merged or s.closed:
        raise BadInput("SLICE", f"{s.id} has left the stack ({'landed' if s.merged else s.closed})")
    if s.pr is None:
        raise BadInput("SLICE", f"{s.id} has no pull request yet: `lk stack push {name}` first")
    return s.pr


def _nothing_to_address(
    root: Path, name: str, stack: Stack, old: str, slice_id: str, followed: list[Followed]
) -> StackStep:
    """``address`` with no new remark: the forge's moves recorded, and what a stopped
    address recorded and did not push, pushed."""
    if followed:
        write(root, stack, old, message="address: " + " ".join(f["slice"] for f in followed))
    pushed: StepSaid = {}
    if stack.remote and _unfinished(root, stack, old):
        sent = push(root, name)  # what a stopped address recorded and did not push
        stack, pushed = Stack.from_json(sent["stack"], ref(name)), sent
    return _result(
        "address",
        stack,
        slice=slice_id,
        remarks=[],
        followed=followed,
        moved=[],
        pushed=pushed.get("pushed", []),
        pulls=pushed.get("pulls", []),
    )


def sync(root: Path, name: str, *, contract: Path) -> StackStep:
    """The stack follows the forge: restack (landed and closed slices leave it, the rest
    move onto what landed, each moved tree verified), then push (leased) and retarget
    every open pull request onto the branch below it, the bottom one onto the target."""
    done = restack(root, name, contract=contract, foreign=True)
    stack, _ = _load(root, name)
    pushed: StepSaid = {}
    if stack.remote and stack.live():
        sent = push(root, name)
        stack, pushed = Stack.from_json(sent["stack"], ref(name)), sent
    return _result(
        "sync",
        stack,
        moved=done["moved"],
        followed=done["followed"],
        pushed=pushed.get("pushed", []),
        pulls=pushed.get("pulls", []),
    )


def _unfinished(root: Path, stack: Stack, old: str) -> bool:
    """Whether a push is owed: a live slice not pushed as it is, or a push that stopped
    after the remote took it, before its pull requests were updated."""
    if any(s.pushed != s.head for s in stack.live()):
        return True
    return git.out(["log", "-1", "--format=%s", old], cwd=root) == "loopkit stack: pushed"


def _evidence_refs(root: Path, stack: Stack) -> list[str]:
    """The refs a dead run leaves as evidence (saved and parked attempts under
    refs/loopkit/, never the stack records): pushed as they are, never forced."""
    listed = git.out(["for-each-ref", "--format=%(refname)", "refs/loopkit/"], cwd=root)
    return [
        r for r in listed.splitlines() if r and not r.startswith(("refs/loopkit/stack/", PUSHING))
    ]


def _pushable(root: Path, stack: Stack) -> None:
    """Every live slice as verified, checked by id with git alone (no check runs here: a
    landing job that holds a write token runs no code a worker wrote): its head's tree is
    the tree its evidence says passed, and it sits on the slice below it. Refused (40)
    otherwise: nothing is pushed."""
    parent = ""
    for s in stack.live():
        verify = s.evidence.get("verify")
        said = verify.get("tree") if verify else None
        tree = tree_of(root, s.head)
        if not (verify and verify.get("passed") and said == s.tree == tree):
            raise Refused(
                f"{s.id}: its head {s.head[:12]} (tree {tree[:12]}) is not the tree its "
                f"checks passed on ({str(said or 'none')[:12]}): nothing pushed"
            )
        if parent and s.fork != parent:
            raise Refused(
                f"{s.id} is not on the slice below it ({parent[:12]}): "
                f"`lk stack restack {stack.name}` first; nothing pushed"
            )
        parent = s.head


def push(root: Path, name: str, *, issues: bool = False) -> StackStep:
    stack, old = _load(root, name)
    if not stack.remote:
        raise BadInput("--remote", f"stack {name} has no remote to push to")
    _pushable(root, stack)
    updates = [
        pushing.Update(f"refs/heads/{s.branch}", s.head, s.pushed)
        for s in stack.live()
        if s.pushed != s.head
    ]
    for s in stack.live():
        s.pushed = s.head
    before_meta = stack.pushed_meta
    # The record pushed (meta), and the one the local ref becomes once the remote took it
    # (current): made before anything moves, the local ref moved only after the push, in
    # one step, so a stop anywhere leaves either the old record or the pushed one (a
    # rerun settles which from the pending ref: ``_settle``), never one whose leases are
    # not what the remote holds.
    meta = record(root, stack, old, message="push")
    stack.pushed_meta = meta
    current = record(root, stack, meta, message="pushed")
    git.out(["update-ref", pending(name), current], cwd=root)
    try:
        pushing.push(root, stack.remote, [*updates, pushing.Update(ref(name), meta, before_meta)])
    except Refused:
        git.git(["update-ref", "-d", pending(name)], cwd=root, check=False)
        raise
    _moved(root, name, current, old)
    evidence = _evidence_refs(root, stack)
    kept: list[str] = []
    if evidence:
        done = git.git(
            ["push", "--porcelain", "--no-verify", stack.remote, *[f"{r}:{r}" for r in evidence]],
            cwd=root,
            env=pushing.token_env(),
            check=False,
        )
        kept = evidence if done.exit_code == 0 else []
    published = store.publish(root, stack.remote, env=pushing.token_env())  # the statements
    forge = clients.client(stack.forge, stack.repo)
    pulls: list[PullShown] = []
    if forge is not None:
        live = stack.live()
        signed = frozenset(s.id for s in live if published and store.get(root, s.head))
        if issues:
            for s in live:
                if s.issue is None:
                    part = f"Part of #{stack.issue}." if stack.issue else ""
                    s.issue = forge.open_issue(
                        title=s.title, body=f"Slice `{s.id}` of stack `{name}`. {part}"
                    )
        for i, s in enumerate(live):
            base = live[i - 1].branch if i else stack.target
            if s.pr is None:
                found = forge.find_pull(s.branch)
                if found is None:
                    found = forge.open_pull(
                        head=s.branch, base=base, title=s.title, body=body.render(stack, s, signed)
                    )
                s.pr = found.number
        for i, s in enumerate(live):  # again: each body names every pull request
            base = live[i - 1].branch if i else stack.target
            assert s.pr is not None
            forge.update_pull(s.pr, base=base, body=body.render(stack, s, signed))
            pulls.append({"slice": s.id, "number": s.pr, "base": base})
    if pulls or issues:
        write(root, stack, current, message="pull requests")
    return _result("push", stack, pushed=[u.ref for u in updates], evidence_refs=kept, pulls=pulls)


def land(root: Path, name: str, *, method: str = "squash") -> StackStep:
    try:
        return _land(root, name, method=method)
    except Refused as e:
        stack, _ = read(root, name)
        live = stack.live() if stack else []
        if live:
            note_return(root, name, live[0].id, "land", e.message)
        raise


def _land(root: Path, name: str, *, method: str) -> StackStep:
    """The bottom slice lands, as the forge's merge of exactly its verified head, only
    where the forge lands up-to-date heads alone; then the landed tree is checked equal to
    the verified one. A plain remote: the target moves to the verified head itself,
    leased on the tip it was verified on."""
    stack, old = _load(root, name)
    live = stack.live()
    if not live:
        raise BadInput("NAME", f"stack {name} has no slice left to land")
    s = live[0]
    tip = target_tip(root, stack)
    if s.fork != tip:
        raise Refused(
            f"{s.id} was verified on {s.fork[:12]}, {stack.target} is at {tip[:12]}: "
            f"run `lk stack restack {name}` and push first"
        )
    if s.pushed != s.head:
        raise Refused(
            f"{s.id}: the verified head {s.head[:12]} is not pushed; `lk stack push {name}`"
        )
    forge = clients.client(stack.forge, stack.repo)
    if forge is None:
        if not stack.remote:
            raise BadInput("--remote", f"stack {name} has no remote to land on")
        pushing.push(
            root, stack.remote, [pushing.Update(f"refs/heads/{stack.target}", s.head, tip)]
        )
        landed = s.head
    else:
        why = forge.landing_guard(stack.target)
        if why is not None:
            raise Refused(f"landing refused: {why}")
        if s.pr is None:
            raise Refused(f"{s.id} has no pull request yet; `lk stack push {name}`")
        pr = forge.get_pull(s.pr)
        if pr.head_sha != s.head:
            raise Refused(
                f"#{s.pr}'s head is {pr.head_sha[:12]}, not the verified {s.head[:12]}: "
                "it changed after verification; nothing merged"
            )
        if pr.state == "merged":  # through the forge's queue since the last call
            landed = pr.merge_commit
        elif pr.base != stack.target:
            raise Refused(f"#{s.pr} targets {pr.base}, not {stack.target}; `lk stack push {name}`")
        elif forge.has_queue(stack.target):
            forge.enqueue(pr, sha=s.head)
            pr = forge.get_pull(s.pr)
            if pr.state != "merged":  # the queue lands it later: run land again then
                return _result("land", stack, slice=s.id, queued=True, method=method)
            landed = pr.merge_commit
        else:
            landed = forge.merge(s.pr, sha=s.head, method=method, title=f"{s.title} (#{s.pr})")
    now = target_tip(root, stack)
    if now != landed and not _ancestor(root, landed, now):
        raise EnvironmentProblem(
            f"{stack.target} is at {now[:12]} after the merge, not {landed[:12]}"
        )
    if tree_of(root, landed) != s.tree:
        raise Refused(
            f"{stack.target} landed {landed[:12]} whose tree is not the verified {s.tree[:12]}"
        )
    s.merged = landed
    write(root, stack, old, message=f"landed {s.id} as {landed[:12]}")
    return _result("land", stack, slice=s.id, landed=landed, tree=s.tree, method=method)


def collect(
    root: Path,
    name: str,
    folders: list[Path],
    *,
    contract: Path,
    ledger: Path,
    **stack_kw: Any,
) -> StackStep:
    """The fan-out's results, in plan order: each job's ledger folded into ``ledger``, its
    saved attempts fetched under refs/loopkit/ (evidence a parked or dead job leaves), and
    each green slice added to the stack, its fork point the base the job was pinned to
    (restack then stacks them, verifying each moved tree)."""
    results = [fleet.read_result(folder) for folder in folders]  # all readable, or nothing
    stack, old = read(root, check_name(name))
    if stack is None:  # the stack's settings recorded even when no job came back green
        stack = Stack(name=name)
    for key in ("target", "remote", "forge", "repo", "issue"):
        if stack_kw.get(key):
            setattr(stack, key, stack_kw[key])
    if stack.forge not in FORGES:
        raise BadInput("--forge", f"{stack.forge!r}: one of {', '.join(FORGES)}")
    write(root, stack, old, message="collect")
    outcomes: list[Outcome] = []
    folded = 0
    for folder, result in zip(folders, results, strict=True):
        task = str(result["task"])
        if (folder / "ledger.jsonl").is_file():
            folded += fleet.fold(ledger, [folder / "ledger.jsonl"])["added"]
        bundle = folder / "slice.bundle"
        if result.get("bundle") and bundle.is_file():
            git.out(["fetch", "-q", str(bundle), "refs/loopkit/*:refs/loopkit/*"], cwd=root)
            store.take(root, str(bundle))  # the job's signed statements, if it has any
        entry: Outcome = {"task": task, "code": result["code"]}
        if result["code"] == 0 and result["head"] != result["base"] and bundle.is_file():
            git.out(["fetch", "-q", str(bundle), "HEAD"], cwd=root)
            head = git.out(["rev-parse", "FETCH_HEAD"], cwd=root)
            if head != result["head"]:
                raise BadInput(
                    str(bundle), f"holds {head[:12]}, result.json says {result['head'][:12]}"
                )
            doc: Any = None  # parse_attempt's answer: an attempt document (an ``Attempt``)
            if (folder / "decided.json").is_file():
                doc = parse_attempt(
                    (folder / "decided.json").read_bytes(), source=str(folder / "decided.json")
                )
            add(
                root,
                name,
                git.ref_component(task),
                head,
                contract=contract,
                title=task,
                doc=doc,
                ledger=ledger,
                fork_rev=str(result["base"]),
            )
            entry["slice"] = git.ref_component(task)
        outcomes.append(entry)
    stack, _ = read(root, name)
    assert stack is not None
    return _result("collect", stack, outcomes=outcomes, folded=folded)


def show(root: Path, name: str) -> StackStep:
    stack, _ = _load(root, name)
    return _result("show", stack)
