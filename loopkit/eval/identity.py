"""What a trial is: a hash of everything that defines it.

A trial's ``id`` hashes its configuration (provider, model, the worker's options with
its environment allow-list, the configuration's environment -- values hashed, never
written --, and the *provider version*: the content of the executable it runs), its
contract as the trial gets it (the task's text as the prompt, criteria, scope, budgets,
the worker section), its task (id, text, criteria, scope, reference, hidden tests,
repository), the commit it starts from, loopkit's version and the repeat. A
configuration changed under the same name is another configuration: its trials are new
ones, and the old ones stay in the log, unused.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopkit import __version__
from loopkit.digest import file_sha256, sha256

#: Hex digits of a hash kept in ids (64 bits: no collision among any eval's trials).
SHORT = 16


def digest(value: object) -> str:
    """The hash of a JSON value, keys sorted: the same value, the same hash."""
    body = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return sha256(body.encode()).hexdigest()[:SHORT]


@dataclass(frozen=True)
class Hashes:
    """A trial's hashes, as its line in the eval log names them."""

    id: str
    config: str
    task: str
    contract: str
    provider_version: str | None
    base: str
    loopkit: str = __version__

    def record(self) -> dict[str, object]:
        return {
            "id": self.id,
            "base": self.base,
            "loopkit_version": self.loopkit,
            "hashes": {
                "config": self.config,
                "task": self.task,
                "contract": self.contract,
                "provider_version": self.provider_version,
            },
        }


def trial(
    *, config: str, task: str, contract: str, version: str | None, base: str, repeat: int
) -> Hashes:
    whole = {
        "loopkit": __version__,
        "config": config,
        "task": task,
        "contract": contract,
        "base": base,
        "repeat": repeat,
    }
    return Hashes(digest(whole), config, task, contract, version, base)


_versions: dict[tuple[str, int, int], str] = {}


def executable_version(exe: str | None, path_var: str | None) -> str | None:
    """The content hash of the executable ``exe`` names (found on ``path_var``, symlinks
    followed: an npm CLI's shim leads to its script): what changes when the CLI is
    upgraded, whatever its ``--version`` says. None when it is not installed."""
    if not exe:
        return None
    found = exe if os.sep in exe else shutil.which(exe, path=path_var)
    if not found:
        return None
    real = Path(found).resolve()
    try:
        st = real.stat()
    except OSError:
        return None
    key = (str(real), st.st_size, st.st_mtime_ns)
    if key not in _versions:
        try:
            _versions[key] = file_sha256(real)[:SHORT]
        except OSError:
            return None
    return _versions[key]


def config_executable(provider_binary: str | None, worker: Mapping[str, Any]) -> str | None:
    """The executable a configuration runs: its provider's CLI, or a command's first word."""
    if provider_binary:
        return provider_binary
    command = worker.get("command")
    if isinstance(command, str):
        try:
            words = shlex.split(command)
        except ValueError:
            return None
        return words[0] if words else None
    if isinstance(command, list) and command:
        return str(command[0])
    return None


def config_record(
    *,
    provider: str,
    model: str | None,
    worker: Mapping[str, Any],
    env: Mapping[str, str],
    version: str | None,
) -> dict[str, object]:
    """A configuration as the eval log keeps it: the environment's values hashed."""
    return {
        "provider": provider,
        "model": model,
        "worker": dict(worker),
        "env": {k: digest(v) for k, v in sorted(env.items())},
        "provider_version": version,
    }
