"""Provenance: a signed statement of what verified each landed commit, and its check.

``statement`` builds the in-toto Statement a landing makes (its subject the commit and its
tree, its predicate loopkit's: schemas/attest-statement.json); ``envelope`` wraps it in a
DSSE envelope signed with an SSH key through ``ssh-keygen -Y sign`` (the person's key as
git signs with, or the repository's own) and checks a signature against allowed signers;
``store`` keeps the envelopes as git notes under ``refs/notes/loopkit-attest``; ``check``
is ``lk attest verify``: each way a statement can fail, its own exit code (docs/attest.md).
"""
