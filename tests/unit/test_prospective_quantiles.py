"""The searcher's predictions are read by the model's own distribution, on a real map whose best third is its bound.

The wine map of bench/ml_maps.py (an SVC on scikit-learn's wine data; each trial reads the committed grid's true
score, a third of them exactly 1.0), swept with its bounds as ``python -m bench calibration`` sweeps it: 8 Sobol
points, then one GP batch of 8 tagged by the posterior mixture. Near the bound that mixture is skewed, with mass
of its own on the bound, and its mean and sd describe it badly: the recorded quantiles are checked against draws
from the tagger, and a result the Gaussian read counts outside is inside by the model.
NOTE: docs/decisions/0082-prospective-check-reads-the-models-quantiles.md
"""

from __future__ import annotations

import numpy as np
import pytest

from bench.ml_maps import MAPS, truth_at
from sweeper.search.calibration import prospective_check
from sweeper.search.ensemble import GPEnsemble
from sweeper.search.policy import MultiversePolicy
from sweeper.search.settings import PolicySettings
from sweeper.search.suggestion import PREDICTED_PROBS

pytestmark = pytest.mark.usefixtures("one_blas_thread")


def predictive_draws(gp: GPEnsemble, x: tuple[float, ...], n: int = 20_000) -> np.ndarray:
    """A new trial's result at ``x`` drawn from the mixture: each member's Gaussian on its modelled scale, mapped
    back through its own warp (whose ceiling may lie below the bound): ``n`` draws per member, pooled."""
    rng = np.random.default_rng(0)
    point = np.asarray(x)[None, :]
    pooled = []
    for m in gp.members:
        mean, sd = m.predict_warped(point, noise=True)
        g = mean[0] + sd[0] * rng.standard_normal(n)
        pooled.append(g if m.warp is None else m.warp.inverse(g))
    return np.concatenate(pooled)


def test_each_prediction_is_read_by_the_taggers_own_distribution_on_the_wine_map() -> None:
    space = MAPS["wine"].space
    policy = MultiversePolicy(space, PolicySettings(strategy="ivr", num_trials=16, n_initial=8, batch_size=8, seed=2,
                                                    metric_bounds=[0.0, 1.0]))
    fits: list = []
    policy.on_gp_fit = fits.append
    for _ in range(2):
        batch = [policy.ask() for _ in range(8)]  # every point asked before a result: one plan, one tagger
        results = truth_at("wine", np.array([s.x for s in batch]))
        for s, y in zip(batch, results, strict=True):
            policy.tell(s.index, float(y))
    (fit,) = fits
    assert isinstance(fit.gp, GPEnsemble) and len(fit.gp.members) > 1
    quantiles = np.array([s.predicted_quantiles for s in batch])
    mean, sd = np.array([s.predicted_mean for s in batch]), np.array([s.predicted_sd for s in batch])

    # The recorded quantiles are the tagger's own, by draws from it (Monte Carlo error ~0.001): at each, at most
    # the level lies strictly below and at least the level at or below (a ceiling holds mass of its own; a
    # quantile may stop within rounding of it, QUANTILE_SLACK).
    draws = [np.sort(predictive_draws(fit.gp, s.x)) for s in batch]
    below = [lambda v, d=d: np.searchsorted(d, v, side="left") / d.size for d in draws]  # P(Y < v)
    at_or_below = [lambda v, d=d: np.searchsorted(d, v, side="right") / d.size for d in draws]  # P(Y <= v)
    for i, row in enumerate(quantiles):
        for p, q in zip(PREDICTED_PROBS, row, strict=True):
            assert below[i](q - 1e-9) - 0.005 <= p <= at_or_below[i](q + 1e-9) + 0.005, (i, p, q)

    # Inside its 95 % interval by the model: at most 97.5 % of its mass below the result, at least 2.5 % up to it.
    by_model = np.array([below[i](y) <= 0.975 and at_or_below[i](y) >= 0.025 for i, y in enumerate(results)])
    read = prospective_check(results, mean, sd, quantiles=quantiles)
    as_gaussians = prospective_check(results, mean, sd)
    assert read is not None and as_gaussians is not None
    np.testing.assert_array_equal((read.pit >= 0.025) & (read.pit <= 0.975), by_model)
    gaussian_inside = (as_gaussians.pit >= 0.025) & (as_gaussians.pit <= 0.975)
    # Where the reads differ, the model holds the result and the Gaussian does not. Read as a Gaussian, a result at
    # the map's floor (0.39), 2.7 sd below a mean of 0.90, is outside; the model's long lower tail holds it. A result
    # of exactly 1.0 far above its Gaussian's mean is outside that read too, while the members whose ceiling is the
    # bound put more than 2.5 % of their mass on it.
    differs = np.flatnonzero(gaussian_inside != by_model)
    assert differs.size and by_model[differs].all(), (results, mean, sd)
    assert any(results[i] < 0.4 < 0.9 < mean[i] for i in differs), (results, mean)
    assert np.any(results[by_model] == 1.0)
