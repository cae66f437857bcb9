"""Calibration: does the verdict next to a map say when the map is wrong? (issue 32)

For each real map of :mod:`bench.ml_maps` (an SVC on breast cancer, gradient boosting and SGD
on digits, an SVC on wine whose best third scores exactly 1.0), with and without the metric's
bounds, and several seeds, this runs the ``ivr`` policy as a sweep does (32 trials, 8 Sobol
then batches of 8, two trials in flight, each taking minutes, so batches are re-planned as
results arrive; each result looked up in the committed dense grid),
then does what ``sweeper multiverse`` and ``sweeper report`` do with the trials:

- fits the analysis GP (:func:`sweeper.analysis.multiverse.fit_multiverse`) and scores its
  95 % band against the truth at **every node of the grid** (the map holds the truth there
  or not: the quantity the verdict is about);
- runs its predictive checks (:func:`sweeper.search.calibration.calibration`: leave-one-out,
  leave-one-configuration-out, and the searcher's own predictions of the trials it chose,
  made before they ran) and takes their verdict;
- computes the surrogate expected-max curve (:func:`sweeper.report.surrogate.surrogate_curve`)
  and the share of n = 1..32 whose true curve lies inside its band.

Goals (issue 32): the verdict fails on every sweep whose map holds < 85 % of the truth and
passes on at least 80 % of the others; the searcher's predictions hold 85-99 % of their
results in their 95 % intervals; the curve's band holds the true curve for >= 90 % of n,
also on the wine map.

    python -m bench calibration                 # 4 maps x 2 bound settings x 5 seeds (~20 min on 2 cores)
    python -m bench calibration --smoke         # the wine map, bounded, one seed
    python -m bench calibration --bounds bounded --policy ivr_mixture=true --results-name calibration_mixture
    python -m bench calibration --bounds bounded --points-from calibration --analysis SHAPE_PRIOR_SD=1
"""

from __future__ import annotations

import argparse
import itertools
import time
from typing import Any

import numpy as np
from numpy.typing import NDArray

from bench.report import markdown_table, write_results

MAP_GOAL, PASS_GOAL, PREDICTION_GOAL, BAND_GOAL = 0.85, 0.80, (0.85, 0.99), 0.90
#: A curve "misses" the truth by at most this much when it is outside its band only by the
#: Monte Carlo error of a curve that converges on the bound (the wine map: 1 - 4e-5 against 1 - 1e-5).
MISS_TOLERANCE = 1e-3
#: Simulated duration of a trial: long enough that re-planning a batch is always affordable
#: (sweeper.search.policy), so a sweep's points do not depend on how busy the machine is.
TRIAL_SECONDS = 600.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from bench.ml_maps import HELD_OUT, MAPS

    parser.add_argument("--maps", nargs="+", default=[m for m in MAPS if m not in HELD_OUT], choices=list(MAPS))
    parser.add_argument("--seeds", type=int, default=5, help="sweep seeds 0..S-1 (default 5)")
    parser.add_argument("--trials", type=int, default=32)
    parser.add_argument("--bounds", choices=("both", "bounded", "unbounded"), default="both",
                        help="sweep each map with its bounds [0, 1], without, or both (default)")
    parser.add_argument("--policy", nargs="*", default=[], metavar="KEY=VALUE",
                        help="PolicySettings overrides (JSON values) for every sweep, e.g. ivr_mixture=true "
                             "(with --bounds bounded)")
    parser.add_argument("--analysis", nargs="*", default=[], metavar="NAME=VALUE",
                        help="the analysis GP's priors (JSON values), e.g. SHAPE_PRIOR_SD=1 (bench/analysis_priors.py)")
    parser.add_argument("--points-from", default=None, metavar="NAME",
                        help="sweep nothing: analyse again the trials (points, results, the searcher's predictions) "
                             "of bench/results/NAME.json, e.g. under another --analysis (decision 0084)")
    parser.add_argument("--results-name", default=None, metavar="NAME",
                        help="bench/results/NAME.md/.json (default calibration, calibration_smoke with --smoke)")
    parser.add_argument("--smoke", action="store_true", help="the wine map, bounded, one seed: a check that it runs")


def run(args: argparse.Namespace) -> None:
    from bench.analysis_priors import analysis_overrides, apply
    from bench.efficiency import policy_overrides

    overrides = policy_overrides(args.policy)
    apply(analysis_overrides(args.analysis))
    kinds = {"both": (False, True), "bounded": (True,), "unbounded": (False,)}[args.bounds]
    settings = [(name, bounds, seed) for name in args.maps for bounds in kinds for seed in range(args.seeds)]
    if args.smoke:
        settings = [("wine", True, 0)]
        args.trials = 16
    if args.points_from and overrides:  # the arguments before the file
        raise SystemExit("--policy with --points-from: nothing is swept, the points are the earlier run's")
    saved = saved_trials(args.points_from) if args.points_from else {}
    if args.points_from and (missing := [s for s in settings if s not in saved]):
        raise SystemExit(f"--points-from {args.points_from}: no trials for {', '.join(map(str, missing))}")
    rows = []
    for name, bounds, seed in settings:
        rows.append(one(name, bounds, seed, args.trials, overrides, saved.get((name, bounds, seed))))
        r = rows[-1]
        print(f"{name} {'bounded' if bounds else 'unbounded'} seed {seed}: map {r['map_coverage']:.1%}, verdict "
              f"{r['verdict']} (loo {r['loo']}, loco {r['loco']}, prospective {r['prospective']}), predictions "
              f"{r['prediction_coverage95']:.0%}, curve in band {r['curve_in_band']:.0%}, {r['seconds']:.0f} s",
              flush=True)
    write_results(args.results_name or ("calibration_smoke" if args.smoke else "calibration"),
                  calibration_markdown(rows), {"settings": {k: str(v) for k, v in vars(args).items()}, "rows": rows})


def sweep(name: str, bounds: bool, seed: int, n: int, workers: int = 2,
          overrides: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The policy's trials on map ``name``, two in flight as on a 2-core machine, in the order they finish;
    ``overrides``: more PolicySettings fields."""
    from bench.ml_maps import MAPS, truth_at
    from sweeper.search.policy import MultiversePolicy
    from sweeper.search.settings import PolicySettings

    clock = [0.0]  # simulated seconds: trials of minutes, so the policy always re-plans, whatever the machine's load
    policy = MultiversePolicy(MAPS[name].space, PolicySettings(
        strategy="ivr", num_trials=n, n_initial=8, batch_size=8, seed=seed,
        metric_bounds=[0.0, 1.0] if bounds else None, **(overrides or {})), clock=lambda: clock[0])
    pending, done = [], []
    while True:
        while len(pending) < workers and (s := policy.ask()) is not None:
            pending.append(s)
        if not pending:
            return done
        s = pending.pop(0)
        clock[0] += TRIAL_SECONDS
        y = float(truth_at(name, np.array(s.x)[None, :])[0])
        policy.tell(s.index, y)
        done.append({"x": s.x, "y": y, "mean": s.predicted_mean, "sd": s.predicted_sd, "from": s.predicted_from,
                     "quantiles": s.predicted_quantiles})


def grid_truth(name: str) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Every node of the map's grid (unit cube) and its true value."""
    from bench.ml_maps import load_grid

    values, axes = load_grid(name)
    return np.array(list(itertools.product(*axes))), values.reshape(-1)


def saved_trials(results_name: str) -> dict[tuple[str, bool, int], list[dict[str, Any]]]:
    """The trials each sweep of an earlier run kept (``bench/results/<name>.json``), by (map, bounds, seed)."""
    import json

    from bench.report import RESULTS_DIR

    path = RESULTS_DIR / f"{results_name}.json"
    if not path.exists():
        raise SystemExit(f"--points-from {results_name}: no {path}; run the bench with --results-name {results_name} "
                         "first")
    rows = json.loads(path.read_text(encoding="utf-8"))["rows"]
    return {(r["map"], bool(r["bounds"]), int(r["seed"])): r["trials"] for r in rows if "trials" in r}


def one(name: str, bounds: bool, seed: int, n: int, overrides: dict[str, Any] | None = None,
        trials: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """One sweep and its analysis against the truth; with ``trials`` (an earlier sweep's, with the searcher's
    predictions as it recorded them) the analysis alone."""
    from bench.ml_maps import MAPS, true_curve
    from sweeper.analysis.multiverse import fit_multiverse
    from sweeper.report.surrogate import surrogate_curve
    from sweeper.search.calibration import calibration, prospective_check
    from sweeper.search.warping import MetricBounds

    started = time.perf_counter()
    if trials is None:
        trials = sweep(name, bounds, seed, n, overrides=overrides)
    n = len(trials)
    space = MAPS[name].space
    X = np.array([t["x"] for t in trials])
    y = np.array([t["y"] for t in trials])
    mb = MetricBounds(0.0, 1.0) if bounds else None
    fit = fit_multiverse(space, X, y, bounds=mb, seed=0)
    U, truth = grid_truth(name)
    low, high = fit.gp.band(U)
    chosen = [t for t in trials if t["mean"] is not None]
    predicted = [[t[k] for t in chosen] for k in ("y", "mean", "sd", "from")]
    quantiles = [t["quantiles"] for t in chosen]
    # The searcher's predictions, all of them (the goal's figure), by the model's own quantiles and, as the check
    # read them before they were recorded, as Gaussians of their mean and sd.
    every = prospective_check(*predicted[:3], quantiles=quantiles)
    gaussian = prospective_check(*predicted[:3])
    prospective = prospective_check(*predicted, n_model=len(y), quantiles=quantiles)  # those the verdict scores
    checks = calibration(fit.gp, [], prospective)
    curve = surrogate_curve(X, y, bounds=mb, space=space, seed=0).curve
    true = true_curve(name, n)
    return {
        "map": name, "bounds": bounds, "seed": seed, "seconds": time.perf_counter() - started,
        "map_coverage": float(np.mean((truth >= low) & (truth <= high))),
        "verdict": checks.verdict(), **{k: (c.verdict() if (c := checks.check(kind)) else "none")
                                        for k, kind in (("loo", "leave-one-out"),
                                                        ("loco", "leave-one-configuration-out"),
                                                        ("prospective", "prospective"))},
        "loo_coverage95": checks.checks[0].coverage95,
        "prediction_coverage95": every.coverage95 if every else float("nan"),
        "prediction_coverage95_gaussian": gaussian.coverage95 if gaussian else float("nan"),
        "prediction_worst_z": every.max_abs_residual if every else float("nan"),
        "prospective_scored": prospective.n if prospective else 0,
        "prospective_coverage95": prospective.coverage95 if prospective else float("nan"),
        "curve_in_band": float(np.mean((true >= curve.low) & (true <= curve.high))),
        "curve_max_error": float(np.max(np.abs(curve.mean - true))),
        "curve_largest_miss": float(np.max(np.maximum(curve.low - true, true - curve.high).clip(min=0.0))),
        "prospective_pit": [] if every is None else every.pit.tolist(),
        "loo_pit": checks.checks[0].pit.tolist(),
        "trials": trials,
    }


def calibration_markdown(rows: list[dict[str, Any]]) -> str:
    header = ["map", "bounds", "seed", "map holds the truth", "verdict (LOO / LOCO / prospective)",
              "searcher's predictions in 95 % (those the verdict scores)",
              "worst residual", "curve: truth in band (largest miss)", "max error"]
    table = [[r["map"], "[0, 1]" if r["bounds"] else "none", str(r["seed"]),
              f"{r['map_coverage']:.1%}" + ("" if r["map_coverage"] >= MAP_GOAL else " (< 85 %)"),
              f"**{r['verdict']}** ({r['loo']} / {r['loco']} / {r['prospective']})",
              f"{r['prediction_coverage95']:.0%} ({r['prospective_coverage95']:.0%} of {r['prospective_scored']})",
              f"{r['prediction_worst_z']:.1f}",
              f"{r['curve_in_band']:.0%} ({r['curve_largest_miss']:.1g})",
              f"{r['curve_max_error']:.3f}"] for r in rows]
    bad = [r for r in rows if r["map_coverage"] < MAP_GOAL]
    good = [r for r in rows if r["map_coverage"] >= MAP_GOAL]
    caught = sum(r["verdict"] == "failed" for r in bad)
    passed = sum(r["verdict"] != "failed" for r in good)
    lo, hi = PREDICTION_GOAL
    predicted = sum(lo <= r["prediction_coverage95"] <= hi for r in rows)
    banded = sum(r["curve_in_band"] >= BAND_GOAL for r in rows)
    near = sum(r["curve_largest_miss"] <= MISS_TOLERANCE for r in rows)
    pooled = {}
    for key in sorted({(r["map"], r["bounds"]) for r in rows}):
        pits = np.concatenate([r["prospective_pit"] for r in rows if (r["map"], r["bounds"]) == key])
        pooled[key] = float(np.mean((pits >= 0.025) & (pits <= 0.975))) if pits.size else float("nan")
    summary = markdown_table(["goal", "measured"], [
        ["the verdict fails on every map holding < 85 % of the truth",
         f"{caught} of {len(bad)}"],
        [f"the verdict passes on ≥ {PASS_GOAL:.0%} of maps holding ≥ 85 %",
         f"{passed} of {len(good)} ({passed / max(len(good), 1):.0%})"],
        ["the searcher's predictions hold 85-99 % of their results (95 % intervals)",
         f"{predicted} of {len(rows)} sweeps; pooled over each map's seeds: " + ", ".join(
             f"{m} {'bounded' if b else 'unbounded'} {v:.0%}" for (m, b), v in pooled.items())],
        [f"the curve's band holds the true curve for ≥ {BAND_GOAL:.0%} of n", f"{banded} of {len(rows)}; "
         f"{near} of {len(rows)} never miss it by more than {MISS_TOLERANCE:g}"],
    ])
    return f"### Calibration verdicts against the truth\n\n{summary}\n\n{markdown_table(header, table)}"
