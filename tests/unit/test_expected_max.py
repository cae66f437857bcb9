"""Unit tests for sweeper.analysis.expected_max (Dodge et al. 2019)."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweeper.analysis import ExpectedMax, expected_max
from sweeper.analysis.expected_max import SurrogateExpectedMax, surrogate_expected_max
from sweeper.analysis.order_statistics import _DIRECT_MAX_N, _Hypergeometric


def _enumerate(values: list[float], n: int, *, replace: bool) -> tuple[float, float]:
    """Mean and population sd of the max over every equally likely draw of n values."""
    draws = (
        itertools.product(values, repeat=n)
        if replace
        else itertools.combinations(values, n)  # n-subsets of positions: ties stay distinct
    )
    maxima = np.array([max(d) for d in draws])
    return float(maxima.mean()), float(maxima.std())


def _ungrouped(values: list[float], n: int) -> float:
    """The paper's eq. 8 term by term over sorted positions, ties NOT grouped (exact)."""
    v = sorted(Fraction(x) for x in values)
    big_n = len(v)
    total = sum(
        (x * (Fraction(i, big_n) ** n - Fraction(i - 1, big_n) ** n) for i, x in enumerate(v, 1)),
        Fraction(0),
    )
    return float(total)


SMALL_CASES = [
    [3.0],
    [1.0, 2.0],
    [2.0, 2.0],
    [0.5, 1.5, 1.5],
    [4.0, 1.0, 3.0, 2.0],
    [1.0, 1.0, 2.0, 2.0, 2.0],
    [-1.0, 0.25, 0.25, 3.0, -1.0],
    [0.7, 0.1, 0.9, 0.3, 0.5],
]


@pytest.mark.parametrize("values", SMALL_CASES)
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_matches_enumeration_with_replacement(values: list[float], n: int) -> None:
    em = expected_max(values, n_max=4)
    mean, std = _enumerate(values, n, replace=True)
    assert em.mean[n - 1] == pytest.approx(mean, abs=1e-12)
    assert em.std[n - 1] == pytest.approx(std, abs=1e-7)  # sqrt near 0 amplifies rounding


@pytest.mark.parametrize("values", SMALL_CASES)
def test_matches_enumeration_without_replacement(values: list[float]) -> None:
    em = expected_max(values, without_replacement=True)
    assert em.n.tolist() == list(range(1, len(values) + 1))
    for n in em.n:
        mean, std = _enumerate(values, int(n), replace=False)
        assert em.mean[n - 1] == pytest.approx(mean, abs=1e-12)
        assert em.std[n - 1] == pytest.approx(std, abs=1e-7)


@pytest.mark.parametrize("values", SMALL_CASES)
def test_minimize_is_negated_maximize(values: list[float]) -> None:
    low = expected_max(values, maximize=False, n_max=4)
    high = expected_max([-v for v in values], n_max=4)
    np.testing.assert_allclose(low.mean, -high.mean, atol=1e-14)
    np.testing.assert_allclose(low.std, high.std, atol=1e-14)
    for n in range(1, 5):  # and it is the expected minimum
        draws = [min(d) for d in itertools.product(values, repeat=n)]
        assert low.mean[n - 1] == pytest.approx(np.mean(draws), abs=1e-12)


def test_grouped_ties_equal_ungrouped_formula() -> None:
    values = [0.3, 0.5, 0.5, 0.5, 0.8, 0.8, 0.1, 0.3, 0.9, 0.9, 0.9, 0.9]
    em = expected_max(values)
    for n in range(1, len(values) + 1):
        assert em.mean[n - 1] == pytest.approx(_ungrouped(values, n), abs=1e-14)


def test_matches_exact_rational_arithmetic() -> None:
    rng = np.random.default_rng(7)
    values = np.round(rng.normal(50.0, 10.0, size=30), 2).tolist()  # with ties likely
    em = expected_max(values)
    exact = np.array([_ungrouped(values, n) for n in range(1, 31)])
    np.testing.assert_allclose(em.mean, exact, rtol=0, atol=1e-12 * np.ptp(values))


def test_without_replacement_matches_exact_rational_arithmetic() -> None:
    rng = np.random.default_rng(11)
    values = np.round(rng.uniform(0.0, 1.0, size=40), 1).tolist()  # many ties
    em = expected_max(values, without_replacement=True)
    v = sorted(set(values))
    below = [sum(x <= u for x in values) for u in v]  # c_j
    for n in range(1, 41):
        cdf = [Fraction(math.comb(c, n), math.comb(40, n)) for c in below]
        exact = sum(
            (Fraction(u) * (p - q) for u, p, q in zip(v, cdf, [Fraction(0), *cdf[:-1]], strict=True)),
            Fraction(0),
        )
        assert em.mean[n - 1] == pytest.approx(float(exact), abs=1e-12)


def test_blocked_evaluation_matches_plain_sum_far_into_the_truncation() -> None:
    # N = 2000 distinct values: budgets up to 2.5 N exercise the block factorisation and
    # the dropped terms; compare with a plain (n, value) evaluation of the same sum.
    rng = np.random.default_rng(3)
    v = np.sort(rng.normal(size=2000))
    em = expected_max(v, n_max=5000)
    big_n = v.size
    log_f = np.log1p(-(big_n - np.arange(1, big_n)) / big_n)  # (N-1,)
    d1 = np.diff(v)
    n = np.arange(1, 5001)[:, None]
    plain = v[-1] - np.exp(n * log_f[None, :]) @ d1
    np.testing.assert_allclose(em.mean, plain, rtol=0, atol=1e-12 * np.ptp(v))


@given(
    st.lists(
        st.integers(min_value=-5, max_value=5).map(lambda i: i / 4), min_size=1, max_size=40
    ),
    st.booleans(),
)
@settings(max_examples=60, deadline=None)
def test_invariants(values: list[float], without: bool) -> None:
    x = np.array(values)
    em = expected_max(x, without_replacement=without)
    assert em.mean[0] == pytest.approx(x.mean(), abs=1e-12)  # n = 1 gives the mean
    assert em.std[0] == pytest.approx(x.std(), abs=1e-7)
    assert np.all(np.diff(em.mean) >= 0)  # never decreases
    assert np.all(em.mean <= x.max()) and np.all(em.mean >= x.min())
    assert np.all(em.std >= 0)
    if without:  # all N without replacement: the observed max, surely
        assert em.mean[-1] == pytest.approx(x.max(), abs=1e-12)
        assert em.std[-1] == pytest.approx(0.0, abs=1e-6)


def test_result_fields_and_read_only_arrays() -> None:
    em = expected_max([3.0, 1.0, 2.0], durations_s=[10.0, 20.0, 30.0])
    assert isinstance(em, ExpectedMax)
    assert em.n.tolist() == [1, 2, 3]
    assert em.values_sorted.tolist() == [1.0, 2.0, 3.0]
    assert em.n_trials == 3
    assert em.mean_duration_s == pytest.approx(20.0)
    np.testing.assert_allclose(em.budget_s, [20.0, 40.0, 60.0])
    with pytest.raises(ValueError):
        em.mean[0] = 0.0
    assert expected_max([1.0, 2.0]).budget_s is None
    assert expected_max([2.0, 1.0], maximize=False).values_sorted.tolist() == [1.0, 2.0]


def test_large_budget_with_replacement_approaches_max() -> None:
    em = expected_max([0.0, 1.0], n_max=60)
    assert em.mean[-1] == pytest.approx(1.0 - 0.5**60, abs=1e-15)
    assert em.mean[-1] <= 1.0


def test_all_equal_values() -> None:
    em = expected_max([0.5] * 4, without_replacement=True)
    assert em.mean.tolist() == [0.5] * 4
    assert em.std.tolist() == [0.0] * 4


def test_budget_to_reach() -> None:
    em = expected_max([1.0, 2.0, 3.0, 4.0], durations_s=[10, 20, 30, 40])
    # E[max] for n = 1..4: 2.5, 3.125, 3.4375, 3.6171875
    np.testing.assert_allclose(em.mean, [2.5, 3.125, 3.4375, 3.6171875])
    assert em.budget_to_reach(2.5) == 1
    assert em.budget_to_reach(3.2) == 3
    assert em.budget_to_reach(3.2, unit="seconds") == pytest.approx(75.0)
    assert em.budget_to_reach(4.0) is None  # the observed max is only approached
    losses = expected_max([1.0, 2.0, 3.0, 4.0], maximize=False)
    assert losses.budget_to_reach(1.6) == 3  # 2.5, 1.875, 1.5625, ...
    with pytest.raises(ValueError, match="durations_s"):
        expected_max([1.0, 2.0]).budget_to_reach(1.5, unit="seconds")
    with pytest.raises(ValueError, match="'trials' or 'seconds'"):
        em.budget_to_reach(3.0, unit="hours")  # type: ignore[arg-type]  # a bad unit on purpose
    with pytest.raises(ValueError, match="finite"):
        em.budget_to_reach(float("nan"))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"values": []}, "empty"),
        ({"values": [0.5, float("nan")]}, "drop failed trials first"),
        ({"values": [0.5, float("inf")]}, "drop failed trials first"),
        ({"values": [[0.5, 0.6]]}, "one-dimensional"),
        ({"values": [0.5, 0.6], "durations_s": [1.0]}, "one duration per trial"),
        ({"values": [0.5, 0.6], "durations_s": [1.0, -1.0]}, ">= 0 seconds"),
        ({"values": [0.5, 0.6], "n_max": 0}, "positive int"),
        ({"values": [0.5, 0.6], "n_max": 3, "without_replacement": True}, "n_max <= 2"),
    ],
)
def test_bad_input(kwargs: dict[str, object], match: str) -> None:
    values = kwargs.pop("values")
    with pytest.raises(ValueError, match=match):
        expected_max(values, **kwargs)  # type: ignore[arg-type]  # bad input on purpose


def test_surrogate_expected_max_aggregates_per_sample_curves() -> None:
    rng = np.random.default_rng(0)
    samples = rng.normal(size=(40, 25)) + rng.normal(size=(40, 1))  # (S, M)
    s = surrogate_expected_max(samples, n_max=30)
    assert isinstance(s, SurrogateExpectedMax)
    per = [expected_max(row, n_max=30) for row in samples]
    curves = np.array([p.mean for p in per])
    np.testing.assert_allclose(s.mean, curves.mean(axis=0), atol=1e-13)
    np.testing.assert_allclose(s.within_std, np.mean([p.std for p in per], axis=0), atol=1e-13)
    np.testing.assert_allclose(s.low, np.percentile(curves, 2.5, axis=0))
    np.testing.assert_allclose(s.high, np.percentile(curves, 97.5, axis=0))
    assert (s.n_samples, s.n_points, s.level) == (40, 25, 0.95)
    assert np.all(s.low <= s.mean) and np.all(s.mean <= s.high)
    assert np.all(np.diff(s.mean) >= 0)


def test_surrogate_single_sample_and_minimize() -> None:
    s = surrogate_expected_max([[3.0, 1.0, 2.0]], maximize=False)
    em = expected_max([3.0, 1.0, 2.0], maximize=False)
    np.testing.assert_allclose(s.mean, em.mean)
    np.testing.assert_allclose(s.low, em.mean)
    np.testing.assert_allclose(s.high, em.mean)


@pytest.mark.parametrize(
    ("samples", "kwargs", "match"),
    [
        ([1.0, 2.0], {}, r"shape \(S, M\)"),
        ([[1.0, float("nan")]], {}, "NaN"),
        ([[1.0, 2.0]], {"level": 1.0}, "level"),
    ],
)
def test_surrogate_bad_input(samples: object, kwargs: dict[str, float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        surrogate_expected_max(samples, **kwargs)  # type: ignore[arg-type]  # bad input on purpose


@pytest.mark.parametrize("ties", [False, True])  # distinct scores; 4,000 of them tied in pairs
def test_without_replacement_hankel_tiles_match_term_by_term(ties: bool) -> None:
    # Above 2^15 distinct scores the curve goes through FFT tiles; compare with evaluating
    # every kept term (the path of smaller samples), budgets 1..N and a cut n_max.
    rng = np.random.default_rng(5)
    v = rng.normal(size=40_000)
    if ties:
        v[:4000] = v[4000:8000]
    x = np.sort(v)
    starts = np.flatnonzero(np.diff(x, prepend=-np.inf))
    counts = np.diff(starts, append=x.size)
    assert starts.size > _DIRECT_MAX_N
    w = x[starts] - x[-1]
    coef = np.stack([w[1:] - w[:-1], w[:-1] ** 2 - w[1:] ** 2])
    direct = _Hypergeometric(counts, coef).direct(1, x.size + 1, 0)
    em = expected_max(v, without_replacement=True)
    span = np.ptp(v)
    np.testing.assert_allclose(em.mean, np.maximum.accumulate(x[-1] - direct[0]), rtol=0, atol=1e-10 * span)
    var = np.clip(direct[1] - direct[0] ** 2, 0, None)
    np.testing.assert_allclose(em.std, np.sqrt(var), rtol=0, atol=1e-5 * span)  # sqrt near 0 amplifies
    assert em.mean[-1] == pytest.approx(x[-1], abs=1e-10 * span)  # all N: the observed max
    cut = expected_max(v, without_replacement=True, n_max=10_000)
    np.testing.assert_allclose(cut.mean, em.mean[:10_000], rtol=0, atol=1e-10 * span)
