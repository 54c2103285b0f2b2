"""Provenance: every commit the loop lands carries a signed statement of what verified it
(an in-toto statement in a DSSE envelope, the commit's note under
refs/notes/loopkit-attest), and `lk attest verify` refuses each way of tampering with its
own exit code and line: a changed predicate, an unknown signer, a statement moved to
another commit, a changed tree, a missing statement, a statement replayed from another
repository, checks that are not the contract's. The round trip: pushed to a bare remote
and to the test forge, fetched into a fresh clone, verified there."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from loopkit import schema
from loopkit.attest import envelope, statement
from loopkit.testing.forge import serving
from tests.helpers.recipes import BIN, Project, fail_message, make_project, recipe_env

pytestmark = pytest.mark.slow

WORKER = 'Path("src").mkdir(exist_ok=True)\nPath("src/value.txt").write_text("good\\n")\n'
TASKS = "# Tasks\n\n- [ ] Fix the value {#fix-value}\n"
NOTES = "refs/notes/loopkit-attest"


def _land(p: Project) -> None:
    proc = p.run(
        "loop.sh", "--contract", "loop.yaml", "--tasks", "TASKS.md", "--task-id", "fix-value",
        "--task", "Fix",
    )  # fmt: skip
    assert proc.returncode == 0, fail_message(proc)


@pytest.fixture(scope="module")
def landed_once(tmp_path_factory: pytest.TempPathFactory) -> Project:
    p = make_project(tmp_path_factory.mktemp("landed"), WORKER, tasks=TASKS)
    _land(p)
    return p


@pytest.fixture
def landed(landed_once: Project, tmp_path: Path) -> Project:
    """A copy of the landed repository (its git folder, notes and key included) to tamper."""
    root = tmp_path / "repo"
    shutil.copytree(landed_once.root, root, symlinks=True)
    return Project(root=root, scratch=landed_once.scratch)


def attest(p: Project, *args: str, cwd: Path | None = None) -> tuple[int, dict[str, Any], str]:
    done = p.execute([str(BIN / "lk"), "attest", "verify", *args], cwd=cwd)
    assert "Traceback" not in done.stderr, done.stderr
    doc = json.loads(done.stdout) if done.stdout.strip() else {}
    if doc:
        assert schema.errors(doc, "attest-verify") == []
    return done.returncode, doc, done.stderr


def note(p: Project, rev: str) -> dict[str, Any]:
    return json.loads(p.git("notes", "--ref", NOTES, "show", rev))


def put_note(p: Project, rev: str, env: dict[str, Any]) -> None:
    blob = (
        subprocess.run(
            ["git", "hash-object", "-w", "--stdin"],
            cwd=p.root,
            input=json.dumps(env).encode(),
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .strip()
    )
    p.git("notes", "--ref", NOTES, "add", "-f", "-C", blob, rev)


def payload(env: dict[str, Any]) -> dict[str, Any]:
    return json.loads(base64.b64decode(env["payload"]))


def commit_tree(p: Project, tree: str, parent: str, message: str) -> str:
    return p.git("commit-tree", tree, "-p", parent, "-m", message).strip()


# ------------------------------------------------------------------ what a landing leaves


def test_every_landed_commit_has_a_statement_that_verifies(landed: Project) -> None:
    p = landed
    first = p.git("rev-list", "--max-parents=0", "HEAD").strip()
    landing, mark = p.git("rev-list", "--reverse", f"{first}..HEAD").split()
    assert "mark fix-value done" in p.git("log", "-1", "--format=%s", mark)
    code, doc, err = attest(p, f"{first}..HEAD")
    assert code == 0, err
    one, two = doc["commits"]
    assert (one["commit"], one["verified"], one["checks"]) == (landing, True, ["value"])
    assert one["signer"].startswith("loopkit@")
    assert (two["commit"], two["bookkeeping_of"]) == (mark, landing)
    st = payload(note(p, landing))
    assert schema.errors(st, "attest-statement") == []
    assert st["_type"] == "https://in-toto.io/Statement/v1"
    assert st["predicateType"] == statement.PREDICATE_TYPE
    digests = [s["digest"] for s in st["subject"]]
    assert {"gitCommit": landing} in digests
    assert {"gitTree": p.git("rev-parse", f"{landing}^{{tree}}").strip()} in digests
    pred = st["predicate"]
    assert pred["base"] == first and pred["repository"]["roots"] == [first]
    assert pred["task"]["id"] == "fix-value" and pred["worker"]["agent"] == "command"
    assert [a["outcome"] for a in pred["attempts"]] == ["complete"]
    assert pred["checks"][0]["command"] == "grep -qx good src/value.txt"
    assert pred["contract"]["path"] == "loop.yaml"
    # The key loopkit made for the repository, and where it is.
    assert (p.root / ".git/loopkit/attest/signing-key").stat().st_mode & 0o077 == 0


# ---------------------------------------------------------------------------- tampering


def test_a_changed_predicate_fails_62(landed: Project) -> None:
    p = landed
    env = note(p, "HEAD^")
    st = payload(env)
    st["predicate"]["checks"][0]["command"] = "true"
    env["payload"] = base64.b64encode(statement.canonical(st)).decode()
    put_note(p, "HEAD^", env)
    code, doc, err = attest(p, "HEAD^")
    assert code == 62, err
    assert "changed after signing" in err and doc["commits"][0]["verified"] is False


def test_an_unknown_signer_fails_61(landed: Project, tmp_path: Path) -> None:
    p = landed
    key = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    st = base64.b64decode(note(p, "HEAD^")["payload"])
    forged = envelope.seal(st, envelope.Signer(key, "loopkit@stranger", "a stranger's key"))
    put_note(p, "HEAD^", forged)
    code, _, err = attest(p, "HEAD^")
    assert code == 61, err
    assert "no allowed signer holds" in err


def test_a_statement_moved_to_another_commit_fails_65(landed: Project) -> None:
    p = landed
    tree = p.git("rev-parse", "HEAD^^{tree}").strip()
    other = commit_tree(p, tree, "HEAD~2", "the same tree, another commit")
    p.git("notes", "--ref", NOTES, "copy", "HEAD^", other)
    code, _, err = attest(p, other)
    assert code == 65, err
    assert "the statement is" in err and "another commit" in err


def test_a_changed_tree_fails_64(landed: Project) -> None:
    p = landed
    (p.root / "src/value.txt").write_text("bad\n")
    p.git("add", "src/value.txt")
    tree = p.git("write-tree").strip()
    amended = commit_tree(p, tree, "HEAD~2", "loopkit: fix-value: Fix")
    p.git("notes", "--ref", NOTES, "copy", "HEAD^", amended)
    code, _, err = attest(p, amended)
    assert code == 64, err
    assert "is not the tree the checks ran on" in err


def test_a_commit_by_hand_has_no_statement_60(landed: Project) -> None:
    p = landed
    (p.root / "src/value.txt").write_text("by hand\n")
    p.git("add", "src/value.txt")
    p.git("-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "-m", "by hand")
    code, _, err = attest(p, "HEAD")
    assert code == 60, err
    assert "no statement" in err
    # Right on top of the landed commit, a code change is no checklist mark either.
    bypass = commit_tree(p, p.git("rev-parse", "HEAD^{tree}").strip(), "HEAD~2", "by hand")
    assert attest(p, bypass)[0] == 60
    # lk-verify --attest (a pre-commit hook or a CI job) refuses it before any check runs.
    done = p.execute([str(BIN / "lk-verify"), "--attest"])
    assert done.returncode == 60, fail_message(done)
    assert "no statement" in done.stderr and "Traceback" not in done.stderr


def test_checks_that_are_not_the_contracts_fail_66(landed: Project) -> None:
    """A landing whose document says no check ran: lk task land takes it (its tree is a
    tree), and signs what it was given -- which is not what the contract demands."""
    p = landed
    decided = sorted(p.state().glob("runs/fix-value/*/1-decide.json"))[-1]
    doc = json.loads(decided.read_text().splitlines()[-1])
    doc["verify"]["checks"] = []
    doc["verify"]["tree"] = p.git("rev-parse", "HEAD^{tree}").strip()
    doc["task"] = {"id": "again", "text": "again", "kind": "task"}
    doc["contract_source"]["path"] = str(p.root / "loop.yaml")  # the copy's own
    (p.scratch / "no-checks.json").write_text(json.dumps(doc))
    lk = str(BIN / "lk")
    begun = p.execute([lk, "task", "begin", "--task-id", "again", "--task", "again"])
    assert begun.returncode == 0, fail_message(begun)
    done = p.execute([lk, "task", "land", str(p.scratch / "no-checks.json"), "--label", "1"])
    assert done.returncode == 0, fail_message(done)
    code, _, err = attest(p, "HEAD")
    assert code == 66, err
    assert "the contract's check 'value'" in err


def test_a_statement_replayed_from_another_repository_fails_63(tmp_path: Path) -> None:
    """The person's own key (git's gpg.format ssh) signs in both repositories: a statement
    made in one holds its signature in the other, and is refused there."""
    key = tmp_path / "person"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(f"me@example.invalid {(tmp_path / 'person.pub').read_text()}")
    config = {
        "gpg.format": "ssh",
        "user.signingkey": str(key),
        "user.email": "me@example.invalid",
        "gpg.ssh.allowedSignersFile": str(allowed),
    }
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = make_project(tmp_path / "a", WORKER, tasks=TASKS)
    b = make_project(tmp_path / "b", WORKER, tasks=TASKS)
    for p in (a, b):
        for k, v in config.items():
            p.git("config", k, v)
    _land(a)
    code, doc, err = attest(a, "HEAD^")
    assert code == 0, err
    assert doc["commits"][0]["signer"] == "me@example.invalid"
    assert not (a.root / ".git/loopkit/attest/signing-key").exists()
    # b: the same tree committed by hand, a's statement attached to it.
    (b.root / "src").mkdir()
    (b.root / "src/value.txt").write_text("good\n")
    b.git("add", "-A")
    b.git("commit", "-q", "-m", "the same change")
    put_note(b, "HEAD", note(a, "HEAD^"))
    code, _, err = attest(b, "HEAD")
    assert code == 63, err
    assert "made in another repository" in err


def test_under_require_no_commit_lands_unattested(tmp_path: Path) -> None:
    """A key that cannot sign: the default lands with a warning (and the statement is
    missing); `loopkit.attest require` refuses the landing, nothing moves."""
    p = make_project(tmp_path, WORKER, tasks=TASKS)
    p.git("config", "gpg.format", "ssh")
    p.git("config", "user.signingkey", str(tmp_path / "no-such-key"))
    p.git("config", "loopkit.attest", "require")
    before = p.head()
    proc = p.run(
        "loop.sh", "--contract", "loop.yaml", "--tasks", "TASKS.md", "--task-id", "fix-value",
        "--task", "Fix",
    )  # fmt: skip
    assert proc.returncode == 40, fail_message(proc)
    assert "is not attested" in proc.stderr
    assert p.head() == before
    assert p.git("notes", "--ref", NOTES, "list") == ""
    # The default policy lands, says so, and the commit is one nobody attested.
    (tmp_path / "default").mkdir()
    q = make_project(tmp_path / "default", WORKER, tasks=TASKS)
    q.git("config", "gpg.format", "ssh")
    q.git("config", "user.signingkey", str(tmp_path / "no-such-key"))
    proc = q.run(
        "loop.sh", "--contract", "loop.yaml", "--tasks", "TASKS.md", "--task-id", "fix-value",
        "--task", "Fix",
    )  # fmt: skip
    assert proc.returncode == 0, fail_message(proc)
    assert "lands without a signed statement" in proc.stderr
    assert attest(q, "HEAD^")[0] == 60


# ---------------------------------------------------------------------------- round trip


def _fresh_clone(p: Project, url: str, dest: Path) -> Project:
    env = recipe_env()
    subprocess.run(["git", "clone", "-q", url, str(dest)], check=True, env=env)
    subprocess.run(
        ["git", "fetch", "-q", "origin", f"{NOTES}:{NOTES}"], cwd=dest, check=True, env=env
    )
    return Project(root=dest, scratch=p.scratch)


def test_the_round_trip_through_a_bare_remote_and_the_forge(
    landed: Project, tmp_path: Path
) -> None:
    p = landed
    allowed = tmp_path / "allowed_signers"
    shutil.copy(p.root / ".git/loopkit/attest/allowed_signers", allowed)
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    p.git("push", "-q", str(bare), "main", NOTES)
    clone = _fresh_clone(p, str(bare), tmp_path / "clone")
    code, doc, err = attest(clone, "HEAD~2..HEAD", "--allowed-signers", str(allowed))
    assert code == 0, err
    assert [c["verified"] for c in doc["commits"]] == [True, True]
    # Without the allowed signers, the clone trusts no key: the signer is unknown.
    assert attest(clone, "HEAD^")[0] == 61
    with serving(tmp_path / "forge") as forge:
        forge.create_repo("o/r", source=p.root)
        url = forge.url("o/r", token=forge.token)
        p.git("push", "-q", url, NOTES)
        there = _fresh_clone(p, url, tmp_path / "forge-clone")
        code, _, err = attest(there, "HEAD^", "HEAD", "--allowed-signers", str(allowed))
        assert code == 0, err


def test_the_queues_landings_verify_the_rebuilt_one_by_its_own_checks(tmp_path: Path) -> None:
    """Through the merge queue: the entry landed as it was, and the one rebuilt on the new
    tip, verified there -- each verified commit and each mark holds by its statement."""
    from tests.e2e.test_queue import _add, _project
    from tests.helpers.queue import attempt, lk, out

    p = _project(tmp_path)
    base = p.head()
    _add(p, attempt(p, "set-a", base=base))
    _add(p, attempt(p, "add-c", base=base))
    done = lk(p, "queue", "land")
    assert done.returncode == 0, done.stderr
    first, second = out(done)["landed"]
    assert second["verification"] == "ran"
    code, doc, err = attest(p, f"{base}..HEAD")
    assert code == 0, err
    verified = [c["commit"] for c in doc["commits"] if c["bookkeeping_of"] is None]
    assert verified == [first["verified"], second["verified"]]
    st = payload(note(p, second["verified"]))
    assert st["predicate"]["base"] == first["commit"]
    assert {"gitTree": second["tree"]} in [s["digest"] for s in st["subject"]]


def test_lk_stack_push_carries_the_statements_and_keeps_the_remotes(
    landed: Project, tmp_path: Path
) -> None:
    """The remote already holds a statement this checkout lacks (another landing's): the
    push merges, never overwrites, and a fresh clone verifies both."""
    p = landed
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    p.git("push", "-q", str(bare), "HEAD~2:refs/heads/main")
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(p.root, elsewhere, symlinks=True)
    other = Project(root=elsewhere, scratch=p.scratch)
    tree = other.git("rev-parse", "HEAD^{tree}").strip()
    theirs = commit_tree(other, tree, "HEAD~2", "theirs")  # no statement, only a note
    other.git("notes", "--ref", NOTES, "add", "-m", "kept", theirs)
    other.git("push", "-q", str(bare), NOTES, f"{theirs}:refs/heads/theirs")
    lk = str(BIN / "lk")
    added = p.execute(
        [lk, "stack", "add", "demo", "s1", "--remote", str(bare), "--contract", "loop.yaml"]
    )
    assert added.returncode == 0, fail_message(added)
    pushed = p.execute([lk, "stack", "push", "demo"])
    assert pushed.returncode == 0, fail_message(pushed)
    remote_notes = subprocess.run(
        ["git", "notes", "--ref", NOTES, "list"], cwd=bare, capture_output=True, text=True
    ).stdout
    assert p.git("rev-parse", "HEAD^").strip() in remote_notes and theirs in remote_notes


def test_a_pull_request_names_its_heads_statement(landed: Project, tmp_path: Path) -> None:
    """lk stack push to the test forge with the real gh: the notes ref goes along, and the
    pull request of a slice whose head is attested says where its statement is."""
    from tests.helpers import require_tool

    require_tool("gh")
    p = landed
    with serving(tmp_path / "forge") as forge:
        forge.create_repo("o/r")
        p.git("push", "-q", forge.url("o/r", token=forge.token), "HEAD~2:refs/heads/main")
        p.git("remote", "add", "origin", forge.url("o/r"))
        env = {**forge.gh_env(tmp_path / "gh"), "LOOPKIT_FORGE_TOKEN": forge.token}
        lk = str(BIN / "lk")
        added = p.execute(
            [lk, "stack", "add", "demo", "s1", "--head", "HEAD^", "--contract", "loop.yaml",
             "--remote", "origin", "--forge", "github", "--repo", "o/r", "--title", "Fix"],
            env=env,
        )  # fmt: skip
        assert added.returncode == 0, fail_message(added)
        pushed = p.execute([lk, "stack", "push", "demo"], env=env)
        assert pushed.returncode == 0, fail_message(pushed)
        (pr,) = json.loads(pushed.stdout)["pulls"]
        body = forge.repos["o/r"].pulls[pr["number"]]["body"]
        landed_commit = p.git("rev-parse", "HEAD^").strip()
        assert f"the note of `{landed_commit[:12]}`" in body
        listed = subprocess.run(
            ["git", "notes", "--ref", NOTES, "list", landed_commit],
            cwd=forge.repos["o/r"].path,
            capture_output=True,
            text=True,
        )
        assert listed.returncode == 0 and listed.stdout.strip()


def test_bad_input_is_one_line_and_its_code(landed: Project, tmp_path: Path) -> None:
    p = landed
    lk = str(BIN / "lk")
    for args, code, said in (
        (["verify", "no-such-rev"], 3, "no-such-rev: names no commit"),
        (["verify", "HEAD..no-such-rev"], 3, "names no range of commits"),
        (["show", "HEAD~2"], 3, "no statement"),
    ):
        done = p.execute([lk, "attest", *args])
        assert (done.returncode, done.stdout) == (code, ""), fail_message(done)
        assert said in done.stderr and len(done.stderr.splitlines()) == 1
    outside = p.execute([lk, "attest", "verify"], cwd=tmp_path)
    assert outside.returncode == 4 and "not a git repository" in outside.stderr
    # A note that is not an envelope at all: refused as changed (62), and shown as such.
    p.git("notes", "--ref", NOTES, "add", "-f", "-m", "not json", "HEAD^")
    code, _, err = attest(p, "HEAD^")
    assert code == 62 and "not a DSSE envelope" in err
    shown = p.execute([lk, "attest", "show", "HEAD^"])
    assert shown.returncode == 62 and "Traceback" not in shown.stderr


READ_THE_KEY = """
import glob
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("good\\n")
for path in glob.glob(".git/loopkit/attest/*") + [".git/loopkit/attest/signing-key"]:
    try:
        (STATE / "stolen").write_text(Path(path).read_text())
    except OSError as e:
        (STATE / "refused").write_text(f"{path}: {e}")
"""


def test_a_sandboxed_worker_cannot_read_the_repositorys_signing_key(tmp_path: Path) -> None:
    """The repository's key is unprotected on disk: a worker that read it could sign any
    statement. In its sandbox the key's folder is not there at all."""
    p = make_project(tmp_path, READ_THE_KEY, tasks=TASKS)
    envelope.repository_key(p.root, identity=p.head())  # made before the worker runs
    _land(p)
    if not p.docs("fix-value", "invoke")[-1]["run"]["sandbox"]["used"]:
        pytest.skip("no sandbox on this machine")
    assert not (p.scratch / "stolen").exists(), "the worker read the signing key"
    assert (p.scratch / "refused").exists()
    assert attest(p, "HEAD^")[0] == 0
