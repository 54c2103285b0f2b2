"""The pure parts of the .git defences: how a control state is compared, reported and
shortened, which git calls need the filter lookup, and how nested repositories read."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from loopkit import control, git, proc
from loopkit.evidence import diff

SHA = "a" * 64
BASE = "1" * 40
MOVED = "2" * 40
STARTED = {
    ".git": "folder",
    ".git/config": SHA,
    ".git/info/exclude": "b" * 64,
    ".git/loopkit/cache/contract-x.json": "c" * 64,
    control.HEAD_KEY: "ref: refs/heads/main",
    ".git/refs/heads/main": BASE,
}


def _record(state: dict[str, str], changed: list[str] | None = None) -> dict[str, object]:
    return {
        "digest": control.control_digest(state),
        "paths": {k: control.short(v) for k, v in state.items()},
        "changed": changed or [],
    }


def _found(started: dict[str, str], now: dict[str, str], **kw: list[str]) -> set[tuple[str, str]]:
    return {(v.rule, v.path) for v in diff.git_control_violations(_record(started, **kw), now)}


def test_an_unchanged_state_has_no_violation() -> None:
    assert _found(STARTED, dict(STARTED)) == set()


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({".git/config": "d" * 64}, {("git_control_changed", ".git/config")}),
        ({".git/hooks/pre-commit": "e" * 64}, {("git_control_changed", ".git/hooks/pre-commit")}),
        ({".git/info/exclude": None}, {("git_control_changed", ".git/info/exclude")}),
        ({".git/refs/heads/main": MOVED}, {("head_moved", "refs/heads/main")}),
        ({control.HEAD_KEY: "ref: refs/heads/other"}, {("head_moved", "HEAD")}),
        ({control.HEAD_KEY: BASE}, {("head_moved", "HEAD")}),
        # loopkit empties its cache after the worker: that is no violation.
        ({".git/loopkit/cache/contract-x.json": None}, set()),
    ],
)
def test_each_change_is_reported_by_its_rule(
    change: dict[str, str | None], expected: set[tuple[str, str]]
) -> None:
    now = dict(STARTED)
    for key, value in change.items():
        if value is None:
            now.pop(key)
        else:
            now[key] = value
    assert _found(STARTED, now) == expected


def test_what_changed_while_the_worker_ran_counts_even_when_gone_since() -> None:
    now = {k: v for k, v in STARTED.items() if "cache" not in k}
    planted = ".git/loopkit/cache/contract-planted.json"
    assert _found(STARTED, now, changed=[planted]) == {("git_control_changed", planted)}


def test_no_record_no_comparison() -> None:
    assert diff.git_control_violations(None, dict(STARTED)) == []
    assert diff.git_control_violations({"digest": "x"}, dict(STARTED)) == []


def test_short_cuts_only_sha256_hex() -> None:
    assert control.short(SHA) == "a" * 16
    assert control.short(BASE) == BASE
    assert control.short("ref: refs/heads/main") == "ref: refs/heads/main"
    assert control.control_changes({"k": control.short(SHA)}, {"k": SHA}) == []
    assert control.control_changes({"k": "ref: refs/heads/ma"}, {"k": "ref: refs/heads/main"}) == [
        "k"
    ]


@pytest.mark.parametrize(
    ("args", "may_filter"),
    [
        (["rev-parse", "HEAD"], False),
        (["update-ref", "refs/x", BASE], False),
        (["diff-index", "--cached", "-z", BASE], False),
        (["diff-index", "-z", BASE], True),
        (["-c", "advice.addEmbeddedRepo=false", "add", "-A"], True),
        (["write-tree"], True),  # writing an index re-reads racily clean files
        (["read-tree", "-u", "--reset", BASE], True),
        (["cat-file", "blob", BASE], False),
        (["cat-file", "--filters", "--path=x", BASE], True),
    ],
)
def test_which_calls_look_up_filter_drivers(args: list[str], may_filter: bool) -> None:
    at, sub = git._subcommand(args)
    assert args[at] == sub
    assert git._may_filter(sub, args) is may_filter


def test_every_call_gets_the_neutral_settings_after_the_callers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "user.name")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "me")
    env = git._env(settings=[("filter.a=b.clean", "")])
    pairs = [
        (env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"])
        for i in range(int(env["GIT_CONFIG_COUNT"]))
    ]
    assert pairs == [("user.name", "me"), *git.NEUTRAL_CONFIG, ("filter.a=b.clean", "")]
    assert env["GIT_NO_REPLACE_OBJECTS"] == "1"


def test_unborn_nested_repositories_are_read_from_gits_complaint() -> None:
    err = (
        b"error: 'src/lib/' does not have a commit checked out\n"
        b"error: 'a b/' does not have a commit checked out\n"
        b"fatal: adding files failed\n"
    )
    assert git._unborn_repositories(proc.Captured(128, b"", err)) == ["a b", "src/lib"]
    other = err + b'error: open("x"): Permission denied\n'
    assert git._unborn_repositories(proc.Captured(128, b"", other)) == []


def _facts(files: list[dict[str, object]], unborn: list[str] | None = None) -> diff.Facts:
    files = [{"added": 0, "deleted": 0, **f} for f in files]
    return diff.Facts(
        root=Path("/r"), base=BASE, base_ref="HEAD", tree=BASE, files=files, unborn=unborn or []
    )


def test_new_gitlinks_and_unborn_repositories_are_nested_repositories() -> None:
    files = [
        {"path": "lib", "status": "added", "new_mode": "160000", "submodule": True},
        {
            "path": "vendor",
            "status": "type_changed",
            "old_mode": "100644",
            "new_mode": "160000",
            "submodule": True,
        },
        # An existing submodule moved to another commit: the scope rules decide.
        {"path": "ext", "status": "modified", "submodule": True},
        {"path": "old", "status": "deleted", "submodule": True},
    ]
    found = {(v.rule, v.path) for v in diff.nested_repositories(_facts(files, ["sub"]))}
    assert found == {
        ("nested_repository", "lib"),
        ("nested_repository", "vendor"),
        ("nested_repository", "sub"),
    }
    result = diff.assess(_facts(files, ["sub"]), contract=None)
    assert result.within_policy is False


@pytest.fixture
def user_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A repository, and a HOME of its own with no global git files yet (no system config,
    no XDG or GIT_CONFIG_* overrides)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    home = tmp_path / "home"
    (home / ".config" / "git").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    for name in ("XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    return repo, home


def test_the_users_own_git_files_are_control_state(
    user_repo: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, home = user_repo
    before = control.control_state(repo)
    assert not [k for k in before if k.startswith("~")]  # none there: none recorded
    (home / ".config" / "git" / "attributes").write_text("* -diff\n")
    (home / ".gitconfig").write_text("[alias]\n\tst = status\n")
    after = control.control_state(repo)
    assert control.control_changes(before, after) == ["~/.config/git/attributes", "~/.gitconfig"]
    # A dotfiles symlink: what it points at is what git reads, and watched.
    (home / ".gitconfig").unlink()
    (tmp_path / "dotfiles").write_text("[user]\n\tname = me\n")
    (home / ".gitconfig").symlink_to(tmp_path / "dotfiles")
    linked = control.control_state(repo)
    with open(tmp_path / "dotfiles", "a") as f:
        f.write(f"[core]\n\tattributesFile = {tmp_path / 'absent'}\n")  # no file there
    assert control.control_changes(linked, control.control_state(repo)) == ["~/.gitconfig"]
    # Where git would read them instead: $XDG_CONFIG_HOME, $GIT_CONFIG_GLOBAL, the system's.
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "global"))
    monkeypatch.delenv("GIT_CONFIG_NOSYSTEM")
    monkeypatch.setenv("GIT_CONFIG_SYSTEM", str(tmp_path / "system"))
    files = dict((key, path) for path, key in git.user_files())
    assert files == {
        "global git config": str(tmp_path / "global"),
        "system git config": str(tmp_path / "system"),
        "~/.config/git/attributes": str(tmp_path / "xdg" / "git" / "attributes"),
        "~/.config/git/ignore": str(tmp_path / "xdg" / "git" / "ignore"),
    }


def test_the_files_a_config_names_are_control_state(user_repo: tuple[Path, Path]) -> None:
    repo, home = user_repo
    (home / "conf.d").mkdir()
    (home / ".gitconfig").write_text(
        "[core]\n\texcludesFile = ~/ignore-all\n\tattributesFile = ~/attrs\n"
        "[include]\n\tpath = ~/conf.d/extra\n"
    )
    (home / "conf.d" / "extra").write_text("[alias]\n\tst = status\n")
    (home / "ignore-all").write_text(".env\n")
    before = control.control_state(repo)
    keys = {k for k in before if k.startswith("git config file: ")}
    assert keys == {
        f"git config file: {home / 'conf.d' / 'extra'}",
        f"git config file: {home / 'ignore-all'}",
    }  # ~/attrs does not exist (yet): its creation is a change too
    (home / "ignore-all").write_text("# nothing\n")
    (home / "attrs").write_text("* -diff\n")
    (home / "conf.d" / "extra").write_text("[alias]\n\tst = status -s\n")
    changed = control.control_changes(before, control.control_state(repo))
    assert changed == sorted(
        f"git config file: {home / n}" for n in ("attrs", "conf.d/extra", "ignore-all")
    )


def test_the_config_listing_is_asked_again_only_when_a_file_it_reads_changed(
    user_repo: tuple[Path, Path], tmp_path: Path
) -> None:
    """lk-invoke asks before and after the worker, lk-diff again: the answer is reused
    while nothing git reads config from changed -- and an include that held no entry,
    empty or not there yet, is watched too: a worker filling one is seen."""
    from loopkit import timing

    repo, home = user_repo
    (home / ".gitconfig").write_text("[include]\n\tpath = extra.cfg\n\tpath = later.cfg\n")
    (home / "extra.cfg").write_text("")  # empty: git reads no entry from it
    before = control.control_state(repo)
    timing.begin()
    assert control.control_state(repo) == before
    assert timing.git_processes() == 0  # nothing changed: no git call
    attributes = tmp_path / "attrs"
    attributes.write_text("* -diff\n")
    (home / "extra.cfg").write_text(f"[core]\n\tattributesFile = {attributes}\n")
    filled = control.control_state(repo)
    assert control.control_changes(before, filled) == [
        f"git config file: {attributes}",
        f"git config file: {home / 'extra.cfg'}",
    ]
    (home / "later.cfg").write_text("[alias]\n\tx = status\n")  # an include not there before
    assert f"git config file: {home / 'later.cfg'}" in control.control_changes(
        filled, control.control_state(repo)
    )
    # The repository's own config named it: a new entry there is asked about again.
    subprocess.run(
        ["git", "config", "core.excludesFile", str(tmp_path / "ex")], cwd=repo, check=True
    )
    (tmp_path / "ex").write_text("*.log\n")
    assert f"git config file: {tmp_path / 'ex'}" in control.control_state(repo)
