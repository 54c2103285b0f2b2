"""The numbers an eval reports, with the standard library alone (seeded, no numpy).

- ``pass_at_k(n, c, k)``: the unbiased estimator of the chance that at least one of k
  trials passes, from n trials of which c passed (Chen et al., 2021: 1 - C(n-c,k)/C(n,k)).
- ``pass_hat_k(n, c, k)``: the chance that all k pass (pass^k: C(c,k)/C(n,k)), what a
  person relying on one run each time needs.
- ``bootstrap(values, ...)``: a percentile interval of the mean, resampling *tasks*
  (trials of one task are not independent draws).
- ``paired(a, b, ...)``: two configurations on the same tasks -- the per-task difference of
  pass rates, its paired bootstrap interval and p-value, an exact sign test, the smallest
  effect the sample could detect, and a verdict: ``better``, ``worse``, ``no difference``
  or ``inconclusive``.
- ``holm(ps)``: p-values adjusted for many comparisons (Holm's step-down), and
  ``verdict`` again on the adjusted one.
- ``plan(...)``: tasks x repeats needed to detect a difference of a given size.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from statistics import NormalDist

#: The level of a verdict: a family-wise 5 % over all comparisons.
ALPHA = 0.05
#: Resamples per bootstrap interval.
RESAMPLES = 2000
#: Two-sided 95 % intervals, and 80 % power for the smallest detectable effect.
Z_ALPHA = 1.959964
Z_POWER = 0.841621
#: A difference of pass rates smaller than this is "no difference" (when the sample can
#: tell differences this small at all).
DEFAULT_MARGIN = 0.10


def pass_at_k(n: int, c: int, k: int) -> float:
    if k > n or n <= 0:
        raise ValueError(f"pass@{k} needs at least {k} trials, got {n}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    if k > n or n <= 0:
        raise ValueError(f"pass^{k} needs at least {k} trials, got {n}")
    return math.comb(c, k) / math.comb(n, k)


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _means(values: Sequence[float], seed: int, resamples: int) -> list[float]:
    rng = random.Random(seed)
    n = len(values)
    return sorted(sum(values[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))


def bootstrap_p(values: Sequence[float], *, seed: int, resamples: int = RESAMPLES) -> float:
    """The two-sided bootstrap p-value of "the mean is zero": twice the share of the
    resampled means on the far side of zero (the same resamples as ``bootstrap``)."""
    if not values:
        return 1.0
    means = _means(values, seed, resamples)
    low = sum(1 for m in means if m <= 0)
    high = sum(1 for m in means if m >= 0)
    return min(1.0, 2 * min(low, high) / resamples)


def bootstrap(
    values: Sequence[float], *, seed: int, resamples: int = RESAMPLES, level: float = 0.95
) -> tuple[float, float]:
    """The percentile interval of the mean of ``values`` (one value per task)."""
    if not values:
        return (0.0, 0.0)
    means = _means(values, seed, resamples)
    lo = means[int((1 - level) / 2 * resamples)]
    hi = means[min(resamples - 1, int((1 + level) / 2 * resamples))]
    return (lo, hi)


def sign_test(diffs: Sequence[float]) -> float:
    """Exact two-sided sign test p-value over the non-zero per-task differences."""
    pos = sum(1 for d in diffs if d > 0)
    neg = sum(1 for d in diffs if d < 0)
    n = pos + neg
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(pos, neg) + 1)) / 2**n
    return float(min(1.0, 2 * tail))


def detectable(diffs: Sequence[float], repeats: int) -> float:
    """The smallest difference of pass rates this sample could detect (two-sided 5 %,
    80 % power): (z_a + z_b) * s / sqrt(tasks), where s is the spread of the per-task
    differences -- never taken below what a pass rate measured from ``repeats`` trials
    per task can show (a coin's: sqrt(0.5 / repeats)), so three identical tasks do not
    claim to see everything."""
    t = len(diffs)
    if t == 0:
        return 1.0
    m = mean(diffs)
    sd = math.sqrt(sum((d - m) ** 2 for d in diffs) / (t - 1)) if t > 1 else 0.0
    floor = math.sqrt(0.5 / max(1, repeats))
    return min(1.0, (Z_ALPHA + Z_POWER) * max(sd, floor) / math.sqrt(t))


def paired(
    a: Mapping[str, float],
    b: Mapping[str, float],
    *,
    repeats: int,
    seed: int,
    margin: float = DEFAULT_MARGIN,
) -> dict[str, object]:
    """Configuration ``a`` against ``b``, paired by task (per-task pass rates).

    The verdict (``verdict``): ``better`` / ``worse`` when the paired bootstrap p-value of
    the mean difference is at most 5 % (its 95 % interval excludes zero); ``no difference`` when it lies within ±``margin`` and the
    sample could detect a difference of ``margin``; ``inconclusive`` otherwise."""
    tasks = sorted(set(a) & set(b))
    diffs = [a[t] - b[t] for t in tasks]
    lo, hi = bootstrap(diffs, seed=seed)
    mde = detectable(diffs, repeats)
    p = bootstrap_p(diffs, seed=seed)
    return {
        "tasks": len(tasks),
        "difference": round(mean(diffs), 4),
        "interval": [round(lo, 4), round(hi, 4)],
        "p": round(p, 4),
        "sign_test_p": round(sign_test(diffs), 4),
        "wins": sum(1 for d in diffs if d > 0),
        "losses": sum(1 for d in diffs if d < 0),
        "ties": sum(1 for d in diffs if d == 0),
        "detectable": round(mde, 4),
        "margin": margin,
        "verdict": verdict(len(tasks), mean(diffs), p, (lo, hi), mde, margin),
    }


def verdict(
    tasks: int,
    difference: float,
    p: float,
    interval: tuple[float, float],
    mde: float,
    margin: float,
    alpha: float = ALPHA,
) -> str:
    """``better`` / ``worse`` when the difference's p-value is at most ``alpha``; ``no
    difference`` when its interval lies within ±``margin`` and the sample could detect a
    difference of ``margin``; ``inconclusive`` otherwise."""
    lo, hi = interval
    if not tasks:
        return "inconclusive"
    if p <= alpha and difference > 0:
        return "better"
    if p <= alpha and difference < 0:
        return "worse"
    if -margin <= lo and hi <= margin and mde <= margin:
        return "no difference"
    return "inconclusive"


def holm(ps: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of ``ps`` (in their order): the smallest is multiplied
    by m, the next by m - 1, ..., never below the one before it; a verdict on the adjusted
    p-value at ``ALPHA`` keeps the chance of any false "better" or "worse" among all the
    comparisons at ``ALPHA``."""
    m = len(ps)
    order = sorted(range(m), key=lambda i: ps[i])
    out = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * ps[i]))
        out[i] = running
    return out


def plan(
    *,
    effect: float,
    rate: float,
    repeats: int,
    spread: float = 0.0,
    comparisons: int = 1,
    alpha: float = ALPHA,
    power: float = 0.8,
) -> int:
    """Tasks needed for a paired comparison to detect a difference of ``effect`` in pass
    rate (baseline ``rate``) with ``repeats`` trials per task and configuration: the
    two-proportion sample size (Fleiss, without continuity correction) with each task's
    binomial variance divided by the repeats, plus ``spread``² -- how much the true
    difference varies from task to task, which repeats do not average away. Many
    comparisons: ``alpha`` / comparisons (Holm's first step, the strictest)."""
    p1, p2 = rate, min(1.0, rate + effect)
    bar = (p1 + p2) / 2
    z_a = _z(1 - alpha / comparisons / 2)
    z_b = _z(power)
    null_sd = math.sqrt(2 * bar * (1 - bar) / repeats + spread**2)
    alt_sd = math.sqrt((p1 * (1 - p1) + p2 * (1 - p2)) / repeats + spread**2)
    return max(1, math.ceil(((z_a * null_sd + z_b * alt_sd) / effect) ** 2 - 1e-9))


def _z(q: float) -> float:
    return NormalDist().inv_cdf(q)
