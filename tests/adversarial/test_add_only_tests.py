"""A worker may add tests but never weaken the ones that judge it (``scope.add_only``,
what ``lk init`` writes for a project's existing tests): through the real loop.sh, an
edited, deleted or renamed test is refused however green the checks turn; a new test file
lands with the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.helpers import loop, nothing_unverified_landed
from tests.helpers.recipes import fail_message, make_project

pytestmark = pytest.mark.slow

#: The project's test: the check runs every script under tests/ (a test runner's discovery).
TEST = "grep -qx good src/value.txt\n"
CHECK = {"name": "tests", "run": 'for t in tests/*.sh; do sh "$t" || exit 1; done', "timeout": 30}
#: lk init's shape: the tests sit in a writable folder too, and add_only keeps them.
SCOPE = {"writable": ["src/**", "tests/**"], "add_only": ["tests/**"]}

# Wrong code, and the test that would catch it made to pass whatever the code says.
WEAKEN = {
    "edited": 'Path("tests/test_value.sh").write_text("true\\n")',
    "deleted": 'Path("tests/test_value.sh").unlink(); Path("tests/test_ok.sh").write_text("true\\n")',
    "renamed": 'Path("tests/test_value.sh").rename("tests/test_value.sh.off"); '
    'Path("tests/test_ok.sh").write_text("true\\n")',
}


def project(tmp_path: Path, body: str):
    return make_project(
        tmp_path,
        body,
        files={"src/value.txt": "old\n", "tests/test_value.sh": TEST},
        checks=[CHECK],
        scope=SCOPE,
        budgets={"attempts": 2},
    )


@pytest.mark.parametrize("how", sorted(WEAKEN))
def test_a_weakened_test_is_refused(tmp_path: Path, how: str) -> None:
    p = project(tmp_path, f'Path("src/value.txt").write_text("bad\\n")\n{WEAKEN[how]}\n')
    before = p.head()
    proc = loop(p)
    assert p.worker_calls() >= 1
    assert proc.returncode in (20, 21, 22), fail_message(proc)  # parked, never committed
    assert nothing_unverified_landed(p, before, tmp_path)
    assert (p.root / "tests/test_value.sh").read_text() == TEST  # the revert kept it
    assert p.git("show", "HEAD:tests/test_value.sh") == TEST
    diff = p.docs("fix-value", "diff")[0]["diff"]
    rules = {(v["rule"], v["path"]) for v in diff["violations"]}
    assert rules & {("add_only", "tests/test_value.sh"),
                    ("rename_out_of_scope", "tests/test_value.sh")}, rules  # fmt: skip
    assert diff["within_policy"] is False


def test_a_new_test_lands_with_the_fix(tmp_path: Path) -> None:
    p = project(
        tmp_path,
        'Path("src/value.txt").write_text("good\\n")\n'
        'Path("tests/test_new.sh").write_text("test -s src/value.txt\\n")\n',
    )
    proc = loop(p)
    assert proc.returncode == 0, fail_message(proc)
    assert p.git("show", "HEAD:tests/test_new.sh") == "test -s src/value.txt\n"
    assert p.git("show", "HEAD:tests/test_value.sh") == TEST
    assert p.docs("fix-value", "diff")[-1]["diff"]["violations"] == []


# A new conftest.py beside the tests that skips every one of them: add-only lets new files
# in, so lk init protects conftest.py files outright in a Python project.
SKIP_ALL = """
Path("src/value.txt").write_text("bad\\\\n")
Path("tests/conftest.py").write_text(
    "import pytest\\\\n\\\\n\\\\ndef pytest_collection_modifyitems(items):\\\\n"
    "    for item in items:\\\\n        item.add_marker(pytest.mark.skip(reason='later'))\\\\n"
)
"""

PYTEST = 'from pathlib import Path\n\n\ndef test_value():\n    assert Path("src/value.txt").read_text() == "good\\n"\n'


def test_lk_init_s_contract_refuses_a_conftest_that_skips_the_tests(tmp_path: Path) -> None:
    import json
    import subprocess

    import yaml

    from tests.helpers.recipes import BIN, recipe_env

    p = make_project(tmp_path, SKIP_ALL, files={"src/value.txt": "old\n",
                                               "tests/test_value.py": PYTEST,
                                               "pyproject.toml": "[project]\nname = 'v'\n"})  # fmt: skip
    worker = json.loads((p.root / "loop.yaml").read_text())["worker"]
    (p.root / "loop.yaml").unlink()
    done = subprocess.run([str(BIN / "lk"), "init"], cwd=p.root, env=recipe_env(),
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    data = yaml.safe_load((p.root / "loop.yaml").read_text())
    data["worker"] = worker
    data["budgets"]["attempts"] = 1
    data["sandbox"]["writable"] = [str(p.scratch)]
    (p.root / "loop.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    p.git("add", "-A")
    p.git("commit", "-qm", "lk init")
    before = p.head()
    proc = loop(p)
    assert proc.returncode in (20, 21, 22), fail_message(proc)
    assert nothing_unverified_landed(p, before, tmp_path)
    assert not (p.root / "tests/conftest.py").exists()
    violations = p.docs("fix-value", "diff")[0]["diff"]["violations"]
    assert {"rule": "protected", "path": "tests/conftest.py"} in [
        {k: v[k] for k in ("rule", "path")} for v in violations
    ], violations
