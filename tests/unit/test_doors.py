"""The two doors docs/architecture.md names hold: every git process loopkit starts goes
through ``loopkit/git.py`` (its hooks, fsmonitor and the repository's filter drivers off),
and every other process through ``loopkit/proc.py`` but the three the page names.

Read from the source (ast; nothing is imported). A module that starts ``git`` itself, or
a process by ``subprocess``, ``os.exec*``, ``os.spawn*``, ``os.posix_spawn*`` or
``os.system``, fails here with its file and line.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "loopkit"

#: The modules that start processes of their own (docs/architecture.md, ``proc.py``'s row).
OWN_PROCESSES = {
    "proc.py",  # the door itself
    "worker/acp/client.py",  # the ACP agent on a long-lived pipe
    "testing/forge.py",  # the test forge's git and gh
    "boundary/bridge.py",  # inside the sandbox: starts the worker there, after its relays
}
#: The modules that may start git without the door: the door, and the test forge (a
#: stand-in for the forge's own server-side git).
OWN_GIT = {"git.py", "testing/forge.py"}

_SPAWNING = {"system", "fork", "forkpty"} | {
    f"{stem}{tail}"
    for stem in ("exec", "spawn", "posix_spawn")
    for tail in ("", "l", "le", "lp", "lpe", "v", "ve", "vp", "vpe", "p")
}


@functools.cache
def _sources() -> list[tuple[str, ast.Module]]:
    return [
        (path.relative_to(PACKAGE).as_posix(), ast.parse(path.read_text(), str(path)))
        for path in sorted(PACKAGE.rglob("*.py"))
    ]


def _starts_git(node: ast.Call) -> bool:
    """A call whose first argument is an argv list or tuple that begins with "git"."""
    if not node.args or not isinstance(node.args[0], (ast.List, ast.Tuple)):
        return False
    first = node.args[0].elts[:1]
    return bool(first) and isinstance(first[0], ast.Constant) and first[0].value == "git"


def _starts_process(node: ast.Call) -> bool:
    func = node.func
    if not isinstance(func, ast.Attribute) or not isinstance(func.value, ast.Name):
        return False
    if func.value.id == "subprocess":
        return func.attr in {"run", "Popen", "call", "check_call", "check_output"}
    return func.value.id == "os" and func.attr in _SPAWNING


def _calls(check: Callable[[ast.Call], bool], exempt: set[str]) -> list[str]:
    return [
        f"loopkit/{name}:{node.lineno}"
        for name, tree in _sources()
        if name not in exempt
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and check(node)
    ]


def test_every_git_process_goes_through_the_door() -> None:
    assert _calls(_starts_git, OWN_GIT) == []


def test_every_other_process_goes_through_proc() -> None:
    assert _calls(_starts_process, OWN_PROCESSES) == []


@pytest.mark.parametrize(
    ("source", "check"),
    [
        ('proc.capture(["git", "apply", "-"], cwd=tree)', _starts_git),
        ('subprocess.run(["ls"], check=True)', _starts_process),
        ("os.execvp(argv[0], argv)", _starts_process),
        ("os.posix_spawnp(argv[0], argv, env)", _starts_process),
    ],
)
def test_the_checks_see_a_process_started_beside_the_door(
    source: str, check: Callable[[ast.Call], bool]
) -> None:
    (call,) = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)][:1]
    assert check(call)
