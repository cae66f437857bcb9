"""Unit tests for the checks that LOO cannot do: copies and configurations leave together, the
searcher's prospective predictions are scored, and the verdict is the worst judged check."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sweeper.search.calibration import LOCO, LOO, PROSPECTIVE, Calibration, calibration, prospective_check
from sweeper.search.design import sobol_design
from sweeper.search.gp import GPFit
from sweeper.search.gp_fit import fit_gp
from sweeper.search.loo import loo_check, loo_gaussian, replicate_groups
from tests.unit.test_loo import by_hand, prior_sample, smooth_2d

pytestmark = pytest.mark.usefixtures("one_blas_thread")


def brute_force_group(gp: GPFit, group: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The group predicted (noise included, modelled scale) by a GP without any of it: same hyperparameters."""
    keep = np.setdiff1d(np.arange(gp.X.shape[0]), group)
    held_out = GPFit(gp.terms, gp.noise_variance, gp.y_mean, gp.y_std, 0.0, gp.X[keep], gp.y[keep],
                     gp.kernel_name, gp.warp)
    return held_out.predict_warped(gp.X[group], noise=True)


def seeded_sweep(n_configs: int, n_seeds: int, *, identical: bool, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Configurations (x0, x1) each run under ``n_seeds`` seeds (column 2); ``identical``: the task ignores its seed."""
    configs = sobol_design(n_configs, 2, seed=seed)
    seeds = (np.arange(n_seeds) + 0.5) / n_seeds
    X = np.array([[*c, s] for c in configs for s in seeds])
    noise = 0.0 if identical else 0.05 * np.random.default_rng(seed).standard_normal(X.shape[0])
    return X, smooth_2d(X[:, :2]) + noise


def test_group_predictions_equal_refitting_without_the_group() -> None:
    X, y = seeded_sweep(8, 3, identical=False)
    gp = by_hand(X, y, None, [0.4, 0.5, 2.0], 1.0, 2e-3)
    _, configs = replicate_groups(X, y, [2])
    assert len(configs) == 8 and all(g.size == 3 for g in configs)
    mean, sd = loo_gaussian(gp, configs)
    for g in configs:
        expected_mean, expected_sd = brute_force_group(gp, g)
        np.testing.assert_allclose(mean[g], expected_mean, rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(sd[g], expected_sd, rtol=1e-6)
    # Leaving a configuration's replicates out together predicts worse than one at a time.
    one_by_one, _ = loo_gaussian(gp)
    z = gp.modelled()
    assert np.mean((mean - z) ** 2) > 2 * np.mean((one_by_one - z) ** 2)


def test_bit_identical_copies_leave_together_and_count_once() -> None:
    # A task that ignores its seed: every configuration's 4 "measurements" are one value repeated. One at a
    # time, each is predicted by its own copies, perfectly; that is how LOO certified seeds/cpu.
    X, y = seeded_sweep(6, 4, identical=True)
    gp = by_hand(X, y, None, [0.05, 0.05, 3.0], 1.0, 1e-8)  # overconfident between configurations
    copies, configs = replicate_groups(X, y, [2])
    assert len(copies) == len(configs) == 6
    naive = loo_check(gp)  # no replicate columns: every trial its own configuration
    assert naive.n == 24 and naive.coverage95 == 1.0
    check = loo_check(gp, [2])
    assert check.n == 6 and check.n_total == 24  # distinct measurements
    assert not check.judged and check.verdict() == "too few trials"
    assert "18 bit-identical copies counted once" in check.numbers()


def test_leave_one_configuration_out_fails_where_leave_one_out_is_fooled_by_replicates() -> None:
    # Replicates differ by seed noise, but each configuration's others stay in a LOO fit and vouch for it.
    X, y = seeded_sweep(12, 3, identical=False, seed=4)
    y = prior_sample(X[:, :2], 0.08, seed=4, noise_sd=0.0) + 0.02 * np.random.default_rng(4).standard_normal(36)
    gp = by_hand(X, y, None, [3.0, 3.0, 5.0], 1.0, 4e-4)  # too smooth for rough data, knows the seed noise
    loo = loo_check(gp, [2])
    loco = loo_check(gp, [2], by_configuration=True)
    assert loo.kind == LOO and loco.kind == LOCO and loco.groups == 12
    assert loco.judged and loco.verdict() == "failed"
    assert loco.coverage95 < loo.coverage95


def test_too_few_configurations_gives_no_verdict() -> None:
    X, y = seeded_sweep(3, 6, identical=False)
    check = loo_check(by_hand(X, y, None, [0.4, 0.5, 2.0], 1.0, 2e-3), [2], by_configuration=True)
    assert check.n == 18 and check.groups == 3
    assert not check.judged and check.verdict() == "too few trials"
    assert "3 configuration(s), fewer than 5" in check.sentence("this map")


def test_prospective_check_scores_the_predictions_as_gaussians() -> None:
    rng = np.random.default_rng(0)
    mean = rng.uniform(0.5, 0.9, 200)
    sd = np.full(200, 0.02)
    calibrated = prospective_check(mean + sd * rng.standard_normal(200), mean, sd)
    assert calibrated is not None and calibrated.kind == PROSPECTIVE and calibrated.n == 200
    assert 0.9 <= calibrated.coverage95 <= 0.99 and calibrated.verdict() == "passed"
    overconfident = prospective_check(mean + 5 * sd * rng.standard_normal(200), mean, sd)
    assert overconfident is not None and overconfident.coverage95 < 0.5 and overconfident.verdict() == "failed"
    assert overconfident.max_abs_residual > 5


def test_prospective_check_skips_trials_without_a_prediction_and_handles_zero_sd() -> None:
    y = np.array([0.8, 0.9, 0.7, 0.6])
    check = prospective_check(y, [0.8, np.nan, 0.5, 0.6], [0.0, 0.1, 0.0, 0.1])
    assert check is not None and check.n == 3  # the trial without a prediction is not scored
    # sd 0 holds only its own value: 0.8 is inside, 0.7 (predicted 0.5 exactly) is not.
    assert check.coverage95 == pytest.approx(2 / 3)
    assert math.isinf(check.max_abs_residual) or check.max_abs_residual > 6
    assert prospective_check(y, [np.nan] * 4, [np.nan] * 4) is None


def test_recorded_quantiles_decide_inside_and_outside_and_a_gaussians_reproduce_its_pit() -> None:
    """The predictive's own quantiles (2.5, 16, 50, 84, 97.5 %): a result is inside its 95 % interval exactly when it
    lies between the ends, ends included. A Gaussian's quantiles give back the Gaussian's PIT everywhere (its tails
    too: past 1.96 sd the residual goes on with the slope of the 84-97.5 % stretch, as a Gaussian's does)."""
    from scipy.stats import norm

    from sweeper.search.calibration import quantile_pit
    from sweeper.search.suggestion import PREDICTED_PROBS

    y = np.array([-3.0, -1.96, -0.7, 0.0, 0.4, 1.5, 2.2, 4.0])
    gaussian = np.tile(norm.ppf(PREDICTED_PROBS), (y.size, 1))
    np.testing.assert_allclose(quantile_pit(y, gaussian), norm.cdf(y), rtol=1e-9)
    # A skewed predictive near a bound: mean 0.80, sd 0.157, but the model's 97.5 % quantile is 0.986.
    skewed = [0.43, 0.65, 0.84, 0.96, 0.986]
    q = np.array([skewed, skewed, skewed, [0.68, 0.96, 0.99, 1.0, 1.0], [0.5, 0.5, 0.5, 0.5, 0.5]])
    results = np.array([1.0, 0.986, 0.43, 1.0, 0.5])
    mean, sd = np.array([0.80, 0.80, 0.80, 0.97, 0.5]), np.array([0.157, 0.157, 0.157, 0.09, 0.0])
    read = prospective_check(results, mean, sd, quantiles=q)
    as_gaussians = prospective_check(results, mean, sd)
    assert read is not None and as_gaussians is not None
    # 1.0 is past the model's 97.5 % (as a Gaussian it is inside: 0.80 + 1.96 x 0.157 = 1.11); the ends are inside;
    # 1.0 where the model puts more than 2.5 % of its mass on the bound is inside; no spread holds only its value.
    np.testing.assert_array_equal((read.pit >= 0.025) & (read.pit <= 0.975), [False, True, True, True, True])
    # As Gaussians the first is inside, and 0.43, the model's own 2.5 % quantile, is 2.4 sd below the mean: outside.
    np.testing.assert_array_equal((as_gaussians.pit >= 0.025) & (as_gaussians.pit <= 0.975),
                                  [True, True, False, True, True])
    # A row without quantiles (NaN: recorded before they were) is read as a Gaussian, as before.
    mixed = prospective_check(results, mean, sd, quantiles=np.where(np.arange(5)[:, None] == 0, np.nan, q))
    assert mixed is not None and mixed.coverage95 == 1.0


def test_predictions_made_from_less_than_half_the_trials_are_not_scored() -> None:
    """The first GP batch's forecasts come from a fit on the Sobol design alone: they judge that fit, not the map's.

    24 predictions made from 7, 8, ..., 30 trials of a 32-trial sweep: the first 8 miss by 3 sd, the rest are
    exact. Scored as one, the check fails (67 %); scored as forecasts of the 32-trial model, the 15 made from
    at least 16 trials pass, and the sentence says what was left out.
    """
    y, sd, made = np.zeros(24), np.ones(24), np.arange(7, 31)
    mean = np.where(made < 15, 3.0, 0.0)
    assert prospective_check(y, mean, sd).verdict() == "failed"
    judged = prospective_check(y, mean, sd, made, n_model=32)
    assert judged is not None and (judged.n, judged.earlier, judged.earlier_below) == (15, 9, 16)
    assert judged.verdict() != "failed" and "9 earlier, made from fewer than 16 trials, not scored" in judged.numbers()
    assert judged.summary()["earlier_not_scored"] == 9
    # Too few made from half the trials: the 10 made from the most are scored (a verdict is still given).
    latest = prospective_check(y, mean, sd, made, n_model=60)
    assert latest is not None and (latest.n, latest.earlier_below) == (10, 21) and latest.judged
    # Predictions without a record of their model (sweeps from before the tag) are all scored; so are a few.
    assert prospective_check(y, mean, sd, np.full(24, np.nan), n_model=32).n == 24
    assert prospective_check(y[:8], mean[:8], sd[:8], made[:8], n_model=32).n == 8


def test_the_verdict_is_the_worst_judged_check_and_says_which_failed() -> None:
    X = sobol_design(40, 2, seed=1)
    y = prior_sample(X, 0.3, seed=1, noise_sd=0.05)
    gp = fit_gp(X, y, seed=0)
    rng = np.random.default_rng(1)
    m = rng.uniform(size=20)
    good = prospective_check(m + 0.01 * rng.standard_normal(20), m, np.full(20, 0.01))
    bad = prospective_check(m + 0.2, m, np.full(20, 0.01))
    few = prospective_check(m[:5] + 0.2, m[:5], np.full(5, 0.01))
    passed = calibration(gp, [], good)
    assert [c.kind for c in passed.checks] == [LOO, LOCO, PROSPECTIVE]
    assert passed.verdict() in ("passed", "conservative") and "passed its predictive checks" in passed.sentence("x")
    failed = calibration(gp, [], bad)
    assert failed.verdict() == "failed" and not failed.ok
    sentence = failed.sentence("these maps")
    assert "Warning" in sentence and "failed its prospective check" in sentence and "bounds" in sentence
    summary = failed.summary("these maps")
    assert summary["verdict"] == "failed"
    assert {k: v["verdict"] for k, v in summary["checks"].items()} == {
        LOO: passed.checks[0].verdict(), LOCO: passed.checks[1].verdict(), PROSPECTIVE: "failed"}
    assert failed.metrics("m_")["m_calibration_failed"] == 1.0
    assert failed.metrics("m_")["m_prospective_coverage95"] == 0.0
    # A check without enough trials does not count: the verdict is the judged checks'.
    assert calibration(gp, [], few).verdict() == passed.verdict()
    assert Calibration(()).verdict() == "too few trials"
    assert "m_calibration_failed" not in Calibration(()).metrics("m_")


# ----------------------------------------------------------------------------- a sweep's replicate dims
def test_a_seed_only_sweep_counts_distinct_measurements_and_gives_no_verdict() -> None:
    # seeds/cpu with a task that ignores threads and determinism: 8 seeds x 4 bit-identical copies.
    from sweeper.analysis.calibration import replicate_columns
    from sweeper.analysis.multiverse import fit_multiverse
    from sweeper.search.grammar import parse_specs

    space = parse_specs({"env.threads": "choice(1, 2)", "env.deterministic": "choice(true, false)",
                         "env.seed": "range(0, 8)"})
    assert replicate_columns(space) == [0, 1, 2]
    points = [{"env.threads": t, "env.deterministic": d, "env.seed": s}
              for t in (1, 2) for d in (True, False) for s in range(8)]
    y = np.array([0.9 + 0.01 * ((p["env.seed"] * 5) % 8) for p in points])
    fit = fit_multiverse(space, space.to_unit(points), y, seed=0)
    checks = calibration(fit.gp, replicate_columns(space))
    loo, loco = checks.checks
    assert (loo.n, loo.n_total) == (8, 32) and loco.groups == 1
    assert checks.verdict() == "too few trials"
    # Counted as 32 independent trials, each predicted by its own copies, it would pass.
    assert loo_check(fit.gp).n == 32 and loo_check(fit.gp).verdict() in ("passed", "conservative")


def test_only_env_and_seed_dims_are_replicate_dims() -> None:
    from sweeper.analysis.calibration import replicate_columns
    from sweeper.search.grammar import parse_specs

    space = parse_specs({"lr": "tag(log, interval(1e-4, 1))", "seed": "range(0, 4)", "env.threads": "choice(1, 2)",
                         "model": "choice(a, b)"})
    assert replicate_columns(space) == [1, 2]
    assert replicate_columns(None) == []


# ----------------------------------------------------------------------------- a metric that reaches its bound
def test_a_band_reaches_the_bound_where_trials_score_exactly_on_it() -> None:
    # A third of the space scores exactly 1.0 (the wine map's plateau): the band there must include 1.0, not
    # stop 2e-5 short of it, and nothing may leave [0, 1].
    from sweeper.search.hyperposterior import fit_posterior
    from sweeper.search.warping import MetricBounds

    X = sobol_design(24, 1, seed=0)
    f = lambda x: np.minimum(1.0, 0.55 + 0.7 * x[:, 0])  # noqa: E731 - a one-line test function
    y = np.round(f(X) * 54) / 54  # a 54-sample test set's accuracies
    assert np.sum(y == 1.0) >= 6
    gp = fit_posterior(X, y, seed=0, bounds=MetricBounds(0.0, 1.0), kept=16)
    grid = np.linspace(0.0, 1.0, 101)[:, None]
    low, high = gp.band(grid)
    plateau = grid[:, 0] >= 0.7  # on 1.0 with a margin from its edge at 0.64
    assert np.all(high[plateau] == 1.0)
    assert np.all((low >= 0.0) & (high <= 1.0))
    truth = np.round(f(grid) * 54) / 54
    inside = (truth >= low) & (truth <= high)
    assert inside[plateau].all() and inside.mean() >= 0.8  # off the plateau: a staircase of 1/54 steps


@pytest.mark.parametrize(("inside", "n", "verdict"), [(20, 24, "passed"), (19, 24, "failed"), (27, 32, "passed"),
                                                      (26, 32, "failed"), (84, 100, "failed"), (86, 100, "passed")])
def test_a_check_fails_below_85_percent_only_when_chance_cannot_explain_it(inside: int, n: int, verdict: str) -> None:
    # 20 of 24 inside happens 12 % of the time for a calibrated model: not evidence. 19 of 24: 0.6 %.
    y = np.zeros(n)
    mean = np.where(np.arange(n) < inside, 0.0, 3.0)  # outside: |z| = 3
    check = prospective_check(y, mean, np.ones(n))
    assert check is not None and check.inside95 == inside
    assert check.verdict() == verdict


def test_the_advice_asks_for_bounds_only_where_the_metric_has_none() -> None:
    from sweeper.search.hyperposterior import fit_posterior
    from sweeper.search.warping import MetricBounds

    X = sobol_design(16, 1, seed=0)
    y = 0.5 + 0.4 * np.sin(4 * X[:, 0])
    bad = prospective_check(y[:12], y[:12] + 0.3, np.full(12, 0.01))
    unbounded = calibration(fit_gp(X, y, seed=0), [], bad)
    bounded = calibration(fit_posterior(X, y, seed=0, bounds=MetricBounds(0.0, 1.0), kept=4), [], bad)
    assert unbounded.verdict() == bounded.verdict() == "failed"
    assert "metric_bounds" in unbounded.sentence("x") and "metric_bounds" not in bounded.sentence("x")
    assert "more trials" in bounded.sentence("x") and "--kernel" in bounded.sentence("x")


def test_a_single_fit_gets_no_allowance_for_chance_and_a_mixture_does() -> None:
    from sweeper.search.ensemble import GPEnsemble

    X = sobol_design(40, 2, seed=1)
    y = prior_sample(X, 0.3, seed=1, noise_sd=0.05)
    gp = fit_gp(X, y, seed=0)
    twenty_of_24 = prospective_check(np.zeros(24), np.where(np.arange(24) < 20, 0.0, 3.0), np.ones(24))
    assert twenty_of_24 is not None and twenty_of_24.verdict() == "passed"  # 12 % by chance: no evidence
    single = calibration(gp, [], twenty_of_24)
    assert single.check(PROSPECTIVE).verdict() == "failed" and single.verdict() == "failed"
    mixture = calibration(GPEnsemble(gp, (gp, gp)), [], twenty_of_24)
    assert mixture.check(PROSPECTIVE).verdict() == "passed"
