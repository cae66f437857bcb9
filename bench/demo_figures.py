"""Issue 15's figures of the demo's map over many seeds of the demo's sweep: how often the curve and map hold.

``tests/unit/test_fidelity_demo_map.py`` holds three seeds of the demo's ``ivr`` sweep to the issue's figures;
three seeds say little about how often a design, or a change to the analysis, keeps them. This runs the same
sweep (conf/svm.yaml's settings: 8 Sobol points, then three batches of 8, deterministic, bounds ``[0, 1]``)
driven through the searcher's policy on the committed grid of the demo's map (``bench/data/map_svm.npz``), so
a seed's points are the same on every run and only the settings under test change, and scores each sweep as
the test does, with the functions ``sweeper report`` and ``sweeper multiverse`` call:

- **curve**: the largest ``|mean(n) - truth(n)|`` over n = 1..32 of the report's surrogate curve against the
  true expected best of n random-search trials (:func:`bench.ml_maps.true_curve`); the share of n whose truth
  lies in its 95 % band, and the largest distance by which the truth lies outside it;
- **map**: the share of the 40 x 40 grid whose truth lies in the multiverse map's ``mean ± 1.96 sd``;
- **shown**: the smallest and largest number shown (curve, band, map means).

Goals (issue 15): curve within 0.02; truth in the band for >= 90 % of n; the map holding 85-99 %; nothing
outside [0, 1]. The table counts the seeds meeting each.

    python -m bench demo-figures --seeds 30 --jobs 2                               # the default (~5 min)
    python -m bench demo-figures --seeds 30 --jobs 2 --policy ivr_mixture=true     # (~8 min)
    python -m bench demo-figures --smoke                                           # one seed: a check that it runs
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

import numpy as np
from numpy.typing import NDArray

from bench.ml_maps import MAPS, true_curve, truth_at
from bench.report import fmt, markdown_table, write_results

DEMO = MAPS["svm"]
BOUNDS = (0.0, 1.0)
RESOLUTION = 40
CURVE_GOAL, BAND_GOAL, MAP_GOAL = 0.02, 0.90, (0.85, 0.99)


def demo_sweep(seed: int, num_trials: int = 32, metric_bounds: list[float] | None = None,
               **settings: Any) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The demo's ivr sweep (conf/svm.yaml's settings, deterministic batches) on the cached truth.

    ``settings``: more :class:`~sweeper.search.settings.PolicySettings` fields (``ivr_mixture=True``). Without
    ``metric_bounds`` the default's points are those of the bounded sweep: ``ivr`` chooses on the raw-scale
    fit, and the bounds only add the posterior mixture that tags each chosen point with a prediction
    (docs/decisions/0013-ivr-chooses-on-the-raw-scale.md), which costs 90 % of a sweep's time.
    """
    from sweeper.search.policy import MultiversePolicy
    from sweeper.search.settings import PolicySettings

    policy = MultiversePolicy(DEMO.space, PolicySettings(
        strategy="ivr", num_trials=num_trials, n_initial=8, batch_size=8, seed=seed, deterministic=True,
        metric_bounds=metric_bounds, **settings))
    X, y = [], []
    while (s := policy.ask()) is not None:
        value = float(truth_at("svm", np.array(s.x)[None, :])[0])
        policy.tell(s.index, value)
        X.append(s.x)
        y.append(value)
    return np.array(X), np.array(y)


def demo_truth() -> dict[str, NDArray[np.float64]]:
    """The true random-search curve (n = 1..32) and the map's truth on ``contour_map``'s grid."""
    from sweeper.analysis.multiverse import snap

    t = np.linspace(0.0, 1.0, RESOLUTION)
    gx, gy = np.meshgrid(t, t)  # contour_map's grid: rows over gamma, columns over C
    grid = snap(DEMO.space, np.column_stack([gx.ravel(), gy.ravel()]))
    return {"curve": true_curve("svm", 32), "map": truth_at("svm", grid).reshape(RESOLUTION, RESOLUTION)}


def figures(X: NDArray[np.float64], y: NDArray[np.float64], truth: dict[str, NDArray[np.float64]],
            bounded: bool = True, kept: int | None = None) -> dict[str, float | None]:
    """The issue's figures for one sweep, from the report's curve and the multiverse map, and whether the map's
    sampler chains agree (``chains_rhat``, :mod:`sweeper.analysis.chain_agreement`; None for a single fit).

    ``bounded=False, kept=1``: the model the analysis used before bounds (one maximum-likelihood fit of the raw
    accuracies; its curve from the report's GP with one member, its map band from the latent sd).
    """
    from sweeper.analysis.chain_agreement import chain_agreement
    from sweeper.analysis.multiverse import contour_map, fit_multiverse
    from sweeper.report.surrogate import surrogate_curve
    from sweeper.search.warping import MetricBounds

    bounds = MetricBounds(*BOUNDS) if bounded else None
    if kept is None:
        curve = surrogate_curve(X, y, bounds=bounds, seed=0).curve
    else:
        from sweeper.analysis.expected_max import surrogate_expected_max
        from sweeper.search.design import random_design
        from sweeper.search.gp_fit import fit_gp

        gp = fit_gp(X, y, seed=[0, 0])
        samples = np.vstack([gp.sample_posterior(random_design(1000, 2, [0, 1, b]), 20, [0, 2, b]) for b in range(10)])
        curve = surrogate_expected_max(samples, n_max=32)
    fit = fit_multiverse(DEMO.space, X, y, seed=0, bounds=bounds, kept=kept)
    cm = contour_map(fit, 0, 1, resolution=RESOLUTION)
    mean, sd = cm.mean[""], cm.sd[""]
    if kept == 1:  # the single fit's map: its latent sd, as the analysis drew it before
        sd = cm.sd_latent[""]  # type: ignore[index]  # a single fit has it
    t = truth["curve"]
    outside = np.maximum(curve.low - t, t - curve.high)
    chains = chain_agreement(fit.gp, DEMO.space)  # None for a single fit
    return {
        "curve_max_error": float(np.max(np.abs(curve.mean - t))),
        "curve_in_band": float(np.mean((t >= curve.low) & (t <= curve.high))),
        "band_miss": float(max(np.max(outside), 0.0)),
        "band_below_truth": float(max(np.max(t - curve.high), 0.0)),
        "map_coverage": float(np.mean(np.abs(mean - truth["map"]) <= 1.96 * sd)),
        "shown_min": float(min(curve.low.min(), mean.min())),
        "shown_max": float(max(curve.high.max(), mean.max())),
        "chains_rhat": None if chains is None else chains.rhat,
        "chains_agree": None if chains is None else chains.agree,
    }


def meets(f: dict[str, float]) -> dict[str, bool]:
    """Which of the issue's goals one sweep's figures meet."""
    return {"curve": f["curve_max_error"] <= CURVE_GOAL, "band": f["curve_in_band"] >= BAND_GOAL,
            "map": MAP_GOAL[0] <= f["map_coverage"] <= MAP_GOAL[1],
            "shown": f["shown_min"] >= BOUNDS[0] and f["shown_max"] <= BOUNDS[1]}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seeds", type=int, default=30, help="sweep seeds FIRST..S-1 (default 30)")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1, help="sweeps in parallel processes (default 1)")
    parser.add_argument("--policy", nargs="*", default=[], metavar="KEY=VALUE",
                        help="PolicySettings overrides (JSON values), e.g. ivr_mixture=true")
    parser.add_argument("--analysis", nargs="*", default=[], metavar="NAME=VALUE",
                        help="the analysis GP's priors (JSON values), e.g. SHAPE_PRIOR_SD=1 (bench/analysis_priors.py)")
    parser.add_argument("--results-name", default=None, metavar="NAME",
                        help="bench/results/NAME.md/.json (default demo_figures, demo_figures_smoke with --smoke)")
    parser.add_argument("--smoke", action="store_true", help="one seed: a check that it runs")


def one_seed(seed: int, overrides: dict[str, Any], truth: dict[str, NDArray[np.float64]]) -> dict[str, Any]:
    """One seed's sweep (bounded, as the demo's) and its figures against ``truth`` (:func:`demo_truth`)."""
    from bench.efficiency import _one_thread

    _one_thread()
    t0 = time.perf_counter()
    X, y = demo_sweep(seed, metric_bounds=list(BOUNDS), **overrides)
    sweep_s = time.perf_counter() - t0
    return {"seed": seed, "best_trial": float(y.max()), "sweep_s": sweep_s, **figures(X, y, truth)}


def run(args: argparse.Namespace) -> None:
    from bench.analysis_priors import analysis_overrides, apply
    from bench.efficiency import policy_overrides

    if args.smoke:
        args.first_seed, args.seeds = 0, 1
    name = args.results_name or "demo_figures" + ("_smoke" if args.smoke else "")
    overrides = policy_overrides(args.policy)
    priors = analysis_overrides(args.analysis)
    seeds = list(range(args.first_seed, args.seeds))
    truth = demo_truth()  # once: 200,000 draws of the grid for the true curve
    rows = []
    with ProcessPoolExecutor(max(1, args.jobs), initializer=apply, initargs=(priors,)) as pool:
        for future in as_completed([pool.submit(one_seed, seed, overrides, truth) for seed in seeds]):
            rows.append(future.result())
            r = rows[-1]
            print(f"seed {r['seed']}: {r['sweep_s']:.0f} s; curve {r['curve_max_error']:.4f}, "
                  f"band {r['curve_in_band']:.0%} (miss {r['band_miss']:.4f}), map {r['map_coverage']:.1%}", flush=True)
    rows.sort(key=lambda r: r["seed"])
    write_results(name, demo_markdown(rows, overrides), {"policy": overrides, "analysis": priors, "rows": rows})


def demo_markdown(rows: list[dict[str, Any]], overrides: dict[str, Any]) -> str:
    """The per-seed table and the counts of seeds meeting each goal."""
    from sweeper.analysis.chain_agreement import RHAT_LIMIT

    goals = [meets(r) for r in rows]
    count = {k: sum(g[k] for g in goals) for k in ("curve", "band", "map", "shown")}
    every = sum(all(g.values()) for g in goals)
    per_seed = markdown_table(
        ["seed", "best trial", "curve: max error", "truth in band", "largest band miss", "map holds", "shown",
         "chains' R", "sweep s"],
        [[str(r["seed"]), f"{r['best_trial']:.4f}", fmt(r["curve_max_error"]), f"{r['curve_in_band']:.0%}",
          fmt(r["band_miss"]), f"{r['map_coverage']:.1%}", f"{r['shown_min']:.3f} … {r['shown_max']:.4f}",
          f"{r['chains_rhat']:.2f}", f"{r['sweep_s']:.0f}"] for r in rows])
    n = len(rows)
    summary = markdown_table(
        ["settings", "sweeps", "band holds >= 90 % of n", "curve within 0.02", "map 85-99 %", "all four",
         "mean share of n in band", "mean map coverage", "largest band miss"],
        [[", ".join(f"{k}={v}" for k, v in overrides.items()) or "the default", str(n), str(count["band"]),
          str(count["curve"]), str(count["map"]), str(every), f"{np.mean([r['curve_in_band'] for r in rows]):.1%}",
          f"{np.mean([r['map_coverage'] for r in rows]):.1%}", fmt(max(r["band_miss"] for r in rows))]])
    below = [r["band_below_truth"] for r in rows]
    parted = [r["seed"] for r in rows if r["chains_agree"] is False]
    which = f": seed{'s' * (len(parted) > 1)} {', '.join(map(str, parted))}" if parted else ""
    return (f"{summary}\n\nNothing shown outside [0, 1]: {count['shown']} of {n}. The band below the truth: on "
            f"{sum(b > 0 for b in below)} of {n} (largest {fmt(max(below))}). The map's sampler chains drew "
            f"different maps (R > {RHAT_LIMIT} and further apart than the noise, decision 0080) on {len(parted)} of "
            f"{n}{which}.\n\n{per_seed}\n")
