"""loopkit: supervise coding agents from outside their own loop."""

from __future__ import annotations

__version__ = "0.2.0"
SCHEMA_VERSION = 1
