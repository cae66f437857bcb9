"""The live map of a sweep (issue 19): the searcher's own GP, drawn over the dims it is most sensitive to.

The ground truth is the policy itself: the fit it hands out (``on_gp_fit``) is the one that
tagged its batch's points, the map's grids are that fit's predictions at the grid points
(built here independently of the map's code), and its numbers are :func:`loo_check`'s.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from sweeper.analysis.effect_test import ALPHA, effect_test
from sweeper.analysis.live_map import live_map, live_map_pngs
from sweeper.analysis.map_view import draw_map
from sweeper.search.ensemble import GPEnsemble
from sweeper.search.gp_batch import TAG_MEMBERS
from sweeper.search.grammar import parse_specs
from sweeper.search.loo import loo_check
from sweeper.search.policy import BatchFit, MultiversePolicy
from sweeper.search.settings import PolicySettings

#: Three continuous dims, of which ``z`` moves the metric least, and a choice: two facets.
SPACE = parse_specs({"x": "interval(0, 1)", "y": "tag(log, interval(1e-3, 1))", "z": "interval(0, 1)",
                     "m": "choice(a, b)"})
FAST = dict(n_candidates=256, n_integration=128, gp_restarts=1, seed=0)


def score(x: tuple[float, ...], m: str) -> float:
    return math.sin(5 * x[0]) + 2 * x[1] + 0.05 * x[2] + (0.5 if m == "b" else 0.0)


def run_policy(space=SPACE, f=score, bounds=None) -> tuple[MultiversePolicy, list[BatchFit]]:
    """An ivr sweep of 16 (8 Sobol, then batches of 4), each batch asked whole before its results come in
    (so no batch is re-planned); trial #3 fails."""
    policy = MultiversePolicy(space, PolicySettings(strategy="ivr", num_trials=16, n_initial=8, batch_size=4,
                                                    metric_bounds=bounds, **FAST))
    fits: list[BatchFit] = []
    policy.on_gp_fit = fits.append
    for size in (8, 4, 4):
        asked = [policy.ask() for _ in range(size)]
        for s in asked:
            policy.tell(s.index, math.nan if s.index == 3 else f(s.x, s.params.get("m", "a")))
    return policy, fits


@pytest.fixture(scope="module")
def swept() -> tuple[MultiversePolicy, list[BatchFit]]:
    return run_policy()


def test_the_policy_hands_out_the_fit_that_tagged_each_batch(swept) -> None:
    policy, fits = swept
    assert [f.batch for f in fits] == [1, 2]  # one per GP batch
    for fit in fits:
        batch = [s for s in policy.suggestions if s.batch == fit.batch]
        mean, sd = fit.gp.predict(np.array([s.x for s in batch]), noise=True)  # of the trial's result
        np.testing.assert_allclose(mean, [s.predicted_mean for s in batch], rtol=1e-12)
        np.testing.assert_allclose(sd, [s.predicted_sd for s in batch], rtol=1e-12)
        finished_before = [s for s in policy.suggestions if s.batch < fit.batch]
        assert fit.gp.X.shape[0] == len(finished_before) - 1  # every result in but the failed one
        np.testing.assert_array_equal(fit.failed, [policy.suggestions[3].x])


def test_the_map_is_the_searchers_gp_on_the_grid_and_its_numbers_are_loo_checks(swept) -> None:
    _, fits = swept
    fit = fits[1]
    live = live_map(SPACE, fit, resolution=7)
    assert live.view.columns == (0, 1)  # z, the dim the metric hardly depends on, is left at its centre
    cm = live.view.contour
    assert cm is not None and (cm.x_dim, cm.y_dim) == ("x", "y") and cm.y_log
    t = np.linspace(0.0, 1.0, 7)
    gx, gy = np.meshgrid(t, t)
    for k, label in enumerate(["m=a", "m=b"]):
        P = np.column_stack([gx.ravel(), gy.ravel(), np.full(49, 0.5), np.full(49, (k + 0.5) / 2)])
        mean, sd = fit.gp.predict(P, noise=True)
        np.testing.assert_allclose(cm.mean[label].ravel(), mean, rtol=1e-12)
        np.testing.assert_allclose(cm.sd[label].ravel(), sd, rtol=1e-6)
        np.testing.assert_allclose(cm.mean[label].ravel(), fit.gp.predict(P)[0], rtol=1e-12)  # no bounds: same mean
    np.testing.assert_allclose(cm.y, np.geomspace(1e-3, 1.0, 7))
    effect = effect_test(SPACE, fit.gp.X, fit.gp.y, warp=None, kernel=fit.gp.kernel_name)
    assert effect.shown  # sin(5x) + 2y: an effect, shown on 11 trials
    assert live.metrics() == {**loo_check(fit.gp).metrics("live_"), "live_trials": 11.0,
                              "live_effect_p": effect.p_value, "live_effect_log10_K": effect.log10_K}
    assert {"live_loo_coverage95", "live_loo_rmse"} <= set(live.metrics())
    np.testing.assert_array_equal(live.trials.kept, fit.gp.X)
    np.testing.assert_array_equal(live.trials.excluded, fit.failed)


def test_a_bounded_metrics_map_is_the_bounded_fits_and_stays_inside_the_bounds() -> None:
    policy, fits = run_policy(f=lambda x, m: 0.5 + 0.45 * math.sin(5 * x[0]) * x[1], bounds=[0, 1])
    fit = fits[0]
    assert fit.gp.warp is not None  # the model that tags the points, warped into [0, 1] ...
    # ... the analysis's posterior mixture, whose predictions the prospective check scores
    assert isinstance(fit.gp, GPEnsemble) and len(fit.gp.members) == TAG_MEMBERS
    batch = [s for s in policy.suggestions if s.batch == fit.batch]
    mean, sd = fit.gp.predict(np.array([s.x for s in batch]), noise=True)
    np.testing.assert_allclose([s.predicted_sd for s in batch], sd, rtol=1e-12)
    live = live_map(SPACE, fit, resolution=5)
    grids = np.concatenate([g.ravel() for g in live.view.contour.mean.values()])
    assert grids.min() > 0.0 and grids.max() < 1.0
    assert live.fit.bounds is not None and live.fit.bounds.as_list() == [0, 1]


def test_the_pngs_are_named_so_they_sort_by_batch(swept) -> None:
    _, fits = swept
    first = live_map_pngs(live_map(SPACE, fits[0], resolution=5), "score", digits=4)
    assert sorted(first) == ["batch_0001_mean.png", "batch_0001_sd.png"]
    for data in first.values():
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and 10_000 < len(data) < 150_000
    assert sorted(live_map_pngs(live_map(SPACE, fits[1], resolution=5), "score")) == [
        "batch_002_mean.png", "batch_002_sd.png"]  # padded to 3 digits by default


def test_the_figures_say_which_batch_and_how_many_trials(swept) -> None:
    _, fits = swept
    live = live_map(SPACE, fits[1], resolution=5)
    figures = draw_map(live.view, SPACE, live.trials, "score", note=live.note())
    assert [f._suptitle.get_text() for f in figures.values()] == [
        f"score: posterior {what} over x x y\n(after batch 2: 11 trials; others at their centre)"
        for what in ("mean", "sd")]
    facets = [ax for ax in figures["mean"].axes if ax.get_title()]
    assert [ax.get_title() for ax in facets] == ["m=a", "m=b"]
    dots = sum(len(line.get_xdata()) for ax in facets for line in ax.lines if line.get_marker() == "o")
    crosses = sum(len(line.get_xdata()) for ax in facets for line in ax.lines if line.get_marker() == "x")
    assert (dots, crosses) == (11, 1)


def test_one_continuous_dim_gives_one_map_figure() -> None:
    space = parse_specs({"x": "interval(0, 1)", "m": "choice(a, b)"})
    _, fits = run_policy(space, f=lambda x, m: math.sin(5 * x[0]) + (0.5 if m == "b" else 0.0))
    live = live_map(space, fits[0])
    assert live.view.columns == (0,) and live.view.line is not None
    assert list(live_map_pngs(live, "score")) == ["batch_001_map.png"]


def test_a_pickled_policy_keeps_its_state_but_not_its_hooks(swept) -> None:
    """Tune pickles the searcher into its experiment state: a live map's queues must not go with it."""
    import json
    import pickle

    policy, _ = swept
    hooks = policy.on_gp_fit, policy.on_bayes_factor
    policy.on_gp_fit = policy.on_bayes_factor = lambda event: None  # a lambda does not pickle
    try:
        copy = pickle.loads(pickle.dumps(policy))
    finally:
        policy.on_gp_fit, policy.on_bayes_factor = hooks
    assert copy.on_gp_fit is None and copy.on_bayes_factor is None
    assert json.dumps(copy.state_dict()) == json.dumps(policy.state_dict())  # (a failed trial's NaN included)


def test_while_the_trials_show_no_effect_the_title_says_the_colours_may_be_noise() -> None:
    """A metric that depends on no choice (seed noise only) still gets a coloured map; its live map says the
    trials do not show any effect yet, and logs the test's p-value. A constant one says there is nothing to map."""
    rng = np.random.default_rng(1)
    _, fits = run_policy(f=lambda x, m: 0.8 + 0.05 * rng.normal())
    live = live_map(SPACE, fits[1], resolution=5)
    assert live.metrics()["live_effect_p"] > ALPHA and not live.effect.shown
    assert live.note() == (f"after batch 2: 11 trials; others at their centre; no effect of any choice shown yet "
                           f"(p = {live.effect.p_value:.2f}): colours may be noise")
    title = draw_map(live.view, SPACE, live.trials, "score", note=live.note())["mean"]._suptitle.get_text()
    assert "no effect of any choice shown yet" in title
    _, fits = run_policy(f=lambda x, m: 0.8)
    constant = live_map(SPACE, fits[1], resolution=5)
    assert constant.note().endswith("; every score equal so far: nothing to map")
    assert "live_effect_p" not in constant.metrics() and constant.metrics()["live_trials"] == 11.0
