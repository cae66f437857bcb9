"""Unit tests for GPFit.sample_posterior: joint samples of the latent function."""

from __future__ import annotations

import numpy as np
import pytest

from sweeper.search.design import random_design, sobol_design
from sweeper.search.gp import GPFit


def smooth_2d(X: np.ndarray) -> np.ndarray:
    return 3.0 + np.sin(3.0 * X[:, 0]) * np.cos(2.0 * X[:, 1]) + X[:, 0]


@pytest.fixture(scope="module")
def fit() -> GPFit:
    # Fixed hyperparameters (no GPy): the test is about sampling, not fitting.
    X = sobol_design(12, 2, seed=1)
    y = smooth_2d(X)
    return GPFit.matern(lengthscales=np.array([0.4, 0.6]), variance=1.0, noise_variance=1e-4,
                 y_mean=float(y.mean()), y_std=float(y.std()), log_likelihood=0.0, X=X, y=y)


def test_samples_have_the_posterior_mean_and_covariance(fit: GPFit) -> None:
    Xs = random_design(5, 2, seed=3)
    samples = fit.sample_posterior(Xs, 40_000, seed=0)
    assert samples.shape == (40_000, 5)
    mean, sd = fit.predict(Xs)
    # Monte Carlo error of the mean is sd / 200; allow 5 standard errors.
    np.testing.assert_array_less(np.abs(samples.mean(axis=0) - mean), 5 * sd / 200 + 1e-9)
    np.testing.assert_allclose(samples.std(axis=0), sd, rtol=0.03)
    # The joint covariance, not only the marginals: compare with the exact posterior.
    Ks = fit.kernel(fit.X, Xs)
    K = fit.kernel(fit.X, fit.X) + fit.noise_variance * np.eye(fit.X.shape[0])
    cov = (fit.kernel(Xs, Xs) - Ks.T @ np.linalg.solve(K, Ks)) * fit.y_std**2
    np.testing.assert_allclose(np.cov(samples.T), cov, atol=0.05 * cov.diagonal().max())


def test_samples_are_seeded(fit: GPFit) -> None:
    Xs = random_design(7, 2, seed=4)
    a = fit.sample_posterior(Xs, 3, seed=11)
    np.testing.assert_array_equal(a, fit.sample_posterior(Xs, 3, seed=11))
    assert not np.allclose(a, fit.sample_posterior(Xs, 3, seed=12))


def test_samples_at_training_points_stay_near_the_data(fit: GPFit) -> None:
    samples = fit.sample_posterior(fit.X, 200, seed=0)
    # noise sd 1e-2 on the standardised scale: the latent f is pinned to within a few of it.
    assert np.max(np.abs(samples - fit.y[None, :])) < 0.1 * fit.y_std


def test_repeated_and_dense_points_need_jitter_but_work(fit: GPFit) -> None:
    # 1000 points with exact duplicates: the posterior covariance is singular.
    Xs = np.vstack([random_design(500, 2, seed=5)] * 2)
    samples = fit.sample_posterior(Xs, 50, seed=0)
    assert samples.shape == (50, 1000)
    assert np.all(np.isfinite(samples))
    np.testing.assert_allclose(samples[:, :500], samples[:, 500:], atol=1e-3 * fit.y_std)


@pytest.mark.parametrize(("X", "n", "match"), [
    (np.zeros((3, 3)), 2, r"shape \(a, 2\)"),
    (np.zeros((0, 2)), 2, r"shape \(a, 2\)"),
    (np.zeros((3, 2)), 0, "n_samples must be a positive int"),
])
def test_bad_arguments_are_named(fit: GPFit, X: np.ndarray, n: int, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        fit.sample_posterior(X, n, seed=0)
