"""The DSSE envelope around a statement, signed with an SSH key by ``ssh-keygen -Y sign``
and checked by ``ssh-keygen -Y verify`` against an allowed signers file.

Which key signs: the person's, as git signs with it (``gpg.format ssh`` and
``user.signingkey``: a key file, or ``key::`` a public key whose private half an agent
holds); else the repository's own, which loopkit makes once in its git folder
(``<git common dir>/loopkit/attest/signing-key``, ed25519, NOT protected by a passphrase:
anyone who can read the git folder can sign as it) and adds to loopkit's allowed signers
file beside it. Which keys are trusted: ``--allowed-signers FILE``, else git's
``gpg.ssh.allowedSignersFile``, else that file of loopkit's.

A keyless signer (Sigstore: a certificate for an identity from an OIDC provider, the
signature logged in Rekor) is one more ``Signer`` kind: its signature goes in the same
``signatures`` list with the certificate beside it, and ``verified_by`` asks the bundle's
verifier instead of ``ssh-keygen``; nothing else changes.
"""

from __future__ import annotations

import base64
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from loopkit import git, proc
from loopkit.errors import EnvironmentProblem

PAYLOAD_TYPE = "application/vnd.in-toto+json"
NAMESPACE = "loopkit-attest"


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding: what the signature covers."""
    kind = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


@dataclass(frozen=True)
class Signer:
    key: Path  # a private key file, or a public key whose private half ssh-agent holds
    principal: str  # the name the allowed signers file gives the key
    source: str  # where the key came from, for a person


def folder(root: Path) -> Path:
    return git.git_dirs(root).common / "loopkit" / "attest"


def _config(root: Path, key: str) -> str:
    return (git.config_value(root, key) or "").strip()


def signer(root: Path, *, identity: str) -> Signer:
    """The person's key as git signs with it, else the repository's own (made once)."""
    key = _config(root, "user.signingkey")
    if key and _config(root, "gpg.format") == "ssh":
        principal = _config(root, "user.email") or "loopkit"
        if key.startswith("key::") or key.startswith("ssh-"):
            pub = folder(root) / "user-signingkey.pub"
            pub.parent.mkdir(parents=True, exist_ok=True)
            pub.write_text(key.removeprefix("key::") + "\n")
            return Signer(pub, principal, "git's user.signingkey (through ssh-agent)")
        return Signer(Path(os.path.expanduser(key)), principal, "git's user.signingkey")
    return repository_key(root, identity=identity)


def repository_key(root: Path, *, identity: str) -> Signer:
    """The repository's own key, made once with its line in loopkit's allowed signers."""
    home = folder(root)
    key = home / "signing-key"
    principal = f"loopkit@{identity[:12]}"
    if not key.exists():
        home.mkdir(parents=True, exist_ok=True)
        done = proc.capture(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", principal, "-f", str(key)]
        )
        if done.exit_code != 0:
            raise EnvironmentProblem(f"cannot make {key}: {_said(done)}")
        pub = (home / "signing-key.pub").read_text().strip()
        with open(home / "allowed_signers", "a", encoding="utf-8") as f:
            f.write(f'{principal} namespaces="{NAMESPACE}" {pub}\n')
    return Signer(key, principal, f"the repository's key {key} (no passphrase)")


def allowed_signers(root: Path, given: str | None = None) -> Path:
    """``given``, else git's ``gpg.ssh.allowedSignersFile``, else loopkit's own."""
    if given:
        return Path(given)
    configured = _config(root, "gpg.ssh.allowedSignersFile")
    if configured:
        return Path(os.path.expanduser(configured))
    return folder(root) / "allowed_signers"


def _said(done: proc.Captured) -> str:
    lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
    return lines[-1] if lines else f"exit {done.exit_code}"


def seal(statement: bytes, who: Signer) -> dict[str, object]:
    """The DSSE envelope: the statement, and one SSH signature over its PAE."""
    done = proc.capture(
        ["ssh-keygen", "-q", "-Y", "sign", "-f", str(who.key), "-n", NAMESPACE],
        input=pae(PAYLOAD_TYPE, statement),
        timeout=60,
    )
    if done.exit_code != 0:
        raise EnvironmentProblem(f"ssh-keygen could not sign with {who.source}: {_said(done)}")
    return {
        "payloadType": PAYLOAD_TYPE,
        "payload": base64.b64encode(statement).decode(),
        "signatures": [{"keyid": who.principal, "sig": base64.b64encode(done.stdout).decode()}],
    }


@dataclass(frozen=True)
class Seen:
    """What ``ssh-keygen`` said of one signature: who made it (empty: no allowed signer
    holds its key) and whether it covers the payload."""

    principals: tuple[str, ...]
    valid: bool


def verified_by(payload_type: str, payload: bytes, sig: bytes, allowed: Path) -> Seen:
    """Whose signature ``sig`` is among ``allowed``, and whether it covers the payload."""
    if not allowed.is_file():
        return Seen((), False)
    with tempfile.TemporaryDirectory(prefix="loopkit-attest-") as tmp:
        sig_file = Path(tmp) / "sig"
        sig_file.write_bytes(sig)
        found = proc.capture(
            ["ssh-keygen", "-Y", "find-principals", "-s", str(sig_file), "-f", str(allowed)]
        )
        if found.exit_code == 127:
            raise EnvironmentProblem("ssh-keygen is not installed (or not on PATH)")
        principals = tuple(found.stdout.decode("utf-8", "replace").split())
        if found.exit_code != 0 or not principals:
            return Seen((), False)
        message = pae(payload_type, payload)
        for principal in principals:
            argv = ["ssh-keygen", "-Y", "verify", "-f", str(allowed), "-I", principal]
            done = proc.capture([*argv, "-n", NAMESPACE, "-s", str(sig_file)], input=message)
            if done.exit_code == 0:
                return Seen(principals, True)
        return Seen(principals, False)
