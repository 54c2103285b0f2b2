"""loopkit: supervise coding agents from outside their own loop."""

from __future__ import annotations

from pathlib import Path

__version__ = "0.2.0"
SCHEMA_VERSION = 1


def shipped(folder: str, marker: str, missing: str) -> Path:
    """The ``folder`` loopkit ships (``schemas``, ``recipes``): inside the installed
    package (a wheel), else beside it in the source tree -- the first that holds
    ``marker``. FileNotFoundError(``missing``) when neither does."""
    package = Path(__file__).resolve().parent
    for candidate in (package / folder, package.parent / folder):
        if (candidate / marker).is_file():
            return candidate
    raise FileNotFoundError(missing)
