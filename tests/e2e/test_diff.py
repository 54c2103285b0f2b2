"""lk-diff over real temporary git repositories: what changed, the tree hash, the policy."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from loopkit import discovery
from loopkit import git as lkgit
from tests.helpers import git
from tests.helpers.evidence import attempt, by_path, one_json, rules, run, write_contract
from tests.helpers.recipes import BIN


@pytest.fixture
def repo(git_repo: Path) -> Path:
    """A repository with a few committed files of every kind."""
    (git_repo / "src").mkdir()
    (git_repo / "src" / "app.py").write_text("".join(f"line {i}\n" for i in range(10)))
    (git_repo / "src" / "old_name.py").write_text("".join(f"keep {i}\n" for i in range(30)))
    (git_repo / "src" / "gone.py").write_text("a\nb\n")
    (git_repo / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (git_repo / "migrations").mkdir()
    (git_repo / "migrations" / "0001.sql").write_text("create table t (x int);\n")
    (git_repo / ".gitignore").write_text("*.log\nbuild/\n")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "files")
    return git_repo


def test_every_kind_of_change_is_collected(repo: Path) -> None:
    # staged edit + a further unstaged edit of the same file
    (repo / "src" / "app.py").write_text("".join(f"line {i}\n" for i in range(12)))
    git(repo, "add", "src/app.py")
    with open(repo / "src" / "app.py", "a") as f:
        f.write("unstaged\n")
    # a rename (staged through git mv) with a small edit
    git(repo, "mv", "src/old_name.py", "src/new_name.py")
    with open(repo / "src" / "new_name.py", "a") as f:
        f.write("more\n")
    (repo / "src" / "gone.py").unlink()  # deletion, not staged
    (repo / "notes.txt").write_text("one\ntwo\nthree\n")  # untracked
    (repo / "blob.bin").write_bytes(bytes(range(256)) * 4)  # untracked binary
    os.chmod(repo / "run.sh", 0o755)  # mode change only
    os.symlink("src/app.py", repo / "link")  # symlink inside the repo
    (repo / "debug.log").write_text("ignored\n")  # ignored: never part of the change
    (repo / "build").mkdir()
    (repo / "build" / "out.o").write_text("ignored too\n")

    done = run("lk-diff", cwd=repo)
    assert done.returncode == 0, done.stderr  # no contract in the repo: nothing to violate
    d = one_json(done.stdout, "diff")
    assert d["kind"] == "loopkit/diff"
    assert d["base"] == git(repo, "rev-parse", "HEAD").strip()
    files = by_path(d)
    assert set(files) == {
        "src/app.py",
        "src/new_name.py",
        "src/gone.py",
        "notes.txt",
        "blob.bin",
        "run.sh",
        "link",
    }
    assert files["src/app.py"] == {
        "path": "src/app.py",
        "status": "modified",
        "added": 3,
        "deleted": 0,
        "bytes": (repo / "src" / "app.py").stat().st_size,  # the whole new blob
    }
    assert files["src/new_name.py"]["status"] == "renamed"
    assert files["src/new_name.py"]["old_path"] == "src/old_name.py"
    assert (files["src/new_name.py"]["added"], files["src/new_name.py"]["deleted"]) == (1, 0)
    assert (files["src/gone.py"]["status"], files["src/gone.py"]["deleted"]) == ("deleted", 2)
    assert (files["notes.txt"]["status"], files["notes.txt"]["added"]) == ("added", 3)
    assert files["blob.bin"]["binary"] is True
    assert (files["blob.bin"]["added"], files["blob.bin"]["deleted"]) == (0, 0)
    assert files["blob.bin"]["bytes"] == 1024
    assert "bytes" not in files["src/gone.py"]  # a deletion adds nothing
    assert (files["run.sh"]["old_mode"], files["run.sh"]["new_mode"]) == ("100644", "100755")
    assert (files["run.sh"]["added"], files["run.sh"]["deleted"]) == (0, 0)
    assert files["link"]["symlink"] is True
    assert files["link"]["symlink_target"] == "src/app.py"
    assert files["link"]["bytes"] == len("src/app.py")  # a symlink's blob is its target
    sizes = sum(f.get("bytes", 0) for f in files.values())
    assert sizes == sum(os.lstat(repo / p).st_size for p in files if p != "src/gone.py")
    assert d["totals"] == {
        "files": 7,
        "lines": 3 + 1 + 2 + 3 + 1,
        "added": 8,
        "deleted": 2,
        "bytes": sizes,
    }
    assert d["violations"] == [] and d["within_policy"] is True and d["policy"] is None
    assert "scope policy was not checked" in done.stderr
    # The real index is untouched: the unstaged edit is still unstaged.
    assert git(repo, "diff", "--name-only").split() == [
        "run.sh",
        "src/app.py",
        "src/gone.py",
        "src/new_name.py",
    ]


def test_tree_hash_is_content_only_same_in_another_clone_and_index_untouched(
    repo: Path, tmp_path: Path
) -> None:
    other = tmp_path / "elsewhere" / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(other))
    for r in (repo, other):
        (r / "src" / "app.py").write_text("changed\n")
        (r / "fresh.txt").write_text("new file\n")
        (r / "x.log").write_text(f"ignored, differs: {r}\n")
    os.utime(other / "fresh.txt", (1_000_000, 1_000_000))  # timestamps do not matter
    index_before = (repo / ".git" / "index").read_bytes()
    a = one_json(run("lk-diff", cwd=repo).stdout)
    b = one_json(run("lk-diff", cwd=other).stdout)
    assert a["tree"] == b["tree"] == lkgit.tree_hash(repo) == lkgit.tree_hash(other)
    assert (repo / ".git" / "index").read_bytes() == index_before
    assert not list((repo / ".git").glob("loopkit-index-*"))  # no scratch index left behind
    # The hash is git's own tree id of that content: committing it reproduces it.
    git(other, "add", "-A")
    assert git(other, "write-tree").strip() == a["tree"]
    # Any content change moves it.
    (repo / "fresh.txt").write_text("new file!\n")
    assert lkgit.tree_hash(repo) != a["tree"]


def test_within_policy_exits_0_and_violations_exit_1_with_rule_and_path(repo: Path) -> None:
    contract = write_contract(
        repo,
        writable=["src/**"],
        protected=["migrations/**", "src/secrets/**"],
        always_allowed=["tests/**", "loop.yaml"],
    )
    (repo / "src" / "app.py").write_text("ok\n")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_app.py").write_text("def test(): pass\n")  # always allowed
    done = run("lk-diff", "--contract", str(contract), cwd=repo)
    assert done.returncode == 0, done.stdout
    assert one_json(done.stdout)["within_policy"] is True

    (repo / "migrations" / "0001.sql").write_text("drop table t;\n")  # protected touched
    (repo / "README.md").write_text("outside writable\n")
    (repo / "src" / "secrets").mkdir()
    (repo / "src" / "secrets" / "key").write_text("protected wins over writable\n")
    done = run("lk-diff", "--contract", str(contract), cwd=repo)
    assert done.returncode == 1
    d = one_json(done.stdout)
    assert d["within_policy"] is False
    assert rules(d) == {
        ("protected", "migrations/0001.sql"),
        ("outside_writable", "README.md"),
        ("protected", "src/secrets/key"),
    }
    assert "protected: migrations/0001.sql" in done.stderr


def test_deleted_protected_file_and_renames_out_of_scope_both_ends(repo: Path) -> None:
    contract = write_contract(
        repo, writable=["src/**"], protected=["migrations/**"], always_allowed=["loop.yaml"]
    )
    git(repo, "rm", "-q", "migrations/0001.sql")
    git(repo, "mv", "src/old_name.py", "lib_old_name.py")  # into unwritable ground
    git(repo, "mv", "run.sh", "src/run.sh")  # from unwritable ground
    done = run("lk-diff", "--contract", str(contract), cwd=repo)
    assert done.returncode == 1
    d = one_json(done.stdout)
    assert rules(d) == {
        ("protected_deleted", "migrations/0001.sql"),
        ("rename_out_of_scope", "lib_old_name.py"),
        ("rename_out_of_scope", "run.sh"),
    }
    renamed = by_path(d)["lib_old_name.py"]
    assert (renamed["status"], renamed["old_path"]) == ("renamed", "src/old_name.py")


def test_symlinks_pointing_outside_or_into_protected_scope(repo: Path, tmp_path: Path) -> None:
    contract = write_contract(
        repo, writable=["src/**"], protected=["migrations/**"], always_allowed=["loop.yaml"]
    )
    os.symlink("/etc/passwd", repo / "src" / "abs_out")
    os.symlink("../../outside", repo / "src" / "rel_out")
    os.symlink(str(repo / "src" / "app.py"), repo / "src" / "abs_in")  # absolute but inside
    os.symlink("../migrations/0001.sql", repo / "src" / "to_protected")
    os.symlink("../migrations", repo / "src" / "to_protected_dir")
    os.symlink("app.py", repo / "src" / "fine")
    d = one_json(run("lk-diff", "--contract", str(contract), cwd=repo).stdout)
    assert rules(d) == {
        ("symlink_outside_repo", "src/abs_out"),
        ("symlink_outside_repo", "src/rel_out"),
        ("symlink_into_protected", "src/to_protected"),
        ("symlink_into_protected", "src/to_protected_dir"),
    }
    assert by_path(d)["src/abs_out"]["symlink_target"] == "/etc/passwd"


def test_budgets_on_files_and_lines_not_counting_always_allowed(repo: Path) -> None:
    contract = write_contract(
        repo,
        writable=["src/**"],
        always_allowed=["tests/**", "loop.yaml"],
        budgets={"changed_files": 2, "changed_lines": 10},
    )
    (repo / "tests").mkdir()
    for i in range(5):  # allowed files count toward neither budget
        (repo / "tests" / f"test_{i}.py").write_text("x\n" * 50)
    (repo / "src" / "a.py").write_text("x\n" * 4)
    (repo / "src" / "b.py").write_text("x\n" * 4)
    done = run("lk-diff", "--contract", str(contract), cwd=repo)
    assert done.returncode == 0, done.stdout
    (repo / "src" / "c.py").write_text("x\n" * 4)
    done = run("lk-diff", "--contract", str(contract), cwd=repo)
    assert done.returncode == 1
    d = one_json(done.stdout)
    assert rules(d) == {("changed_files", "*"), ("changed_lines", "*")}
    details = {v["rule"]: v["detail"] for v in d["violations"]}
    assert details["changed_files"] == "3 files changed; budget 2"
    assert details["changed_lines"] == "12 lines changed; budget 10"
    assert d["totals"]["files"] == 9  # the totals still count everything


def test_a_large_binary_breaks_changed_bytes_whatever_changed_lines_says(repo: Path) -> None:
    # 200 MB of binary counts 0 lines: only its bytes can stop it from being committed.
    contract = write_contract(
        repo, writable=["**"], always_allowed=["assets/**"], budgets={"changed_lines": 100}
    )
    (repo / "assets").mkdir()
    with open(repo / "assets" / "model.bin", "wb") as f:
        f.truncate(200 * 1024 * 1024)  # sparse: cheap to write, 200 MB to git
    (repo / "src" / "app.py").write_text("changed\n")
    (repo / ":odd name").write_text("a path that looks like a raw diff record\n")
    done = run("lk-diff", "--contract", str(contract), cwd=repo)
    assert done.returncode == 1, done.stderr
    d = one_json(done.stdout, "diff")
    files = by_path(d)
    assert files["assets/model.bin"]["binary"] is True
    assert files["assets/model.bin"]["bytes"] == 200 * 1024 * 1024
    assert files[":odd name"]["bytes"] == 41
    assert d["totals"]["lines"] <= 100 and d["totals"]["bytes"] > 200 * 1024 * 1024
    assert rules(d) == {("changed_bytes", "*")}  # the default budget: 5 MB
    assert d["policy"]["changed_bytes"] == 5_000_000
    assert "changed_bytes: * (" in done.stderr
    (repo / "assets" / "model.bin").unlink()
    done = run("lk-diff", "--contract", str(contract), cwd=repo)
    assert done.returncode == 0, done.stdout


def test_changed_bytes_budget_from_the_contract(repo: Path) -> None:
    contract = write_contract(repo, writable=["**"], budgets={"changed_bytes": 1000})
    (repo / "src" / "big.txt").write_text("x" * 999)
    done = run("lk-diff", "--contract", str(contract), cwd=repo)
    d = one_json(done.stdout, "diff")
    assert done.returncode == 1 and rules(d) == {("changed_bytes", "*")}
    used = d["totals"]["bytes"]
    assert [v["detail"] for v in d["violations"]] == [f"{used} bytes changed; budget 1000"]


def test_in_a_pipe_adds_diff_and_prefers_the_recorded_base(repo: Path) -> None:
    first = git(repo, "rev-parse", "HEAD").strip()
    (repo / "src" / "app.py").write_text("committed by the worker\n")
    git(repo, "commit", "-q", "-am", "worker commit")
    (repo / "notes.txt").write_text("and an untracked file\n")
    contract = json.loads(
        json.dumps(
            {
                "version": 1,
                "objective": "o",
                "scope": {"writable": ["**"]},
                "criteria": [{"name": "ok", "run": "true"}],
            }
        )
    )
    piped = attempt(
        contract=contract,
        attempt_id="a-1",
        diff={
            "base": first,
            "tree": "0" * 40,
            "files": [],
            "totals": {"files": 0, "lines": 0},
            "violations": [],
            "within_policy": True,
        },
    )
    done = run("lk-diff", "--base", "HEAD", cwd=repo, stdin=piped)
    assert done.returncode == 0, done.stderr
    doc = one_json(done.stdout, "attempt")
    assert doc["kind"] == "loopkit/attempt" and doc["attempt_id"] == "a-1"
    assert doc["diff"]["base"] == first  # the attempt's base, not --base
    assert set(by_path(doc["diff"])) == {"src/app.py", "notes.txt"}
    # Without a recorded base, --base decides.
    done = run("lk-diff", "--base", "HEAD", cwd=repo, stdin=attempt(contract=contract))
    assert set(by_path(one_json(done.stdout)["diff"])) == {"notes.txt"}


def test_state_folder_never_shows_in_the_diff_or_the_tree(repo: Path) -> None:
    before = lkgit.tree_hash(repo)
    state = repo / ".loopkit" / "artifacts" / "x"
    state.mkdir(parents=True)
    (state / "log.txt").write_text("evidence\n")  # not even excluded yet
    d = one_json(run("lk-diff", cwd=repo).stdout)
    assert d["files"] == [] and d["tree"] == before
    assert lkgit.tree_hash(repo) == before


def test_repository_without_commits(tmp_path: Path) -> None:
    repo = tmp_path / "fresh"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "a.txt").write_text("1\n2\n")
    done = run("lk-diff", cwd=repo)
    assert done.returncode == 0, done.stderr
    d = one_json(done.stdout)
    assert d["base"] == git(repo, "hash-object", "-t", "tree", "/dev/null").strip()
    assert by_path(d)["a.txt"]["added"] == 2


def test_not_a_repository_exits_4_and_a_bad_base_exits_3(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "plain"
    outside.mkdir()
    done = run("lk-diff", cwd=outside)
    assert done.returncode == 4
    assert done.stdout == ""
    assert "not a git repository" in done.stderr and "Traceback" not in done.stderr
    done = run("lk-diff", "--base", "no-such-ref", cwd=repo)
    assert done.returncode == 3
    assert "no-such-ref" in done.stderr and done.stdout == ""


def test_names_with_spaces_newlines_and_unicode(repo: Path) -> None:
    odd = ["with space.txt", "tab\there.txt", "ünï côdé.txt", "new\nline.txt"]
    for name in odd:
        (repo / name).write_text("x\n")
    d = one_json(run("lk-diff", cwd=repo).stdout)
    assert set(by_path(d)) == set(odd)


def test_a_clone_of_the_repository_gets_the_same_hash_as_the_committed_tree(
    repo: Path, tmp_path: Path
) -> None:
    clean = tmp_path / "clean"
    shutil.copytree(repo, clean, symlinks=True)
    subprocess.run(["touch", str(clean / "src" / "app.py")], check=True)
    assert lkgit.tree_hash(clean) == git(repo, "rev-parse", "HEAD^{tree}").strip()


def test_linked_worktree_and_verify_agree_on_the_tree(repo: Path, tmp_path: Path) -> None:
    wt = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", str(wt), "-b", "side")
    (wt / "src" / "app.py").write_text("in the worktree\n")
    (wt / "new.txt").write_text("untracked\n")
    d = one_json(run("lk-diff", cwd=wt).stdout)
    assert set(by_path(d)) == {"src/app.py", "new.txt"}
    contract = write_contract(wt, where=tmp_path)
    v = one_json(run("lk-verify", "--contract", str(contract), cwd=wt).stdout)
    assert v["tree"] == d["tree"]  # the same tree, whoever hashes it
    # The main checkout is unaffected and its own hash is its committed tree.
    assert lkgit.tree_hash(repo) == git(repo, "rev-parse", "HEAD^{tree}").strip()
    assert git(wt, "status", "--porcelain", "--untracked-files=all").split() == [
        "M",
        "src/app.py",
        "??",
        "new.txt",
    ]


def test_repository_discovery_without_git_agrees_with_git(repo: Path, tmp_path: Path) -> None:
    sub = repo / "src"
    found = discovery.discover(sub)
    assert found is not None
    top = git(sub, "rev-parse", "--show-toplevel").strip()
    index = git(sub, "rev-parse", "--git-path", "index").strip()
    assert found.root == Path(top)
    assert found.index == (sub / index).resolve()
    # Anything unusual is left to git itself: a .git file (linked worktree), not a repo.
    wt = tmp_path / "wt2"
    git(repo, "worktree", "add", "-q", str(wt))
    assert discovery.discover(wt) is None
    assert lkgit.locate(wt).root == wt.resolve()
    assert discovery.discover(tmp_path) is None


def test_tree_watch_sees_every_change_and_skips_write_tree_when_none(repo: Path) -> None:
    # Files written in the same instant as an index are "racily clean" and make git
    # rewrite it; settled files (the usual case) leave it alone.
    past = time.time() - 60
    for f in repo.rglob("*"):
        if ".git" not in f.parts:
            os.utime(f, (past, past), follow_symlinks=False)
    git(repo, "update-index", "-q", "--refresh")
    with lkgit.TreeWatch(repo) as watch:
        first = watch.hash()
        stamp = watch._stamp()
        assert watch.hash() == first and watch._stamp() == stamp  # nothing rewritten
        (repo / "src" / "app.py").write_text("X" * len((repo / "src" / "app.py").read_text()))
        same_size = watch.hash()  # same size, same second: content is compared
        assert same_size != first
        os.chmod(repo / "run.sh", 0o755)
        assert watch.hash() != same_size
        os.chmod(repo / "run.sh", 0o644)
        (repo / "src" / "app.py").write_text("".join(f"line {i}\n" for i in range(10)))
        assert watch.hash() == first == lkgit.tree_hash(repo)
    assert not list((repo / ".git").glob("loopkit-index-*"))


@pytest.mark.parametrize("version", ["2", "3", "4"])
def test_the_state_folder_is_dropped_whatever_the_index_format(
    repo: Path, version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The git call that drops the state folder is skipped when the index's own bytes show
    # no such name; a worker's .gitignore re-includes the folder, in every index format.
    git(repo, "update-index", "--index-version", version)
    clean = lkgit.tree_hash(repo)
    calls: list[list[str]] = []
    real = lkgit.git

    def counted(args: list[str], **kw: object) -> object:
        calls.append(list(args))
        return real(args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(lkgit, "git", counted)
    (repo / ".loopkit").mkdir(exist_ok=True)
    (repo / ".loopkit" / "ledger.jsonl").write_text("{}\n")
    with open(repo / ".git" / "info" / "exclude", "a") as f:
        f.write("/.loopkit/\n")  # as every command excludes it
    with lkgit.TreeWatch(repo) as watch:
        assert watch.hash() == clean
        dropped = sum(1 for a in calls if "rm" in a)
        assert dropped == (1 if version == "4" else 0)  # v4 stores paths as differences
        (repo / ".gitignore").write_text("!/.loopkit/\n")
        reincluded = watch.hash()
        assert sum(1 for a in calls if "rm" in a) == dropped + 1
    assert reincluded == lkgit.tree_hash(repo) != clean  # .gitignore itself is a change
    listed = git(repo, "ls-tree", "-r", "--name-only", reincluded).split()
    assert ".gitignore" in listed and not [p for p in listed if p.startswith(".loopkit")]


def test_index_may_hold_answers_from_the_bytes_and_asks_git_when_unsure(tmp_path: Path) -> None:
    index = tmp_path / "index"
    assert lkgit._index_may_hold(str(index), [".loopkit"])  # unreadable
    index.write_bytes(b"DIRC\0\0\0\2" + b"\0" * 60 + b"src/app.py\0")
    assert not lkgit._index_may_hold(str(index), [".loopkit"])
    index.write_bytes(b"DIRC\0\0\0\2" + b"\0" * 60 + b".loopkit/ledger.jsonl\0")
    assert lkgit._index_may_hold(str(index), [".loopkit"])
    index.write_bytes(b"DIRC\0\0\0\4" + b"\0" * 60 + b"src/app.py\0")
    assert lkgit._index_may_hold(str(index), [".loopkit"])  # version 4
    index.write_bytes(b"DIRC\0\0\0\2" + b"\0" * 60 + b"src/app.py\0link" + b"\0" * 24)
    assert lkgit._index_may_hold(str(index), [".loopkit"])  # a split index


def test_attributes_the_base_had_are_kept_and_a_real_binary_stays_binary(repo: Path) -> None:
    from loopkit.evidence import diff as lkdiff

    (repo / ".gitattributes").write_text("*.lock -diff\n")
    (repo / "deps.lock").write_text("a\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the user's own attributes")
    (repo / "deps.lock").write_text("a\nb\nc\n")  # the user's -diff: no line counts
    files = {f["path"]: f for f in lkdiff.gather(repo).files}
    assert files["deps.lock"].get("binary") and files["deps.lock"]["added"] == 0
    # The worker's own attributes (here in a .gitattributes that ignores itself, so that
    # it is in no change): counted as git counts with the base's attributes in force --
    # the user's *.lock -diff still holds, a real binary (a NUL byte) still has no lines.
    (repo / "src" / ".gitattributes").write_text("* binary\n")
    (repo / "src" / ".gitignore").write_text(".gitattributes\n.gitignore\n")
    (repo / "src" / "blob.bin").write_bytes(b"\0\1\2" * 100)
    (repo / "src" / "app.py").write_text("changed\n")
    (repo / "src" / "new.py").write_text("a\nb\nc\n")
    files = {f["path"]: f for f in lkdiff.gather(repo).files}
    assert ".gitattributes" not in " ".join(files)  # hidden from the change itself
    assert files["deps.lock"].get("binary") and files["deps.lock"]["added"] == 0
    assert (files["src/app.py"]["added"], files["src/app.py"]["deleted"]) == (1, 10)
    assert (files["src/new.py"]["added"], files["src/new.py"].get("binary")) == (3, None)
    assert files["src/blob.bin"].get("binary") and files["src/blob.bin"]["added"] == 0


def test_a_command_started_with_stderr_closed_still_gives_its_verdict(repo: Path) -> None:
    # No stderr at all (a daemon, `2>&-`): what a command says there is dropped, and its
    # exit code is still the verdict, not a crash (70).
    (repo / "src" / "app.py").write_text("changed\n")
    done = subprocess.run(
        ["bash", "-c", f'"{BIN}/lk-diff" </dev/null 2>&-'], cwd=repo, capture_output=True
    )
    assert done.returncode == 0, done.stdout
    assert json.loads(done.stdout)["within_policy"] is True


def test_what_was_ignored_at_the_start_is_folders_ignored_whole_and_files(git_repo: Path) -> None:
    # A folder is listed only where a rule ignores it as a whole: `foo/` holds only
    # ignored *.pyc files now, but a new foo/new.py would not be ignored.
    (git_repo / ".gitignore").write_text("*.pyc\nbuild/\n*.tmp/\n")
    git(git_repo, "add", ".gitignore")
    git(git_repo, "commit", "-qm", "ignore rules")
    # A folder named like pathspec magic is a name, not magic, to check-ignore.
    for rel in ("foo/a.pyc", "build/out.bin", "tools/lib/x.py", "src/keep.py", ":(glob)a.tmp/x"):
        (git_repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (git_repo / rel).write_text("x\n")
    (git_repo / "tools" / ".gitignore").write_text("*\n")  # in no commit, ignores itself
    found = lkgit.ignored_now(git_repo)
    assert "build/" in found and "foo/a.pyc" in found and "tools/lib/" in found
    assert ":(glob)a.tmp/" in found
    assert "foo/" not in found and not any(p.startswith("src") for p in found)
    added = [{"path": p, "status": "added"} for p in ("foo/new.py", "tools/lib/y.py", "build/z")]
    added.append({"path": "tools/lib/x.py", "status": "modified"})
    from loopkit.evidence import diff

    assert diff._ignored_at_start(added, found, set()) == ["tools/lib/y.py", "build/z"]
    assert diff._ignored_at_start(added, found, {"build/z"}) == ["tools/lib/y.py"]
    assert diff._ignored_at_start(added, [], set()) == []
