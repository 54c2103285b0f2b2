"""A `.gitattributes` line changes what a checkout writes for the same blob: `eol=crlf`
writes CRLF, `ident` expands `$Id$`, `working-tree-encoding` writes UTF-16. The clean room
is synced by rewriting only files whose blob changed; attempt 1 leaves it holding
`src/value.txt` as it is, attempt 2 adds only the attribute (and the file the check
wants). Checked on the file as it was, the change would land, and a person's checkout of
the commit -- a fresh clone -- would fail the very check. The clean room must write what
a checkout of the tree writes, so the checks see what a person gets."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.helpers import loop, nothing_unverified_landed
from tests.helpers.recipes import fail_message, make_project

pytestmark = pytest.mark.slow

WORKER = """
if n == 1:
    Path("src/notes.txt").write_text("a first try\\n")  # fails the check: no src/ok.txt
else:
    Path("src/ok.txt").write_text("ok\\n")
    Path("src/.gitattributes").write_text("value.txt ATTRIBUTE\\n")
"""

CASES = {
    "eol": ("text eol=crlf", "good\n", "grep -qx good src/value.txt"),
    "ident": ("ident", "good $Id$\n", "grep -qx 'good [$]Id[$]' src/value.txt"),
    "encoding": ("working-tree-encoding=UTF-16LE", "good\n", "grep -qx good src/value.txt"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_an_attribute_added_alone_is_checked_as_a_checkout_writes_it(
    tmp_path: Path, case: str
) -> None:
    attribute, value, check = CASES[case]
    checks = [{"name": "value", "run": f"test -f src/ok.txt && {check}", "timeout": 30}]
    p = make_project(
        tmp_path,
        WORKER.replace("ATTRIBUTE", attribute),
        files={"src/value.txt": value},
        checks=checks,
        budgets={"attempts": 2, "same_failure": 2},
    )
    before = p.head()
    proc = loop(p)
    assert nothing_unverified_landed(p, before, tmp_path), fail_message(proc)
    assert proc.returncode != 0, fail_message(proc)
    assert p.worker_calls() == 2  # attempt 2 ran, and its checks saw the checkout's bytes
    verified = p.docs("fix-value", "verify")
    if len(verified) > 1:
        assert not verified[1]["verify"]["passed"], verified[1]
    else:
        # git could not hash the tree at all (a file the new encoding cannot decode, read
        # again when its stat data does not vouch for it): lk-diff stops the attempt, and
        # nothing was verified or landed -- the other way the same guarantee holds.
        assert "failed to encode" in proc.stderr, fail_message(proc)


def test_the_repositorys_own_attributes_hold_in_the_checks(tmp_path: Path) -> None:
    """The base's `.gitattributes` (`eol=crlf`) is in force in the clean room: a check
    that wants the CRLF a checkout writes passes, and the fix lands."""
    check = "test -f src/ok.txt && grep -q $'\\r' src/value.txt"
    body = 'Path("src/notes.txt").write_text("x\\n") if n == 1 else Path("src/ok.txt").write_text("ok\\n")\n'
    p = make_project(
        tmp_path,
        body,
        files={"src/value.txt": "good\n", "src/.gitattributes": "value.txt text eol=crlf\n"},
        checks=[{"name": "value", "run": f"bash -c {check!r}", "timeout": 30}],
    )
    before = p.head()
    proc = loop(p)
    assert proc.returncode == 0, fail_message(proc)
    assert nothing_unverified_landed(p, before, tmp_path)
