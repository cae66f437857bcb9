"""Unit tests for sweeper.search.acquisition: IVR (single and greedy batch) and GP-BUCB."""

from __future__ import annotations

from unittest.mock import create_autospec

import GPy
import numpy as np
import pytest

from sweeper.search.acquisition import (
    BatchSelection,
    integrated_variance_reduction,
    select_ivr_batch,
    select_ucb_batch,
)
from sweeper.search.design import random_design, sobol_design
from sweeper.search.gp import GPY_JITTER, GPFit
from sweeper.search.gp_fit import fit_gp
from sweeper.search.slope_weights import slope_weights


def toy_function(X: np.ndarray) -> np.ndarray:
    return np.sin(5.0 * X[:, 0]) + 0.5 * np.cos(3.0 * X[:, 1])


@pytest.fixture(scope="module")
def toy_gp() -> GPFit:
    """A GP fitted on 10 noisy points of a 2-D function."""
    X = random_design(10, 2, seed=0)
    y = toy_function(X) + 0.3 * np.random.default_rng(1).standard_normal(10)
    return fit_gp(X, y, seed=0)


def fixed_gp(d: int, X: np.ndarray, lengthscale: float = 0.3, noise: float = 1e-3) -> GPFit:
    """A GP with given hyperparameters (no fitting)."""
    y = np.sin(X.sum(axis=1)) if X.shape[0] else np.zeros(0)
    if X.shape[0] == 0:
        X, y = np.full((1, d), 0.5), np.zeros(1)
    return GPFit.matern(
        lengthscales=np.full(d, lengthscale), variance=1.0, noise_variance=noise,
        y_mean=0.0, y_std=1.0, log_likelihood=0.0, X=X, y=y,
    )


def grid(n: int) -> np.ndarray:
    """Cell centres of an n x n grid in the unit square, shape (n*n, 2)."""
    t = (np.arange(n) + 0.5) / n
    return np.stack(np.meshgrid(t, t, indexing="ij"), axis=-1).reshape(-1, 2)


def gpy_posterior_variance(gp: GPFit, X_train: np.ndarray, X_eval: np.ndarray) -> np.ndarray:
    """Latent posterior variance from GPy with gp's hyperparameters, not optimised."""
    kern = GPy.kern.Matern52(
        X_train.shape[1], variance=gp.variance, lengthscale=gp.lengthscales, ARD=True
    )
    Y = np.zeros((X_train.shape[0], 1))  # the variance does not depend on y
    model = GPy.models.GPRegression(
        X_train, Y, kernel=kern, noise_var=gp.noise_variance - GPY_JITTER
    )
    _, var = model.predict_noiseless(X_eval)
    return var[:, 0]


# --- integrated_variance_reduction -------------------------------------------------------


def test_ivr_matches_brute_force_gpy_integral(toy_gp: GPFit) -> None:
    X_cond = toy_gp.X
    X_cand = grid(9)  # 81 candidates
    X_int = grid(40)  # 1600 integration points
    before = gpy_posterior_variance(toy_gp, X_cond, X_int)
    brute = np.array(
        [
            np.mean(before - gpy_posterior_variance(toy_gp, np.vstack([X_cond, x]), X_int))
            for x in X_cand
        ]
    )
    ours = integrated_variance_reduction(toy_gp, X_cond, X_cand, X_int)
    assert toy_gp.noise_variance > 1e-4  # a regime where the brute force is accurate
    np.testing.assert_allclose(ours, brute, rtol=1e-6, atol=1e-12)
    assert np.argmax(ours) == np.argmax(brute)


def test_ivr_closed_form_on_mocked_gp() -> None:
    # With no conditioning points and one integration point u:
    # IVR(x) = k(u, x)^2 / (k(x, x) + noise). Mock the GP as emukit does.
    gp = create_autospec(GPFit, instance=True)
    gp.noise_variance, gp.noise_varies = 0.1, False
    gp.kernel.side_effect = lambda A, B: np.exp(-0.5 * ((A[:, :1] - B[:, 0]) / 0.2) ** 2)
    gp.kernel_diag.side_effect = lambda A: np.ones(A.shape[0])
    X_cand = np.array([[0.1], [0.5], [0.9]])
    u = np.array([[0.4]])
    k = np.exp(-0.5 * ((u[0, 0] - X_cand[:, 0]) / 0.2) ** 2)
    ivr = integrated_variance_reduction(gp, np.empty((0, 1)), X_cand, u)
    np.testing.assert_allclose(ivr, k**2 / 1.1, rtol=1e-14)


@pytest.mark.parametrize("n_cond", [0, 1, 25])
def test_ivr_shape_finite_nonnegative(n_cond: int) -> None:
    X_cond = random_design(n_cond, 3, seed=2) if n_cond else np.empty((0, 3))
    gp = fixed_gp(3, X_cond)
    ivr = integrated_variance_reduction(gp, X_cond, random_design(64, 3, seed=3),
                                        random_design(128, 3, seed=4))
    assert ivr.shape == (64,)
    assert np.all(np.isfinite(ivr)) and np.all(ivr >= 0.0)


def test_ivr_at_observed_point_not_above_far_point(toy_gp: GPFit) -> None:
    observed = toy_gp.X[:1]
    dists = np.linalg.norm(grid(20)[:, None, :] - toy_gp.X[None], axis=-1).min(axis=1)
    far = grid(20)[np.argmax(dists)][None]
    ivr = integrated_variance_reduction(toy_gp, toy_gp.X, np.vstack([observed, far]), grid(30))
    assert ivr[0] <= ivr[1]


def test_ivr_is_lower_next_to_a_pending_point() -> None:
    X_obs = sobol_design(8, 2, seed=5)
    gp = fixed_gp(2, X_obs, lengthscale=0.2)
    pending = np.array([[0.52, 0.48]])
    near = np.array([[0.5, 0.5]])
    X_mc = grid(30)
    without = integrated_variance_reduction(gp, X_obs, near, X_mc)
    with_pending = integrated_variance_reduction(gp, np.vstack([X_obs, pending]), near, X_mc)
    assert with_pending[0] < 0.5 * without[0]


def test_ivr_rejects_mismatched_shapes(toy_gp: GPFit) -> None:
    with pytest.raises(ValueError, match="X_cond must have shape"):
        integrated_variance_reduction(toy_gp, np.zeros((3, 3)), np.zeros((4, 2)), grid(3))
    with pytest.raises(ValueError, match="X_mc must have shape"):
        integrated_variance_reduction(toy_gp, toy_gp.X, np.zeros((4, 2)), np.zeros((5, 3)))


# --- select_ivr_batch --------------------------------------------------------------------


@pytest.mark.parametrize("n_cond", [0, 20])
def test_greedy_batch_equals_repeated_single_calls(n_cond: int) -> None:
    d, q = 3, 8
    X_cond = random_design(n_cond, d, seed=6) if n_cond else np.empty((0, d))
    gp = fixed_gp(d, X_cond, lengthscale=0.4, noise=1e-3)
    X_cand = random_design(200, d, seed=7)
    X_mc = random_design(300, d, seed=8)
    batch = select_ivr_batch(gp, X_cond, X_cand, X_mc, q)
    assert isinstance(batch, BatchSelection)
    assert batch.indices.shape == (q,) and batch.values.shape == (q,)
    grown = X_cond
    for k in range(q):
        ivr = integrated_variance_reduction(gp, grown, X_cand, X_mc)
        ivr[batch.indices[:k]] = -np.inf
        assert np.argmax(ivr) == batch.indices[k]
        np.testing.assert_allclose(batch.values[k], ivr[batch.indices[k]], rtol=1e-8)
        grown = np.vstack([grown, X_cand[batch.indices[k]]])
    assert np.all(np.diff(batch.values) <= 1e-12)  # submodular-like: gains shrink


def test_batch_of_32_spreads_out() -> None:
    X_obs = random_design(10, 2, seed=0)
    gp = fixed_gp(2, X_obs, lengthscale=0.2, noise=1e-3)  # isotropic: distances are fair
    X_cand = sobol_design(1024, 2, seed=9)
    batch = select_ivr_batch(gp, X_obs, X_cand, sobol_design(512, 2, seed=10), q=32)
    assert len(set(batch.indices.tolist())) == 32
    picks = X_cand[batch.indices]
    dist = np.linalg.norm(picks[:, None] - picks[None], axis=-1)
    dist[np.diag_indices(32)] = np.inf
    # 32 i.i.d. uniform points have a median minimum distance of ~0.022 (99th
    # percentile ~0.052); greedy IVR picks are spread much further apart.
    assert dist.min() > 0.06
    assert np.all(batch.values > 0.0)


def test_batch_rejects_bad_q(toy_gp: GPFit) -> None:
    with pytest.raises(ValueError, match="batch size q"):
        select_ivr_batch(toy_gp, toy_gp.X, grid(2), grid(3), q=5)
    with pytest.raises(ValueError, match="batch size q"):
        select_ivr_batch(toy_gp, toy_gp.X, grid(2), grid(3), q=0)


def test_batch_can_take_every_candidate(toy_gp: GPFit) -> None:
    batch = select_ivr_batch(toy_gp, toy_gp.X, grid(3), grid(5), q=9)
    assert sorted(batch.indices.tolist()) == list(range(9))


# --- select_ucb_batch --------------------------------------------------------------------


@pytest.mark.parametrize("maximize", [True, False])
def test_ucb_beta_zero_picks_mean_optimum(toy_gp: GPFit, maximize: bool) -> None:
    X_cand = grid(25)
    mean, _ = toy_gp.predict(X_cand)
    batch = select_ucb_batch(toy_gp, toy_gp.X, X_cand, q=1, beta=0.0, maximize=maximize)
    expected = np.argmax(mean) if maximize else np.argmin(mean)
    assert batch.indices[0] == expected
    z = (mean[expected] - toy_gp.y_mean) / toy_gp.y_std
    assert batch.values[0] == pytest.approx(z if maximize else -z, rel=1e-12)


def test_ucb_batch_picks_are_distinct_and_spread(toy_gp: GPFit) -> None:
    X_cand = sobol_design(512, 2, seed=11)
    batch = select_ucb_batch(toy_gp, toy_gp.X, X_cand, q=16, beta=3.0)
    assert len(set(batch.indices.tolist())) == 16
    picks = X_cand[batch.indices]
    dist = np.linalg.norm(picks[:, None] - picks[None], axis=-1)
    dist[np.diag_indices(16)] = np.inf
    assert dist.min() > 0.02  # hallucinated variance pushes later picks away


def test_ucb_hallucinated_variance_matches_conditioning(toy_gp: GPFit) -> None:
    # The second pick (and its score) equals a fresh first pick with the first pick
    # moved into X_cond: hallucinating only changes the variance, never the mean.
    X_cand = grid(15)
    beta = 2.0
    batch = select_ucb_batch(toy_gp, toy_gp.X, X_cand, q=2, beta=beta)
    first = batch.indices[0]
    rest = np.delete(np.arange(X_cand.shape[0]), first)
    again = select_ucb_batch(
        toy_gp, np.vstack([toy_gp.X, X_cand[first]]), X_cand[rest], q=1, beta=beta
    )
    assert rest[again.indices[0]] == batch.indices[1]
    np.testing.assert_allclose(again.values[0], batch.values[1], rtol=1e-8)


def test_ucb_pending_point_lowers_exploration_bonus(toy_gp: GPFit) -> None:
    x = np.array([[0.95, 0.95]])
    bonus_free = select_ucb_batch(toy_gp, toy_gp.X, x, q=1, beta=1.0).values[0]
    bonus_pending = select_ucb_batch(toy_gp, np.vstack([toy_gp.X, x]), x, q=1, beta=1.0).values[0]
    assert bonus_pending < bonus_free


def test_ucb_rejects_negative_beta(toy_gp: GPFit) -> None:
    with pytest.raises(ValueError, match="beta must be >= 0"):
        select_ucb_batch(toy_gp, toy_gp.X, grid(3), q=1, beta=-1.0)


# --- slope-weighted IVR ------------------------------------------------------------------


def cliff(X: np.ndarray) -> np.ndarray:
    """A plateau at 0 for x < 0.5 and a plateau at 1 above it, joined by a steep ramp: a real map's cliff."""
    return 1.0 / (1.0 + np.exp(-(X[:, 0] - 0.5) / 0.02))


def test_slope_weights_are_heaviest_on_the_cliff() -> None:
    X = sobol_design(24, 2, seed=3)
    gp = fit_gp(X, cliff(X), seed=0)
    X_mc = grid(20)
    w = slope_weights(gp, X_mc, strength=4.0)
    on_cliff = np.abs(X_mc[:, 0] - 0.5) < 0.1
    assert np.all(w >= 1.0) and np.isclose(np.mean(w), 5.0)  # 1 + strength * slope / mean slope
    assert np.mean(w[on_cliff]) > 2.0 * np.mean(w[~on_cliff])


def test_slope_weights_are_equal_for_a_flat_map_or_no_strength() -> None:
    X = sobol_design(12, 2, seed=3)
    flat = fit_gp(X, np.full(12, 0.627), seed=0)  # the majority class everywhere
    assert np.array_equal(slope_weights(flat, grid(10), strength=4.0), np.ones(100))
    tilted = fit_gp(X, X[:, 0], seed=0)
    assert np.array_equal(slope_weights(tilted, grid(10), strength=0.0), np.ones(100))


def test_equal_weights_are_plain_ivr_and_heavy_weights_pull_the_batch(toy_gp: GPFit) -> None:
    X_cand, X_mc = sobol_design(256, 2, seed=4), sobol_design(512, 2, seed=5)
    plain = select_ivr_batch(toy_gp, toy_gp.X, X_cand, X_mc, q=6)
    equal = select_ivr_batch(toy_gp, toy_gp.X, X_cand, X_mc, q=6, weights=np.full(512, 3.0))
    assert np.array_equal(plain.indices, equal.indices)
    np.testing.assert_allclose(plain.values, equal.values, rtol=1e-12)
    right = np.where(X_mc[:, 0] > 0.7, 50.0, 1.0)  # the variance right of x = 0.7 counts 50 times
    pulled = select_ivr_batch(toy_gp, toy_gp.X, X_cand, X_mc, q=6, weights=right)
    assert np.mean(X_cand[pulled.indices, 0] > 0.6) > np.mean(X_cand[plain.indices, 0] > 0.6)
    assert np.all(X_cand[pulled.indices[:3], 0] > 0.6)


@pytest.mark.parametrize("weights", [np.zeros(512), np.full(512, np.nan), np.ones(511), -np.ones(512)])
def test_ivr_rejects_weights_that_are_not_positive_finite_one_per_point(toy_gp: GPFit, weights) -> None:
    X_cand, X_mc = sobol_design(16, 2, seed=4), sobol_design(512, 2, seed=5)
    with pytest.raises(ValueError, match="positive finite"):
        select_ivr_batch(toy_gp, toy_gp.X, X_cand, X_mc, q=2, weights=weights)
    with pytest.raises(ValueError, match="positive finite"):
        integrated_variance_reduction(toy_gp, toy_gp.X, X_cand, X_mc, weights=weights)
