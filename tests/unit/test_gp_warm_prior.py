"""fit_gp's warm start (``init``) and MAP lengthscale prior (``lengthscale_prior``)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sweeper.search.design import sobol_design
from sweeper.search.gp_fit import dimension_scaled_prior, fit_gp


def smooth(X: np.ndarray) -> np.ndarray:
    return np.sin(6.0 * X[:, 0]) + 0.5 * np.cos(4.0 * X[:, 1])


def test_warm_start_from_the_optimum_stays_there_in_one_start() -> None:
    X = sobol_design(32, 2, 0)
    y = smooth(X)
    full = fit_gp(X, y, seed=0, n_restarts=3)
    warm = fit_gp(X, y, seed=1, n_restarts=1, init=full)
    assert warm.log_likelihood == pytest.approx(full.log_likelihood, abs=1e-3)
    np.testing.assert_allclose(warm.lengthscales, full.lengthscales, rtol=1e-2)
    # The JSON form (as a saved searcher state holds it) starts at the same point.
    hp = json.loads(json.dumps(full.hyperparameters()))
    again = fit_gp(X, y, seed=1, n_restarts=1, init=hp)
    np.testing.assert_allclose(again.lengthscales, warm.lengthscales)
    assert again.log_likelihood == warm.log_likelihood


def test_warm_start_from_fewer_points_reaches_the_full_fits_optimum() -> None:
    X = sobol_design(40, 2, 3)
    y = smooth(X)
    full = fit_gp(X, y, seed=0, n_restarts=3)
    previous = fit_gp(X[:32], y[:32], seed=0, n_restarts=3)
    warm = fit_gp(X, y, seed=0, n_restarts=2, init=previous)  # the previous optimum, then the fixed start
    assert warm.log_likelihood >= full.log_likelihood - 1e-3
    np.testing.assert_allclose(warm.lengthscales, full.lengthscales, rtol=5e-2)


def test_warm_start_comes_first_then_the_usual_restarts() -> None:
    """With init and n_restarts=k, the starts are init plus the first k-1 of the usual ones."""
    X = sobol_design(16, 2, 1)
    y = smooth(X)
    # A deliberately poor start: the fit from it must not be worse than the fixed start's.
    bad = {"kernel": "matern52-ard", "noise_variance": 5.0, "lengthscales": [50.0, 50.0], "variance": 0.01}
    with_fixed = fit_gp(X, y, seed=0, n_restarts=2, init=bad)
    fixed_only = fit_gp(X, y, seed=0, n_restarts=1)
    assert with_fixed.log_likelihood >= fixed_only.log_likelihood - 1e-6


def test_an_init_of_another_layout_is_ignored() -> None:
    X2 = sobol_design(8, 2, 0)
    other = fit_gp(X2, smooth(X2), seed=0, n_restarts=1)
    X3 = sobol_design(12, 3, 0)
    y3 = smooth(X3) + X3[:, 2]
    plain = fit_gp(X3, y3, seed=0, n_restarts=1)
    ignored = fit_gp(X3, y3, seed=0, n_restarts=2, init=other)  # 2-D lengthscales: not a 3-D start
    # init ignored: the starts are the usual two, the first of which is plain's only one.
    assert ignored.log_likelihood >= plain.log_likelihood - 1e-9
    assert fit_gp(X3, y3, seed=0, n_restarts=1, init={"junk": 1}).log_likelihood == plain.log_likelihood


def test_warm_start_with_categorical_columns() -> None:
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.random(30), rng.random(30)])
    y = np.sin(5 * X[:, 0]) + (X[:, 1] > 0.5)
    fit = fit_gp(X, y, seed=0, n_restarts=2, categories={1: 2})
    hp = json.loads(json.dumps(fit.hyperparameters()))
    warm = fit_gp(X, y, seed=1, n_restarts=1, categories={1: 2}, init=hp)
    assert warm.log_likelihood == pytest.approx(fit.log_likelihood, abs=1e-3)


def test_dimension_scaled_prior() -> None:
    mu, sigma = dimension_scaled_prior(2)
    assert mu == pytest.approx(np.sqrt(2) + 0.5 * np.log(2))
    assert sigma == pytest.approx(np.sqrt(3))
    assert dimension_scaled_prior(6)[0] > mu
    with pytest.raises(ValueError):
        dimension_scaled_prior(0)


def test_the_prior_pulls_a_lengthscale_fitted_on_8_points_toward_it() -> None:
    """8 points of a function of x0 only: ML sends x1's lengthscale far off, the prior holds it in."""
    X = sobol_design(8, 2, 0)
    y = np.sin(6.0 * X[:, 0])
    ml = fit_gp(X, y, seed=0, n_restarts=3)
    prior = dimension_scaled_prior(2)
    mode = float(np.exp(prior[0] - prior[1] ** 2))
    m = fit_gp(X, y, seed=0, n_restarts=3, lengthscale_prior=prior)
    assert ml.lengthscales[1] > 10.0
    assert m.lengthscales[1] < ml.lengthscales[1] / 3
    assert abs(np.log(m.lengthscales[1] / mode)) < abs(np.log(ml.lengthscales[1] / mode))
    # The reported likelihood is the likelihood alone (the MAP optimum's, so below ML's).
    assert m.log_likelihood == pytest.approx(m.log_marginal_likelihood(), abs=1e-6)
    assert m.log_likelihood <= ml.log_likelihood + 1e-6


def test_the_prior_leaves_coregionalization_alone_and_is_validated() -> None:
    rng = np.random.default_rng(1)
    X = np.column_stack([rng.random(20), rng.random(20)])
    y = np.sin(5 * X[:, 0]) + (X[:, 1] > 0.5)
    fit = fit_gp(X, y, seed=0, n_restarts=1, categories={1: 2}, lengthscale_prior=dimension_scaled_prior(1))
    assert fit.terms[0].columns == (0,) and len(fit.factors) == 1
    with pytest.raises(ValueError, match="lengthscale_prior"):
        fit_gp(X, y, seed=0, lengthscale_prior=(0.0, -1.0))


def test_warm_start_above_max_fit_points_goes_straight_to_the_refinement() -> None:
    X = sobol_design(64, 2, 5)
    y = smooth(X)
    exact = fit_gp(X, y, seed=0, n_restarts=3)
    previous = fit_gp(X[:56], y[:56], seed=0, n_restarts=3)
    for restarts in (1, 2):
        warm = fit_gp(X, y, seed=0, n_restarts=restarts, init=previous, max_fit_points=20, refine_max_points=100)
        assert warm.log_likelihood == pytest.approx(exact.log_likelihood, abs=1e-2)
        assert warm.X.shape[0] == 64
    # Without refinement the warm start runs on the subset like any restart.
    sub = fit_gp(X, y, seed=0, n_restarts=2, init=previous, max_fit_points=20)
    assert np.isfinite(sub.log_likelihood)
