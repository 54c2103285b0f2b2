"""The worker's sandbox (bubblewrap): what a worker inside can and cannot reach.

Command workers try each escape the trust boundary names (write .git, read the state
folder, read the loop's environment through /proc, leave a daemon behind, share /tmp);
the real claude and codex CLIs then work inside it against the scripted model server,
resume included. Where a test shows a leak is closed, a control shows the same probe
finding it without the sandbox, so the assertion can fail.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from loopkit import proc
from loopkit.boundary import sandbox
from loopkit.testing import rehearse
from tests.helpers import git
from tests.helpers.agents import AGENTS_BIN, claude_bin, codex_bin, model_server
from tests.helpers.invoke import pids_with

PY = sys.executable


@pytest.fixture(autouse=True)
def _needs_bwrap() -> None:
    available, reason = sandbox.probe()
    if not available:
        if os.environ.get("LOOPKIT_REQUIRE_SANDBOX") == "1":
            pytest.fail(f"no sandbox: {reason}")
        pytest.skip(f"no sandbox: {reason}")


def base_env(**extra: str) -> dict[str, str]:
    path = os.environ.get("PATH", os.defpath)
    return {"PATH": f"{path}{os.pathsep}{AGENTS_BIN}", "LANG": "C.UTF-8", **extra}


def state(repo: Path) -> Path:
    folder = repo / ".loopkit"
    folder.mkdir(exist_ok=True)
    return folder


def boxed(repo: Path, argv: Sequence[str], **kw: Any) -> sandbox.Wrapped:
    kw.setdefault("env", base_env())
    return sandbox.wrap(argv, root=repo, git_dir=repo / ".git", state_dir=state(repo), **kw)


def sh(repo: Path, script: str, *, timeout: float = 30, **kw: Any) -> proc.Finished:
    """``sh -c script`` inside the sandbox, through loopkit's process door."""
    argv, env = boxed(repo, ["sh", "-c", script], **kw)
    return proc.run(argv, cwd=repo, env=env, timeout=timeout)


def text(done: proc.Finished) -> str:
    return done.output.decode("utf-8", "replace")


# -- the probe and the command line --------------------------------------------------------


def test_probe_starts_a_real_sandbox_once() -> None:
    first = sandbox.probe()
    assert first.available and "bubblewrap at" in first.reason
    assert sandbox.binary() in sandbox.candidates()
    assert sandbox.probe() is first  # kept for the life of the process


def test_no_bwrap_is_reported_and_wrap_refuses(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(sandbox.BWRAP_ENV, str(git_repo / "no-such-bwrap"))
    available, reason = sandbox.probe()
    assert available is False and "no-such-bwrap: not an executable file" in reason
    with pytest.raises(sandbox.SandboxUnavailable, match="no-such-bwrap"):
        boxed(git_repo, ["true"])


def test_the_command_line_carries_no_environment_value(git_repo: Path) -> None:
    argv, env = boxed(git_repo, ["true"], env=base_env(API_KEY="sk-not-on-argv"))
    assert not any("sk-not-on-argv" in a for a in argv)  # argv is world-readable (ps)
    assert env["API_KEY"] == "sk-not-on-argv" and env["TMPDIR"] == "/tmp"
    assert argv[-2:] == ["--", "true"] and "--unshare-net" not in argv
    assert "--unshare-net" in boxed(git_repo, ["true"], network=False).argv


# -- (a) the repository is writable, (b) .git is not ---------------------------------------


def test_the_worker_writes_in_the_repository(git_repo: Path) -> None:
    done = sh(git_repo, "echo made > made.txt && mkdir -p src && echo x > src/a.py && pwd")
    assert done.exit_code == 0, text(done)
    assert (git_repo / "made.txt").read_text() == "made\n"
    assert (git_repo / "src" / "a.py").exists()
    assert text(done).strip() == str(git_repo.resolve())


def test_the_worker_cannot_touch_git(git_repo: Path) -> None:
    hooks = sorted(p.name for p in (git_repo / ".git" / "hooks").iterdir())
    config = (git_repo / ".git" / "config").read_text()
    script = """
        for try in 'echo "#!/bin/sh" > .git/hooks/pre-commit' \
                   'echo "[core] fsmonitor = evil" >> .git/config' \
                   'echo "* filter=evil" > .git/info/attributes' \
                   'mv .git .git-moved' 'rm -rf .git' 'git config core.hooksPath /tmp/h'; do
            if sh -c "$try" 2>/dev/null; then echo "ALLOWED: $try"; fi
        done
        echo finished
    """
    done = sh(git_repo, script)
    assert text(done).strip() == "finished"
    assert sorted(p.name for p in (git_repo / ".git" / "hooks").iterdir()) == hooks
    assert (git_repo / ".git" / "config").read_text() == config
    assert not (git_repo / ".git" / "info" / "attributes").exists()


def test_a_linked_worktree_protects_its_git_file(git_repo: Path, tmp_path: Path) -> None:
    linked = tmp_path / "linked"
    git(git_repo, "worktree", "add", "-q", str(linked), "-b", "side")
    git_dir = git(linked, "rev-parse", "--absolute-git-dir").strip()
    argv, env = sandbox.wrap(
        ["sh", "-c", "echo gitdir: /tmp/elsewhere > .git; echo x >> $0/HEAD; echo y > ok", git_dir],
        root=linked,
        git_dir=git_dir,
        state_dir=state(linked),
        env=base_env(),
    )
    done = proc.run(argv, cwd=linked, env=env)
    assert (linked / "ok").exists(), text(done)
    assert (linked / ".git").read_text().startswith(f"gitdir: {git_repo}")
    assert git(linked, "rev-parse", "--abbrev-ref", "HEAD").strip() == "side"


def test_read_only_extras_and_a_judges_read_only_repository(git_repo: Path) -> None:
    (git_repo / "loop.yaml").write_text("version: 1\n")
    done = sh(
        git_repo,
        "echo evil > loop.yaml; mv loop.yaml x.yaml; echo fine > other.txt",
        read_only_extra=[git_repo / "loop.yaml"],
    )
    assert (git_repo / "loop.yaml").read_text() == "version: 1\n", text(done)
    assert (git_repo / "other.txt").exists()
    done = sh(git_repo, "cat README.md && echo no > judged.txt", repo_writable=False)
    assert done.exit_code != 0 and "# test repo" in text(done)
    assert "Read-only file system" in text(done)
    assert not (git_repo / "judged.txt").exists()


# -- (c) the state folder is not there ------------------------------------------------------


def test_the_state_folder_is_empty_and_read_only_inside(git_repo: Path) -> None:
    folder = state(git_repo)
    (folder / "cancel.json").write_text('{"reason": "stop"}\n')
    (folder / "ledger").mkdir()
    (folder / "ledger" / "index.json").write_text("{}\n")
    done = sh(
        git_repo,
        "ls -A .loopkit; cat .loopkit/cancel.json; rm -rf .loopkit; "
        "echo 1 > .loopkit/ledger; echo listed:$(ls -A .loopkit | wc -l)",
    )
    out = text(done)
    assert "cancel.json" not in out.replace("cat: .loopkit/cancel.json", "")
    assert "stop" not in out and "listed:0" in out
    assert (folder / "cancel.json").read_text() == '{"reason": "stop"}\n'
    assert (folder / "ledger" / "index.json").exists()


def test_a_state_folder_outside_the_repository_and_hidden_extras(
    git_repo: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "home" / ".loopkit-state"
    outside.mkdir(parents=True)
    (outside / "ledger.jsonl").write_text("secret ledger\n")
    creds = tmp_path / "home" / ".aws"
    creds.mkdir()
    (creds / "credentials").write_text("aws_secret_access_key = abc\n")
    token = tmp_path / "home" / ".netrc"
    token.write_text("machine x password p\n")
    argv, env = sandbox.wrap(
        [
            "sh",
            "-c",
            f"cat {outside}/ledger.jsonl {creds}/credentials {token}; ls -A {creds}; echo ran",
        ],
        root=git_repo,
        git_dir=git_repo / ".git",
        state_dir=outside,
        env=base_env(),
        hidden_extra=[creds, token, tmp_path / "not-there"],
        writable_extra=[tmp_path / "home"],  # hiding wins over a writable parent
    )
    done = proc.run(argv, cwd=git_repo, env=env)
    out = text(done)
    assert out.endswith("ran\n") and "Permission denied" not in out, out  # it ran, found nothing
    assert "secret" not in out and "password" not in out
    assert (outside / "ledger.jsonl").read_text() == "secret ledger\n"


# -- (d) no secret from the loop's environment ----------------------------------------------

#: Scans every process it can see for a value (given reversed, so that its own command
#: line does not contain it) and reads its parent's and the loop's /proc environ.
SCANNER = """
import os, sys
needle, loop_pid = sys.argv[1][::-1].encode(), sys.argv[2]
hits = []
for pid in os.listdir("/proc"):
    for name in ("environ", "cmdline"):
        try:
            with open(f"/proc/{pid}/{name}", "rb") as f:
                if needle in f.read():
                    hits.append(f"{pid}/{name}")
        except OSError:
            pass
for pid in (str(os.getppid()), loop_pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            if needle in f.read():
                hits.append(f"parent {pid}")
    except OSError:
        pass
print("HITS", sorted(set(hits)), "OWN", needle.decode() in repr(dict(os.environ)))
"""

#: The loop: a process whose own environment holds the secret, starting the worker
#: (LOOP_PID in the worker's argv becomes the loop's pid).
LAUNCHER = """
import json, os, subprocess, sys
argv, env = json.loads(sys.argv[1])
argv = [str(os.getpid()) if a == "LOOP_PID" else a for a in argv]
sys.exit(subprocess.call(argv, env=env))
"""


def _scan_from_a_loop(repo: Path, secret: str, how: str) -> str:
    env = base_env(HOME=os.environ["HOME"])
    scanner = [PY, "-c", SCANNER, secret[::-1], "LOOP_PID"]
    inner: tuple[list[str], dict[str, str] | None]
    if how == "bare":  # no sandbox: only the worker's own environment is allow-listed
        inner = (scanner, env)
    else:
        argv, wrapped_env = boxed(repo, scanner, env=env)
        inner = (argv, wrapped_env if how == "sandbox" else None)  # None: bwrap inherits all
    done = proc.run(
        [PY, "-c", LAUNCHER, json.dumps(inner)],
        cwd=repo,
        env={**os.environ, "AWS_SECRET_ACCESS_KEY": secret},
    )
    return text(done)


@pytest.mark.parametrize(
    ("how", "leaked"),
    [
        # control: without a sandbox /proc/$PPID/environ holds the loop's secret
        ("bare", "parent LOOP_PID"),
        # control: bwrap started with everything hands it on and keeps it as pid 1
        ("full-env", "1/environ"),
        ("sandbox", None),
    ],
)
def test_the_loops_environment_is_out_of_reach(
    git_repo: Path, how: str, leaked: str | None
) -> None:
    secret = "wJalrXUtnFEMI-K7MDENG-bPxRfiCY"
    out = _scan_from_a_loop(git_repo, secret, how)
    if leaked is None:
        assert out.strip() == "HITS [] OWN False", out
    elif leaked == "parent LOOP_PID":
        assert "HITS [" in out and "'parent " in out and "OWN False" in out, out
    else:
        assert f"'{leaked}'" in out, out


# -- (e) nothing outlives the sandbox, (f) /tmp is private ----------------------------------

#: A daemon in a session of its own (the pause lets setsid() happen before the run ends).
DAEMON = "(setsid sleep {t} </dev/null >/dev/null 2>&1 &); sleep 0.3; echo started"


def _gone(marker: str, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not pids_with(marker):
            return True
        time.sleep(0.05)
    return False


def test_a_double_forked_daemon_does_not_outlive_the_sandbox(git_repo: Path) -> None:
    marker = f"300.{os.getpid()}1"
    done = sh(git_repo, DAEMON.format(t=marker))
    assert done.exit_code == 0 and "started" in text(done)
    assert _gone(marker)


def test_control_a_double_forked_daemon_outlives_a_bare_run(git_repo: Path) -> None:
    marker = f"300.{os.getpid()}2"
    # In a process of its own: a test process that ran a loopkit command in-process may
    # have become a subreaper (loopkit.proc.guard), which ends such daemons too.
    script = f"from loopkit import proc; import sys; sys.stdout.buffer.write(proc.run({['sh', '-c', DAEMON.format(t=marker)]!r}).output)"
    out = subprocess.run(
        [sys.executable, "-c", script],
        cwd=git_repo,
        env=base_env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "started" in out
    try:
        assert not _gone(marker, 0.5)  # what the sandbox prevents
    finally:
        for pid in pids_with(marker):
            os.kill(pid, 9)


def test_a_timeout_ends_the_sandbox_and_its_daemon(git_repo: Path) -> None:
    marker = f"300.{os.getpid()}3"
    start = time.monotonic()
    done = sh(git_repo, DAEMON.format(t=marker) + "; sleep 60", timeout=1)
    assert done.timed_out and time.monotonic() - start < 50  # the 60 s sleep: not waited out
    assert _gone(marker)


def test_the_worker_sees_its_own_processes_only(git_repo: Path) -> None:
    done = sh(git_repo, "ls /proc | grep -c '^[0-9]'; cat /proc/1/cmdline | tr '\\0' ' '")
    count, init = text(done).splitlines()[:2]
    assert int(count) <= 5, text(done)  # bwrap's init, sh, ls/grep: not the host's
    assert init.split()[0].endswith("bwrap") and "--setenv" not in init


def test_tmp_is_private(git_repo: Path, tmp_path: Path) -> None:
    (tmp_path / "beside-the-repo.txt").write_text("host\n")
    name = f"loopkit-sandbox-{os.getpid()}.txt"
    done = sh(
        git_repo,
        f"echo mine > /tmp/{name} && echo $TMPDIR; ls -A {tmp_path}; ls -A /tmp | wc -l",
    )
    out = text(done)
    assert done.exit_code == 0, out
    assert out.splitlines()[0] == "/tmp"
    assert "beside-the-repo.txt" not in out and "repo" in out
    assert not Path("/tmp", name).exists()


def test_network_can_be_cut(git_repo: Path) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        port = server.getsockname()[1]
        probe = [PY, "-c", f"import socket; socket.create_connection(('127.0.0.1', {port}), 2)"]
        shared = boxed(git_repo, probe)
        cut = boxed(git_repo, probe, network=False)
        assert proc.run(shared.argv, env=shared.env).exit_code == 0
        assert proc.run(cut.argv, env=cut.env).exit_code != 0


def test_a_unix_socket_on_a_read_only_path_answers_unless_hidden(
    git_repo: Path, tmp_path: Path
) -> None:
    # A read-only mount does not stop connect(): a daemon's socket (docker, dbus) stays
    # reachable, even with the network cut, until it is hidden.
    run = tmp_path / "run"
    run.mkdir()
    path = run / "daemon.sock"
    client = [PY, "-c", f"import socket; socket.socket(socket.AF_UNIX).connect({str(path)!r})"]
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        server.listen(4)
        seen = boxed(git_repo, client, read_only_extra=[run], network=False)
        hidden = boxed(git_repo, client, read_only_extra=[run], hidden_extra=[path])
        assert proc.run(seen.argv, env=seen.env).exit_code == 0
        assert proc.run(hidden.argv, env=hidden.env).exit_code != 0


# -- the real agent CLIs inside the sandbox --------------------------------------------------

WRITE = {"name": "Write", "input": {"file_path": "{{cwd}}/hello.py", "content": "print('hello')\n"}}
READ = {"name": "Read", "input": {"file_path": "{{cwd}}/hello.py"}}
EDIT = {
    "name": "Edit",
    "input": {"file_path": "{{cwd}}/hello.py", "old_string": "hello", "new_string": "hello, world"},
}


def events(done: proc.Finished) -> list[dict[str, Any]]:
    out = []
    for line in text(done).splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def _claude(repo: Path, home: Path, url: str, *, resume: str | None = None) -> proc.Finished:
    """claude -p in the sandbox: only its config folder (~/.claude, ~/.claude.json) is
    writable, HOME itself stays read-only (no ~/.bashrc for a worker to plant)."""
    env = base_env(**rehearse.claude_env(url, home, retries=0))
    (home / ".claude").mkdir(exist_ok=True)
    if not (home / ".claude.json").exists():
        (home / ".claude.json").write_text("{}\n")
    argv = [claude_bin(), "-p", "go", "--output-format", "stream-json", "--verbose"]
    argv += ["--permission-mode", "acceptEdits", *(["--resume", resume] if resume else [])]
    wrapped = boxed(repo, argv, env=env, writable_extra=[home / ".claude", home / ".claude.json"])
    return proc.run(wrapped.argv, cwd=repo, env=wrapped.env, timeout=90)


@pytest.mark.agents
def test_claude_edits_and_resumes_inside_the_sandbox(git_repo: Path, tmp_path: Path) -> None:
    home = tmp_path / "claude-home"
    turns = [
        {"text": "Creating.", "tools": [WRITE]},
        {"text": "First part done."},
        {"tools": [READ]},
        {"tools": [EDIT]},
        {"text": "Second part done."},
    ]
    with model_server(turns) as server:
        first = _claude(git_repo, home, server.url)
        result = [e for e in events(first) if e.get("type") == "result"]
        assert first.exit_code == 0 and result and result[0]["is_error"] is False, text(first)
        sid = result[0]["session_id"]
        assert list((home / ".claude" / "projects").glob(f"*/{sid}.jsonl"))  # persisted
        second = _claude(git_repo, home, server.url, resume=sid)
        turns_seen = [r["turn"] for r in server.model_requests("anthropic")]
    result = [e for e in events(second) if e.get("type") == "result"]
    assert second.exit_code == 0 and result[0]["result"] == "Second part done.", text(second)
    assert turns_seen[-3:] == [2, 3, 4]  # the resumed conversation carried the first two turns
    assert (git_repo / "hello.py").read_text() == "print('hello, world')\n"
    assert sorted(os.listdir(home)) == [".claude", ".claude.json"]  # nothing else written


PATCH = {
    "name": "apply_patch",
    "input": "*** Begin Patch\n*** Add File: hello.py\n+print('hello')\n*** End Patch\n",
}


def _codex(repo: Path, home: Path, url: str, *, resume: str | None = None) -> proc.Finished:
    """codex exec in the sandbox: CODEX_HOME writable; its own bwrap sandbox does not nest
    inside ours when the worker is root (uid map refused), so ours is the only one:
    ``--sandbox danger-full-access`` given before ``resume``."""
    env = base_env(HOME=str(home), **rehearse.codex_home(url, home, retries=0))
    argv = [codex_bin(), "exec", "--json", "--sandbox", "danger-full-access"]
    argv += ["--skip-git-repo-check", *(["resume", resume] if resume else []), "--", "go"]
    wrapped = boxed(repo, argv, env=env, writable_extra=[home])
    return proc.run(wrapped.argv, cwd=repo, env=wrapped.env, timeout=90)


@pytest.mark.agents
def test_codex_patches_runs_and_resumes_inside_the_sandbox(git_repo: Path, tmp_path: Path) -> None:
    home = tmp_path / "codex-home"
    shell = {"name": "exec_command", "input": {"cmd": "cat hello.py; echo y > .git/config"}}
    turns = [
        {"text": "Creating.", "tools": [PATCH]},
        {"text": "First part done."},
        {"tools": [shell]},
        {"text": "Second part done."},
    ]
    config = (git_repo / ".git" / "config").read_text()
    with model_server(turns) as server:
        first = _codex(git_repo, home, server.url)
        assert first.exit_code == 0, text(first)
        thread = next(e["thread_id"] for e in events(first) if e["type"] == "thread.started")
        assert list((home / "sessions").rglob(f"*{thread}.jsonl"))  # persisted in CODEX_HOME
        second = _codex(git_repo, home, server.url, resume=thread)
    assert second.exit_code == 0, text(second)
    done = [e["item"] for e in events(second) if e["type"] == "item.completed"]
    ran = next(i for i in done if i["type"] == "command_execution")
    assert "print('hello')" in ran["aggregated_output"]
    assert "Read-only file system" in ran["aggregated_output"]  # .git stays out of reach
    assert done[-1]["text"] == "Second part done."
    assert (git_repo / "hello.py").read_text() == "print('hello')\n"
    assert (git_repo / ".git" / "config").read_text() == config
