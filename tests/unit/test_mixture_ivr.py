"""IVR over a bounded metric's posterior mixture (``ivr_mixture``): the greedy batch, the members'
metric-unit weights, the raw fit's share, and where the policy uses it.
NOTE: docs/decisions/0070-ivr-over-the-bounded-mixture.md, docs/decisions/0071-mixture-ivr-keeps-the-raw-fit.md,
docs/decisions/0075-metric-variance-over-the-members-doubt.md"""

from __future__ import annotations

import math

import numpy as np
import pytest

from sweeper.errors import SweeperConfigError
from sweeper.search import gp_batch
from sweeper.search.acquisition import integrated_variance_reduction, select_ivr_batch, select_mixture_ivr_batch
from sweeper.search.bounded import fit_bounded_gp
from sweeper.search.design import random_design, sobol_design
from sweeper.search.gp import GPFit
from sweeper.search.grammar import parse_specs
from sweeper.search.policy import MultiversePolicy
from sweeper.search.settings import PolicySettings
from sweeper.search.slope_weights import metric_variance_weights
from sweeper.search.warping import MetricBounds

SPACE_2D = parse_specs({"x": "interval(0, 1)", "y": "interval(0, 1)"})
FAST = dict(n_candidates=256, n_integration=128, gp_restarts=2)


def member(X: np.ndarray, lengthscale: float, noise: float = 1e-3, y_std: float = 1.0) -> GPFit:
    """A GP with given hyperparameters (no fitting): a stand-in for one posterior draw."""
    return GPFit.matern(lengthscales=np.full(X.shape[1], lengthscale), variance=1.0, noise_variance=noise,
                        y_mean=0.0, y_std=y_std, log_likelihood=0.0, X=X, y=np.sin(X.sum(axis=1)))


def accuracy(X: np.ndarray) -> np.ndarray:
    """An accuracy-like map in [0, 1]: a plateau near 1 on the left, a cliff down to 0.3 on the right."""
    return 0.3 + 0.69 / (1.0 + np.exp((X[:, 0] - 0.6) / 0.05)) + 0.005 * X[:, 1]


@pytest.mark.parametrize(("shares", "second_points"), [(None, 200), ([0.8, 0.2], 200), ([0.8, 0.2], 48)])
def test_each_pick_is_the_argmax_of_the_members_weighted_ivr_given_the_earlier_picks(shares, second_points) -> None:
    """Also where the second member integrates over its own set, the first 48 of the 200 points (the option's
    members integrate over a prefix, gp_batch.MEMBER_INTEGRATION)."""
    X_cond = random_design(12, 2, seed=1)
    members = [member(X_cond, 0.15), member(X_cond, 0.5, noise=1e-2)]
    X_cand, X_mc = random_design(150, 2, seed=2), random_design(200, 2, seed=3)
    mcs = [X_mc, X_mc[:second_points]]
    weights = [np.full(200, 2.0), 1.0 + 9.0 * (mcs[1][:, 0] > 0.5)]
    batch = select_mixture_ivr_batch(members, X_cond, X_cand, X_mc if second_points == 200 else mcs, 5, weights,
                                     shares)
    grown = X_cond
    for k in range(5):
        total = sum(np.mean(w) * share * integrated_variance_reduction(m, grown, X_cand, points, w)
                    for m, w, share, points in zip(members, weights, shares or [0.5, 0.5], mcs, strict=True))
        total[batch.indices[:k]] = -np.inf
        assert np.argmax(total) == batch.indices[k]
        np.testing.assert_allclose(batch.values[k], total[batch.indices[k]], rtol=1e-8)
        grown = np.vstack([grown, X_cand[batch.indices[k]]])
    assert len(set(batch.indices.tolist())) == 5


def test_one_member_is_the_single_fit_and_the_member_with_more_metric_variance_leads() -> None:
    X_cond = random_design(10, 2, seed=4)
    short, long = member(X_cond, 0.1), member(X_cond, 0.6)
    X_cand, X_mc = sobol_design(128, 2, seed=5), sobol_design(256, 2, seed=6)
    alone = select_ivr_batch(short, X_cond, X_cand, X_mc, 4)
    one = select_mixture_ivr_batch([short], X_cond, X_cand, X_mc, 4, [np.full(256, 7.0)])
    assert np.array_equal(one.indices, alone.indices)
    np.testing.assert_allclose(one.values, 7.0 * alone.values, rtol=1e-10)  # in the weights' units
    # The long member's variance means 10^4 times less of the metric: the short one decides.
    both = select_mixture_ivr_batch([short, long], X_cond, X_cand, X_mc, 4, [np.ones(256), np.full(256, 1e-4)])
    assert np.array_equal(both.indices, alone.indices)
    assert not np.array_equal(select_ivr_batch(long, X_cond, X_cand, X_mc, 4).indices, alone.indices)


def test_a_mixture_without_members_or_with_weights_for_other_members_is_refused() -> None:
    X = random_design(6, 2, seed=0)
    X_cand, X_mc = random_design(20, 2, seed=1), random_design(30, 2, seed=2)
    with pytest.raises(ValueError, match="one weight vector per member"):
        select_mixture_ivr_batch([], X, X_cand, X_mc, 2, [])
    with pytest.raises(ValueError, match="one weight vector per member"):
        select_mixture_ivr_batch([member(X, 0.3)], X, X_cand, X_mc, 2, [np.ones(30), np.ones(30)])
    with pytest.raises(ValueError, match="one integration set"):
        select_mixture_ivr_batch([member(X, 0.3)], X, X_cand, [X_mc, X_mc], 2, [np.ones(30)])
    with pytest.raises(ValueError, match="positive finite"):
        select_mixture_ivr_batch([member(X, 0.3)], X, X_cand, X_mc, 2, [np.zeros(30)])
    for shares in ([0.0], [math.nan], [0.5, 0.5]):
        with pytest.raises(ValueError, match="one positive finite share per member"):
            select_mixture_ivr_batch([member(X, 0.3)], X, X_cand, X_mc, 2, [np.ones(30)], shares)


def metric_weights_and_slope(X: np.ndarray) -> tuple[GPFit, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A bounded fit of :func:`accuracy` on ``X``, its weights, modelled sd, mean metric and delta-method weights."""
    fit = fit_bounded_gp(X, accuracy(X), MetricBounds(0.0, 1.0), seed=0, n_restarts=2)
    X_mc = sobol_design(64, 2, seed=8)
    g, sd = fit.predict_warped(X_mc)
    h = 1e-5 * fit.y_std
    slope = (fit.warp.inverse(g + h) - fit.warp.inverse(g - h)) / (2 * h)
    # Monte Carlo of the metric's variance over the member's predictive: the weight times the standardised variance.
    w = metric_variance_weights(fit, X_mc)
    draws = fit.warp.inverse(g[:, None] + sd[:, None] * np.random.default_rng(0).standard_normal((64, 20000)))
    np.testing.assert_allclose(w * (sd / fit.y_std) ** 2, draws.var(axis=1), rtol=0.05, atol=1e-12)
    return fit, w, sd, fit.warp.inverse(g), (fit.y_std * slope) ** 2


def test_a_members_weights_are_the_metrics_variance_over_its_doubt_per_unit_of_modelled_variance() -> None:
    fit, w, sd, y, delta = metric_weights_and_slope(sobol_design(16, 2, seed=7))
    # Where the member is sure, it is the delta method: (y_std dy/dg)^2 at the mean.
    sure = (sd < 0.02 * fit.y_std) & (y > 0.02) & (y < 0.98)  # away from where inverse() snaps onto a bound
    assert sure.sum() >= 3
    np.testing.assert_allclose(w[sure], delta[sure], rtol=0.02)
    # The plateau near 1 is squeezed by the warp: its variance means far less of the metric than the cliff's.
    assert np.median(w[y > 0.97]) < 0.1 * np.median(w[(y > 0.4) & (y < 0.8)])
    # Trials on the left only: where the member is unsure and its mean near a bound, the delta method would call
    # the point nearly known (the warp's slope is flat there); the metric's variance over the doubt does not.
    fit, w, sd, y, delta = metric_weights_and_slope(sobol_design(8, 2, seed=7) * np.array([0.6, 1.0]))
    doubtful = (np.minimum(y, 1.0 - y) < 0.15) & (sd > 0.8 * fit.y_std)
    assert doubtful.sum() >= 3 and np.all(w[doubtful] > 1.3 * delta[doubtful])
    unwarped = member(sobol_design(16, 2, seed=7), 0.3)
    assert np.array_equal(metric_variance_weights(unwarped, sobol_design(64, 2, seed=8)),
                          np.full(64, unwarped.y_std ** 2))


def test_weights_stay_finite_and_positive_for_a_metric_of_any_size_so_the_batch_is_still_chosen() -> None:
    X, X_mc = random_design(8, 2, seed=0), sobol_design(64, 2, seed=8)
    huge, tiny = member(X, 0.3, y_std=1e200), member(X, 0.1, y_std=1e-200)  # y_std^2 over- and underflows
    weights = [metric_variance_weights(m, X_mc) for m in (huge, tiny)]
    assert all(np.all(np.isfinite(w) & (w > 0)) for w in weights)
    assert weights[0][0] > 1e250 and weights[1][0] < 1e-250
    batch = select_mixture_ivr_batch([huge, tiny], X, sobol_design(32, 2, seed=9), X_mc, 3, weights)
    assert np.all(np.isfinite(batch.values)) and len(set(batch.indices.tolist())) == 3
    # The huge member's variance decides, as its weight says.
    alone = select_ivr_batch(huge, X, sobol_design(32, 2, seed=9), X_mc, 3)
    assert np.array_equal(batch.indices, alone.indices)


def bounded_sweep(**settings) -> np.ndarray:
    """8 Sobol points and one GP batch of 4 (a second batch cost each of the test's sweeps 2.5 CPU-s)."""
    policy = MultiversePolicy(SPACE_2D, PolicySettings(num_trials=12, n_initial=8, batch_size=4, seed=3,
                                                       deterministic=True, **FAST, **settings))
    while (s := policy.ask()) is not None:
        policy.tell(s.index, float(accuracy(np.array([s.x]))[0]))
    return np.array([s.x for s in policy.suggestions])


def test_the_mixture_chooses_only_a_bounded_metric_s_points_while_the_mixture_tags_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    bounds = dict(metric_bounds=[0.0, 1.0])
    default, mixture = bounded_sweep(**bounds), bounded_sweep(**bounds, ivr_mixture=True)
    np.testing.assert_array_equal(default[:8], mixture[:8])  # the Sobol phase
    assert not np.allclose(default[8:], mixture[8:])
    assert len({tuple(x) for x in mixture}) == 12
    # The members integrate over a prefix of the integration set (here all 128 points): a shorter one changes the
    # members' part of the sum, so the batch.
    monkeypatch.setattr(gp_batch, "MEMBER_INTEGRATION", 16)
    prefix = bounded_sweep(**bounds, ivr_mixture=True)
    assert not np.array_equal(prefix[8:], mixture[8:]) and len({tuple(x) for x in prefix}) == 12
    monkeypatch.setattr(gp_batch, "MEMBER_INTEGRATION", 256)
    # The raw fit is one part of the sum: given (almost) all of it, it chooses the default's points.
    monkeypatch.setattr(gp_batch, "RAW_FIT_SHARE", 1.0 - 1e-12)
    np.testing.assert_array_equal(default, bounded_sweep(**bounds, ivr_mixture=True))
    # Past TAG_MIXTURE_MAX_TRIALS one bounded fit tags the points, and the raw fit chooses again (the default's
    # points do not depend on what tags them).
    monkeypatch.setattr(gp_batch, "RAW_FIT_SHARE", 0.5)
    monkeypatch.setattr(gp_batch, "TAG_MIXTURE_MAX_TRIALS", 4)
    np.testing.assert_array_equal(default, bounded_sweep(**bounds, ivr_mixture=True))


@pytest.mark.parametrize("value", [1, "yes", math.nan])
def test_an_ivr_mixture_that_is_not_true_or_false_is_refused(value) -> None:
    with pytest.raises(SweeperConfigError, match="ivr_mixture.*true or false"):
        MultiversePolicy(SPACE_2D, PolicySettings(ivr_mixture=value))


@pytest.mark.parametrize("settings", [dict(), dict(strategy="ucb", metric_bounds=[0, 1]),
                                      dict(strategy="sobol", metric_bounds=[0, 1])])
def test_an_ivr_mixture_with_nothing_to_average_over_is_refused_not_ignored(settings) -> None:
    """Without bounds there is no mixture, and other strategies never use it: the option would do nothing."""
    with pytest.raises(SweeperConfigError, match=r"ivr_mixture=true needs strategy=ivr and metric_bounds.*"
                                                 r"Try metric_bounds=\[0,1\].*or ivr_mixture=false"):
        MultiversePolicy(SPACE_2D, PolicySettings(ivr_mixture=True, **settings))
