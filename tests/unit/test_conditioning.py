"""How IVR conditions a posterior member whose noise is in the metric's units (decision 0086): each trial with the
noise its member's posterior gives it, each pending point and pick with the noise at its predicted value, so a member
chooses with the posterior its map is drawn with.
NOTE: docs/decisions/0087-members-choose-with-their-own-noise.md"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sweeper.search.acquisition import integrated_variance_reduction, select_mixture_ivr_batch
from sweeper.search.conditioning import Conditioner, observation_noise
from sweeper.search.design import random_design
from sweeper.search.gp import GPFit
from sweeper.search.hyperposterior import fit_posterior
from sweeper.search.warping import MetricBounds

TRIALS = Path(__file__).parent / "data" / "svm_default_ivr_seed2_bounded32.json"


@pytest.fixture(scope="module")
def members() -> tuple[GPFit, ...]:
    """Four posterior members of the demo's map (SVC on breast cancer, 32 committed trials, accuracy in [0, 1])."""
    trials = json.loads(TRIALS.read_text())
    X, y = np.asarray(trials["X"]), np.asarray(trials["y"])
    return fit_posterior(X, y, seed=0, bounds=MetricBounds(0.0, 1.0), kept=4).members


def posterior_variance(gp: GPFit, X: np.ndarray, noise: np.ndarray, U: np.ndarray) -> np.ndarray:
    """The latent variance at ``U`` given observations at ``X`` with the noise variances ``noise``, from scratch."""
    K = gp.kernel(X, X) + np.diag(noise)
    Ku = gp.kernel(X, U)
    return gp.kernel_diag(U) - np.einsum("ij,ij->j", Ku, np.linalg.solve(K, Ku))


def test_a_members_conditioner_has_the_variance_its_map_is_drawn_with(members: tuple[GPFit, ...]) -> None:
    """Conditioned on the trials, the acquisition's variance is the member's own posterior variance (its band);
    with the scalar ``noise_variance`` (as before decision 0087) it would be far below it next to the plateau's
    trials."""
    U = random_design(400, members[0].X.shape[1], seed=3)
    for m in members:
        _, sd = m.predict_warped(U)
        conditioned = Conditioner(m, m.X, U, 0).var
        np.testing.assert_allclose(conditioned, (sd / m.y_std) ** 2, rtol=1e-6, atol=1e-9)
        scalar = posterior_variance(m, m.X, np.full(m.X.shape[0], m.noise_variance), U)
        assert np.min(scalar / conditioned) < 0.5  # measured 0.12-0.42: up to 8 times surer than the posterior


def test_trials_keep_their_results_noise_and_new_points_take_it_at_their_predicted_value(
        members: tuple[GPFit, ...]) -> None:
    m = members[0]
    assert m.warp is not None and m.metric_noise > 0.0
    new = random_design(5, m.X.shape[1], seed=4)
    X = np.vstack([m.X[::-1], m.X[:2], new])  # the trials in another order, two pending repeats, five new points
    noise = observation_noise(m, X)
    n = m.X.shape[0]
    np.testing.assert_array_equal(noise[:n], m.noise_at(m.y[::-1]))
    mean, _ = m.predict_warped(X[n:])
    np.testing.assert_allclose(noise[n:], m.noise_at(m.warp.inverse(mean)), rtol=1e-12)
    # The warp is steepest next to the bounds: the plateau's trials carry several times the scalar noise.
    top = m.y >= np.quantile(m.y, 0.75)
    assert np.median(noise[:n][::-1][top]) > 2.0 * m.noise_variance


def test_ivr_with_each_points_own_noise_is_the_variance_it_removes(members: tuple[GPFit, ...]) -> None:
    """IVR(x) against the integrated variance computed from scratch before and after a result at x, every point
    (trials, a pending repeat, pending new points, the candidate) with its :func:`observation_noise`."""
    m = members[1]
    d = m.X.shape[1]
    X_cond = np.vstack([m.X, m.X[:1], random_design(3, d, seed=5)])
    cand, U = random_design(40, d, seed=6), random_design(300, d, seed=7)
    ours = integrated_variance_reduction(m, X_cond, cand, U)
    noise_cond, noise_cand = observation_noise(m, X_cond), observation_noise(m, cand)
    before = posterior_variance(m, X_cond, noise_cond, U)
    brute = np.array([np.mean(before - posterior_variance(m, np.vstack([X_cond, x]), np.append(noise_cond, s), U))
                      for x, s in zip(cand, noise_cand, strict=True)])
    np.testing.assert_allclose(ours, brute, rtol=1e-6, atol=1e-12)


def test_each_pick_of_a_members_batch_is_the_argmax_given_the_earlier_picks(members: tuple[GPFit, ...]) -> None:
    d = members[0].X.shape[1]
    X_cond = np.vstack([members[0].X, random_design(2, d, seed=8)])
    cand, U = random_design(60, d, seed=9), random_design(200, d, seed=10)
    weights = [np.ones(200)] * len(members)
    batch = select_mixture_ivr_batch(members, X_cond, cand, U, 4, weights)
    grown = X_cond
    for k in range(4):
        total = sum(integrated_variance_reduction(m, grown, cand, U) for m in members) / len(members)
        total[batch.indices[:k]] = -np.inf
        assert np.argmax(total) == batch.indices[k]
        np.testing.assert_allclose(batch.values[k], total[batch.indices[k]], rtol=1e-7)
        grown = np.vstack([grown, cand[batch.indices[k]]])


def test_extending_the_members_own_factor_gives_the_fresh_factors_ivr(members: tuple[GPFit, ...],
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """At scale the conditioner extends the fit's factor, built with each trial's own noise; the pending points
    (a repeat of a trial among them) join with the noise at their predicted value, as in a fresh factor."""
    from sweeper.search import conditioning

    m = members[2]
    d = m.X.shape[1]
    rng = np.random.default_rng(11)
    X_cond = rng.permutation(np.vstack([m.X, random_design(4, d, seed=12), m.X[:3]]))
    cand, U = random_design(50, d, seed=13), random_design(100, d, seed=14)
    fresh = integrated_variance_reduction(m, X_cond, cand, U)
    monkeypatch.setattr(conditioning, "REUSE_FACTOR_MIN_N", 10)
    X_ordered, L = conditioning.conditioning_factor(m, X_cond)
    assert np.array_equal(L[: m.X.shape[0], : m.X.shape[0]], m.cholesky)  # the member's own factor, extended
    np.testing.assert_allclose(integrated_variance_reduction(m, X_cond, cand, U), fresh, rtol=1e-7, atol=1e-12)
