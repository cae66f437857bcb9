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
  sweep, and at most 99 % on average over the three (94.2-95.3 %; seed 2's held 99.5 % while
  a stranded chain of the sampler drew a flat map, :func:`test_no_chain_of_the_mixture_is_stranded_in_a_flat_map`);
- nothing shown leaves [0, 1].

The same trials under the model the analysis used before bounds (a single maximum-likelihood
fit of the raw accuracies) miss these figures, as the issue measured.

These three seeds are the issue's, and the band's figure is not met on every seed: on 30 seeds of the
same sweep (``python -m bench demo-figures``) the band holds the true curve for >= 90 % of n on 26 (16
before the analysis's metric-unit noise, docs/decisions/0086-metric-unit-noise.md); on the others it sits
above the truth at large n, by 0.0027 at most, because the analysis's GP overshoots the map's flat top
(docs/decisions/0073-demo-curve-band-on-thirty-seeds.md).
"""

from __future__ import annotations

import numpy as np
import pytest

from bench.demo_figures import demo_sweep, demo_truth, figures
from sweeper.analysis.chain_agreement import RHAT_LIMIT
from sweeper.search.warping import MetricBounds

pytestmark = pytest.mark.usefixtures("one_blas_thread")

BOUNDS = MetricBounds(0.0, 1.0)


@pytest.fixture(scope="module")
def sweeps() -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """The demo's sweep without its bounds (the same points, a tenth of the time: see :func:`demo_sweep`).
    NOTE: docs/decisions/0050-test-time-cuts.md"""
    return {seed: demo_sweep(seed) for seed in (0, 1, 2)}


def test_the_demo_sweeps_points_are_its_bounded_sweeps(sweeps) -> None:
    """The sweeps above leave out the demo's bounds: with them (and their tagging fits), the first GP batch is
    the very same points, as are the values."""
    X, y = sweeps[0]
    X_bounded, y_bounded = demo_sweep(0, num_trials=16, metric_bounds=[0, 1])
    assert np.array_equal(X_bounded, X[:16]) and np.array_equal(y_bounded, y[:16])


@pytest.fixture(scope="module")
def truth() -> dict[str, np.ndarray]:
    return demo_truth()


@pytest.fixture(scope="module")
def bounded_figures(sweeps, truth) -> dict[int, dict[str, float]]:
    return {seed: figures(*sweeps[seed], truth) for seed in sweeps}


ONE_EXAMPLE = 1 / 171  # the demo's test set: its accuracies are k / 171


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_demo_maps_curve_and_band_hold_the_truth(seed: int, bounded_figures) -> None:
    f = bounded_figures[seed]
    assert f["curve_max_error"] <= 0.02, f
    assert f["curve_in_band"] >= 0.90, f
    # Where the band misses (on other seeds: decision 0073), it is above the truth, by less than one test example.
    assert f["band_below_truth"] == 0.0 and f["band_miss"] < ONE_EXAMPLE, f
    assert f["map_coverage"] >= 0.85, f
    assert f["shown_min"] >= 0.0 and f["shown_max"] <= 1.0, f
    assert f["chains_rhat"] <= RHAT_LIMIT and f["chains_agree"], f  # the sampler's chains draw one map (decision 0080)


def test_the_demo_maps_band_is_not_wider_than_it_needs_be_on_average(bounded_figures) -> None:
    assert np.mean([f["map_coverage"] for f in bounded_figures.values()]) <= 0.99, bounded_figures


def test_the_single_raw_fit_misses_the_demo_maps_truth(sweeps, truth) -> None:
    """What the issue measured: without bounds, one maximum-likelihood fit overshoots and is overconfident."""
    misses = []
    for seed in (0, 1, 2):
        X, y = sweeps[seed]
        f = figures(X, y, truth, bounded=False, kept=1)
        assert f["chains_rhat"] is None and f["chains_agree"] is None  # one fit: no chains to compare
        misses.append(f["shown_max"] > 1.0 or f["curve_in_band"] < 0.9 or not 0.85 <= f["map_coverage"] <= 0.99)
    assert all(misses)


def test_no_chain_of_the_mixture_is_stranded_in_a_flat_map(sweeps, monkeypatch) -> None:
    """Seed 2's sweep is one where a chain of the sampler falls into a white-noise mode (one lengthscale at
    the box's floor, 15 nats below the other chains; it drew a flat map): it is sampled again, so every
    chain of the mixture draws the map. Either rule catches it, the mass rule (decision 0068) or the
    lengthscale rule (0076); without both the same fit keeps it, which this test checks too, so the sweep
    still exercises the fault. That mode is the posterior's without the noise in the metric's units (decision
    0086), which has none here, so the test turns that noise off."""
    from sweeper.search import hyper_vector, hyperposterior
    from sweeper.search.hyper_vector import pack
    from sweeper.search.log_posterior import LogPosterior

    X, y = sweeps[2]
    monkeypatch.setattr(hyper_vector, "METRIC_NOISE", False)

    def chains(ensemble) -> tuple[list[float], float]:
        logp = LogPosterior(ensemble.point, X, y)
        per_chain = np.array_split(np.arange(len(ensemble.members)), hyperposterior.CHAINS)
        mean_logp = [float(np.mean([logp(pack(ensemble.members[i])) for i in rows])) for rows in per_chain]
        return mean_logp, min(float(np.min(m.lengthscales)) for m in ensemble.members)

    fitted = hyperposterior.fit_posterior(X, y, seed=0, bounds=BOUNDS)
    mean_logp, shortest = chains(fitted)
    assert max(mean_logp) - min(mean_logp) <= hyperposterior.STRANDED_NATS and shortest > 0.01, mean_logp
    monkeypatch.setattr(hyperposterior, "STRANDED_NATS", np.inf)  # the lengthscale rule alone catches it too
    assert chains(hyperposterior.fit_posterior(X, y, seed=0, bounds=BOUNDS))[1] > 0.01
    monkeypatch.setattr(hyperposterior, "WHITE_NOISE_LENGTHSCALE", 0.0)
    mean_logp, shortest = chains(hyperposterior.fit_posterior(X, y, seed=0, bounds=BOUNDS))
    assert max(mean_logp) - min(mean_logp) > 10.0 and shortest < 0.01, mean_logp


def test_the_bench_scores_the_demo_sweep_as_this_test_does(bounded_figures, tmp_path, monkeypatch) -> None:
    """``python -m bench demo-figures`` counts these figures over many seeds; its seed 0 is this test's seed 0
    (swept with the bounds, so with its tagging fits), scored the same, and its table counts it."""
    import json

    from bench import __main__ as bench_main
    from bench import report

    monkeypatch.setattr(report, "RESULTS_DIR", tmp_path)
    bench_main.main(["demo-figures", "--smoke"])
    (row,) = json.loads((tmp_path / "demo_figures_smoke.json").read_text())["rows"]
    assert {k: row[k] for k in bounded_figures[0]} == bounded_figures[0]
    table = (tmp_path / "demo_figures_smoke.md").read_text()
    assert "| the default | 1 | 1 | 1 | 1 | 1 |" in table, table
