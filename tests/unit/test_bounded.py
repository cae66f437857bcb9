"""Unit tests for sweeper.search.bounded: the warped GP likelihood and fits of a bounded metric with a learned warp."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import expit
from scipy.stats import multivariate_normal

from sweeper.search.bounded import best_shapes, fit_bounded_gp, shape_log_prior, warped_log_likelihood
from sweeper.search.design import sobol_design
from sweeper.search.gp import GPFit
from sweeper.search.gp_fit import fit_gp
from sweeper.search.warping import MetricBounds, OutputWarp

pytestmark = pytest.mark.usefixtures("one_blas_thread")

UNIT = MetricBounds(0.0, 1.0)


def accuracy_map(X: np.ndarray) -> np.ndarray:
    """A plateau at 0.5, a cliff at x0 = 0.4 and a ceiling of perfect scores (exactly 1.0)."""
    return np.minimum(1.0, 0.5 + 0.55 * expit(20.0 * (X[:, 0] - 0.4)))


def grid(n: int) -> np.ndarray:
    g = np.linspace(0.0, 1.0, n)
    return np.array(np.meshgrid(g, g)).reshape(2, -1).T




@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray]:
    X = sobol_design(30, 2, seed=0)
    y = accuracy_map(X)
    assert np.sum(y == 1.0) >= 3 and np.sum(y < 0.6) >= 3  # the ceiling and the plateau are both observed
    return X, y


@pytest.fixture(scope="module")
def bounded_fit(data: tuple[np.ndarray, np.ndarray]) -> GPFit:
    X, y = data
    return fit_bounded_gp(X, y, UNIT, seed=0)


@pytest.fixture(scope="module")
def plain_fit(data: tuple[np.ndarray, np.ndarray]) -> GPFit:
    X, y = data
    return fit_gp(X, y, seed=0)


def objective(gp: GPFit, warp: OutputWarp) -> float:
    """What best_shapes maximises: the warped likelihood with gp's covariance plus the shapes' prior."""
    return warped_log_likelihood(warp, gp.y, gp.cholesky) + shape_log_prior(math.log(warp.a), math.log(warp.b))


# ----------------------------------------------------------------------------- warped_log_likelihood
@pytest.mark.parametrize("warp", [
    OutputWarp(UNIT, 1.0, 1.0, 0.01),
    OutputWarp(UNIT, 3.0, 0.6, 0.004),
    OutputWarp(MetricBounds(0.0, None), eps=0.01),
    OutputWarp(MetricBounds(None, 1.0), eps=0.01),
])
def test_warped_log_likelihood_is_the_change_of_variables(warp: OutputWarp) -> None:
    X = sobol_design(15, 2, seed=3)
    y = np.clip(0.3 + 0.6 * X[:, 0] * X[:, 1] + 0.1 * np.sin(7 * X[:, 1]), 0.0, 1.0)
    y[0] = 1.0  # one value on a bound: squeezed, as the fit sees it
    g = warp.forward(y)
    gp = GPFit.matern(np.array([0.3, 0.5]), 1.3, 1e-3, float(g.mean()), float(g.std()), 0.0, X, y)
    L = gp.cholesky
    s = float(np.std(g))
    z = (g - np.mean(g)) / s
    direct = (multivariate_normal(mean=np.zeros(15), cov=L @ L.T).logpdf(z) - 15 * math.log(s)
              + float(np.sum(warp.log_jacobian(y))))
    assert warped_log_likelihood(warp, y, L) == pytest.approx(direct, rel=1e-10)
    # The same covariance on the standardised warped outputs: the GP's own likelihood of z, plus the Jacobians.
    warped_gp = GPFit(gp.terms, gp.noise_variance, float(g.mean()), s, 0.0, X, y, warp=warp)
    np.testing.assert_allclose(warped_gp.standardized(), z, rtol=1e-12, atol=1e-12)
    assert warped_log_likelihood(warp, y, L) == pytest.approx(
        warped_gp.log_marginal_likelihood() - 15 * math.log(s) + float(np.sum(warp.log_jacobian(y))), rel=1e-10)


def test_warped_log_likelihood_of_constant_outputs_is_minus_infinity() -> None:
    y = np.full(4, 0.5)
    assert warped_log_likelihood(OutputWarp(UNIT), y, np.eye(4)) == -math.inf


# ----------------------------------------------------------------------------- fit_bounded_gp
def test_bounded_fit_carries_its_warp_and_models_the_warped_values(bounded_fit: GPFit,
                                                                   data: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = data
    warp = bounded_fit.warp
    assert warp is not None and warp.two_sided
    assert warp.bounds == UNIT
    assert warp.eps == pytest.approx(0.5 * (1.0 - y[y < 1.0].max()))  # half the gap below the ceiling
    np.testing.assert_array_equal(bounded_fit.y, y)  # original units kept
    g = warp.forward(y)
    np.testing.assert_array_equal(bounded_fit.modelled(), g)
    assert bounded_fit.y_mean == pytest.approx(float(np.mean(g)), rel=1e-12)
    assert bounded_fit.y_std == pytest.approx(float(np.std(g)), rel=1e-12)
    assert bounded_fit.hyperparameters()["warp"] == warp.to_dict()
    assert "Kumaraswamy shapes" in bounded_fit.describe()
    # predict is the back-transformed Gaussian of predict_warped.
    Xt = grid(7)
    np.testing.assert_allclose(bounded_fit.predict(Xt), warp.moments(*bounded_fit.predict_warped(Xt)), rtol=1e-12)


def test_learned_shapes_beat_the_plain_logit(bounded_fit: GPFit) -> None:
    warp = bounded_fit.warp
    assert warp is not None
    assert (warp.a, warp.b) != (1.0, 1.0)  # a ceiling and a cliff: the plain logit is not the best warp
    learned = objective(bounded_fit, warp)
    plain = objective(bounded_fit, warp.with_shapes(1.0, 1.0))
    assert math.isfinite(learned)
    assert learned >= plain
    # The fit stopped where another step of the coordinate ascent would not gain anything real.
    a, b = best_shapes(bounded_fit, warp)
    assert objective(bounded_fit, warp.with_shapes(a, b)) >= learned - 1e-9
    assert objective(bounded_fit, warp.with_shapes(a, b)) - learned < 1.0


def test_bounded_predictions_stay_inside_where_the_plain_gp_does_not(bounded_fit: GPFit, plain_fit: GPFit) -> None:
    Xt = grid(50)
    # The data make a plain GP overshoot the ceiling: the check below has teeth.
    mean0, sd0 = plain_fit.predict(Xt)
    assert np.max(mean0 + 1.96 * sd0) > 1.0
    for noise in (False, True):
        mean, sd = bounded_fit.predict(Xt, noise=noise)
        assert np.all(np.isfinite(mean)) and np.all(sd >= 0)
        assert np.all((mean > 0.0) & (mean < 1.0))
        g_mean, g_sd = bounded_fit.predict_warped(Xt, noise=noise)  # the 95 % band the maps draw
        band = bounded_fit.warp.inverse(np.stack([g_mean - 1.96 * g_sd, g_mean + 1.96 * g_sd]))
        assert np.all((band >= 0.0) & (band <= 1.0))
        np.testing.assert_array_equal(bounded_fit.predict_mean(Xt), bounded_fit.predict(Xt)[0])
    samples = bounded_fit.sample_posterior(grid(25), 20, seed=0)
    assert samples.shape == (20, 625)
    assert np.all(np.isfinite(samples))
    assert np.all((samples >= 0.0) & (samples <= 1.0))


def test_bounded_fit_still_fits_the_data(bounded_fit: GPFit, data: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = data
    mean, _ = bounded_fit.predict(X)
    # Perfect scores are modelled eps below the ceiling; the rest closely.
    eps = bounded_fit.warp.eps  # type: ignore[union-attr]  # a bounded fit has a warp
    np.testing.assert_allclose(mean, np.minimum(y, 1.0 - eps), atol=0.01)
    Xt = sobol_design(200, 2, seed=9)
    assert np.sqrt(np.mean((bounded_fit.predict(Xt)[0] - accuracy_map(Xt)) ** 2)) < 0.05


def test_outside_the_bounds_is_an_error(data: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = data
    for bad in (1.0 + 1e-9, -0.2):
        y_bad = y.copy()
        y_bad[4] = bad
        with pytest.raises(ValueError, match="outside"):
            fit_bounded_gp(X, y_bad, UNIT, seed=0)


def test_starting_shapes_with_no_rounds_are_kept(data: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = data
    gp = fit_bounded_gp(X, y, UNIT, shapes=(2.0, 3.0), rounds=0, seed=0, n_restarts=1)
    assert gp.warp == OutputWarp.for_data(UNIT, y, 2.0, 3.0)


def test_one_sided_bound_gives_a_log_warp_fit(data: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = data
    error = 1.0 - y  # an error rate: 0 where the accuracy is perfect
    bounds = MetricBounds(0.0, None)
    gp = fit_bounded_gp(X, error, bounds, seed=0)
    assert gp.warp is not None and not gp.warp.two_sided
    assert gp.warp == OutputWarp.for_data(bounds, error)  # fixed warp: nothing learned
    Xt = grid(40)
    mean, sd = gp.predict(Xt, noise=True)
    assert np.all(np.isfinite(mean)) and np.all(mean > 0.0)
    samples = gp.sample_posterior(grid(20), 10, seed=1)
    assert np.all(samples >= 0.0)


# ----------------------------------------------------------------------------- the unbounded path
def test_unbounded_fit_is_unchanged_by_the_warp_argument(data: tuple[np.ndarray, np.ndarray],
                                                         plain_fit: GPFit) -> None:
    X, y = data
    again = fit_gp(X, y, seed=0, warp=None)
    assert again.warp is None and plain_fit.warp is None
    assert again.hyperparameters() == plain_fit.hyperparameters()
    assert "warp" not in plain_fit.hyperparameters()
    assert again.log_likelihood == plain_fit.log_likelihood
    assert (again.y_mean, again.y_std) == (plain_fit.y_mean, plain_fit.y_std)
    assert (plain_fit.y_mean, plain_fit.y_std) == (float(np.mean(y)), float(np.std(y)))
    Xt = grid(9)
    np.testing.assert_array_equal(again.predict(Xt)[0], plain_fit.predict(Xt)[0])


def test_unwarped_predict_is_the_gaussian(plain_fit: GPFit) -> None:
    Xt = grid(11)
    for noise in (False, True):
        mean, sd = plain_fit.predict(Xt, noise=noise)
        mean_w, sd_w = plain_fit.predict_warped(Xt, noise=noise)
        np.testing.assert_array_equal(mean, mean_w)
        np.testing.assert_array_equal(sd, sd_w)
    np.testing.assert_allclose(plain_fit.predict(Xt, noise=True)[1] ** 2,
                               plain_fit.predict(Xt)[1] ** 2 + plain_fit.noise_sd**2, rtol=1e-10)
    np.testing.assert_array_equal(plain_fit.modelled(), plain_fit.y)
    np.testing.assert_allclose(plain_fit.standardized(), (plain_fit.y - plain_fit.y_mean) / plain_fit.y_std)
