"""The slice sampler's log posterior, worked out once per fit, gives the very bits of the composition it
replaced (:func:`bench.sampler_speed.composed_log_posterior`: ``unpack -> warp_inputs -> sum_of_terms ->
cholesky_with_jitter -> warped_log_likelihood``, plus the prior summed block by block): a seeded analysis
draws the same members as before it.

Every layout the analysis fits: one term or additive ones, ARD or one lengthscale, Matern or RBF,
categorical factors (and a term of a category alone), no warp, a one-sided warp, a two-sided one with
and without a sampled ceiling; and every kind of point the sampler visits: near the fit, far from it,
outside the prior's boxes, and where the covariance is nearly singular.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.sampler_speed import composed_log_posterior
from sweeper.search.bounded import fit_bounded_gp
from sweeper.search.gp_fit import fit_gp
from sweeper.search.gp_linalg import cholesky_with_jitter
from sweeper.search.hyper_vector import has_ceiling, pack, parameter_names
from sweeper.search.log_posterior import LogPosterior
from sweeper.search.warping import MetricBounds


def _data(seed: int, n: int, d: int, *, on_bound: bool = False) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, d))
    y = 0.9 - 0.4 * (X[:, 0] - 0.6) ** 2 - 0.2 * np.abs(X[:, 1] - 0.3) + 0.02 * rng.normal(size=n)
    y = np.clip(y + 0.08 * (X[:, -1] > 0.5), 0.05, 1.0)
    if on_bound:
        y[np.argmax(y)] = 1.0
    return X, y


UNIT = MetricBounds(0.0, 1.0)
LAYOUTS = {
    "two-sided, ceiling": lambda: fit_bounded_gp(*_data(0, 24, 2), UNIT, seed=[0], n_restarts=1),
    "two-sided, a trial on the bound": lambda: fit_bounded_gp(*_data(1, 24, 2, on_bound=True), UNIT, seed=[0],
                                                             n_restarts=1),
    "categorical factor, rbf": lambda: fit_bounded_gp(*_data(2, 30, 3), UNIT, seed=[0], n_restarts=1,
                                                      categories={2: 3}, kernel="rbf-ard"),
    "additive with a category's own term": lambda: fit_bounded_gp(*_data(3, 30, 3), UNIT, seed=[0], n_restarts=1,
                                                                  categories={2: 2}, terms=[[0], [1], [2]]),
    "one lengthscale": lambda: fit_bounded_gp(*_data(4, 20, 2), UNIT, seed=[0], n_restarts=1, kernel="matern52"),
    "one-sided (a loss)": lambda: fit_bounded_gp(*_data(5, 20, 2), MetricBounds(0.0, None), seed=[0],
                                                 n_restarts=1),
    "no warp": lambda: fit_gp(*_data(6, 20, 2), seed=[0], n_restarts=1),
}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_point_the_sampler_visits_gets_the_composed_value_bit_for_bit(layout: str) -> None:
    gp = LAYOUTS[layout]()
    logp, composed = LogPosterior(gp, gp.X, gp.y), composed_log_posterior(gp, gp.X, gp.y)
    theta0 = pack(gp)
    rng = np.random.default_rng(7)
    kinds = {"finite": 0, "-inf": 0}
    for spread in (0.0, 0.3, 1.0, 3.0):
        for _ in range(40):
            theta = theta0 + rng.normal(0.0, spread, size=theta0.size)
            expected = composed(theta)
            assert logp(theta) == expected, (layout, theta)
            kinds["finite" if math.isfinite(expected) else "-inf"] += 1
    assert kinds["finite"] >= 40 and kinds["-inf"] >= 10, kinds  # both kinds of point were met
    if layout == "two-sided, ceiling":
        assert has_ceiling(gp)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_walk_one_coordinate_at_a_time_gets_the_composed_value_bit_for_bit(layout: str) -> None:
    """The sampler's own moves: each point differs from the last in one coordinate, so the values kept for the
    blocks that did not move are reused. A block read from a coordinate it does not list (a term's input warp,
    the noise, a shape of the output warp) would give the last point's value and fail here."""
    gp = LAYOUTS[layout]()
    logp, composed = LogPosterior(gp, gp.X, gp.y), composed_log_posterior(gp, gp.X, gp.y)
    theta = pack(gp)
    rng = np.random.default_rng(11)
    moved = {"finite": set(), "-inf": 0}
    for _ in range(300):
        j = int(rng.integers(theta.size))
        trial = theta.copy()
        trial[j] += rng.normal(0.0, rng.choice([0.05, 0.5, 3.0]))
        expected = composed(trial)
        assert logp(trial) == expected, (layout, j, trial)
        if math.isfinite(expected):
            moved["finite"].add(j)
            theta = trial if rng.uniform() < 0.7 else theta  # accepted, or the walk stays where it was
        else:
            moved["-inf"] += 1
        assert logp(theta) == composed(theta)  # back at the current point: every cached block is right again
    assert moved["finite"] == set(range(theta.size)) and moved["-inf"] >= 5, moved


def test_a_nearly_singular_covariance_gets_the_composed_value_bit_for_bit() -> None:
    """Every trial twice, the noise at its floor and lengthscales from short to long."""
    X, y = _data(8, 12, 2)
    X, y = np.vstack([X, X]), np.concatenate([y, y])
    gp = fit_bounded_gp(X, y, UNIT, seed=[0], n_restarts=1)
    logp, composed = LogPosterior(gp, gp.X, gp.y), composed_log_posterior(gp, gp.X, gp.y)
    theta = pack(gp)
    names = parameter_names(gp)
    noise_at = names.index("noise_variance")
    lengthscales_at = [i for i, name in enumerate(names) if "lengthscale" in name]
    seen = []
    for log_noise in (math.log(1e-8) + 1e-9, -16.0, -12.0, -9.0, -5.0):
        for log_ls in (-2.0, 0.5, 2.0, 3.0):
            t = theta.copy()
            t[noise_at] = log_noise
            t[lengthscales_at] = log_ls
            expected = composed(t)
            assert logp(t) == expected
            seen.append(math.isfinite(expected))
    assert any(seen)


def test_the_cholesky_is_scipys_bit_for_bit_and_jitter_still_rescues_a_singular_matrix() -> None:
    import scipy.linalg

    rng = np.random.default_rng(3)
    A = rng.normal(size=(9, 9))
    K = A @ A.T + 0.1 * np.eye(9)
    assert np.array_equal(cholesky_with_jitter(K), scipy.linalg.cholesky(K, lower=True, check_finite=False))
    ones = np.ones((4, 4))  # rank one: the plain factorisation fails at the second pivot
    with pytest.raises(np.linalg.LinAlgError):
        scipy.linalg.cholesky(ones, lower=True)
    L = cholesky_with_jitter(ones)
    assert np.array_equal(L, scipy.linalg.cholesky(ones + 1e-10 * np.eye(4), lower=True))
    with pytest.raises(np.linalg.LinAlgError, match="even with jitter"):
        cholesky_with_jitter(-np.eye(3), max_tries=2)


def test_the_sampler_bench_draws_the_same_members_either_way(tmp_path, monkeypatch) -> None:
    """``python -m bench sampler --smoke`` (decision 0083's table): its mixture with our log posterior and with
    the composition put in its place are the very same members, and its table says so."""
    import json

    import bench.report
    from bench.__main__ import main as bench_main

    monkeypatch.setattr(bench.report, "RESULTS_DIR", tmp_path)
    bench_main(["sampler", "--smoke"])
    (row,) = json.loads((tmp_path / "sampler_speed_smoke.json").read_text())["rows"]
    assert row["map"] == "svm" and row["same_members"] is True, row
    assert row["ours_us"] > 0 and row["composed_us"] > 0 and row["mixture_ours_s"] > 0
    assert row["members"] == 8 and "| svm | 16 | 8 |" in (tmp_path / "sampler_speed_smoke.md").read_text()


def test_the_triangular_solve_is_scipys_bit_for_bit_in_either_memory_order() -> None:
    import scipy.linalg

    from sweeper.search.gp_linalg import solve_lower

    rng = np.random.default_rng(4)
    A = rng.normal(size=(11, 11))
    L = cholesky_with_jitter(A @ A.T + np.eye(11))
    z = rng.normal(size=11)
    expected = scipy.linalg.solve_triangular(L, z, lower=True, check_finite=False)
    assert L.flags.f_contiguous and np.array_equal(solve_lower(L, z), expected)
    C = np.ascontiguousarray(L)
    assert np.array_equal(solve_lower(C, z), scipy.linalg.solve_triangular(C, z, lower=True, check_finite=False))
