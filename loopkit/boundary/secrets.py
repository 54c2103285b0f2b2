"""Secrets stay where they are: what environment a child gets, and what loopkit writes.

Children (the worker, the checks, the judge) get an allow-listed environment: the base
names every tool needs (PATH, HOME, LANG, proxies, ...), plus what each asks for (a
provider's own variables, the contract's ``worker.env_allow`` / ``verify.env_allow`` /
``judge.env_allow``, a criterion's ``env``). Everything else -- an ``AWS_SECRET_ACCESS_KEY``
in the user's shell -- is not passed on.

And the *values* of the variables whose names look like secrets (KEY, TOKEN, SECRET,
PASSWORD, CREDENTIAL, ...) in loopkit's own environment are replaced by ``[redacted]`` in
everything loopkit writes or hands on: the documents it prints, the ledger, the handoff
to the next worker, and so the memory file, the report and the commit messages built
from them. A check that prints a token, or a worker that echoes one back, leaves no copy.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from loopkit.errors import EnvironmentProblem

TYPE_CHECKING = False  # typing stays unloaded at run time (start-up is a feature)
if TYPE_CHECKING:
    from typing import Any

#: What every child gets when its parent has it.
BASE_ENV = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TERM",
    "TMPDIR",
    "TZ",
    "USER",
    "LOGNAME",
    "SHELL",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "SSL_CERT_FILE",
    "NODE_EXTRA_CA_CERTS",
)
#: What checks get beside the base: the toolchains' own locations, never credentials.
CHECK_ENV = (
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "PYTHONPATH",
    "PYTHONDONTWRITEBYTECODE",
    "PYTHONHASHSEED",
    "CI",
    "GOPATH",
    "GOCACHE",
    "GOFLAGS",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "NODE_PATH",
    "JAVA_HOME",
    "LD_LIBRARY_PATH",
    "NO_COLOR",
)
SECRET_NAME = re.compile(
    r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|PRIVATE|COOKIE|AUTH(?!OR)|SIGNATURE",
    re.IGNORECASE,
)
#: The variables that hold a person's credentials, by vendor (names, and prefixes ending
#: in ``_``): with the meter on, none reaches a worker unless the contract names it.
VENDOR_CREDENTIALS: dict[str, tuple[str, ...]] = {
    "anthropic": (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_OAUTH_TOKEN",
        "CLAUDE_CODE_OAUTH_TOKEN",
    ),
    "openai": ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY", "CODEX_API_KEY", "AZURE_OPENAI_API_KEY"),
    "google": (
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "GOOGLE_GENAI_API_KEY",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "GOOGLE_CLOUD_ACCESS_TOKEN",
        "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE",
    ),
    "alibaba": ("DASHSCOPE_API_KEY",),
    "github": (
        "GH_TOKEN",
        "GITHUB_TOKEN",
        "GH_ENTERPRISE_TOKEN",
        "GITHUB_ENTERPRISE_TOKEN",
        "COPILOT_GITHUB_TOKEN",
        "COPILOT_PROVIDER_API_KEY",
        "COPILOT_PROVIDER_BEARER_TOKEN",
        "COPILOT_PROVIDER_API_KEY_COMMAND",
    ),
    "aws": ("AWS_",),
}
#: Any other variable named like a credential (a word of its name: ``*_API_KEY``,
#: ``*_TOKEN``, ``*_SECRET``, ...; ``MAX_OUTPUT_TOKENS`` and ``GEMINI_DEFAULT_AUTH_TYPE``
#: are settings, not credentials).
CREDENTIAL_NAME = re.compile(
    r"(?:^|_)(?:API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|COOKIE)(?:_|$)"
    r"|(?:^|_)AUTH$|KEY_COMMAND$",
    re.IGNORECASE,
)
_VENDOR_NAMES = frozenset(n for names in VENDOR_CREDENTIALS.values() for n in names)
_VENDOR_PREFIXES = tuple(n for n in _VENDOR_NAMES if n.endswith("_"))


def is_credential(name: str) -> bool:
    """Whether the variable ``name`` holds a credential (a vendor's, or named like one)."""
    return (
        name in _VENDOR_NAMES
        or name.startswith(_VENDOR_PREFIXES)
        or CREDENTIAL_NAME.search(name) is not None
    )


class Withheld:
    """What a metered run's environment keeps of the person's credentials."""

    __slots__ = ("env", "unmetered", "withheld")

    def __init__(self, env: dict[str, str], withheld: list[str], unmetered: list[str]) -> None:
        self.env = env
        self.withheld = withheld  # names not passed on
        self.unmetered = unmetered  # names passed on raw, as the contract marks them


def withhold(
    env: Mapping[str, str],
    *,
    token: str,
    named: Sequence[str],
    unmetered: Sequence[str],
    metering: str,
) -> Withheld:
    """``env`` (a metered worker's) without any credential but the run's ``token``: every
    credential-shaped variable is dropped, unless the contract names it exactly
    (``named``, its ``env_allow``) -- then it is refused (``EnvironmentProblem``, exit 4),
    the meter meters ``metering`` alone, unless the contract marks it ``unmetered``."""
    keep: dict[str, str] = {}
    dropped: list[str] = []
    raw: list[str] = []
    for name, value in env.items():
        if value == token or not is_credential(name):
            keep[name] = value
        elif name in unmetered:
            keep[name] = value
            raw.append(name)
        elif name in named:
            raise EnvironmentProblem(
                f"worker.env_allow: {name} is a credential the meter cannot meter (it meters"
                f" {metering}); name it in worker.unmetered to pass it on raw"
            )
        else:
            dropped.append(name)
    return Withheld(keep, sorted(dropped), sorted(raw))


#: Shorter values are not redacted: "1" or "true" would blank out half a log.
MIN_SECRET_CHARS = 6
REDACTED = "[redacted]"


def allowed_env(parent: Mapping[str, str], names: Sequence[str]) -> dict[str, str]:
    """``parent`` cut to the base names and ``names`` (an entry ending in ``_`` is a
    prefix: ``OPENAI_`` passes every ``OPENAI_*``)."""
    exact = set(BASE_ENV) | {n for n in names if not n.endswith("_")}
    prefixes = tuple(n for n in names if n.endswith("_"))
    return {k: v for k, v in parent.items() if k in exact or (prefixes and k.startswith(prefixes))}


def outside_hook_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` without the environment pre-commit built for loopkit itself.

    With the remote form of the hook (``repo: <loopkit's URL>``), pre-commit installs
    loopkit in a virtualenv of its own and puts it first on PATH (and in VIRTUAL_ENV).
    The checks must run with the user's tools -- their pytest, not a missing one -- so
    when this interpreter lives in an environment pre-commit built, it is taken out."""
    prefix = os.path.realpath(sys.prefix)
    if not _pre_commit_venv(prefix):
        return env
    own = {os.path.join(sys.prefix, "bin"), os.path.join(prefix, "bin")}
    out = dict(env)
    if "PATH" in out:
        out["PATH"] = os.pathsep.join(
            p
            for p in out["PATH"].split(os.pathsep)
            if os.path.realpath(p) not in own and p not in own
        )
    if out.get("VIRTUAL_ENV") and os.path.realpath(out["VIRTUAL_ENV"]) == prefix:
        del out["VIRTUAL_ENV"]
    return out


#: A project's own virtualenv folders, first found first (as ``python -m venv .venv``
#: and most tools name it).
PROJECT_VENVS = (".venv", "venv")


def project_env(env: Mapping[str, str], root: Path | None) -> dict[str, str]:
    """``env`` as a person in the project at ``root`` has it with its environment
    activated: the project's virtualenv (``.venv``, else ``venv``: a folder with
    ``bin/python``) first on PATH and in VIRTUAL_ENV, its ``node_modules/.bin`` after
    it (as ``npm test`` has it). loopkit's own virtualenv -- the one whose ``python``
    runs loopkit, when it is not the project's -- is taken off PATH then, so a check's
    ``python`` and its tools are the project's, never loopkit's; and the environment
    pre-commit built for loopkit (``outside_hook_env``) is always taken off."""
    out = outside_hook_env(dict(env))
    if root is None:
        return out
    first: list[str] = []
    venv = next((root / n for n in PROJECT_VENVS if (root / n / "bin" / "python").exists()), None)
    if venv is not None:
        first.append(str(venv / "bin"))
        out["VIRTUAL_ENV"] = str(venv)
        out.pop("PYTHONHOME", None)
    node = root / "node_modules" / ".bin"
    if node.is_dir():
        first.append(str(node))
    if not first:
        return out
    own = os.path.realpath(sys.prefix)
    drop = set(first)
    if venv is not None and sys.prefix != sys.base_prefix and own != os.path.realpath(venv):
        drop |= {os.path.join(sys.prefix, "bin"), os.path.join(own, "bin")}
    rest = [
        p
        for p in out.get("PATH", os.defpath).split(os.pathsep)
        if p and p not in drop and os.path.realpath(p) not in drop
    ]
    out["PATH"] = os.pathsep.join([*first, *rest])
    return out


def _pre_commit_venv(prefix: str) -> bool:
    """Whether ``prefix`` is a virtualenv pre-commit built for a hook: under its store
    (PRE_COMMIT_HOME, else ~/.cache/pre-commit), or anywhere laid out as pre-commit lays
    out its hook environments -- ``<store>/<repo...>/py_env-<version>`` beside the clone of
    the hook's repository, which holds .pre-commit-hooks.yaml. ``pre-commit try-repo``
    builds its environment in a temporary store of its own, away from PRE_COMMIT_HOME."""
    store = os.environ.get("PRE_COMMIT_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "pre-commit",
    )
    if prefix.startswith(os.path.realpath(store) + os.sep):
        return True
    return os.path.basename(prefix).startswith("py_env-") and os.path.isfile(
        os.path.join(os.path.dirname(prefix), ".pre-commit-hooks.yaml")
    )


def secret_values(env: Mapping[str, str] | None = None) -> list[str]:
    """The values of ``env``'s (default: this process's) variables named like secrets,
    longest first (so a value containing another is replaced whole)."""
    source = os.environ if env is None else env
    found = {
        v for k, v in source.items() if SECRET_NAME.search(k) and len(v.strip()) >= MIN_SECRET_CHARS
    }
    return sorted(found, key=len, reverse=True)


class Scrubber:
    """Replaces known secret values with ``[redacted]`` in text and in JSON-like data."""

    def __init__(self, values: Iterable[str]) -> None:
        values = [v for v in values if v]
        self._rx = re.compile("|".join(re.escape(v) for v in values)) if values else None

    def text(self, s: str) -> str:
        return s if self._rx is None else self._rx.sub(REDACTED, s)

    def data(self, value: Any) -> Any:
        """A copy of ``value`` with every string scrubbed (dict keys too)."""
        if self._rx is None:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {
                self.text(k) if isinstance(k, str) else k: self.data(v) for k, v in value.items()
            }
        if isinstance(value, list):
            return [self.data(v) for v in value]
        return value


_default: Scrubber | None = None


def scrubber() -> Scrubber:
    """The scrubber for this process's environment (built once)."""
    global _default
    if _default is None:
        _default = Scrubber(secret_values())
    return _default


def scrub(value: Any) -> Any:
    """``value`` (text or JSON-like data) with this process's secret values redacted."""
    return scrubber().data(value)
