"""Fixtures the hostile workers share."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def home() -> Iterator[Path]:
    """A person's home outside /tmp: the sandbox's private /tmp would hide one there by
    accident, whatever loopkit does about homes."""
    path = Path(tempfile.mkdtemp(prefix="loopkit-home-", dir="/var/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
