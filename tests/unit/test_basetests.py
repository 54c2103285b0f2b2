"""The tree the base's tests run on, built from real git trees: the attempt's code under
test, everything else as at the base."""

from __future__ import annotations

import subprocess
from pathlib import Path

from loopkit.evidence import basetests

CONTRACT = {"scope": {"writable": ["src/**", "tests/**"], "add_only": ["tests/**"]}}
BASE = {
    "src/pkg/calc.py": "def add(a, b):\n    return a - b\n",
    "tests/test_calc.py": "from pkg.calc import add\n",
    "pytest.ini": "[pytest]\n",
}


def _tree(repo: Path, files: dict[str, str]) -> str:
    subprocess.run(["git", "rm", "-rq", "--cached", "--ignore-unmatch", "."], cwd=repo, check=True)
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
        subprocess.run(["git", "add", rel], cwd=repo, check=True)
    return subprocess.run(["git", "write-tree"], cwd=repo, check=True, capture_output=True,
                          text=True).stdout.strip()  # fmt: skip


def _files(repo: Path, tree: str) -> dict[str, str]:
    def run(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                              text=True).stdout  # fmt: skip

    return {
        n: run("cat-file", "blob", f"{tree}:{n}")
        for n in run("ls-tree", "-r", "--name-only", tree).split()
    }


def test_only_the_code_under_test_and_what_it_names_come_from_the_attempt(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    base = _tree(tmp_path, BASE)
    attempt = _tree(tmp_path, {
        **BASE,
        "src/pkg/calc.py": "from .plus import plus\n\n\ndef add(a, b):\n    return plus(a, b)\n",
        "src/pkg/plus.py": "def plus(a, b):\n    return a + b\n",  # named by calc.py
        "src/sitecustomize.py": "import os\n",  # named by nothing: infrastructure
        "src/pkg/test_zz.py": "import pkg.calc\n",  # a test beside the source
        "tests/conftest.py": "x = 1\n",  # the tests' folder: the base's
        "tests/test_new.py": "def test_new():\n    pass\n",
        "pytest.ini": "[pytest]\naddopts = -p no:x\n",  # outside the writable scope
    })  # fmt: skip
    got = _files(tmp_path, basetests.tree(tmp_path, base, attempt, CONTRACT))
    assert sorted(got) == ["pytest.ini", "src/pkg/calc.py", "src/pkg/plus.py", "tests/test_calc.py"]
    assert got["pytest.ini"] == BASE["pytest.ini"]
    assert "plus" in got["src/pkg/calc.py"]
    unfixed = _files(tmp_path, basetests.without_fix(tmp_path, base, attempt, CONTRACT))
    assert unfixed["src/pkg/calc.py"] == BASE["src/pkg/calc.py"]
    assert "src/pkg/plus.py" not in unfixed and "tests/test_new.py" in unfixed


def test_a_change_to_the_code_under_test_alone_is_one_tree(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    base = _tree(tmp_path, BASE)
    attempt = _tree(tmp_path, {**BASE, "src/pkg/calc.py": "def add(a, b):\n    return a + b\n"})
    assert basetests.tree(tmp_path, base, attempt, CONTRACT) == attempt


def test_proving_fixes_reads_the_task_s_words() -> None:
    contract = {"verify": {"prove_new_tests": "fixes"}}
    assert basetests.proving(contract, {"text": "Fix the parser on blank lines"})
    assert basetests.proving(contract, {"text": "bug: blank lines crash"})
    assert not basetests.proving(contract, {"text": "Add a --json flag"})
    assert basetests.proving({"verify": {"prove_new_tests": True}}, {"text": "Add a flag"})
    assert not basetests.proving({}, {"text": "Fix it"})


def test_a_runner_s_own_file_and_a_shadow_are_not_reached_by_a_name(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    js = {"package.json": "{}\n", "src/calc.js": "exports.add = (a, b) => a - b;\n",
          "tests/calc.test.js": "require('../src/calc');\n"}  # fmt: skip
    base = _tree(tmp_path, js)
    attempt = _tree(tmp_path, {
        **js,
        "src/calc.js": "// calc, tested with jest\nconst { plus } = require('./helpers');\n",
        "src/helpers.js": "exports.plus = (a, b) => a + b;\n",  # its module named by calc.js
        "src/data.txt": "x\n",  # its path named by the command
        "src/calc.mjs": "export const add = (a, b) => a + b;\n",  # another file for calc
        "jest.config.js": "module.exports = {};\n",  # `jest` names the runner, not this
        "calc/go.mod": "module other\n",  # `go` is no go.mod
    })  # fmt: skip
    command = "jest --ci tests && grep -qx x src/data.txt && go vet ./..."
    got = _files(tmp_path, basetests.tree(tmp_path, base, attempt, JS, named_by=[command]))
    assert sorted(got) == [
        "package.json", "src/calc.js", "src/data.txt", "src/helpers.js", "tests/calc.test.js",
    ]  # fmt: skip


JS = {"scope": {"writable": ["**"], "add_only": ["tests/**"], "protected": ["package.json"]}}
