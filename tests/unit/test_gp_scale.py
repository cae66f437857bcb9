"""The scaling path of the GP searcher: hyperparameters on a subset, posterior on every point.

``fit_gp(..., max_fit_points=M)`` fits on a seeded random subset of ``M`` observations once
there are more, then conditions on all of them; the acquisition extends the fit's Cholesky
factor by the pending points instead of factorising again. These tests fail if either
silently stops doing what it claims: a different result at small n, a posterior that
ignores the points outside the subset, hyperparameters far from the full fit's, a
non-deterministic subset, or a reused factor that changes the picks.
"""

from __future__ import annotations

import numpy as np
import pytest

from sweeper.search import conditioning
from sweeper.search.acquisition import integrated_variance_reduction, select_ivr_batch, select_ucb_batch
from sweeper.search.design import sobol_design
from sweeper.search.gp import GPFit
from sweeper.search.gp_fit import fit_gp, fit_subset
from sweeper.search.grammar import parse_specs
from sweeper.search.policy import MultiversePolicy
from sweeper.search.settings import PolicySettings


def gp_sample(n: int, d: int, lengthscales: list[float], seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` uniform points and a draw of a Matern-5/2 GP (variance 1) plus noise sd 0.05 there."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, d))
    prior = GPFit.matern(np.array(lengthscales), 1.0, 1e-6, 0.0, 1.0, 0.0, X[:1], np.zeros(1))
    K = prior.kernel(X, X) + 1e-8 * np.eye(n)
    f = np.linalg.cholesky(K) @ rng.standard_normal(n)
    return X, f + 0.05 * rng.standard_normal(n)


@pytest.fixture(scope="module")
def sample() -> tuple[np.ndarray, np.ndarray]:
    return gp_sample(360, 2, [0.2, 0.5], seed=3)


def test_fit_subset_is_seeded_sorted_and_distinct() -> None:
    a = fit_subset(1000, 100, seed=[1, 2])
    assert a.shape == (100,) and np.all(np.diff(a) > 0) and a.min() >= 0 and a.max() < 1000
    assert np.array_equal(a, fit_subset(1000, 100, seed=[1, 2]))
    assert not np.array_equal(a, fit_subset(1000, 100, seed=[1, 3]))
    assert np.array_equal(fit_subset(50, 100, seed=0), np.arange(50))


def test_fit_subset_keeps_every_category_however_rare() -> None:
    rng = np.random.default_rng(0)
    # 2000 results, category 2 of column A seen 4 times and category 1 of column B twice.
    a = np.zeros(2000, dtype=np.intp)
    a[rng.choice(2000, 4, replace=False)] = 2
    a[rng.choice(np.flatnonzero(a == 0), 900, replace=False)] = 1
    b = np.zeros(2000, dtype=np.intp)
    b[[5, 1500]] = 1
    uniform = [fit_subset(2000, 300, seed=s) for s in range(20)]
    assert sum(not np.any(a[u] == 2) for u in uniform) >= 5  # what a uniform draw loses
    for s in range(20):
        rows = fit_subset(2000, 300, seed=s, labels=[a, b])
        assert rows.shape == (300,) and np.all(np.diff(rows) > 0)
        assert np.sum(a[rows] == 2) >= 3 and np.sum(b[rows] == 1) == 2
        assert 100 < np.sum(a[rows] == 1) < 170  # the rest stays a uniform draw (expected 135)
    assert np.array_equal(fit_subset(2000, 300, seed=1, labels=[a, b]), fit_subset(2000, 300, seed=1, labels=[a, b]))
    # More categories than room: still ``size`` distinct rows.
    many = np.arange(2000) % 500
    assert np.unique(fit_subset(2000, 300, seed=0, labels=[many])).shape == (300,)


def test_at_or_below_max_fit_points_the_fit_is_bit_identical(sample: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = sample[0][:80], sample[1][:80]
    plain = fit_gp(X, y, seed=4, n_restarts=2)
    for m in (80, 500):
        capped = fit_gp(X, y, seed=4, n_restarts=2, max_fit_points=m)
        assert capped.hyperparameters() == plain.hyperparameters()
        assert capped.log_likelihood == plain.log_likelihood


def test_subset_fit_conditions_on_every_point(sample: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = sample
    gp = fit_gp(X, y, seed=0, n_restarts=1, max_fit_points=120)
    assert gp.X.shape == X.shape and np.array_equal(gp.X, X) and np.array_equal(gp.y, y)
    # The same hyperparameters conditioned on all points from scratch: the same posterior.
    t = gp.terms[0]
    reference = GPFit.matern(t.lengthscales, t.variance, gp.noise_variance, gp.y_mean, gp.y_std, 0.0, X, y)
    X_new = np.random.default_rng(9).uniform(size=(50, 2))
    for got, want in zip(gp.predict(X_new), reference.predict(X_new), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(gp.predict_mean(X_new), reference.predict(X_new)[0], rtol=1e-9, atol=1e-12)
    # ... and a fit on the subset alone would not be: the other points moved the posterior.
    rows = fit_subset(X.shape[0], 120, np.random.default_rng(0))
    alone = GPFit.matern(t.lengthscales, t.variance, gp.noise_variance, gp.y_mean, gp.y_std, 0.0, X[rows], y[rows])
    assert np.max(np.abs(alone.predict(X_new)[1] - gp.predict(X_new)[1])) > 1e-3
    # Its log likelihood is the full data's at these hyperparameters.
    assert gp.log_likelihood == pytest.approx(reference.log_marginal_likelihood(), rel=1e-9)


def test_subset_hyperparameters_are_close_to_the_full_fit(sample: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = sample
    full = fit_gp(X, y, seed=0, n_restarts=2)
    sub = fit_gp(X, y, seed=0, n_restarts=2, max_fit_points=150)
    ratio = sub.lengthscales / full.lengthscales
    assert np.all((ratio > 0.67) & (ratio < 1.5)), (sub.describe(), full.describe())
    assert 0.5 < sub.variance / full.variance < 2.0
    # Both near the truth the sample was drawn from (lengthscales 0.2 and 0.5).
    assert np.all(np.abs(np.log(sub.lengthscales / np.array([0.2, 0.5]))) < np.log(2.0)), sub.describe()


def test_refined_fit_reaches_the_full_fit_optimum(sample: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = sample[0][:200], sample[1][:200]
    full = fit_gp(X, y, seed=0, n_restarts=2)
    refined = fit_gp(X, y, seed=0, n_restarts=2, max_fit_points=60, refine_max_points=200)
    unrefined = fit_gp(X, y, seed=0, n_restarts=2, max_fit_points=60, refine_max_points=199)  # n above the limit
    assert refined.log_likelihood == pytest.approx(full.log_likelihood, abs=1e-3 * abs(full.log_likelihood))
    np.testing.assert_allclose(refined.lengthscales, full.lengthscales, rtol=0.03)
    assert unrefined.log_likelihood < refined.log_likelihood - 1e-6
    assert np.max(np.abs(unrefined.lengthscales / full.lengthscales - 1)) > 1e-3


def test_subset_fit_is_deterministic_under_its_seed(sample: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = sample
    a = fit_gp(X, y, seed=[5, 1], n_restarts=1, max_fit_points=60)
    b = fit_gp(X, y, seed=[5, 1], n_restarts=1, max_fit_points=60)
    c = fit_gp(X, y, seed=[5, 2], n_restarts=1, max_fit_points=60)
    assert a.hyperparameters() == b.hyperparameters()
    assert a.hyperparameters() != c.hyperparameters()  # another seed, another subset


def test_log_marginal_likelihood_matches_gpy(sample: tuple[np.ndarray, np.ndarray]) -> None:
    gp = fit_gp(sample[0][:60], sample[1][:60], seed=0, n_restarts=1)
    assert gp.log_marginal_likelihood() == pytest.approx(gp.log_likelihood, rel=1e-6, abs=1e-6)


@pytest.mark.parametrize("bad", [0, 1, -5, 2.5, True])
def test_max_fit_points_is_validated(bad: object) -> None:
    X = sobol_design(8, 2, seed=0)
    with pytest.raises(ValueError, match="max_fit_points"):
        fit_gp(X, X.sum(axis=1), seed=0, n_restarts=1, max_fit_points=bad)  # type: ignore[arg-type]  # on purpose


def test_reused_factor_gives_the_fresh_factor_picks(monkeypatch: pytest.MonkeyPatch) -> None:
    X, y = gp_sample(120, 2, [0.3, 0.3], seed=1)
    gp = GPFit.matern(np.array([0.3, 0.3]), 1.0, 1e-3, float(y.mean()), float(y.std()), 0.0, X, y)
    rng = np.random.default_rng(2)
    pending = rng.uniform(size=(7, 2))
    X_cond = rng.permutation(np.vstack([X, pending, X[:3]]))  # shuffled; a pending repeat of 3 results
    cand, mc = sobol_design(256, 2, seed=1), sobol_design(128, 2, seed=2)
    fresh_ivr = integrated_variance_reduction(gp, X_cond, cand, mc)
    fresh_batch = select_ivr_batch(gp, X_cond, cand, mc, 8)
    fresh_ucb = select_ucb_batch(gp, X_cond, cand, 8, beta=2.0)
    calls = []
    real = conditioning._rows_not_in
    monkeypatch.setattr(conditioning, "_rows_not_in", lambda *a: calls.append(1) or real(*a))
    monkeypatch.setattr(conditioning, "REUSE_FACTOR_MIN_N", 100)
    np.testing.assert_allclose(integrated_variance_reduction(gp, X_cond, cand, mc), fresh_ivr, rtol=1e-7, atol=1e-12)
    reused = select_ivr_batch(gp, X_cond, cand, mc, 8)
    assert reused.indices.tolist() == fresh_batch.indices.tolist()
    np.testing.assert_allclose(reused.values, fresh_batch.values, rtol=1e-7)
    assert select_ucb_batch(gp, X_cond, cand, 8, beta=2.0).indices.tolist() == fresh_ucb.indices.tolist()
    assert calls, "the reuse path was not taken"
    # Only the results themselves: the factor is the fit's own, not a copy.
    X_ordered, L = conditioning.conditioning_factor(gp, X[::-1])
    assert L is gp.cholesky and np.array_equal(X_ordered, X)


def test_conditioning_without_every_training_point_falls_back() -> None:
    assert conditioning._rows_not_in(np.zeros((3, 2)), np.ones((1, 2))) is None
    rest = conditioning._rows_not_in(np.array([[1.0, 1.0], [0.0, 0.0], [1.0, 1.0]]), np.ones((1, 2)))
    assert rest is not None and rest.tolist() == [[0.0, 0.0], [1.0, 1.0]]


@pytest.mark.parametrize("bad", [0, 1, 2.5, True, "500"])
def test_policy_rejects_bad_gp_max_fit_points(bad: object) -> None:
    problems = PolicySettings(gp_max_fit_points=bad).problems(None)  # type: ignore[arg-type]  # a bad value on purpose
    assert any("gp_max_fit_points" in p for p in problems)
    if bad != 1:
        problems = PolicySettings(gp_refine_max_points=bad).problems(None)  # type: ignore[arg-type]  # a bad value
        assert any("gp_refine_max_points" in p for p in problems)
    assert not PolicySettings(gp_max_fit_points=None, gp_refine_max_points=None).problems(None)
    assert not PolicySettings().problems(None)


def test_policy_passes_gp_max_fit_points_to_the_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    import sweeper.search.gp_batch
    import sweeper.search.gp_fit

    seen = []
    real = sweeper.search.gp_fit.fit_gp

    def spy(*args: object, **kwargs: object) -> GPFit:
        seen.append((kwargs["max_fit_points"], kwargs["refine_max_points"]))
        return real(*args, **kwargs)  # type: ignore[arg-type]  # passes fit_gp's own arguments on

    monkeypatch.setattr(sweeper.search.gp_batch, "fit_gp", spy)
    space = parse_specs({"x": "interval(0, 1)", "y": "interval(0, 1)"})
    policy = MultiversePolicy(space, PolicySettings(num_trials=6, n_initial=4, batch_size=2, gp_max_fit_points=3,
                                                    gp_refine_max_points=10, gp_restarts=1, n_candidates=64,
                                                    n_integration=32))
    for _ in range(4):
        s = policy.ask()
        assert s is not None
        policy.tell(s.index, float(np.sin(3 * s.x[0]) + s.x[1]))
    s = policy.ask()
    assert s is not None and s.phase == "ivr"
    assert seen == [(3, 10)]
