"""Unit tests for sweeper.search.gp: the numpy kernel and predictions, and the seeded GPy fit."""

from __future__ import annotations

from typing import Any

import GPy
import numpy as np
import pytest

from sweeper.search.design import sobol_design
from sweeper.search.gp import GPY_JITTER, GPFit
from sweeper.search.gp_fit import fit_gp
from sweeper.search.marginal_likelihood import MarginalLikelihood


def smooth_2d(X: np.ndarray) -> np.ndarray:
    return np.sin(3.0 * X[:, 0]) * np.cos(2.0 * X[:, 1]) + X[:, 0]


def make_fit(lengthscales: np.ndarray, variance: float, noise: float, X: np.ndarray,
             y: np.ndarray) -> GPFit:
    return GPFit.matern(
        lengthscales=np.asarray(lengthscales, dtype=np.float64), variance=variance,
        noise_variance=noise, y_mean=float(np.mean(y)), y_std=float(np.std(y)) or 1.0,
        log_likelihood=0.0, X=X, y=y,
    )


@pytest.fixture(scope="module")
def smooth_fit() -> GPFit:
    X = sobol_design(30, 2, seed=0)
    return fit_gp(X, smooth_2d(X), seed=0)


def test_kernel_equals_gpy_matern52_ard() -> None:
    rng = np.random.default_rng(0)
    X1, X2 = rng.random((17, 3)), rng.random((11, 3))
    ls, var = np.array([0.2, 1.3, 0.05]), 2.7
    ours = make_fit(ls, var, 1e-2, X1, rng.standard_normal(17))
    gpy = GPy.kern.Matern52(3, variance=var, lengthscale=ls, ARD=True)
    np.testing.assert_allclose(ours.kernel(X1, X2), gpy.K(X1, X2), rtol=0, atol=1e-10)
    np.testing.assert_allclose(ours.kernel(X1, X1), gpy.K(X1, X1), rtol=0, atol=1e-10)
    np.testing.assert_allclose(ours.kernel_diag(X1), gpy.Kdiag(X1), rtol=0, atol=1e-12)


def test_kernel_closed_form_values() -> None:
    # r = |x - x'| / l; k = s (1 + sqrt5 r + 5/3 r^2) exp(-sqrt5 r)
    fit = make_fit(np.array([0.5]), 2.0, 1e-2, np.zeros((1, 1)), np.zeros(1))
    r = 0.3 / 0.5
    expected = 2.0 * (1 + np.sqrt(5) * r + 5 / 3 * r**2) * np.exp(-np.sqrt(5) * r)
    k = fit.kernel(np.array([[0.1]]), np.array([[0.4]]))[0, 0]
    assert k == pytest.approx(expected, rel=1e-14)
    assert fit.kernel(np.array([[0.1]]), np.array([[0.1]]))[0, 0] == pytest.approx(2.0, rel=1e-14)


def test_predict_equals_gpy_posterior(smooth_fit: GPFit) -> None:
    fit = smooth_fit
    z = (fit.y - fit.y_mean) / fit.y_std
    kern = GPy.kern.Matern52(2, variance=fit.variance, lengthscale=fit.lengthscales, ARD=True)
    # GPy adds GPY_JITTER to the likelihood variance in exact inference.
    model = GPy.models.GPRegression(
        fit.X, z[:, None], kernel=kern, noise_var=fit.noise_variance - GPY_JITTER
    )
    Xt = np.random.default_rng(1).random((50, 2))
    mu, var = model.predict_noiseless(Xt)
    mean, sd = fit.predict(Xt)
    np.testing.assert_allclose(mean, fit.y_mean + fit.y_std * mu[:, 0], rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(sd, fit.y_std * np.sqrt(var[:, 0]), rtol=1e-6, atol=1e-8)


def test_posterior_mean_interpolates_smooth_function(smooth_fit: GPFit) -> None:
    mean, _ = smooth_fit.predict(smooth_fit.X)
    np.testing.assert_allclose(mean, smooth_fit.y, atol=1e-3)
    # ... and generalises between the training points.
    Xt = np.random.default_rng(2).random((200, 2))
    mean_t, _ = smooth_fit.predict(Xt)
    assert np.sqrt(np.mean((mean_t - smooth_2d(Xt)) ** 2)) < 0.05
    assert smooth_fit.noise_variance < 1e-3
    assert np.isfinite(smooth_fit.log_likelihood)


def test_posterior_sd_nonnegative_and_smaller_at_training_points(smooth_fit: GPFit) -> None:
    _, sd_train = smooth_fit.predict(smooth_fit.X)
    _, sd_grid = smooth_fit.predict(np.random.default_rng(3).random((500, 2)))
    _, sd_far = smooth_fit.predict(np.array([[1e4, 1e4]]))
    assert np.all(sd_train >= 0.0) and np.all(sd_grid >= 0.0)
    assert sd_train.max() < sd_far[0]
    assert sd_train.max() < 0.1 * sd_far[0]
    # Far from the data the posterior reverts to the prior sd.
    assert sd_far[0] == pytest.approx(smooth_fit.y_std * np.sqrt(smooth_fit.variance), rel=1e-6)


def test_standardization_uses_population_std() -> None:
    X = sobol_design(8, 1, seed=1)
    y = 5.0 + 3.0 * X[:, 0]
    fit = fit_gp(X, y, seed=0, n_restarts=1)
    assert fit.y_mean == pytest.approx(np.mean(y))
    assert fit.y_std == pytest.approx(np.std(y, ddof=0))


def test_same_data_and_seed_give_identical_hyperparameters() -> None:
    rng = np.random.default_rng(4)
    X = rng.random((40, 3))
    y = np.sin(4 * X[:, 0]) + 0.1 * rng.standard_normal(40)
    a = fit_gp(X, y, seed=7, n_restarts=3)
    b = fit_gp(X, y, seed=7, n_restarts=3)
    np.testing.assert_array_equal(a.lengthscales, b.lengthscales)
    assert a.variance == b.variance
    assert a.noise_variance == b.noise_variance
    assert a.log_likelihood == b.log_likelihood
    # A sequence seed (derived stream) is just as reproducible.
    c = fit_gp(X, y, seed=[7, 0, 7], n_restarts=3)
    d = fit_gp(X, y, seed=[7, 0, 7], n_restarts=3)
    np.testing.assert_array_equal(c.lengthscales, d.lengthscales)


def test_fit_does_not_use_global_rng() -> None:
    rng = np.random.default_rng(5)
    X = rng.random((20, 2))
    y = X[:, 0] - X[:, 1] ** 2
    np.random.seed(0)
    a = fit_gp(X, y, seed=1, n_restarts=3)
    np.random.seed(12345)
    b = fit_gp(X, y, seed=1, n_restarts=3)
    np.testing.assert_array_equal(a.lengthscales, b.lengthscales)


def test_different_seeds_both_fit_and_restarts_never_hurt() -> None:
    rng = np.random.default_rng(6)
    X = rng.random((25, 2))
    y = np.cos(5 * X[:, 1]) + 0.05 * rng.standard_normal(25)
    one = fit_gp(X, y, seed=0, n_restarts=1)  # restart 0 only: the fixed default start
    fits = [fit_gp(X, y, seed=s, n_restarts=4) for s in (0, 1)]
    for fit in fits:
        assert np.isfinite(fit.log_likelihood)
        assert np.all(np.isfinite(fit.lengthscales)) and np.all(fit.lengthscales > 0)
        assert 1e-6 <= fit.noise_variance <= 10.0 + GPY_JITTER
        # Restart 0 is shared, so more restarts can only keep or raise the likelihood.
        assert fit.log_likelihood >= one.log_likelihood - 1e-9


def test_single_point_keeps_default_hyperparameters() -> None:
    X, y = np.array([[0.2, 0.7]]), np.array([3.5])
    fit = fit_gp(X, y, seed=0)
    assert fit.y_mean == 3.5 and fit.y_std == 1.0
    np.testing.assert_array_equal(fit.lengthscales, [0.3, 0.3])
    assert fit.variance == 1.0 and fit.noise_variance == 1e-2 + GPY_JITTER
    mean, sd = fit.predict(np.array([[0.2, 0.7], [0.9, 0.1]]))
    np.testing.assert_allclose(mean, 3.5)
    assert np.all(np.isfinite(sd)) and sd[0] < sd[1]


def test_constant_outputs() -> None:
    X = sobol_design(10, 2, seed=2)
    fit = fit_gp(X, np.full(10, -2.0), seed=0)
    assert fit.y_std == 1.0 and fit.y_mean == -2.0
    mean, sd = fit.predict(np.random.default_rng(0).random((20, 2)))
    np.testing.assert_allclose(mean, -2.0, atol=1e-8)
    assert np.all(np.isfinite(sd)) and np.all(sd >= 0)


def test_noise_floor_is_respected() -> None:
    X = sobol_design(16, 1, seed=3)
    fit = fit_gp(X, np.sin(6 * X[:, 0]), seed=0, noise_floor=1e-3)
    assert fit.noise_variance >= 1e-3 * (1 - 1e-9)


@pytest.mark.parametrize(
    ("X", "y", "match"),
    [
        (np.zeros(3), np.zeros(3), "X must have shape"),
        (np.zeros((0, 2)), np.zeros(0), "X must have shape"),
        (np.zeros((3, 2)), np.zeros(4), "y must have shape"),
        (np.zeros((2, 1)), np.array([0.0, np.nan]), "must be finite"),
    ],
)
def test_fit_rejects_bad_data(X: np.ndarray, y: np.ndarray, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        fit_gp(X, y, seed=0)


def test_all_restarts_failing_raises_runtime_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: MarginalLikelihood, start: Any, max_iters: int) -> Any:
        raise np.linalg.LinAlgError("not positive definite")

    monkeypatch.setattr(MarginalLikelihood, "maximise", broken)
    X = sobol_design(5, 2, seed=0)
    with pytest.raises(RuntimeError, match="GP fit failed in all 2 restarts.*LinAlgError"):
        fit_gp(X, X[:, 0], seed=0, n_restarts=2)


def test_fit_rejects_bad_settings() -> None:
    X = sobol_design(4, 1, seed=0)
    with pytest.raises(ValueError, match="n_restarts"):
        fit_gp(X, X[:, 0], seed=0, n_restarts=0)
    with pytest.raises(ValueError, match="noise_floor"):
        fit_gp(X, X[:, 0], seed=0, noise_floor=0.0)


def test_each_restart_starts_from_its_own_seeded_point(monkeypatch: pytest.MonkeyPatch) -> None:
    # The optimiser must really start restart i from the i-th drawn point (not from the
    # previous optimum), and those points come from the seed: restart 0 from 0.3, the
    # others log-uniform in [0.05, 2].
    real_maximise = MarginalLikelihood.maximise
    starts: list[np.ndarray] = []

    def recording(self: MarginalLikelihood, start: Any, max_iters: int) -> Any:
        starts.append(np.array(start[1]))  # the lengthscales, after the variance
        theta = np.concatenate(start)
        # round trip: the optimiser's start (its logistic coordinates) is these values
        np.testing.assert_allclose(self._theta_of(self._x_of(theta)), theta, rtol=1e-10)
        return real_maximise(self, start, max_iters)

    monkeypatch.setattr(MarginalLikelihood, "maximise", recording)
    X = sobol_design(12, 2, seed=0)
    fit_gp(X, smooth_2d(X), seed=42, n_restarts=3)
    rng = np.random.default_rng(42)
    expected = [np.full(2, 0.3)] + [
        np.exp(rng.uniform(np.log(0.05), np.log(2.0), size=2)) for _ in range(2)
    ]
    assert len(starts) == 3
    for got, want in zip(starts, expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-10)



def test_hyperparameters_are_plain_values() -> None:
    rng = np.random.default_rng(0)
    X = rng.random((20, 2))
    fit = fit_gp(X, np.sin(6 * X[:, 0]) + X[:, 1], seed=1, n_restarts=2)
    hp = fit.hyperparameters()
    assert hp["lengthscales"] == [float(v) for v in fit.lengthscales]
    assert hp["variance"] == fit.variance and hp["noise_variance"] == fit.noise_variance
    import json

    assert json.loads(json.dumps(hp)) == hp
