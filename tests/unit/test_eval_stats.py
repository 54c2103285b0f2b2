"""The eval's numbers: the unbiased pass@k and pass^k, the seeded task bootstrap, and the
paired verdict -- better, worse, no difference, inconclusive -- with what the sample can
detect."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from loopkit.eval import stats
from loopkit.eval.trials import Trial, schedule


@pytest.mark.parametrize(("n", "c", "k"), [(5, 2, 1), (5, 2, 2), (5, 2, 3), (6, 0, 2), (4, 4, 3)])
def test_pass_at_k_is_the_chance_over_all_subsets(n: int, c: int, k: int) -> None:
    """pass@k and pass^k equal the exact averages over every k-subset of the trials."""
    trials = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(trials, k))
    assert stats.pass_at_k(n, c, k) == pytest.approx(sum(any(s) for s in subsets) / len(subsets))
    assert stats.pass_hat_k(n, c, k) == pytest.approx(sum(all(s) for s in subsets) / len(subsets))


def test_pass_at_k_needs_k_trials() -> None:
    with pytest.raises(ValueError):
        stats.pass_at_k(2, 1, 3)


def test_the_bootstrap_is_seeded_and_covers_the_mean() -> None:
    values = [1.0, 0.0, 0.5, 1.0, 0.0, 1.0, 1.0, 0.5]
    a = stats.bootstrap(values, seed=3)
    assert a == stats.bootstrap(values, seed=3)
    assert a[0] < stats.mean(values) < a[1]
    assert stats.bootstrap([1.0, 1.0, 1.0], seed=1) == (1.0, 1.0)


def test_the_sign_test_is_exact() -> None:
    assert stats.sign_test([1, 1, 1, 1, 1]) == pytest.approx(2 / 32)
    assert stats.sign_test([1, -1, 0]) == 1.0
    assert stats.sign_test([]) == 1.0


def _rates(diffs: list[float]) -> tuple[dict[str, float], dict[str, float]]:
    a = {f"t{i}": 0.5 + d / 2 for i, d in enumerate(diffs)}
    b = {f"t{i}": 0.5 - d / 2 for i, d in enumerate(diffs)}
    return a, b


def test_a_clear_difference_is_better_or_worse() -> None:
    a, b = _rates([1.0] * 15 + [0.0] * 5)
    assert stats.paired(a, b, repeats=3, seed=1)["verdict"] == "better"
    assert stats.paired(b, a, repeats=3, seed=1)["verdict"] == "worse"


def test_three_tasks_cannot_tell() -> None:
    a, b = _rates([1.0, 0.0, 0.0])
    found = stats.paired(a, b, repeats=2, seed=1)
    assert found["verdict"] == "inconclusive" and found["detectable"] > 0.5


def test_identical_on_a_few_tasks_is_inconclusive_not_no_difference() -> None:
    """Ties on three tasks with one trial each prove nothing: the floor of the smallest
    detectable effect keeps that from reading as "no difference"."""
    a, b = _rates([0.0, 0.0, 0.0])
    assert stats.paired(a, b, repeats=1, seed=1)["verdict"] == "inconclusive"


def test_identical_on_many_tasks_is_no_difference() -> None:
    rng = random.Random(5)
    tasks = {f"t{i}": rng.choice([0.0, 0.5, 1.0]) for i in range(400)}
    found = stats.paired(tasks, dict(tasks), repeats=10, seed=1)
    assert found["verdict"] == "no difference" and found["detectable"] <= 0.1


def test_detectable_shrinks_with_the_square_root_of_the_tasks() -> None:
    d = [0.5, -0.5] * 8
    assert stats.detectable(d * 4, 3) == pytest.approx(stats.detectable(d, 3) / 2, rel=0.05)
    assert stats.detectable([0.0] * 16, 2) == pytest.approx(2.8 * math.sqrt(0.25) / 4, rel=0.01)


def test_the_schedule_interleaves_every_configuration_per_task() -> None:
    from types import SimpleNamespace

    configs = [SimpleNamespace(name=n) for n in "abc"]
    tasks = [SimpleNamespace(id=f"t{i}") for i in range(4)]
    suite = SimpleNamespace(configs=configs, tasks=tasks, repeats=2, seed=9)
    order: list[Trial] = schedule(suite)  # type: ignore[arg-type]
    assert len(order) == 24 and len({t.key for t in order}) == 24
    for block in range(0, 24, 3):  # each task's three configurations run back to back
        names = {t.config.name for t in order[block : block + 3]}
        assert names == {"a", "b", "c"} and len({t.task.id for t in order[block : block + 3]}) == 1
    firsts = [order[i].config.name for i in range(0, 24, 3)]
    assert len(set(firsts)) > 1  # shuffled: not always the same configuration first
    assert [t.key for t in schedule(suite)] == [t.key for t in order]  # type: ignore[arg-type]


def _trials(config: str, passes: list[int]) -> list[dict[str, object]]:
    return [
        {
            "config": config,
            "task": f"t{i}",
            "status": "passed" if ok else "failed",
            "wall_s": 1.0,
            "agent_s": 1.0,
            "overhead_s": 0.0,
        }
        for i, ok in enumerate(passes)
    ]


def test_holm_turns_a_borderline_better_inconclusive_among_three_configurations() -> None:
    """cand beats base on six tasks and loses one of ten (p = 0.044): alone, better. With
    a third configuration compared too, Holm doubles the smallest p: inconclusive; a
    clear difference stays better."""
    from types import SimpleNamespace

    from loopkit.eval import report

    base = [0, 0, 0, 0, 0, 0, 1, 0, 0, 0]
    cand = [1, 1, 1, 1, 1, 1, 0, 0, 0, 0]
    results = _trials("base", base) + _trials("cand", cand) + _trials("other", base)
    suite = SimpleNamespace(
        name="s",
        repeats=1,
        seed=7,
        margin=0.1,
        configs=[SimpleNamespace(name=n) for n in ("base", "cand", "other")],
        tasks=[SimpleNamespace(id=f"t{i}") for i in range(10)],
    )
    alone = report.summarize(results, suite=suite, base="b", compare=("cand", "base"))
    (one,) = alone["comparisons"]
    assert one["verdict"] == "better" and one["p"] == pytest.approx(0.044, abs=0.005)
    assert one["correction"] == "none" and "p_adjusted" not in one
    many = report.summarize(results, suite=suite, base="b")
    first = many["comparisons"][0]
    assert first["candidate"] == "cand" and first["correction"] == "holm"
    assert first["p_adjusted"] == pytest.approx(2 * first["p"], abs=0.001)
    assert first["verdict"] == "inconclusive"
    clear = _trials("cand", [1] * 10)
    strong = report.summarize(
        _trials("base", [0] * 10) + clear + _trials("other", [0] * 10), suite=suite, base="b"
    )
    assert strong["comparisons"][0]["verdict"] == "better"


def test_holm_adjusts_step_down_and_stays_monotone() -> None:
    assert stats.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert stats.holm([0.5]) == [0.5]
    assert stats.holm([0.001, 0.9]) == pytest.approx([0.002, 0.9])


def test_plan_is_the_two_proportion_sample_size() -> None:
    # 50% vs 70%, 5% two-sided, 80% power: 93 per group (Fleiss, no continuity correction).
    assert stats.plan(effect=0.2, rate=0.5, repeats=1) == 93
    # 50% vs 60%: 388 per group by the same formula (387.3, rounded up).
    assert stats.plan(effect=0.1, rate=0.5, repeats=1) == 388
    # Repeats average the binomial noise away, never the spread between tasks.
    assert stats.plan(effect=0.1, rate=0.5, repeats=1000, spread=0.2) > 30


def test_the_frontier_keeps_what_nothing_beats_on_cost_and_pass_rate() -> None:
    from loopkit.eval.report import frontier

    points = {"cheap": (0.1, 0.4), "dear": (1.0, 0.9), "worse": (0.5, 0.3), "mid": (0.4, 0.6)}
    assert frontier(points) == ["cheap", "mid", "dear"]
    assert frontier({"a": (0.2, 0.5), "b": (0.2, 0.5)}) == ["a"]
