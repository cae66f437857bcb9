"""Output warping (sweeper.warping): the transforms invert, stay monotone, and the map predicts in metric units."""

from __future__ import annotations

import numpy as np
import pytest

from sweeper.gp import fit_gp
from sweeper.policy import MultiversePolicy, PolicySettings
from sweeper.space import SearchSpace
from sweeper.warping import OUTPUT_WARPINGS, OutputWarping, _yeo_johnson_inverse, fit_warped_gp

import scipy.stats


def skewed(n: int = 40, seed: int = 0) -> np.ndarray:
    """Values piled up near a ceiling with a tail below, like an accuracy map."""
    return 0.98 - np.random.default_rng(seed).exponential(0.05, n)


@pytest.mark.parametrize("lam", [0.0, 0.5, 1.0, 1.7, 2.0])
def test_yeo_johnson_inverse_undoes_scipy_transform(lam: float) -> None:
    y = np.linspace(-3, 3, 61)
    z = scipy.stats.yeojohnson(y, lmbda=lam)
    np.testing.assert_allclose(_yeo_johnson_inverse(np.asarray(z), lam), y, atol=1e-9)


@pytest.mark.parametrize("kind", ["yeo-johnson", "rank"])
def test_round_trip_at_observed_values_and_monotone(kind: str) -> None:
    y = skewed()
    g = OutputWarping.fit(kind, y)
    assert g.kind == kind
    np.testing.assert_allclose(g.inverse(g.forward(y)), y, atol=1e-9)
    grid = np.linspace(y.min(), y.max(), 200)
    assert np.all(np.diff(g.forward(grid)) >= 0)  # monotone increasing: keeps max/min order


def test_yeo_johnson_inverse_is_finite_far_out() -> None:
    """A wide posterior puts Gauss-Hermite nodes far beyond the data: the map must stay finite."""
    heavy_tail = -3.3 * np.exp(-np.random.default_rng(3).exponential(3.0, 100))  # Hartmann-like: piled at 0
    g = OutputWarping.fit("yeo-johnson", heavy_tail)
    assert 0.0 <= g.lam <= 2.0
    assert np.all(np.isfinite(g.inverse(np.linspace(-30, 30, 101))))


def test_yeo_johnson_makes_skewed_values_more_gaussian() -> None:
    y = skewed(200)
    z = OutputWarping.fit("yeo-johnson", y).forward(y)
    assert abs(scipy.stats.skew(z)) < 0.5 * abs(scipy.stats.skew(y))


def test_rank_gives_normal_scores_with_ties_averaged() -> None:
    y = np.array([3.0, 1.0, 2.0, 2.0, 5.0])
    z = OutputWarping.fit("rank", y).forward(y)
    # mean ranks 4, 1, 2.5, 2.5, 5 of n=5 -> quantiles (r - 0.5) / 5
    expected = scipy.stats.norm.ppf((np.array([4.0, 1.0, 2.5, 2.5, 5.0]) - 0.5) / 5)
    np.testing.assert_allclose(z, expected)
    assert OutputWarping.fit("rank", y).inverse(np.array([10.0]))[0] == 5.0  # flat beyond the data


def test_none_and_too_few_values_are_the_identity() -> None:
    assert OutputWarping.fit("none", skewed()).kind == "none"
    assert OutputWarping.fit("yeo-johnson", np.array([1.0, 1.0, 2.0])).kind == "none"
    with pytest.raises(ValueError, match="output warping"):
        OutputWarping.fit("boxcox", skewed())


def test_unwarped_prediction_is_exactly_fit_gp() -> None:
    X = np.random.default_rng(1).random((12, 2))
    y = np.sin(6 * X[:, 0]) + X[:, 1]
    plain = fit_gp(X, y, seed=0, n_restarts=2)
    warped = fit_warped_gp(X, y, warping="none", seed=0, n_restarts=2)
    for a, b in zip(plain.predict(X), warped.predict(X)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("kind", ["yeo-johnson", "rank"])
def test_warped_map_interpolates_in_metric_units(kind: str) -> None:
    """At the training points (tiny noise) the predicted mean is the observed metric, not g(y)."""
    rng = np.random.default_rng(2)
    X = rng.random((25, 2))
    y = 0.98 - 0.3 * np.exp(-8 * ((X - 0.3) ** 2).sum(axis=1))
    model = fit_warped_gp(X, y, warping=kind, seed=0, n_restarts=2)
    mean, sd = model.predict(X)
    assert np.max(np.abs(mean - y)) < 0.05 * np.ptp(y)  # g(y) instead would be off by about 1
    assert np.all(sd >= 0)
    far_mean, far_sd = model.predict(np.array([[0.95, 0.95]]))
    assert y.min() - 0.1 <= far_mean[0] <= y.max() + 0.1 and far_sd[0] > 0


@pytest.mark.parametrize("kind", OUTPUT_WARPINGS)
def test_policy_runs_with_each_warping(kind: str) -> None:
    space = SearchSpace.from_specs({"a": "interval(0, 1)", "b": "interval(0, 1)"})
    policy = MultiversePolicy(space, PolicySettings(strategy="ivr", num_trials=12, n_initial=6, batch_size=3,
                                                    seed=0, output_warping=kind))
    while (s := policy.ask()) is not None:
        policy.tell(s.index, 0.9 - 0.2 * np.exp(-10 * (s.x[0] - 0.5) ** 2))
        if s.phase == "ivr":
            assert s.predicted_mean is not None and 0.5 < s.predicted_mean < 1.2
    assert len(policy.suggestions) == 12


def test_policy_refuses_unknown_warping() -> None:
    space = SearchSpace.from_specs({"a": "interval(0, 1)"})
    problems = PolicySettings(output_warping="boxcox").problems(space)
    assert any("output_warping" in p and "yeo-johnson" in p for p in problems)
