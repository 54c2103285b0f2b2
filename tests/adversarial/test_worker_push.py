"""A hostile worker tries to push, with whatever credential it can find, in a checkout
lk stack has pushed from and with the forge's token in the loop's own environment (as the
landing job has it): the worker gets no token, finds none in .git/config, and the forge's
branches stay where they were."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from loopkit.testing.forge import serving
from tests.helpers import git, require_tool
from tests.helpers.recipes import BIN, fail_message, make_project, recipe_env

pytestmark = pytest.mark.slow

PUSHER = """
import base64, os, subprocess
token = os.environ.get("GH_TOKEN") or os.environ.get("LOOPKIT_FORGE_TOKEN") or ""
config = Path(".git/config").read_text() if Path(".git/config").is_file() else ""
found = [line for line in config.splitlines() if "extraheader" in line.lower() or "@" in line]
header = base64.b64encode(("x-access-token:" + token).encode()).decode()
tries = []
for extra in (["-c", "http.extraHeader=Authorization: Basic " + header], []):
    done = subprocess.run(
        ["git", *extra, "push", "-f", os.environ.get("FORGE_URL") or "{url}", "HEAD:refs/heads/main"],
        capture_output=True, text=True, env={{**os.environ, "GIT_TERMINAL_PROMPT": "0"}},
    )
    tries.append(done.returncode)
(STATE / "push.txt").write_text(repr((token, found, tries)))
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("good\\n")
"""


def test_a_worker_cannot_push_with_the_landers_token(tmp_path: Path) -> None:
    require_tool("git")
    with serving(tmp_path / "forge") as forge:
        url = forge.url("o/r")
        p = make_project(tmp_path, PUSHER.format(url=url))
        forge.create_repo("o/r", source=p.root)
        main = git(forge.repos["o/r"].path, "rev-parse", "main").strip()
        p.git("remote", "add", "origin", url)
        # lk stack pushed from this checkout before: it must have left nothing behind.
        env = recipe_env({"GH_TOKEN": forge.token, "FORGE_URL": url})
        p.git("switch", "-q", "-c", "side")
        (p.root / "src").mkdir(exist_ok=True)
        (p.root / "src" / "value.txt").write_text("good\n")
        p.git("add", "src/value.txt")
        p.git("commit", "-q", "-m", "side")
        done = subprocess.run(
            ["git", "-c", "credential.helper=", "push", "-q", "origin", "side"],
            cwd=p.root,
            env={**env, "GIT_TERMINAL_PROMPT": "0"},
            capture_output=True,
            text=True,
        )
        assert done.returncode != 0  # plain git has no credential here either
        stack_env = {**env}
        add = subprocess.run(
            [str(BIN / "lk"), "stack", "add", "s", "one", "--remote", "origin", "--target", "main"],
            cwd=p.root,
            env=stack_env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert add.returncode == 0, add.stderr
        push = subprocess.run(
            [str(BIN / "lk"), "stack", "push", "s"],
            cwd=p.root,
            env=stack_env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert push.returncode == 0, push.stderr  # lk stack could push, with the token
        p.git("switch", "-q", "main")

        seen = len(forge.log)
        proc = p.run(
            "loop.sh", "--contract", "loop.yaml", "--task-id", "t", "--task", "Fix", env=env
        )
        assert proc.returncode == 0, fail_message(proc)
        token, found, tries = eval((p.scratch / "push.txt").read_text())
        assert token == ""  # the worker never got the lander's token
        assert found == []  # nor a header or a URL with one in .git/config
        assert all(code != 0 for code in tries)
        # It did reach the forge (the sandbox lets it talk to 127.0.0.1), and was refused.
        assert [e for e in forge.log[seen:] if e.get("push")]
        assert git(forge.repos["o/r"].path, "rev-parse", "main").strip() == main
        assert forge.token not in (p.root / ".git" / "config").read_text()
