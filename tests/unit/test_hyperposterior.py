"""Unit tests for sweeper.search.hyperposterior: the slice sampler and the mixture of GP fits over
hyperparameter draws."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import expit

from sweeper.search.design import sobol_design
from sweeper.search.ensemble import GPEnsemble
from sweeper.search.gp import GPFit
from sweeper.search.hyperposterior import (
    KEPT,
    STRANDED_NATS,
    WHITE_NOISE_LENGTHSCALE,
    _restart_stranded,
    fit_posterior,
    members_for,
    sample_members,
    slice_sample,
)
from sweeper.search.kernels import KernelTerm
from sweeper.search.warping import MetricBounds

pytestmark = pytest.mark.usefixtures("one_blas_thread")

UNIT = MetricBounds(0.0, 1.0)


def smooth_2d(X: np.ndarray) -> np.ndarray:
    return np.sin(3.0 * X[:, 0]) * np.cos(2.0 * X[:, 1]) + X[:, 0]


def accuracy_map(X: np.ndarray) -> np.ndarray:
    """A plateau at 0.5, a cliff at x0 = 0.4 and a ceiling of perfect scores (exactly 1.0)."""
    return np.minimum(1.0, 0.5 + 0.55 * expit(20.0 * (X[:, 0] - 0.4)))


def grid(n: int) -> np.ndarray:
    g = (np.arange(n) + 0.5) / n
    return np.array(np.meshgrid(g, g)).reshape(2, -1).T




@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray]:
    X = sobol_design(30, 2, seed=0)
    noise = 0.02 * np.random.default_rng(0).standard_normal(30)
    return X, smooth_2d(X) + noise


@pytest.fixture(scope="module")
def ensemble(data: tuple[np.ndarray, np.ndarray]) -> GPEnsemble:
    X, y = data
    return fit_posterior(X, y, seed=0, kept=KEPT)  # without bounds the default is the single fit


@pytest.fixture(scope="module")
def bounded_data() -> tuple[np.ndarray, np.ndarray]:
    X = sobol_design(30, 2, seed=0)
    return X, accuracy_map(X)


@pytest.fixture(scope="module")
def bounded_ensemble(bounded_data: tuple[np.ndarray, np.ndarray]) -> GPEnsemble:
    X, y = bounded_data
    return fit_posterior(X, y, seed=0, bounds=UNIT)


# ----------------------------------------------------------------------------- slice_sample
def test_slice_sample_draws_from_a_correlated_gaussian() -> None:
    mu = np.array([1.0, -2.0])
    cov = np.array([[1.0, 0.8], [0.8, 2.0]])
    prec = np.linalg.inv(cov)

    def logp(x: np.ndarray) -> float:
        d = x - mu
        return -0.5 * float(d @ prec @ d)

    draws = slice_sample(logp, np.zeros(2), np.random.default_rng(0), burn_in=50, kept=4000, thin=2)
    assert draws.shape == (4000, 2)
    np.testing.assert_allclose(draws.mean(axis=0), mu, atol=0.1)
    np.testing.assert_allclose(np.cov(draws.T), cov, atol=0.15)
    # Seeded: the same generator state gives the same chain.
    again = slice_sample(logp, np.zeros(2), np.random.default_rng(0), burn_in=50, kept=4000, thin=2)
    np.testing.assert_array_equal(draws, again)


def test_slice_sample_respects_zero_density_and_rejects_a_bad_start() -> None:
    def logp(x: np.ndarray) -> float:  # a standard normal truncated to the box [0, 1]^3
        return -0.5 * float(x @ x) if np.all((x >= 0) & (x <= 1)) else -math.inf

    draws = slice_sample(logp, np.full(3, 0.5), np.random.default_rng(1), burn_in=10, kept=500, thin=1)
    assert draws.shape == (500, 3)
    assert np.all((draws >= 0) & (draws <= 1))
    assert np.all(draws.std(axis=0) > 0.15)  # it moves (uniform on [0, 1] has sd 0.29)
    with pytest.raises(ValueError, match="zero posterior density"):
        slice_sample(logp, np.full(3, 2.0), np.random.default_rng(1), burn_in=1, kept=1, thin=1)


def test_members_for() -> None:
    assert [members_for(n) for n in (3, 32, 100, 101, 500, 501, 2000, 2001, 10_000)] == \
        [KEPT, KEPT, KEPT, 16, 16, 4, 4, 1, 1]


# ----------------------------------------------------------------------------- the mixture's predictions
@pytest.mark.parametrize("which", ["ensemble", "bounded_ensemble"])
def test_predict_is_the_equal_weight_mixture(which: str, request: pytest.FixtureRequest) -> None:
    ens: GPEnsemble = request.getfixturevalue(which)
    Xt = grid(12)
    sds = {}
    for noise in (False, True):
        means = np.array([m.predict(Xt, noise=noise)[0] for m in ens.members])
        var = np.array([m.predict(Xt, noise=noise)[1] ** 2 for m in ens.members])
        mixture_mean = means.mean(axis=0)
        mixture_var = (var + means**2).mean(axis=0) - mixture_mean**2
        mean, sd = ens.predict(Xt, noise=noise)
        np.testing.assert_allclose(mean, mixture_mean, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(sd**2, mixture_var, rtol=1e-9, atol=1e-12)
        # The mixture is wider than the average member: the spread of the members' means adds to it.
        assert np.all(sd**2 >= var.mean(axis=0) - 1e-12)
        sds[noise] = sd
    assert np.all(sds[True] >= sds[False])
    assert np.any(sds[True] > sds[False])
    np.testing.assert_array_equal(ens.predict_mean(Xt), ens.predict(Xt)[0])


# ----------------------------------------------------------------------------- fit_posterior
def test_kept_one_is_the_point_fit(data: tuple[np.ndarray, np.ndarray], ensemble: GPEnsemble) -> None:
    X, y = data
    single = fit_posterior(X, y, seed=0, kept=1)
    assert len(single.members) == 1
    assert single.members[0] is single.point
    # The same seeds give the same maximum-likelihood fit with or without the sampler after it.
    assert single.point.hyperparameters() == ensemble.point.hyperparameters()
    np.testing.assert_array_equal(single.predict(X[:5])[0], single.point.predict(X[:5])[0])
    assert "posterior" not in single.hyperparameters()
    assert "averaged" not in single.describe()


def test_members_are_posterior_draws_conditioned_on_all_points(data: tuple[np.ndarray, np.ndarray],
                                                              ensemble: GPEnsemble) -> None:
    X, y = data
    assert len(ensemble.members) == members_for(30) == KEPT
    for m in ensemble.members:
        np.testing.assert_array_equal(m.X, X)
        np.testing.assert_array_equal(m.y, y)
        assert m.warp is None
        assert (m.y_mean, m.y_std) == (ensemble.point.y_mean, ensemble.point.y_std)
    lengthscales = {tuple(m.lengthscales) for m in ensemble.members}
    noises = {m.noise_variance for m in ensemble.members}
    assert len(lengthscales) > 16 and len(noises) > 16  # the chain moves between kept draws
    assert f"averaged over {KEPT} posterior draws" in ensemble.describe()
    assert ensemble.X is ensemble.point.X and ensemble.dim == 2 and ensemble.warp is None
    # Every member still fits the data it conditions on.
    for m in ensemble.members[::8]:
        assert np.sqrt(np.mean((m.predict(X)[0] - y) ** 2)) < 0.1


def test_bounded_members_have_warps_and_predict_inside(bounded_data: tuple[np.ndarray, np.ndarray],
                                                       bounded_ensemble: GPEnsemble) -> None:
    X, y = bounded_data
    assert bounded_ensemble.warp is not None and bounded_ensemble.warp.bounds == UNIT
    shapes = set()
    for m in bounded_ensemble.members:
        assert m.warp is not None and m.warp.two_sided and m.warp.bounds == UNIT
        assert m.warp.eps == bounded_ensemble.point.warp.eps  # type: ignore[union-attr]  # bounded: it has a warp
        g = m.warp.forward(y)
        assert (m.y_mean, m.y_std) == pytest.approx((float(np.mean(g)), float(np.std(g))), rel=1e-12)
        np.testing.assert_array_equal(m.X, X)
        shapes.add((m.warp.a, m.warp.b))
    assert len(shapes) > 16  # the warp's shapes are sampled too
    Xt = grid(40)
    for noise in (False, True):
        mean, sd = bounded_ensemble.predict(Xt, noise=noise)
        assert np.all((mean > 0.0) & (mean < 1.0))
        assert np.all(np.isfinite(sd)) and np.all(sd >= 0) and np.all(sd <= 0.5)
    for m in bounded_ensemble.members[::4]:
        mean, _ = m.predict(Xt)
        assert np.all((mean > 0.0) & (mean < 1.0))


@pytest.mark.parametrize("which", ["ensemble", "bounded_ensemble"])
def test_hyperparameters_carry_the_posterior_summary(which: str, request: pytest.FixtureRequest) -> None:
    ens: GPEnsemble = request.getfixturevalue(which)
    hp = ens.hyperparameters()
    point = ens.point.hyperparameters()
    assert {k: v for k, v in hp.items() if k != "posterior"} == point
    post = hp["posterior"]
    assert post["draws"] == KEPT
    names, q05, median, q95 = post["names"], post["q05"], post["median"], post["q95"]
    assert len(names) == len(q05) == len(median) == len(q95)
    expected = ["t0.variance", "t0.lengthscale[0]", "t0.lengthscale[1]", "noise_variance"]
    inputs = ["input_warp[0].a", "input_warp[0].b", "input_warp[1].a", "input_warp[1].b"]
    # (this bounded data reaches its bound 1.0, so the warp has no ceiling below it to learn; the noise in the
    # metric's units follows the warp's shapes)
    bounded = ["warp.a", "warp.b", "metric_noise"] if which == "bounded_ensemble" else []
    assert names == expected + bounded + inputs
    assert np.all(np.array(q05) <= np.array(median)) and np.all(np.array(median) <= np.array(q95))
    assert np.all(np.array(q05) < np.array(q95))
    assert np.all(np.array(q05) > 0)  # variances, lengthscales, noise and shapes: all positive values
    # The quantiles are of the members' values (not of their logs).
    ls0 = [m.lengthscales[0] for m in ens.members]
    assert median[1] == pytest.approx(float(np.median(ls0)), rel=1e-12)


def test_sample_members_keeps_the_fit_when_there_is_nothing_to_sample(data: tuple[np.ndarray, np.ndarray],
                                                                      ensemble: GPEnsemble) -> None:
    assert sample_members(ensemble.point, seed=0, kept=1) == (ensemble.point,)
    X, y = data
    tiny = GPFit.matern(np.array([0.3, 0.3]), 1.0, 1e-2, float(y[:2].mean()), float(y[:2].std()), 0.0, X[:2], y[:2])
    assert sample_members(tiny, seed=0) == (tiny,)


# ----------------------------------------------------------------------------- calibration
def prior_draw(seed: int, n: int, Xt: np.ndarray, noise_sd: float) -> tuple[np.ndarray, ...]:
    """A Matern-5/2 GP draw (lengthscale 0.25): n noisy observations at Sobol points, and noisy truth at Xt."""
    rng = np.random.default_rng(seed)
    X = sobol_design(n, 2, seed=seed)
    A = np.vstack([X, Xt])
    K = KernelTerm((0, 1), np.array([0.25, 0.25]), 1.0)(A, A) + 1e-8 * np.eye(A.shape[0])
    f = np.linalg.cholesky(K) @ rng.standard_normal(A.shape[0])
    y = f[:n] + noise_sd * rng.standard_normal(n)
    truth = f[n:] + noise_sd * rng.standard_normal(Xt.shape[0])  # what a new trial there would give
    return X, y, truth


def test_posterior_mixture_is_calibrated_where_the_point_fit_is_overconfident() -> None:
    Xt = grid(20)
    ens_cover, point_cover = [], []
    for seed in (2, 3, 4, 6):
        X, y, truth = prior_draw(seed, 25, Xt, 0.05)
        ens = fit_posterior(X, y, seed=0, kept=KEPT)
        point = GPEnsemble(ens.point, (ens.point,))  # what fit_posterior(kept=1) returns
        covers = []
        for model in (ens, point):
            mean, sd = model.predict(Xt, noise=True)
            covers.append(float(np.mean(np.abs(truth - mean) <= 1.96 * sd)))
        ens_cover.append(covers[0])
        point_cover.append(covers[1])
    report = f"ensemble coverage {ens_cover}, maximum-likelihood coverage {point_cover}"
    assert all(0.8 <= c <= 1.0 for c in ens_cover), report
    assert all(e >= p - 0.02 for e, p in zip(ens_cover, point_cover, strict=True)), report
    # On average the mixture is much nearer the nominal 95 % than the single fit is.
    assert np.mean(ens_cover) >= 0.9, report
    assert np.mean(ens_cover) - np.mean(point_cover) >= 0.05, report


# ----------------------------------------------------------------------------- share / sample_posterior
def test_share_splits_members_disjointly_and_covers_them(ensemble: GPEnsemble) -> None:
    k = len(ensemble.members)
    for parts in (1, 2, 3, 5, 32):
        shares = [ensemble.share(part, parts) for part in range(parts)]
        ids = [[id(m) for m in s.members] for s in shares]
        flat = [i for s in ids for i in s]
        assert len(flat) == len(set(flat)) == k  # disjoint, and every member once
        assert set(flat) == {id(m) for m in ensemble.members}
        assert all(s.point is ensemble.point for s in shares)
        assert max(len(s) for s in ids) - min(len(s) for s in ids) <= 1  # as even as can be
    # More parts than members: every share is the whole mixture.
    for part in (0, 7, k + 3):
        assert ensemble.share(part, k + 8).members == ensemble.members


def test_sample_posterior_is_a_draw_from_the_mixture(ensemble: GPEnsemble) -> None:
    Xt = grid(3)
    samples = ensemble.sample_posterior(Xt, 640, seed=0)
    assert samples.shape == (640, 9)
    np.testing.assert_array_equal(samples, ensemble.sample_posterior(Xt, 640, seed=0))
    assert not np.array_equal(samples, ensemble.sample_posterior(Xt, 640, seed=1))
    mean, sd = ensemble.predict(Xt)
    np.testing.assert_array_less(np.abs(samples.mean(axis=0) - mean), 5 * sd / math.sqrt(640))
    np.testing.assert_allclose(samples.std(axis=0), sd, rtol=0.15)
    assert ensemble.sample_posterior(Xt, 1, seed=0).shape == (1, 9)


def test_bounded_samples_stay_inside(bounded_ensemble: GPEnsemble) -> None:
    Xt = grid(15)
    samples = bounded_ensemble.sample_posterior(Xt, 40, seed=0)
    assert samples.shape == (40, 225)
    assert np.all(np.isfinite(samples))
    assert np.all((samples >= 0.0) & (samples <= 1.0))


def test_isotropic_kernel_members_stay_isotropic(data: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = data
    ens = fit_posterior(X, y, seed=0, kernel="matern52", kept=KEPT)
    assert np.ptp(ens.point.lengthscales) == 0.0
    for m in ens.members:
        assert m.kernel_name == "matern52"
        assert np.ptp(m.lengthscales) == 0.0


def test_without_bounds_the_analysis_keeps_the_single_fit(data: tuple[np.ndarray, np.ndarray]) -> None:
    """No declared bounds: today's analysis, one maximum-likelihood fit (the averaged one hurts smooth maps)."""
    X, y = data
    ens = fit_posterior(X, y, seed=0)
    assert ens.members == (ens.point,) and "posterior" not in ens.hyperparameters()


def test_a_bounded_metric_below_its_bound_gets_a_ceiling_between_the_best_trial_and_the_bound() -> None:
    X = sobol_design(24, 2, seed=3)
    y = 0.6 + 0.35 * expit(15.0 * (X[:, 0] - 0.4))  # saturates at 0.95, below the bound 1
    ens = fit_posterior(X, y, seed=0, bounds=UNIT)
    assert "warp.top_logit" in ens.hyperparameters()["posterior"]["names"]
    tops = np.array([m.warp.top for m in ens.members])
    assert np.all((tops > y.max()) & (tops < 1.0)) and np.ptp(tops) > 0.001
    assert np.all(ens.sample_posterior(sobol_design(200, 2, seed=4), 16, seed=0) <= tops.max())


def test_a_chain_stranded_in_a_mode_of_negligible_mass_is_sampled_again() -> None:
    """Two modes of a 1-d density, the second 25 nats below the first: a chain that sits in it is replaced by
    one from the best chain's last draw, with as many draws; a chain within ``STRANDED_NATS`` is kept as it is."""
    def logp(x: np.ndarray) -> float:
        return float(np.logaddexp(-0.5 * ((x[0] - 0.0) / 0.3) ** 2, -25.0 - 0.5 * ((x[0] - 10.0) / 0.3) ** 2))

    rng = np.random.default_rng(0)
    main = slice_sample(logp, np.zeros(1), rng, burn_in=5, kept=16)
    near = slice_sample(logp, np.full(1, 0.5), rng, burn_in=5, kept=16)
    stranded = slice_sample(logp, np.full(1, 10.0), rng, burn_in=5, kept=12)  # width 1: it never steps to 0
    assert np.all(np.abs(stranded - 10.0) < 2.0)
    chains = _restart_stranded([main, near, stranded], logp, rng)
    assert chains[0] is main and chains[1] is near
    assert chains[2].shape == (12, 1) and np.all(np.abs(chains[2]) < 2.0)
    assert STRANDED_NATS < 25.0


def white_noise_density(x: np.ndarray) -> float:
    """A 1-d density over a log lengthscale: a real mode at 0.2 and a white-noise mode at 0.007, 4 nats heavier
    (as on IVR's first 30 points of the svm map, decision 0076)."""
    return float(np.logaddexp(-0.5 * ((x[0] - math.log(0.2)) / 0.3) ** 2,
                              4.0 - 0.5 * ((x[0] - math.log(0.007)) / 0.3) ** 2))


def test_a_chain_in_the_white_noise_mode_is_sampled_again_above_the_floor_however_heavy_it_is() -> None:
    """The nats rule keeps a white-noise chain that is heavier than the real one; the lengthscale rule replaces it
    from the other chain, and its new draws stay above ``WHITE_NOISE_LENGTHSCALE``."""
    rng = np.random.default_rng(0)
    real = slice_sample(white_noise_density, np.full(1, math.log(0.2)), rng, burn_in=5, kept=16)
    white = slice_sample(white_noise_density, np.full(1, math.log(0.007)), rng, burn_in=5, kept=16)
    assert np.all(np.exp(real) > 0.05) and np.all(np.exp(white) < 0.02)  # width 1: neither steps to the other
    assert _restart_stranded([real, white], white_noise_density, rng)[1] is white  # by nats alone: kept
    chains = _restart_stranded([real, white], white_noise_density, rng, shortest=lambda x: math.exp(x[0]))
    assert chains[0] is real
    assert chains[1].shape == (16, 1) and np.all(np.exp(chains[1]) >= WHITE_NOISE_LENGTHSCALE), chains[1].ravel()


def test_when_every_chain_is_white_noise_the_data_look_like_noise_and_the_chains_stay() -> None:
    rng = np.random.default_rng(1)
    chains = [slice_sample(white_noise_density, np.full(1, math.log(0.007)), rng, burn_in=5, kept=8)
              for _ in range(2)]
    kept = _restart_stranded(chains, white_noise_density, rng, shortest=lambda x: math.exp(x[0]))
    assert kept[0] is chains[0] and kept[1] is chains[1]
