"""Unit tests for sweeper.analysis.environment_effects (Crane 2018 style condition comparisons)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from sweeper.analysis import ConditionComparison, compare_conditions
from sweeper.analysis.environment_effects import ConditionSummary, summarize_conditions


def test_hand_checkable_case() -> None:
    a = [2.0, 4.0, 6.0, 8.0, 10.0]
    b = [1.0, 2.0, 3.0, 4.0, 5.0]  # differences 1..5, all positive, no ties
    c = compare_conditions(a, b, names=("fp32", "tf32"))
    assert isinstance(c, ConditionComparison)
    assert c.names == ("fp32", "tf32") and c.n == 5 and c.n_nonzero == 5
    assert c.mean_difference == pytest.approx(3.0)
    assert c.t_statistic == pytest.approx(3.0 * math.sqrt(2.0))  # 3 / (sqrt(2.5) / sqrt(5))
    assert c.wilcoxon_statistic == 0.0  # no negative ranks
    assert c.wilcoxon_p == pytest.approx(2 / 32)  # exact: both all-sign patterns of 2^5
    assert c.kendall_tau == pytest.approx(1.0)
    assert c.spearman_rho == pytest.approx(1.0)
    assert c.summary_a == ConditionSummary(
        name="fp32", n=5, mean=6.0, sd=pytest.approx(math.sqrt(10.0)), min=2.0, max=10.0, range=8.0
    )
    assert c.summary_b.range == 4.0
    assert c.notes == ()


def _pairs(seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = np.round(rng.normal(0.8, 0.02, size=n), 4)
    b = a + np.round(rng.normal(0.003, 0.01, size=n), 4)
    b[:2] = a[:2]  # two zero differences, as bitwise-identical runs give
    b[2:] = np.where(b[2:] == a[2:], b[2:] + 1e-3, b[2:])  # and no other zeros
    return a, b


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("zero_method", ["wilcox", "pratt", "zsplit"])
def test_matches_scipy_directly(seed: int, zero_method: str) -> None:
    a, b = _pairs(seed, 20)  # > 13 pairs with zeros: scipy's normal approximation
    c = compare_conditions(a, b, zero_method=zero_method)  # type: ignore[arg-type]  # a str of the Literal
    w = stats.wilcoxon(a, b, zero_method=zero_method)
    t = stats.ttest_rel(a, b)
    tau = stats.kendalltau(a, b)
    rho = stats.spearmanr(a, b)
    assert (c.wilcoxon_statistic, c.wilcoxon_p) == pytest.approx((w.statistic, w.pvalue))
    assert (c.t_statistic, c.t_p) == pytest.approx((t.statistic, t.pvalue))
    assert (c.kendall_tau, c.kendall_p) == pytest.approx((tau.statistic, tau.pvalue))
    assert (c.spearman_rho, c.spearman_p) == pytest.approx((rho.statistic, rho.pvalue))
    assert c.zero_method == zero_method
    assert c.n_nonzero == 18


def test_small_sample_with_zeros_uses_scipys_permutation_test() -> None:
    a, b = _pairs(2, 7)
    c = compare_conditions(a, b)
    assert c.wilcoxon_p == pytest.approx(stats.wilcoxon(a, b).pvalue)
    asym = compare_conditions(a, b, wilcoxon_method="asymptotic")
    assert asym.wilcoxon_p == pytest.approx(stats.wilcoxon(a, b, method="asymptotic").pvalue)


def test_one_sided_alternative_is_passed_to_both_tests() -> None:
    a, b = [0.81, 0.83, 0.80, 0.86, 0.84], [0.80, 0.80, 0.81, 0.82, 0.80]
    c = compare_conditions(a, b, alternative="greater")
    assert c.wilcoxon_p == pytest.approx(stats.wilcoxon(a, b, alternative="greater").pvalue)
    assert c.t_p == pytest.approx(stats.ttest_rel(a, b, alternative="greater").pvalue)
    assert c.alternative == "greater"


def test_all_zero_differences_give_p_one_with_a_note() -> None:
    c = compare_conditions([0.9, 0.8, 0.7], [0.9, 0.8, 0.7])
    assert c.wilcoxon_p == 1.0 and c.t_p == 1.0
    assert math.isnan(c.wilcoxon_statistic) and math.isnan(c.t_statistic)
    assert c.n_nonzero == 0
    assert any("all paired differences are zero" in note for note in c.notes)
    assert c.kendall_tau == pytest.approx(1.0)


def test_constant_condition_gives_nan_rank_correlation_with_a_note() -> None:
    c = compare_conditions([0.5, 0.5, 0.5], [0.4, 0.6, 0.5])
    assert math.isnan(c.kendall_tau) and math.isnan(c.spearman_rho)
    assert any("constant" in note for note in c.notes)


@pytest.mark.parametrize(
    ("a", "b", "kwargs", "match"),
    [
        ([1.0, 2.0, 3.0], [1.0, 2.0], {}, "'a' has 3, 'b' has 2"),
        ([1.0], [2.0], {}, "need at least 2 pairs to compare conditions; got 1"),
        ([1.0, float("nan")], [1.0, 2.0], {}, "drop failed runs first"),
        ([], [], {}, "no scores"),
        ([1.0, 2.0], [2.0, 1.0], {"zero_method": "drop"}, "zero_method must be"),
        ([1.0, 2.0], [2.0, 1.0], {"alternative": "bigger"}, "alternative must be"),
        ([1.0, 2.0], [2.0, 1.0], {"wilcoxon_method": "perm"}, "wilcoxon_method must be"),
    ],
)
def test_bad_input(a: list[float], b: list[float], kwargs: dict[str, str], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        compare_conditions(a, b, **kwargs)  # type: ignore[arg-type]  # bad values on purpose


def test_summarize_conditions() -> None:
    s = summarize_conditions({"cpu": [0.91, 0.93, 0.92], "gpu": [0.95]})
    assert list(s) == ["cpu", "gpu"]
    assert s["cpu"].mean == pytest.approx(0.92)
    assert s["cpu"].sd == pytest.approx(0.01)
    assert (s["cpu"].min, s["cpu"].max) == (0.91, 0.93)
    assert s["cpu"].range == pytest.approx(0.02)
    assert s["gpu"].n == 1 and math.isnan(s["gpu"].sd) and s["gpu"].range == 0.0
    with pytest.raises(ValueError, match="condition 'gpu': no scores"):
        summarize_conditions({"gpu": []})


# ------------------------------------------------- duplicated pairs (issue 32, item 4)
SEEDS_8 = [0.951, 0.944, 0.948, 0.939, 0.951, 0.946, 0.942, 0.950]


def test_pairs_repeated_under_one_seed_count_once() -> None:
    # seeds/cpu: threads=1 vs 2, each seed twice (deterministic true/false), nothing changes the score.
    a = np.repeat(SEEDS_8, 2)
    b = a + np.repeat(np.linspace(-1e-3, 1e-3, 8), 2)
    seeds = np.repeat(np.arange(8), 2)
    doubled = compare_conditions(a, b)
    once = compare_conditions(a, b, keys=seeds)
    expected = compare_conditions(a[::2], b[::2])
    assert (once.n, once.n_total) == (8, 16)
    assert (once.spearman_rho, once.spearman_p, once.t_p, once.wilcoxon_p) == (
        expected.spearman_rho, expected.spearman_p, expected.t_p, expected.wilcoxon_p)
    assert once.spearman_p > doubled.spearman_p  # 16 "pairs" claimed more than 8 seeds hold
    assert "8 of 16 pairs repeat another bit-identically under the same seed" in once.notes[0]


def test_equal_pairs_of_different_seeds_are_kept() -> None:
    c = compare_conditions([0.9, 0.9, 0.8, 0.7], [0.9, 0.9, 0.7, 0.8], keys=[0, 1, 2, 3])
    assert (c.n, c.n_total) == (4, 4) and not any("repeat another" in note for note in c.notes)


def test_too_few_distinct_pairs_give_no_p_value_but_words() -> None:
    c = compare_conditions([0.9, 0.9, 0.8, 0.8], [0.7, 0.7, 0.9, 0.9], keys=[0, 0, 1, 1])
    assert (c.n, c.n_total) == (2, 4)
    assert all(math.isnan(v) for v in (c.wilcoxon_p, c.t_p, c.kendall_p, c.spearman_p, c.spearman_rho))
    assert any(note.startswith("too few distinct pairs for a test: 2 (of 4 pairs), at least 3 needed")
               for note in c.notes)


def test_report_pairs_seeds_cpu_once_per_seed() -> None:
    import pandas as pd

    from sweeper.report.groups import paired_conditions

    seeds, threads, det = (x.ravel() for x in np.meshgrid(np.arange(8), [1, 2], ["true", "false"], indexing="ij"))
    trials = pd.DataFrame({"index": np.arange(32), "run_id": [f"r{i}" for i in range(32)], "status": "FINISHED",
                           "param.lr": 0.05, "param.env.seed": seeds, "param.env.threads": threads,
                           "param.env.deterministic": det, "metric.acc": np.asarray(SEEDS_8)[seeds]})
    comparisons, _ = paired_conditions(trials, "acc")
    assert {p.condition: (p.comparison.n, p.comparison.n_total) for p in comparisons} == {
        "env.threads": (8, 16), "env.deterministic": (8, 16)}
