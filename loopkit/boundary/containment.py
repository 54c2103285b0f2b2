"""What a worker (or a judge) may reach: the sandbox policy of one run.

``loopkit.boundary.sandbox`` knows how to start bubblewrap; this module decides what goes in it,
from the contract's ``sandbox`` section (published keys)::

    sandbox:
      mode: auto        # auto (the default): a sandbox where one can start, else none,
                        #   and run.sandbox says why; required: refuse to run without
                        #   one (exit 4); off: no sandbox
      network: true     # the agents need their API; false cuts the network
      writable: []      # more paths the worker may write (a cache, a scratch folder)

Inside: the repository read-write (read-only for a judge); ``.git`` (the repository's
and a linked worktree's) read-only; the contract file, TASKS.md and the memory file
read-only; the state folder (ledger, cancellation, artifacts) not visible; a private
``/tmp``; a PID namespace of its own (nothing outlives the run, no ancestor's
``/proc/PID/environ``); the allow-listed environment only. What each provider needs to
write (claude's config folder, ``CODEX_HOME``) it declares itself
(``Provider.contained``). The record (``run.sandbox``) says what was used and why.
"""

from __future__ import annotations

import atexit
import fnmatch
import os
import shutil
import stat
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict

from loopkit import places
from loopkit.errors import EnvironmentProblem
from loopkit.values import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from loopkit.boundary.egress import EgressSection, Way

MODES = ("auto", "required", "off")
DEFAULTS: dict[str, Any] = {"mode": "auto", "network": None, "writable": []}


class SandboxRecord(TypedDict, total=False):
    """Where a run (``run.sandbox``) or the checks (``verify.sandbox``) ran: the mode
    asked for, the network, whether a sandbox was used (its tool) and why (not), and
    what the egress gate saw."""

    mode: str
    network: bool | str | None
    used: bool
    tool: str
    reason: str
    egress: EgressSection


class Policy:
    """The sandbox a run asks for (the contract's ``sandbox`` with its defaults).
    ``network``: shared (true), cut (false), or ``egress`` (``loopkit.boundary.egress``:
    no network but the loopback, the meter and the gate to ``hosts``); unset, it is
    ``egress`` for a metered worker and shared otherwise (``network_for``)."""

    mode: str
    network: bool | str | None
    writable: list[str]
    show: list[str]
    hide: list[str]
    hosts: list[str]

    def __init__(
        self,
        mode: str = "auto",
        network: bool | str | None = True,
        writable: list[str] | None = None,
        show: list[str] | None = None,
        hide: list[str] | None = None,
        hosts: list[str] | None = None,
    ) -> None:
        self.mode = mode
        self.network = network
        self.writable = [] if writable is None else writable
        self.show = [] if show is None else show
        self.hide = [] if hide is None else hide
        self.hosts = [] if hosts is None else hosts

    @classmethod
    def of(cls, contract: Mapping[str, Any] | None) -> Policy:
        section = dict(DEFAULTS)
        section.update((contract or {}).get("sandbox") or {})
        raw = section["network"]
        return cls(
            mode="off" if section["mode"] is False else str(section["mode"]),
            network=raw if raw is None or raw == "egress" else bool(raw),
            writable=[str(p) for p in section.get("writable") or []],
            show=[str(p) for p in section.get("show") or []],
            hide=[str(p) for p in section.get("hide") or []],
            hosts=[str(h) for h in section.get("hosts") or []],
        )

    def network_for(self, metered: bool) -> bool | str:
        """The network a worker gets: as the contract says, else ``egress`` when it is
        metered (its API is the meter) and shared when not."""
        if self.network is None:
            return "egress" if metered else True
        return self.network


@record
class Contained:
    """The command to start, the environment to start it with, and the record."""

    argv: list[str]
    env: dict[str, str]
    record: SandboxRecord
    #: Files made for the run outside the hidden state folder (removed afterwards).
    scratch: Path | None = None


def contain(
    argv: Sequence[str],
    env: Mapping[str, str],
    *,
    policy: Policy,
    root: Path,
    git_dirs: Sequence[Path],
    state: Path,
    writable: Sequence[Path] = (),
    read_only: Sequence[Path] = (),
    visible: Mapping[str, Path] | None = None,
    repo_writable: bool = True,
    way: Way | None = None,
) -> Contained:
    """``argv`` wrapped as the policy says, or as it is (with the reason) when no sandbox
    is asked for or can start. ``visible`` maps environment variables to files in the
    hidden state folder the worker must read (the command provider's handoff): each is
    copied to a scratch folder shown read-only, and the variable points at the copy.
    ``way``: the run's egress (``loopkit.boundary.egress``), used when the sandbox starts."""
    from loopkit.boundary import sandbox

    network = "egress" if way is not None else policy.network_for(False)
    record: SandboxRecord = {"mode": policy.mode, "network": network}
    if policy.mode == "off":
        return Contained(list(argv), dict(env), {**record, "used": False, "reason": "mode: off"})
    found = sandbox.probe()
    if not found.available:
        if policy.mode == "required":
            raise EnvironmentProblem(
                f"sandbox required (sandbox.mode: required), but {found.reason}"
            )
        return Contained(list(argv), dict(env), {**record, "used": False, "reason": found.reason})
    inner = dict(env)
    scratch: Path | None = None
    shown: list[Path] = []
    for var, path in (visible or {}).items():
        if scratch is None:
            scratch = Path(tempfile.mkdtemp(prefix="loopkit-run-"))
        copy = scratch / path.name
        copy.write_bytes(path.read_bytes())
        inner[var] = str(copy)
        shown.append(copy)
    extra = [expand(p, root=root) for p in policy.writable]
    for p in extra:
        p.mkdir(parents=True, exist_ok=True)
    if way is not None:
        argv, inner = way.inside(argv, inner)
    wrapped = sandbox.wrap(
        argv,
        root=root,
        git_dir=None,
        state_dir=state,
        env=inner,
        writable_extra=[p for p in (*writable, *extra) if p.exists()],
        read_only_extra=[
            *(p for p in (*git_dirs, *read_only) if os.path.lexists(p)),
            *shown,
        ],
        network=network is True,
        repo_writable=repo_writable,
        egress=way.folder if way is not None else None,
        home=env.get("HOME") or os.path.expanduser("~"),
        shown=shown_paths(policy, root),
        hidden_extra=[
            *(expand(x, root=root) for x in policy.hide),
            # the repository's signing key (lk attest): no worker signs as loopkit
            *(
                d / "loopkit" / "attest"
                for d in git_dirs
                if os.path.lexists(d / "loopkit" / "attest")
            ),
        ],
    )
    record.update({"used": True, "tool": "bwrap", "reason": found.reason})
    return Contained(wrapped.argv, wrapped.env, record, scratch)


# --------------------------------------------------------------------------- the checks


def shown_paths(policy: Policy, root: Path) -> list[Path]:
    """The contract's ``sandbox.show`` paths, expanded; one that is missing is an
    environment error naming it as the contract does (a sandbox that cannot mount what it
    was asked to show never starts)."""
    out: list[Path] = []
    for text in policy.show:
        path = expand(text, root=root)
        if not os.path.exists(path):
            raise EnvironmentProblem(f"sandbox.show: {path} does not exist")
        out.append(path)
    return out


def expand(path: str, *, root: Path) -> Path:
    """A path the contract names: ``~`` is the user's home, a relative path is under the
    repository."""
    text = os.path.expanduser(path) if path.startswith("~") else path
    return Path(text) if os.path.isabs(text) else root / text


class Checks:
    """Where lk-verify's checks run (``for_checks``): the command line and environment
    for one check, and the record (``verify.sandbox``)."""

    record: SandboxRecord

    def __init__(
        self,
        record: SandboxRecord,
        args: dict[str, Any] | None,
        hosts: list[str] | None = None,
    ) -> None:
        self.record = record
        self._args = args
        self._hosts = hosts  # egress: the hosts the gate lets through
        self._way: Way | None = None

    def command(
        self, command: str, env: Mapping[str, str]
    ) -> tuple[list[str] | str, dict[str, str], bool]:
        """(argv or shell text, environment, whether it is shell text) for one check."""
        if self._args is None:
            return command, dict(env), True
        from loopkit.boundary import sandbox

        inner = dict(env)
        inner.setdefault("HOME", self._args["home"])
        argv = ["/bin/sh", "-c", command]
        if self._hosts is not None:
            if self._way is None:
                from loopkit.boundary.egress import Way

                self._way = Way.start(self._hosts)
                atexit.register(self._way.stop)
            argv, inner = self._way.inside(argv, inner)
        egress = self._way.folder if self._way is not None else None
        wrapped = sandbox.wrap(argv, env=inner, egress=egress, **self._args)
        return wrapped.argv, wrapped.env, False

    def recorded(self) -> SandboxRecord:
        """The record (``verify.sandbox``) with what the egress gate saw of the checks so
        far (``egress``: the hosts allowed, used and refused), once one went through it."""
        if self._way is None:
            return self.record
        return {**self.record, "egress": self._way.section()}


def checks_policy(contract: Mapping[str, Any] | None) -> tuple[Policy, bool]:
    """The sandbox policy the checks follow (the contract's ``sandbox.mode``) and whether
    they get one: not with ``mode: off``, nor where none can start (``mode: required``
    then refuses, exit 4)."""
    from loopkit.boundary import sandbox

    policy = Policy.of(contract)
    if policy.mode == "off":
        return policy, False
    found = sandbox.probe()
    if not found.available and policy.mode == "required":
        raise EnvironmentProblem(f"sandbox required (sandbox.mode: required), but {found.reason}")
    return policy, found.available


def for_checks(
    contract: Mapping[str, Any] | None,
    *,
    root: Path,
    room: Path,
    objects: Path,
    carried: Sequence[str],
    hidden: Sequence[Path],
    env: Mapping[str, str],
) -> Checks:
    """The checks' sandbox: the clean room ``room`` shown at the repository's own path
    ``root`` (so an editable install, an absolute path or a symlink into the repository
    sees exactly the verified tree, and the real work tree is not there at all); its own
    ``.git`` read-only, reading the repository's objects (``objects``, read-only); the
    ``carried`` ignored paths of the work tree read-only at their place; a private, empty
    home (``sandbox.show`` paths and the tools on PATH shown read-only); ``hidden`` (the
    state folder, the real git folders, the clean rooms' folder) and ``sandbox.hide`` not
    visible; a private /tmp; the network unless ``verify.network: false``; nothing a check
    starts outlives it. Without a sandbox (``mode: off``, or none can start) the checks
    run as they are, in the room, and the record says why."""
    from loopkit.boundary import sandbox

    policy, usable = checks_policy(contract)
    # The checks run the worker's code: a contract that cut the worker's network
    # (sandbox.network: false, or egress) cuts theirs too, unless verify.network says
    # otherwise; unset, they share it.
    chosen = ((contract or {}).get("verify") or {}).get("network", policy.network)
    network: bool | str = "egress" if chosen == "egress" else chosen is None or bool(chosen)
    record: SandboxRecord = {"mode": policy.mode, "network": network}
    if not usable:
        why = "mode: off" if policy.mode == "off" else sandbox.probe().reason
        return Checks({**record, "used": False, "reason": why}, None)
    home = env.get("HOME") or os.path.expanduser("~")
    shown = shown_paths(policy, root)
    hide = [expand(p, root=root) for p in policy.hide]
    bound: list[tuple[Path, str]] = [(objects, ".git/objects")]
    bound += [
        (places.source_of(root, name), name) for name in carried if not os.path.lexists(room / name)
    ]
    args = {
        "root": root,
        "source": room,
        "git_dir": None,
        "state_dir": None,
        "bound": bound,
        "home": home,
        "shown": shown,
        "venvs": [places.source_of(root, name) for name in carried],
        "hidden_extra": [*hidden, *hide],
        "network": network is True,
    }
    record.update({"used": True, "tool": "bwrap", "reason": sandbox.probe().reason})
    return Checks(record, args, hosts=policy.hosts if network == "egress" else None)


# --------------------------------------------------------------------------- provider homes


def provider_homes() -> Path:
    """Where the providers' private homes live (beside the clean rooms, in the user cache
    folder; ``$LOOPKIT_HOMES`` moves them): never visible to the checks, and never under
    the temporary folder (``TMPDIR``, else /tmp), where codex refuses to lay out its
    helper binaries and its edits then fail -- a person whose HOME or cache is there
    gets ``$XDG_RUNTIME_DIR/loopkit/homes``, else ``/var/tmp/loopkit-UID/homes``."""
    chosen = os.environ.get("LOOPKIT_HOMES")
    if chosen:
        return Path(chosen)
    default = places.rooms().parent / "homes"
    if not under_temp(default):
        return default
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    for base in (Path(runtime) / "loopkit" if runtime else None, _var_tmp()):
        if base is not None and not under_temp(base) and _private(base):
            return base / "homes"
    return default


def temp_dir() -> Path:
    """The temporary folder as the agent CLIs read it: ``TMPDIR``, else /tmp."""
    return Path(os.environ.get("TMPDIR") or "/tmp")


def under_temp(path: Path) -> bool:
    """Whether ``path`` lies in the temporary folder (codex refuses its helpers there)."""
    temp = os.path.realpath(temp_dir())
    here = os.path.realpath(path)
    return here == temp or here.startswith(temp.rstrip(os.sep) + os.sep)


def _var_tmp() -> Path:
    return Path("/var/tmp") / f"loopkit-{os.getuid()}"


def _private(folder: Path) -> bool:
    """Make ``folder`` (0700) or find it: a real folder of this user's, nobody else's."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


def provider_home(root: Path, name: str) -> Path:
    """The private home of provider ``name`` for the repository at ``root``: where its CLI
    keeps settings and sessions during loopkit's runs, never the person's own."""
    return provider_homes() / places.home_of(root).name / name


def seed_home(home: Path, files: Mapping[str, Path], *, keep: Sequence[str]) -> Path:
    """Make the private home ``home`` hold, afresh, copies of ``files`` (name in the home
    -> the person's file; missing ones are skipped) and, of what an earlier run left, only
    the entries ``keep`` names (patterns: its sessions and their index, for a resume). Whatever a worker wrote
    there otherwise -- settings, hooks, helpers, base URLs, MCP servers, instructions --
    is gone before the next run, and never was in the person's own home."""
    home.mkdir(parents=True, exist_ok=True)
    for entry in os.scandir(home):
        if entry.name not in files and any(fnmatch.fnmatchcase(entry.name, k) for k in keep):
            continue
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            os.unlink(entry.path)
    for name, source in files.items():
        try:
            data = source.read_bytes()
        except OSError:
            continue
        target = home / name
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    return home
