"""A dated price table: USD per million tokens per model (``prices.yaml`` beside this
module, each entry with ``as_of`` and ``source``; ``LOOPKIT_PRICES`` names another)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from loopkit import loader


class Prices:
    """A dated price table: USD per million tokens, per model (a served name matches the
    longest entry it starts with: ``claude-sonnet-4-5-20250929`` is ``claude-sonnet-4-5``)."""

    def __init__(self, models: Mapping[str, Mapping[str, Any]], origin: str) -> None:
        self.models = dict(models)
        self.origin = origin

    @classmethod
    def load(cls, environ: Mapping[str, str] | None = None) -> Prices:
        env = os.environ if environ is None else environ
        chosen = env.get("LOOPKIT_PRICES")
        path = Path(chosen) if chosen else Path(__file__).with_name("prices.yaml")
        try:
            data = loader.yaml_load(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return cls({}, str(path))
        models = data.get("models") if isinstance(data, dict) else None
        return cls(models if isinstance(models, dict) else {}, str(path))

    def entry(self, model: str) -> tuple[str, Mapping[str, Any]] | None:
        best = None
        for name in self.models:
            if (model == name or model.startswith(name + "-") or model.startswith(name + "@")) and (
                best is None or len(name) > len(best)
            ):
                best = name
        return (best, self.models[best]) if best is not None else None

    def cost(self, model: str, tokens: Mapping[str, int]) -> tuple[float, str, str] | None:
        """USD for ``tokens`` of ``model``, with the table's source and date; None when
        the table has no price for it."""
        found = self.entry(model)
        if found is None:
            return None
        _, e = found
        per = {k: float(e.get(k, 0) or 0) for k in ("input", "output", "cache_read", "cache_write")}
        if "cache_read" not in e:
            per["cache_read"] = per["input"]
        if "cache_write" not in e:
            per["cache_write"] = per["input"]
        usd = sum(per[k] * tokens.get(k, 0) for k in per) / 1e6
        return usd, str(e.get("source") or self.origin), str(e.get("as_of") or "")

    def holds_at(self, model: str, host: str, vendor_domain: str) -> bool:
        """Whether ``model``'s price holds for answers from ``host``: the vendor's own
        hosts, or those the entry lists in ``hosts`` (a gateway that bills the same)."""
        found = self.entry(model)
        if found is None:
            return False
        if host == vendor_domain or host.endswith("." + vendor_domain):
            return True
        hosts = found[1].get("hosts")
        return isinstance(hosts, list) and host in hosts
