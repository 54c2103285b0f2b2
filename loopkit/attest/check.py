"""``lk attest verify``: whether a commit's statement holds, and if not, why -- each reason
its own exit code (loopkit.exitcodes, the README's table) and one line.

Asked in this order, the first failure answers: a statement at all (60); a DSSE envelope
whose signature an allowed signer made (61) over exactly this statement (62); made in
this repository (63); about this commit's tree (64) and this commit (65); its checks the
contract's criteria at that commit, each passed (66)."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from pathlib import Path

from loopkit import contract, git, loader
from loopkit.attest import envelope, statement, store
from loopkit.errors import BadInput, LoopkitError
from loopkit.exitcodes import ExitCode

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from loopkit.sections import Criterion

KIND = "loopkit/attest-verify"


@dataclass
class Result:
    """One commit's answer."""

    commit: str
    code: ExitCode = ExitCode.OK
    problem: str = ""
    signer: str | None = None
    statement_of: str | None = None  # the commit the statement names
    tree: str | None = None
    checks: list[str] = field(default_factory=list)
    bookkeeping: list[str] = field(default_factory=list)  # paths a mark after it may change
    bookkeeping_of: str | None = None  # a mark commit: the landed commit it follows

    def fail(self, code: ExitCode, problem: str) -> Result:
        self.code, self.problem = code, problem
        return self

    def section(self) -> dict[str, Any]:
        return {
            "commit": self.commit,
            "verified": self.code == ExitCode.OK,
            "exit_code": int(self.code),
            "problem": self.problem or None,
            "signer": self.signer,
            "statement_of": self.statement_of,
            "tree": self.tree,
            "checks": self.checks,
            "bookkeeping_of": self.bookkeeping_of,
        }


class Unreadable(LoopkitError):
    """A note that is not a DSSE envelope (62: it is not what was signed)."""

    code = ExitCode.ATTEST_CHANGED


def opened(raw: bytes) -> tuple[str, bytes, list[bytes]]:
    try:
        env = loader.json_loads(raw.decode("utf-8"))
        payload_type = env["payloadType"]
        payload = base64.b64decode(env["payload"], validate=True)
        sigs = [base64.b64decode(s["sig"], validate=True) for s in env["signatures"]]
    except (loader.LoadError, UnicodeDecodeError, KeyError, TypeError, binascii.Error) as e:
        raise Unreadable(f"not a DSSE envelope ({type(e).__name__}: {e})") from None
    if not isinstance(payload_type, str) or not sigs:
        raise Unreadable("not a DSSE envelope (no payloadType or no signature)")
    return payload_type, payload, sigs


def _subject(st: Any, digest: str) -> str | None:
    for s in st.get("subject") or []:
        if isinstance(s, dict) and isinstance(s.get("digest"), dict) and digest in s["digest"]:
            return str(s["digest"][digest])
    return None


#: The contract whose criteria a statement is held to when neither the caller nor the
#: statement names one inside the repository (its contract was outside: a CI job's share).
DEFAULT_CONTRACT = "loop.yaml"


def _criteria_at(root: Path, commit: str, path: str) -> list[Criterion] | str:
    """The contract's criteria at ``commit``, or why they cannot be read."""
    done = git.git(["cat-file", "blob", f"{commit}:{path}"], cwd=root, check=False)
    if done.exit_code != 0:
        return f"{commit[:12]} has no {path}"
    try:
        parsed = contract.checked(contract.parse_text(done.stdout, path), f"{commit[:12]}:{path}")
    except LoopkitError as e:
        return str(e)
    return list(parsed.get("criteria") or [])


def commit_of(root: Path, rev: str) -> str:
    """The commit ``rev`` names; BadInput (3) when it names none."""
    done = git.git(
        ["rev-parse", "--verify", "-q", "--end-of-options", f"{rev}^{{commit}}"],
        cwd=root,
        check=False,
    )
    if done.exit_code != 0:
        raise BadInput(rev, "names no commit in this repository")
    return done.stdout.decode().strip()


def verify_commit(root: Path, rev: str, *, allowed: Path, contract: str | None = None) -> Result:
    """The answer for ``rev``."""
    commit = commit_of(root, rev)
    r = Result(commit)
    raw = store.get(root, commit)
    if raw is None:
        return _bookkeeping(root, r, allowed, contract) or r.fail(
            ExitCode.ATTEST_MISSING, f"{commit[:12]}: no statement ({store.REF})"
        )
    try:
        payload_type, payload, sigs = opened(raw)
    except Unreadable as e:
        return r.fail(ExitCode.ATTEST_CHANGED, f"{commit[:12]}: {e}")
    known = False
    for sig in sigs:
        seen = envelope.verified_by(payload_type, payload, sig, allowed)
        known = known or bool(seen.principals)
        if seen.valid:
            r.signer = seen.principals[0]
            break
    else:
        if not known:
            return r.fail(
                ExitCode.ATTEST_UNKNOWN_SIGNER,
                f"{commit[:12]}: signed by a key no allowed signer holds ({allowed})",
            )
        return r.fail(
            ExitCode.ATTEST_CHANGED,
            f"{commit[:12]}: the signature does not cover this statement (changed after signing)",
        )
    if payload_type != envelope.PAYLOAD_TYPE:
        return r.fail(ExitCode.ATTEST_CHANGED, f"{commit[:12]}: payloadType {payload_type!r}")
    try:
        st = loader.json_loads(payload.decode("utf-8"))
    except (loader.LoadError, UnicodeDecodeError) as e:
        return r.fail(ExitCode.ATTEST_CHANGED, f"{commit[:12]}: the payload is not JSON: {e}")
    if (
        not isinstance(st, dict)
        or st.get("_type") != statement.STATEMENT_TYPE
        or st.get("predicateType") != statement.PREDICATE_TYPE
        or not isinstance(st.get("predicate"), dict)
    ):
        return r.fail(ExitCode.ATTEST_CHANGED, f"{commit[:12]}: not a loopkit landing statement")
    pred = st["predicate"]
    r.statement_of = _subject(st, "gitCommit")
    r.tree = _subject(st, "gitTree")
    if not all(isinstance(pred.get(k) or {}, dict) for k in ("repository", "contract")):
        return r.fail(ExitCode.ATTEST_CHANGED, f"{commit[:12]}: not a loopkit landing statement")
    roots = (pred.get("repository") or {}).get("roots")
    here = statement.repository(root, commit)
    if roots != here:
        return r.fail(
            ExitCode.ATTEST_REPLAYED,
            f"{commit[:12]}: the statement was made in another repository (root commits "
            f"{', '.join(str(x)[:12] for x in roots or [])}; here {', '.join(x[:12] for x in here)})",
        )
    tree = git.out(["rev-parse", f"{commit}^{{tree}}"], cwd=root)
    if r.tree != tree:
        return r.fail(
            ExitCode.ATTEST_CHANGED_TREE,
            f"{commit[:12]}: its tree {tree[:12]} is not the tree the checks ran on "
            f"({(r.tree or 'none')[:12]})",
        )
    if r.statement_of != commit:
        return r.fail(
            ExitCode.ATTEST_MOVED,
            f"{commit[:12]}: the statement is {(r.statement_of or 'none')[:12]}'s (the same "
            "tree, another commit: moved, amended or squashed)",
        )
    r.bookkeeping = [str(p) for p in pred.get("bookkeeping") or []]
    checks = [c for c in pred.get("checks") or [] if isinstance(c, dict)]
    r.checks = [str(c.get("name")) for c in checks]
    named = contract or (pred.get("contract") or {}).get("path") or DEFAULT_CONTRACT
    criteria = _criteria_at(root, commit, str(named))
    if isinstance(criteria, str):
        return r.fail(ExitCode.ATTEST_CHECKS, f"{commit[:12]}: {criteria}")
    ran = {(str(c.get("name")), str(c.get("command"))): bool(c.get("passed")) for c in checks}
    for c in criteria:
        key = (str(c.get("name")), str(c.get("run")))
        if not ran.get(key):
            return r.fail(
                ExitCode.ATTEST_CHECKS,
                f"{commit[:12]}: the contract's check {key[0]!r} ({key[1]}) is not among the "
                "checks the statement says passed",
            )
    failed = [name for (name, _), ok in ran.items() if not ok]
    if failed:
        return r.fail(ExitCode.ATTEST_CHECKS, f"{commit[:12]}: checks failed: {', '.join(failed)}")
    return r


def _bookkeeping(root: Path, r: Result, allowed: Path, contract: str | None) -> Result | None:
    """A commit without a statement of its own that holds anyway: loopkit's bookkeeping
    after a landing (the checklist's mark), one parent whose statement holds and names
    every path this commit changes among its ``bookkeeping``."""
    parents = git.out(["rev-list", "--parents", "-n", "1", r.commit], cwd=root).split()[1:]
    if len(parents) != 1 or store.get(root, parents[0]) is None:
        return None
    parent = verify_commit(root, parents[0], allowed=allowed, contract=contract)
    changed = git.out(
        ["diff-tree", "--no-commit-id", "--name-only", "-r", "-z", parents[0], r.commit],
        cwd=root,
    ).split("\0")
    if parent.code != ExitCode.OK or not set(filter(None, changed)) <= set(parent.bookkeeping):
        return None
    r.signer, r.statement_of, r.bookkeeping_of = parent.signer, parent.statement_of, parents[0]
    return r


class NotAttested(LoopkitError):
    """A commit whose statement does not hold where one is required: its code, its line."""

    def __init__(self, result: Result) -> None:
        super().__init__(result.problem)
        self.code = result.code


def require(
    cwd: Path, rev: str, *, allowed_signers: str | None = None, contract: str | None = None
) -> Result:
    """``rev``'s answer when its statement holds; NotAttested (60-66) otherwise."""
    root = git.locate(cwd).root
    allowed = envelope.allowed_signers(root, allowed_signers)
    r = verify_commit(root, rev, allowed=allowed, contract=contract)
    if r.code != ExitCode.OK:
        raise NotAttested(r)
    return r


def verify(
    root: Path,
    revs: list[str],
    *,
    allowed_signers: str | None = None,
    contract: str | None = None,
) -> list[Result]:
    """Each commit ``revs`` name (a range A..B names each commit in it), oldest first."""
    allowed = envelope.allowed_signers(root, allowed_signers)
    commits: list[str] = []
    for rev in revs:
        if ".." in rev:
            listed = git.git(
                ["rev-list", "--reverse", "--end-of-options", rev], cwd=root, check=False
            )
            if listed.exit_code != 0:
                raise BadInput(rev, "names no range of commits in this repository")
            commits += listed.stdout.decode().split()
        else:
            commits.append(rev)
    return [verify_commit(root, c, allowed=allowed, contract=contract) for c in commits]


def document(results: list[Result]) -> dict[str, Any]:
    worst = next((r.code for r in results if r.code != ExitCode.OK), ExitCode.OK)
    return {
        "kind": KIND,
        "version": 1,
        "verified": worst == ExitCode.OK,
        "exit_code": int(worst),
        "commits": [r.section() for r in results],
    }


def as_text(doc: dict[str, Any]) -> str:
    return json.dumps(doc, separators=(",", ":"))
