"""Run every benchmark in bench/ (bench_*.py) and print their figures.

Each benchmark is a script that prints its own figures and targets; this runner only
sequences them and reports which ones missed a target (exit 1 if any did).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

here = Path(__file__).resolve().parent
only = sys.argv[1:]
missed = []
for script in sorted(here.glob("bench_*.py")):
    if only and script.stem.removeprefix("bench_") not in only:
        continue
    print(f"== {script.stem}", flush=True)
    rc = subprocess.call([sys.executable, str(script)])
    if rc != 0:
        missed.append(script.stem)
print("\nall targets met" if not missed else f"\ntargets missed: {', '.join(missed)}")
sys.exit(1 if missed else 0)
