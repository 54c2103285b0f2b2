"""The environment children get, and the secrets kept out of what loopkit writes."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from loopkit.boundary import secrets


def test_only_the_allow_list_and_the_names_asked_for_pass() -> None:
    parent = {
        "PATH": "/bin",
        "AWS_SECRET_ACCESS_KEY": "x" * 20,
        "OPENAI_API_KEY": "k" * 20,
        "MY_SETTING": "1",
        "OPENAI_BASE_URL": "http://127.0.0.1",
    }
    env = secrets.allowed_env(parent, ["MY_SETTING", "OPENAI_"])
    assert env == {
        "PATH": "/bin",
        "MY_SETTING": "1",
        "OPENAI_API_KEY": "k" * 20,
        "OPENAI_BASE_URL": "http://127.0.0.1",
    }


def test_values_named_like_secrets_are_redacted_in_text_and_data() -> None:
    values = secrets.secret_values(
        {
            "GITHUB_TOKEN": "ghp_abcdef123456",
            "GIT_AUTHOR_NAME": "Ada Lovelace",
            "SHORT_KEY": "abc",
            "DB_PASSWORD": "hunter2hunter2",
        }
    )
    assert values == ["hunter2hunter2", "ghp_abcdef123456"] or set(values) == {
        "hunter2hunter2",
        "ghp_abcdef123456",
    }
    s = secrets.Scrubber(values)
    doc = {
        "run": {"final_message": "token ghp_abcdef123456 and hunter2hunter2", "n": 3},
        "list": ["ghp_abcdef123456"],
        "by Ada Lovelace": True,
    }
    out = s.data(doc)
    assert out["run"]["final_message"] == "token [redacted] and [redacted]"
    assert out["list"] == ["[redacted]"] and out["run"]["n"] == 3
    assert "by Ada Lovelace" in out  # an author's name is not a secret


def test_checks_run_outside_the_environment_pre_commit_built_for_loopkit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "pre-commit"
    venv = store / "repoabc" / "py_env-python3"
    (venv / "bin").mkdir(parents=True)
    monkeypatch.setenv("PRE_COMMIT_HOME", str(store))
    monkeypatch.setattr(sys, "prefix", str(venv))
    env = {
        "PATH": os.pathsep.join([str(venv / "bin"), "/usr/local/bin", "/usr/bin"]),
        "VIRTUAL_ENV": str(venv),
    }
    out = secrets.outside_hook_env(env)
    assert out["PATH"] == os.pathsep.join(["/usr/local/bin", "/usr/bin"])
    assert "VIRTUAL_ENV" not in out
    # Installed anywhere else (the user's own venv), nothing changes.
    monkeypatch.setattr(sys, "prefix", str(tmp_path / ".venv"))
    assert secrets.outside_hook_env(env) == env


def test_checks_run_outside_the_environment_of_pre_commit_try_repo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # try-repo builds the hook's venv in a temporary store of its own, not PRE_COMMIT_HOME:
    # known by its layout, beside the clone of the hook's repository.
    monkeypatch.setenv("PRE_COMMIT_HOME", str(tmp_path / "pre-commit"))
    clone = tmp_path / "tmpxyz" / "repoabc"
    venv = clone / "py_env-python3.11"
    (venv / "bin").mkdir(parents=True)
    monkeypatch.setattr(sys, "prefix", str(venv))
    env = {"PATH": os.pathsep.join([str(venv / "bin"), "/usr/bin"]), "VIRTUAL_ENV": str(venv)}
    assert secrets.outside_hook_env(env) == env  # no clone beside it: not pre-commit's
    (clone / ".pre-commit-hooks.yaml").write_text("- id: lk-verify\n")
    assert secrets.outside_hook_env(env) == {"PATH": "/usr/bin"}


def test_what_a_run_needs_from_the_hosts_tmp_is_shown_read_only(tmp_path: Path) -> None:
    """A checkout cloned under /tmp keeps its venv and node_modules there; the sandbox's
    private /tmp would hide them from the worker."""
    from loopkit.boundary.sandbox import tools_under

    venv = tmp_path / "clone" / ".venv"
    (venv / "bin").mkdir(parents=True)
    nm = tmp_path / "clone" / ".cache" / "agents" / "node_modules"
    (nm / ".bin").mkdir(parents=True)
    repo = tmp_path / "repo"
    (repo / "bin").mkdir(parents=True)
    env = {
        "PATH": os.pathsep.join(
            [str(venv / "bin"), str(nm / ".bin"), str(repo / "bin"), "/usr/bin"]
        )
    }
    shown = tools_under([str(venv / "bin" / "python"), "-m", "x"], env, root=repo, tops=["/tmp"])
    if not str(tmp_path.resolve()).startswith("/tmp/"):
        pytest.skip("the test folder is not under /tmp here")
    assert venv.resolve() in shown and nm.resolve() in shown
    assert repo.resolve() not in shown and not any(p == Path("/tmp") for p in shown)
    assert all(str(p).startswith("/tmp/") for p in shown)


@pytest.mark.parametrize(
    ("name", "credential"),
    [
        ("ANTHROPIC_AUTH_TOKEN", True),
        ("CLAUDE_CODE_OAUTH_TOKEN", True),
        ("GOOGLE_APPLICATION_CREDENTIALS", True),
        ("AWS_PROFILE", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("COPILOT_PROVIDER_API_KEY_COMMAND", True),
        ("OPENROUTER_API_KEY", True),
        ("GH_TOKEN", True),
        ("CLAUDE_CODE_MAX_OUTPUT_TOKENS", False),
        ("GEMINI_DEFAULT_AUTH_TYPE", False),
        ("ANTHROPIC_BASE_URL", False),
        ("KEYBOARD_LAYOUT", False),
        ("COPILOT_MODEL", False),
    ],
)
def test_what_a_credential_is(name: str, credential: bool) -> None:
    from loopkit.boundary.secrets import is_credential

    assert is_credential(name) is credential
