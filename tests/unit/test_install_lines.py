"""Every install line a user copies names loopkit's own distribution at a version that
exists: "loopkit" on the package index is another project, and a workflow pinned to an
older release, or a pre-commit ``rev:`` tag no clone has, installs the wrong thing or
nothing."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

import loopkit

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = (ROOT / "pyproject.toml").read_text()
DIST = re.search(r'^name = "([^"]+)"', PYPROJECT, flags=re.M).group(1)  # type: ignore[union-attr]

#: Where a user copies an install line from.
SOURCES = [
    "README.md",
    "docs/evidence.md",
    "recipes/README.md",
    "recipes/pre-commit-config.yaml",
    "recipes/github-actions/fan-out.yml",
]

INSTALL = re.compile(r"\b(?:pipx|pip|uv pip|uv tool) install\s+(?:-\S+\s+)*[\"']?([A-Za-z][\w.-]*)")


def test_the_distribution_is_not_the_index_s_other_loopkit() -> None:
    assert DIST != "loopkit"
    assert 'dynamic = ["version"]' in PYPROJECT  # one version: loopkit.__version__


@pytest.mark.parametrize("name", SOURCES)
def test_install_lines_name_the_distribution(name: str) -> None:
    text = (ROOT / name).read_text()
    for found in INSTALL.finditer(text):
        assert found.group(1) == DIST, f"{name}: {found.group(0)!r} installs another project"


def test_the_workflow_pins_the_current_version() -> None:
    flow = yaml.safe_load((ROOT / "recipes/github-actions/fan-out.yml").read_text())
    assert flow["env"]["LOOPKIT_VERSION"] == loopkit.__version__
    text = (ROOT / "recipes/github-actions/fan-out.yml").read_text()
    installs = re.findall(rf"pip install [^\n]*{DIST}[^\n]*", text)
    assert len(installs) >= 2  # each job that runs lk installs that very version
    assert set(installs) == {f'pip install "{DIST}==${{LOOPKIT_VERSION}}"'}, installs


@pytest.mark.parametrize("name", ["docs/evidence.md", "recipes/pre-commit-config.yaml"])
def test_the_pre_commit_forms_pin_what_exists(name: str) -> None:
    text = (ROOT / name).read_text()
    pins = re.findall(r"additional_dependencies: \[\"([^\"]+)\"\]", text)
    assert pins == [f"{DIST}=={loopkit.__version__}"]
    tags = subprocess.run(
        ["git", "tag", "--list"], cwd=ROOT, capture_output=True, text=True
    ).stdout.split()
    for rev in re.findall(r"^\s*#?\s*rev:\s*(\S+)", text, flags=re.M):
        assert rev in tags, f"{name}: rev {rev} is no tag of this repository"
