"""The floor every click command pays: a bare click command printing its help.

Benchmarks state loopkit's start-up and per-attempt cost as multiples of it, so the
figures mean the same on a fast machine and a slow one.
"""

from __future__ import annotations

import sys

#: argv of the floor (run with the venv's own interpreter).
CLICK_FLOOR = [
    sys.executable,
    "-c",
    "import click\n@click.command()\ndef m(): pass\nm()",
    "--help",
]
