"""Unit tests for sweeper.search.loo: closed-form leave-one-out predictions and the calibration check built on them."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import ndtr, ndtri

from sweeper.search.design import sobol_design
from sweeper.search.ensemble import GPEnsemble
from sweeper.search.gp import GPFit
from sweeper.search.gp_fit import fit_gp
from sweeper.search.kernels import KernelTerm
from sweeper.search.loo import MIN_COVERAGE95, PredictiveCheck, loo_check, loo_gaussian
from sweeper.search.warping import MetricBounds, OutputWarp

pytestmark = pytest.mark.usefixtures("one_blas_thread")




def smooth_2d(X: np.ndarray) -> np.ndarray:
    return np.sin(3.0 * X[:, 0]) * np.cos(2.0 * X[:, 1]) + X[:, 0]


def prior_sample(X: np.ndarray, lengthscale: float, seed: int, noise_sd: float) -> np.ndarray:
    """Noisy values at X of one draw from a Matern-5/2 GP with unit variance."""
    rng = np.random.default_rng(seed)
    K = KernelTerm((0, 1), np.full(2, lengthscale), 1.0)(X, X) + 1e-8 * np.eye(X.shape[0])
    return np.linalg.cholesky(K) @ rng.standard_normal(X.shape[0]) + noise_sd * rng.standard_normal(X.shape[0])


def by_hand(X: np.ndarray, y: np.ndarray, warp: OutputWarp | None, lengthscales: list[float], variance: float,
            noise: float) -> GPFit:
    """A GPFit with given hyperparameters, standardised on its data's (warped) values."""
    g = y if warp is None else warp.forward(y)
    term = KernelTerm(tuple(range(X.shape[1])), np.array(lengthscales), variance)
    return GPFit((term,), noise, float(g.mean()), float(g.std()), 0.0, X, y, warp=warp)


@pytest.fixture(scope="module")
def fitted() -> GPFit:
    X = sobol_design(24, 2, seed=2)
    y = smooth_2d(X) + 0.05 * np.random.default_rng(2).standard_normal(24)
    return fit_gp(X, y, seed=0)


@pytest.fixture(scope="module")
def warped() -> GPFit:
    X = sobol_design(30, 2, seed=5)
    y = 0.55 + 0.4 * np.tanh(2.0 * smooth_2d(X) - 1.0) + 0.01 * np.random.default_rng(5).standard_normal(30)
    assert np.all((y > 0.05) & (y < 0.99))  # strictly inside: nothing on a bound is squeezed
    warp = OutputWarp.for_data(MetricBounds(0.0, 1.0), y, 2.5, 0.7)
    return by_hand(X, y, warp, [0.4, 0.6], 1.2, 5e-3)


def brute_force_loo(gp: GPFit) -> tuple[np.ndarray, np.ndarray]:
    """Each trial predicted (noise included, modelled scale) by a GP without it: same hyperparameters and scale."""
    n = gp.X.shape[0]
    means, sds = np.empty(n), np.empty(n)
    for i in range(n):
        keep = np.arange(n) != i
        held_out = GPFit(gp.terms, gp.noise_variance, gp.y_mean, gp.y_std, 0.0, gp.X[keep], gp.y[keep],
                         gp.kernel_name, gp.warp)
        m, s = held_out.predict_warped(gp.X[i:i + 1], noise=True)
        means[i], sds[i] = m[0], s[0]
    return means, sds


# ----------------------------------------------------------------------------- loo_gaussian
@pytest.mark.parametrize("which", ["fitted", "warped"])
def test_loo_gaussian_equals_refitting_without_each_trial(which: str, request: pytest.FixtureRequest) -> None:
    gp: GPFit = request.getfixturevalue(which)
    mean, sd = loo_gaussian(gp)
    expected_mean, expected_sd = brute_force_loo(gp)
    assert mean.shape == sd.shape == (gp.X.shape[0],)
    np.testing.assert_allclose(mean, expected_mean, rtol=1e-6, atol=1e-9 * gp.y_std)
    np.testing.assert_allclose(sd, expected_sd, rtol=1e-6)
    # Held-out predictions are worse than in-sample ones: the check is not a tautology.
    in_sample, _ = gp.predict_warped(gp.X)
    assert np.mean((mean - gp.modelled()) ** 2) > np.mean((in_sample - gp.modelled()) ** 2)


# ----------------------------------------------------------------------------- the verdict
def test_well_specified_gp_passes() -> None:
    X = sobol_design(40, 2, seed=1)
    y = prior_sample(X, 0.3, seed=1, noise_sd=0.05)
    check = loo_check(fit_gp(X, y, seed=0))
    assert check.n == 40 and check.judged
    assert check.coverage95 >= 0.85
    assert check.ok
    assert check.verdict() in ("passed", "conservative")
    assert "Warning" not in check.sentence("this map")
    assert 0.0 < check.rmse < 0.5 * float(np.std(y))


@pytest.mark.parametrize("case", ["huge lengthscale on rough data", "tiny lengthscale and variance"])
def test_overconfident_gp_fails(case: str) -> None:
    X = sobol_design(40, 2, seed=3)
    if case == "huge lengthscale on rough data":
        y = prior_sample(X, 0.08, seed=3, noise_sd=0.0)
        gp = by_hand(X, y, None, [3.0, 3.0], 1.0, 1e-8)
    else:
        y = smooth_2d(X)
        gp = by_hand(X, y, None, [1e-3, 1e-3], 1e-4, 1e-8)
    check = loo_check(gp)
    assert check.coverage95 < MIN_COVERAGE95
    assert not check.ok
    assert check.verdict() == "failed"
    sentence = check.sentence("this map")
    assert "Warning" in sentence and "this map" in sentence
    assert "more trials" in sentence and "bounds" in sentence and "kernel" in sentence
    assert check.summary()["verdict"] == "failed"
    assert check.summary()["threshold_coverage95"] == MIN_COVERAGE95


def test_underconfident_gp_is_conservative() -> None:
    X = sobol_design(20, 2, seed=4)
    check = loo_check(by_hand(X, smooth_2d(X), None, [0.3, 0.3], 1.0, 100.0))
    assert check.coverage95 == 1.0 and check.coverage68 > 0.95
    assert check.ok and check.conservative
    assert check.verdict() == "conservative"
    assert "conservative" in check.sentence("the curve")


def test_too_few_trials_gives_no_verdict() -> None:
    X = sobol_design(8, 2, seed=3)
    y = prior_sample(X, 0.08, seed=3, noise_sd=0.0)
    check = loo_check(by_hand(X, y, None, [3.0, 3.0], 1.0, 1e-8))  # overconfident, but too few to tell
    assert check.n == 8 and not check.judged
    assert check.ok
    assert check.verdict() == "too few trials"
    assert "too few trials" in check.sentence("this map")
    assert "Warning" not in check.sentence("this map")


# ----------------------------------------------------------------------------- what the check reports
@pytest.mark.parametrize("which", ["fitted", "warped"])
def test_check_is_the_pit_of_the_leave_one_out_predictions(which: str, request: pytest.FixtureRequest) -> None:
    gp: GPFit = request.getfixturevalue(which)
    mean, sd = brute_force_loo(gp)
    pit = ndtr((gp.modelled() - mean) / sd)  # standardised residuals on the modelled scale, by hand
    check = loo_check(gp)
    np.testing.assert_allclose(check.pit, pit, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(check.residuals, ndtri(pit), rtol=1e-5, atol=1e-6)
    assert check.coverage95 == pytest.approx(np.mean((pit >= 0.025) & (pit <= 0.975)))
    assert check.coverage68 == pytest.approx(np.mean(np.abs(ndtri(pit)) <= 1.0))
    assert check.max_abs_residual == pytest.approx(float(np.max(np.abs(ndtri(pit)))), rel=1e-5)
    loo_mean = mean if gp.warp is None else gp.warp.moments(mean, sd)[0]  # metric units
    np.testing.assert_allclose(check.mean, loo_mean, rtol=1e-6)
    assert check.rmse == pytest.approx(float(np.sqrt(np.mean((loo_mean - gp.y) ** 2))), rel=1e-6)


def test_warped_pit_is_the_same_on_the_metric_scale(warped: GPFit) -> None:
    # P(Y_i <= y_i | others) with Y_i = warp^-1(G_i), G_i the leave-one-out Gaussian: counted in metric units.
    assert warped.warp is not None
    mean, sd = loo_gaussian(warped)
    n_draws = 20_000
    z = np.random.default_rng(0).standard_normal(n_draws)
    on_metric_scale = np.array([np.mean(warped.warp.inverse(m + s * z) <= y)
                                for m, s, y in zip(mean, sd, warped.y, strict=True)])
    check = loo_check(warped)
    np.testing.assert_allclose(check.pit, on_metric_scale, atol=0.015)
    assert np.ptp(check.pit) > 0.5  # PIT values that vary: a real comparison, not all 0.5


def test_mixture_pit_is_the_members_average(warped: GPFit) -> None:
    other = GPFit(warped.terms, 2e-2, warped.y_mean, warped.y_std, 0.0, warped.X, warped.y, warp=warped.warp)
    assert warped.warp is not None
    third = by_hand(warped.X, warped.y, warped.warp.with_shapes(1.0, 1.0), [0.2, 0.3], 0.8, 1e-3)
    members = (warped, other, third)
    check = loo_check(GPEnsemble(warped, members))
    singles = [loo_check(m) for m in members]
    np.testing.assert_allclose(check.pit, np.mean([c.pit for c in singles], axis=0), rtol=1e-12)
    np.testing.assert_allclose(check.mean, np.mean([c.mean for c in singles], axis=0), rtol=1e-12)
    assert not np.allclose(singles[0].pit, singles[2].pit)  # the members do disagree


def test_metrics_have_the_prefix_and_the_numbers(fitted: GPFit) -> None:
    check = loo_check(fitted)
    metrics = check.metrics("test_acc_")
    assert metrics == {
        "test_acc_loo_coverage68": check.coverage68, "test_acc_loo_coverage95": check.coverage95,
        "test_acc_loo_rmse": check.rmse, "test_acc_loo_max_abs_residual": check.max_abs_residual,
        "test_acc_loo_n": 24.0,
    }
    assert all(isinstance(v, float) for v in metrics.values())
    assert set(check.metrics("")) == {"loo_coverage68", "loo_coverage95", "loo_rmse", "loo_max_abs_residual",
                                      "loo_n"}
    assert isinstance(check, PredictiveCheck) and check.summary()["n"] == 24
