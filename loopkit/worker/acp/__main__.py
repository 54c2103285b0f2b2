"""``python -m loopkit.worker.acp``: the ACP client (see ``loopkit.worker.acp.client``)."""

from __future__ import annotations

import sys

from loopkit.worker.acp.client import main

sys.exit(main())
