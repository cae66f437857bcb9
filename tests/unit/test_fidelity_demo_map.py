"""The demo's own map, against its truth: the report's curve and the multiverse map hold it (issue 15).

The ground truth is the committed 40 x 40 grid of the demo's SVC test accuracy over its space
(``bench/data/map_svm.npz``, made by ``python -m bench.ml_maps``), so no SVC is fitted here:
each trial of the sweep reads the grid. Three seeds of the demo's ``ivr`` sweep (8 Sobol
points, three batches of 8; the points of its declared bounds [0, 1], which only tag them, see
:func:`demo_sweep`) are driven through the searcher's policy, then analysed with the functions
``sweeper report`` and ``sweeper multiverse`` call:

- the surrogate expected-max curve is within 0.02 of the true random-search curve at every
  n = 1..32, and the truth lies inside its 95 % band for at least 90 % of them;
- the map's ``mean ± 1.96 sd`` holds at least 85 % of the 1,600 grid points' truth in each
  sweep, and at most 99 % on average over the three (92.6-94.7 %; seed 2's held 99.5 % while
  a stranded chain of the sampler drew a flat map, :func:`test_no_chain_of_the_mixture_is_stranded_in_a_flat_map`);
- nothing shown leaves [0, 1].

The same trials under the model the analysis used before bounds (a single maximum-likelihood
fit of the raw accuracies) miss these figures, as the issue measured.

These three seeds are the issue's, not the model's best: on 15 seeds of the same sweep the band
holds the true curve for >= 90 % of n on 11 (before and after the sampler's stranded chains were
restarted); on the other four its lower edge sits at the best trial's score at large n, 0.0005-0.004
above the truth (docs/decisions/0068-restart-stranded-chains.md).
"""

from __future__ import annotations

import numpy as np
import pytest

from bench.ml_maps import MAPS, true_curve, truth_at
from sweeper.analysis.multiverse import contour_map, fit_multiverse, snap
from sweeper.report.surrogate import surrogate_curve
from sweeper.search.policy import MultiversePolicy
from sweeper.search.settings import PolicySettings
from sweeper.search.warping import MetricBounds

pytestmark = pytest.mark.usefixtures("one_blas_thread")

DEMO = MAPS["svm"]
BOUNDS = MetricBounds(0.0, 1.0)
RESOLUTION = 40




def demo_sweep(seed: int, num_trials: int = 32, metric_bounds: list[float] | None = None,
               ) -> tuple[np.ndarray, np.ndarray]:
    """The demo's ivr sweep (conf/svm.yaml's settings, deterministic batches) on the cached truth.

    Its points are those of the demo's bounded metric (``metric_bounds=[0, 1]``) without them: ``ivr``
    chooses on the raw-scale fit, and the bounds only add the posterior mixture that tags each chosen
    point with a prediction (docs/decisions/0013-ivr-chooses-on-the-raw-scale.md), which these tests do
    not read and which cost 90 % of the sweeps' time. :func:`test_the_demo_sweeps_points_are_its_bounded_sweeps`
    holds them to that. NOTE: docs/decisions/0050-test-time-cuts.md
    """
    policy = MultiversePolicy(DEMO.space, PolicySettings(
        strategy="ivr", num_trials=num_trials, n_initial=8, batch_size=8, seed=seed, deterministic=True,
        metric_bounds=metric_bounds))
    X, y = [], []
    while (s := policy.ask()) is not None:
        value = float(truth_at("svm", np.array(s.x)[None, :])[0])
        policy.tell(s.index, value)
        X.append(s.x)
        y.append(value)
    return np.array(X), np.array(y)


@pytest.fixture(scope="module")
def sweeps() -> dict[int, tuple[np.ndarray, np.ndarray]]:
    return {seed: demo_sweep(seed) for seed in (0, 1, 2)}


def test_the_demo_sweeps_points_are_its_bounded_sweeps(sweeps) -> None:
    """The sweeps above leave out the demo's bounds: with them (and their tagging fits), the first GP batch is
    the very same points, as are the values."""
    X, y = sweeps[0]
    X_bounded, y_bounded = demo_sweep(0, num_trials=16, metric_bounds=[0, 1])
    assert np.array_equal(X_bounded, X[:16]) and np.array_equal(y_bounded, y[:16])


@pytest.fixture(scope="module")
def truth() -> dict[str, np.ndarray]:
    t = np.linspace(0.0, 1.0, RESOLUTION)
    gx, gy = np.meshgrid(t, t)  # contour_map's grid: rows over gamma, columns over C
    grid = snap(DEMO.space, np.column_stack([gx.ravel(), gy.ravel()]))
    return {"curve": true_curve("svm", 32), "map": truth_at("svm", grid).reshape(RESOLUTION, RESOLUTION)}


def figures(X: np.ndarray, y: np.ndarray, truth: dict[str, np.ndarray], bounds: MetricBounds | None,
            kept: int | None = None) -> dict[str, float]:
    """The issue's four figures for one sweep, from the report's curve and the multiverse map."""
    curve = surrogate_curve(X, y, bounds=bounds, seed=0).curve if kept is None else None
    if curve is None:  # the single-fit model: the report's GP with one member
        from sweeper.analysis.expected_max import surrogate_expected_max
        from sweeper.search.design import random_design
        from sweeper.search.gp_fit import fit_gp

        gp = fit_gp(X, y, seed=[0, 0])
        samples = np.vstack([gp.sample_posterior(random_design(1000, 2, [0, 1, b]), 20, [0, 2, b]) for b in range(10)])
        curve = surrogate_expected_max(samples, n_max=32)
    fit = fit_multiverse(DEMO.space, X, y, seed=0, bounds=bounds, kept=kept)
    cm = contour_map(fit, 0, 1, resolution=RESOLUTION)
    mean, sd = cm.mean[""], cm.sd[""]
    t = truth["map"]
    if kept == 1:  # the single fit's map: its latent sd, as the analysis drew it before
        sd = cm.sd_latent[""]  # type: ignore[index]  # a single fit has it
    return {
        "curve_max_error": float(np.max(np.abs(curve.mean - truth["curve"]))),
        "curve_in_band": float(np.mean((truth["curve"] >= curve.low) & (truth["curve"] <= curve.high))),
        "map_coverage": float(np.mean(np.abs(mean - t) <= 1.96 * sd)),
        "shown_min": float(min(curve.low.min(), mean.min())),
        "shown_max": float(max(curve.high.max(), mean.max())),
    }


@pytest.fixture(scope="module")
def bounded_figures(sweeps, truth) -> dict[int, dict[str, float]]:
    return {seed: figures(*sweeps[seed], truth, BOUNDS) for seed in sweeps}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_demo_maps_curve_and_band_hold_the_truth(seed: int, bounded_figures) -> None:
    f = bounded_figures[seed]
    assert f["curve_max_error"] <= 0.02, f
    assert f["curve_in_band"] >= 0.90, f
    assert f["map_coverage"] >= 0.85, f
    assert f["shown_min"] >= 0.0 and f["shown_max"] <= 1.0, f


def test_the_demo_maps_band_is_not_wider_than_it_needs_be_on_average(bounded_figures) -> None:
    assert np.mean([f["map_coverage"] for f in bounded_figures.values()]) <= 0.99, bounded_figures


def test_the_single_raw_fit_misses_the_demo_maps_truth(sweeps, truth) -> None:
    """What the issue measured: without bounds, one maximum-likelihood fit overshoots and is overconfident."""
    misses = []
    for seed in (0, 1, 2):
        X, y = sweeps[seed]
        f = figures(X, y, truth, None, kept=1)
        misses.append(f["shown_max"] > 1.0 or f["curve_in_band"] < 0.9 or not 0.85 <= f["map_coverage"] <= 0.99)
    assert all(misses)


def test_no_chain_of_the_mixture_is_stranded_in_a_flat_map(sweeps, monkeypatch) -> None:
    """Seed 2's sweep is one where a chain of the sampler falls into a white-noise mode (one lengthscale at
    the box's floor, 15 nats below the other chains; it drew a flat map): it is sampled again, so every
    chain of the mixture draws the map. Without the restart the same fit keeps it, which this test checks
    too, so the sweep still exercises the fault. NOTE: docs/decisions/0068-restart-stranded-chains.md"""
    from sweeper.search import hyperposterior
    from sweeper.search.hyper_vector import pack

    X, y = sweeps[2]

    def chains(ensemble) -> tuple[list[float], float]:
        logp = hyperposterior._log_posterior(ensemble.point, X, y)
        per_chain = np.array_split(np.arange(len(ensemble.members)), hyperposterior.CHAINS)
        mean_logp = [float(np.mean([logp(pack(ensemble.members[i])) for i in rows])) for rows in per_chain]
        return mean_logp, min(float(np.min(m.lengthscales)) for m in ensemble.members)

    mean_logp, shortest = chains(hyperposterior.fit_posterior(X, y, seed=0, bounds=BOUNDS))
    assert max(mean_logp) - min(mean_logp) <= hyperposterior.STRANDED_NATS and shortest > 0.01, mean_logp
    monkeypatch.setattr(hyperposterior, "STRANDED_NATS", np.inf)
    mean_logp, shortest = chains(hyperposterior.fit_posterior(X, y, seed=0, bounds=BOUNDS))
    assert max(mean_logp) - min(mean_logp) > 10.0 and shortest < 0.01, mean_logp
