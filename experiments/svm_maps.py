"""The multiverse paper's motivating result with this tool: IVR maps the SVC's space, UCB does not.

Bell et al. (2022), Fig. 1: an RBF-kernel SVC's test accuracy over the regularisation C and
the kernel width gamma has a high-accuracy plateau along a diagonal of the (log C, log gamma)
plane. A search that maps the space (integrated variance reduction, ``ivr``) recovers that
plateau; a search that optimises (``ucb``) concentrates around one maximum and leaves the
rest of the map to the prior.

This script runs ``experiments/svm.py`` twice through the real Hydra command line, with the
same seed (so the same 8 scrambled Sobol points), then 24 points chosen by ``ivr`` in one
sweep and by ``ucb`` in the other (three batches of 8, ``deterministic=true`` so the points
do not depend on trial timing). It reads both sweeps back from MLflow, fits the analysis GP
(:func:`sweeper.analysis.multiverse.fit_multiverse`) to each, and compares each posterior
mean with the ground truth: the SVC's test accuracy fitted on a ``--grid`` x ``--grid`` grid
over the unit square of (log C, log gamma). It writes

* ``<out>/svm_ivr_vs_ucb.png``: ground truth, ivr posterior mean and ucb posterior mean on
  one colour scale, with each sweep's trials on top;
* ``<out>/svm_ivr_vs_ucb.json``: RMSE of each posterior mean against the ground truth, the
  spread of the 24 GP-phase points, the fraction of them within 0.01 of the best found, and
  the timings.

``--num-trials 16`` runs one GP batch of 8 per sweep instead of three, for a quick check that
the comparison runs (its numbers are rougher).

    .venv/bin/python experiments/svm_maps.py --out docs/figures                   # ~1.5 min
    .venv/bin/python experiments/svm_maps.py --out docs/figures --extra-seeds 1 2  # + seeds 1, 2 in the JSON
    .venv/bin/python experiments/svm_maps.py ray.address=auto --out docs/figures  # Hydra overrides for both sweeps
    .venv/bin/python experiments/svm_maps.py --out /tmp/maps --num-trials 16      # one GP batch each: a quick run

Nothing is written into the repository except ``--out``: the sweeps run in a temporary
folder (Hydra's sweep dir and, unless ``--tracking-uri`` is given, the SQLite MLflow store).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # experiments/ is not a package: import svm.py's fit directly

from svm import svc_scores  # noqa: E402 - svm.py is found through sys.path, set just above

from sweeper.analysis.multiverse import axis_values, contour_map, fit_multiverse  # noqa: E402 - below the sys.path line
from sweeper.analysis.plotting import _new_figure  # noqa: E402 - below the sys.path line
from sweeper.analysis.runs import load_sweep  # noqa: E402 - below the sys.path line
from sweeper.record.tracking_uri import absolute_tracking_uri  # noqa: E402 - below the sys.path line
from sweeper.report.build_report import trial_points  # noqa: E402 - below the sys.path line

STRATEGIES = ("ivr", "ucb")
APP = HERE / "svm.py"
SETTINGS = {"n_initial": 8, "num_trials": 32, "batch_size": 8}
NEAR_BEST = 0.01  # "within 0.01 of the best found"
MAP_RESOLUTION = 60
#: Mean distance of two independent uniform points in the unit square, for scale.
UNIFORM_SPREAD = (2 + math.sqrt(2) + 5 * math.log(1 + math.sqrt(2))) / 15


def sweep_settings(num_trials: int) -> dict[str, int]:
    """:data:`SETTINGS` with ``num_trials`` trials: the same 8 Sobol points, then batches of 8."""
    return {**SETTINGS, "num_trials": num_trials}


def run_sweep(strategy: str, *, seed: int, tracking_uri: str, work: Path, settings: dict[str, int],
              overrides: tuple[str, ...] = ()) -> float:
    """Run one sweep through the Hydra command line in ``work``, with the given Hydra ``overrides`` last;
    return its wall time in seconds."""
    cmd = [
        sys.executable, str(APP), "--multirun", "hydra/sweeper=multiverse",
        f"hydra.sweeper.strategy={strategy}", f"hydra.sweeper.seed={seed}", "hydra.sweeper.deterministic=true",
        *(f"hydra.sweeper.{k}={v}" for k, v in settings.items()),
        f"mlflow.experiment_name=svm-{strategy}", f"mlflow.tracking_uri={tracking_uri}",
        f"hydra.sweep.dir={work / f'multirun-{strategy}'}", *overrides,
    ]
    print(f"$ {shlex.join(cmd)}", flush=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    output = proc.stdout + proc.stderr
    if proc.returncode != 0:
        sys.stderr.write(output[-6000:])
        raise SystemExit(f"the {strategy} sweep failed with exit code {proc.returncode} (its output is above)")
    for line in output.splitlines():
        if "[HYDRA] Best:" in line or "[HYDRA] Finished" in line:
            print(f"  {line.strip()}")
    print(f"  {strategy} sweep: {elapsed:.1f} s", flush=True)
    return elapsed


def load_points(strategy: str, tracking_uri: str, num_trials: int) -> dict[str, Any]:
    """The sweep's finished trials: space, unit-cube points, scores, and which came from the GP."""
    records = load_sweep(f"svm-{strategy}", tracking_uri)
    if records.space is None:
        raise SystemExit(f"svm-{strategy}: the search space cannot be read back from MLflow")
    kept = records.finished("test_acc").sort_values("index")
    if len(kept) != num_trials:
        raise SystemExit(f"svm-{strategy}: {len(kept)} finished trials, expected {num_trials}")
    U = records.space.to_unit(trial_points(kept, records))
    return {
        "space": records.space,
        "U": U,
        "y": kept["metric.test_acc"].to_numpy(dtype=np.float64),
        "gp_phase": (kept["phase"] != "sobol").to_numpy(),
        "index": kept["index"].to_numpy(),
        "bounds": records.bounds,  # conf/svm.yaml's metric_bounds: [0, 1]
    }


def ground_truth(space: Any, iC: int, ig: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Test accuracy on an ``n`` x ``n`` grid of the unit square: ``(t, C, gamma, acc[gamma, C])``."""
    t = np.linspace(0.0, 1.0, n)
    Cs, _ = axis_values(space.dims[iC], t)
    gs, _ = axis_values(space.dims[ig], t)
    acc = np.array([[svc_scores(C, g)["test_acc"] for C in Cs] for g in gs])
    return t, Cs, gs, acc


def mean_pairwise_distance(U: np.ndarray) -> float:
    return float(np.mean([np.linalg.norm(a - b) for a, b in itertools.combinations(U, 2)]))


def draw(path: Path, Cs: np.ndarray, gs: np.ndarray, truth: np.ndarray, maps: dict[str, Any],
         sweeps: dict[str, dict[str, Any]], stats: dict[str, dict[str, Any]], iC: int, ig: int, grid: int) -> None:
    """Three panels on one colour scale: ground truth, then each strategy's posterior mean with its trials."""
    from matplotlib.lines import Line2D

    # One scale for all three panels: the ground truth's range (bands of 0.025), extended to the
    # posterior means' maximum; a posterior mean below the truth's minimum takes the lowest colour
    # (the colorbar's triangle), so that extrapolation errors do not squash the plateau's bands.
    # No contour lines: the bands show the levels, and lines double the PNG's size.
    top = max(float(truth.max()), *(float(m.mean[""].max()) for m in maps.values()))
    lo, hi = math.floor(float(truth.min()) * 40) / 40, math.ceil(top * 40) / 40
    bounds = np.arange(round((hi - lo) * 40) + 1) / 40 + lo
    extend = "min" if min(float(m.mean[""].min()) for m in maps.values()) < lo else "neither"
    fig = _new_figure((13.0, 4.0))
    axes = fig.subplots(1, 3, sharex=True, sharey=True)
    panels = [("ground truth", Cs, gs, truth, None)] + [
        (s, maps[s].x, maps[s].y, maps[s].mean[""], s) for s in STRATEGIES]
    filled = None
    for ax, (_, x, y, z, s) in zip(axes, panels, strict=True):
        filled = ax.contourf(x, y, z, levels=bounds, cmap="viridis", extend=extend)
        if s is None:
            ax.set_title(f"ground truth ({grid}\u00d7{grid} SVC fits)", fontsize="medium")
        else:
            sw = sweeps[s]
            show = [axis_values(sw["space"].dims[c], sw["U"][:, c])[0] for c in (iC, ig)]
            gp = sw["gp_phase"]
            ax.plot(show[0][gp], show[1][gp], linestyle="none", marker="^", markersize=6, markerfacecolor="red",
                    markeredgecolor="black", markeredgewidth=0.6, zorder=3)
            ax.plot(show[0][~gp], show[1][~gp], linestyle="none", marker="o", markersize=6,
                    markerfacecolor="white", markeredgecolor="black", markeredgewidth=0.7, zorder=4)
            ax.set_title(f"{s}: GP posterior mean, RMSE {stats[s]['rmse']:.3f}", fontsize="medium")
        ax.set(xscale="log", yscale="log", xlim=(x[0], x[-1]), ylim=(y[0], y[-1]), xlabel="C")
    axes[0].set_ylabel("gamma")
    fig.colorbar(filled, ax=list(axes), label="test accuracy", ticks=bounds[::2])
    n_initial, batch = SETTINGS["n_initial"], SETTINGS["batch_size"]
    gp_points = int(sweeps[STRATEGIES[0]]["gp_phase"].sum())
    batches = f"{math.ceil(gp_points / batch)} batch{'es' if gp_points > batch else ''} of {batch}"
    fig.legend(handles=[
        Line2D([], [], linestyle="none", marker="o", markerfacecolor="white", markeredgecolor="black",
               label=f"{n_initial} Sobol points (the same in both sweeps)"),
        Line2D([], [], linestyle="none", marker="^", markerfacecolor="red", markeredgecolor="black",
               label=f"{gp_points} GP-phase points (ivr or ucb, {batches})"),
    ], loc="outside lower center", ncols=2, fontsize="small")
    fig.savefig(path, dpi=100)


def measure(seed: int, *, tracking_uri: str | None, grid: int, truth_cache: dict[str, Any],
            settings: dict[str, int], overrides: tuple[str, ...] = ()) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run both sweeps of one seed, fit their GPs and compare with the ground truth.

    The ground truth is computed at the first call and kept in ``truth_cache`` (memory only).
    Returns the drawing inputs (sweeps, maps, truth) and the numbers of this seed.
    """
    timings: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="svm-maps-") as tmp:
        work = Path(tmp)
        uri = absolute_tracking_uri(tracking_uri) if tracking_uri else f"sqlite:///{work / 'mlruns.db'}"
        for s in STRATEGIES:
            timings[f"sweep_{s}_s"] = run_sweep(s, seed=seed, tracking_uri=uri, work=work, settings=settings,
                                                overrides=overrides)
        sweeps = {s: load_points(s, uri, settings["num_trials"]) for s in STRATEGIES}

    space = sweeps["ivr"]["space"]
    iC, ig = space.names.index("C"), space.names.index("gamma")
    sobol = {s: sw["U"][~sw["gp_phase"]] for s, sw in sweeps.items()}
    sobol_diff = float(np.max(np.abs(sobol["ivr"] - sobol["ucb"])))
    if sobol_diff > 1e-6:
        print(f"warning: the two sweeps' Sobol points differ (max |du| = {sobol_diff:.3g})", file=sys.stderr)

    if not truth_cache:
        t0 = time.perf_counter()
        t, Cs, gs, truth = ground_truth(space, iC, ig, grid)
        timings["ground_truth_s"] = time.perf_counter() - t0
        print(f"ground truth: {grid}x{grid} SVC fits in {timings['ground_truth_s']:.1f} s", flush=True)
        gx, gy = np.meshgrid(t, t)  # rows over gamma, columns over C, like ``truth``
        P = np.zeros((gx.size, space.d))
        P[:, iC], P[:, ig] = gx.ravel(), gy.ravel()
        truth_cache.update(Cs=Cs, gs=gs, truth=truth, P=P)
    truth, P = truth_cache["truth"], truth_cache["P"]

    t0 = time.perf_counter()
    maps, stats = {}, {}
    for s, sw in sweeps.items():
        fit = fit_multiverse(space, sw["U"], sw["y"], seed=seed, bounds=sw["bounds"])
        maps[s] = contour_map(fit, iC, ig, resolution=MAP_RESOLUTION)
        mean, sd = (v.reshape(truth.shape) for v in fit.gp.predict(P, noise=True))
        gp_U, gp_y = sw["U"][sw["gp_phase"]], sw["y"][sw["gp_phase"]]
        best = int(np.argmax(sw["y"]))
        stats[s] = {
            "rmse": float(np.sqrt(np.mean((mean - truth) ** 2))),
            "max_abs_error": float(np.max(np.abs(mean - truth))),
            "band_coverage": float(np.mean(np.abs(mean - truth) <= 1.96 * sd)),
            "mean_range": [float(mean.min()), float(mean.max())],
            "gp_points": int(gp_U.shape[0]),
            "gp_spread": mean_pairwise_distance(gp_U[:, [iC, ig]]),
            "gp_frac_within_0.01_of_best": float(np.mean(gp_y >= sw["y"][best] - NEAR_BEST)),
            "gp_frac_on_edge": float(np.mean(np.any((gp_U[:, [iC, ig]] < 0.01) | (gp_U[:, [iC, ig]] > 0.99),
                                                    axis=1))),
            "best_found": float(sw["y"][best]),
            "best_trial": int(sw["index"][best]),
            "best_C": float(axis_values(space.dims[iC], sw["U"][best:best + 1, iC])[0][0]),
            "best_gamma": float(axis_values(space.dims[ig], sw["U"][best:best + 1, ig])[0][0]),
        }
    sobol_fit = fit_multiverse(space, sobol["ivr"], sweeps["ivr"]["y"][~sweeps["ivr"]["gp_phase"]], seed=seed,
                               bounds=sweeps["ivr"]["bounds"])
    sobol_mean = sobol_fit.gp.predict(P, noise=True)[0].reshape(truth.shape)
    timings["gp_fits_s"] = time.perf_counter() - t0
    numbers = {
        "seed": seed,
        "sobol_points_identical": sobol_diff <= 1e-6,
        "sobol_only_rmse": float(np.sqrt(np.mean((sobol_mean - truth) ** 2))),
        "sobol_spread": mean_pairwise_distance(sobol["ivr"][:, [iC, ig]]),
        "strategies": stats,
        "timings_s": {k: round(v, 2) for k, v in timings.items()},
    }
    return {"sweeps": sweeps, "maps": maps, "iC": iC, "ig": ig}, numbers


def print_table(numbers: dict[str, Any], grid: int) -> None:
    gp_points = next(iter(numbers["strategies"].values()))["gp_points"]
    print(f"\nseed {numbers['seed']}: posterior mean vs ground truth ({grid}x{grid}); spread etc. of the {gp_points} "
          f"GP-phase points")
    print(f"{'strategy':<10}{'RMSE':>8}{'max|err|':>10}{'band':>7}{'spread':>9}{'near best':>11}{'on edge':>9}"
          f"{'best found':>12}")
    sobol = f"sobol({SETTINGS['n_initial']})"
    print(f"{sobol:<10}{numbers['sobol_only_rmse']:>8.3f}{'':>10}{'':>7}{numbers['sobol_spread']:>9.3f}")
    for s, st in numbers["strategies"].items():
        print(f"{s:<10}{st['rmse']:>8.3f}{st['max_abs_error']:>10.3f}{st['band_coverage']:>7.2f}{st['gp_spread']:>9.3f}"
              f"{st['gp_frac_within_0.01_of_best']:>11.2f}{st['gp_frac_on_edge']:>9.2f}{st['best_found']:>12.4f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("docs/figures"), help="folder for the PNG and JSON")
    parser.add_argument("--seed", type=int, default=0,
                        help="the sweeps' seed (Sobol scramble, GP) and the analysis fits'; the figure shows it")
    parser.add_argument("--extra-seeds", type=int, nargs="*", default=[],
                        help="more seeds to sweep and measure (numbers in the JSON only, ~65 s each)")
    parser.add_argument("--tracking-uri", default=None,
                        help="MLflow store for the sweeps (default: a SQLite file in a temporary folder)")
    parser.add_argument("--grid", type=int, default=25, help="ground-truth grid points per axis")
    parser.add_argument("--num-trials", type=int, default=SETTINGS["num_trials"],
                        help=f"trials per sweep: {SETTINGS['n_initial']} Sobol points, then batches of "
                             f"{SETTINGS['batch_size']} chosen by each strategy (fewer: a quicker, rougher comparison)")
    parser.add_argument("overrides", nargs="*", metavar="OVERRIDE",
                        help="more Hydra overrides for both sweeps, e.g. ray.address=auto to run them on a cluster "
                             "(not the search itself: the strategies, seed and budget are what is compared)")
    args = parser.parse_args(argv)
    if args.num_trials <= SETTINGS["n_initial"]:
        parser.error(f"--num-trials {args.num_trials} leaves no trial for the GP to choose: give more than "
                     f"{SETTINGS['n_initial']} (the Sobol points), e.g. --num-trials 16")
    settings = sweep_settings(args.num_trials)
    overrides = tuple(args.overrides)
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()

    truth_cache: dict[str, Any] = {}
    drawn, numbers = measure(args.seed, tracking_uri=args.tracking_uri, grid=args.grid, truth_cache=truth_cache,
                             settings=settings, overrides=overrides)
    t0 = time.perf_counter()
    png = args.out / "svm_ivr_vs_ucb.png"
    draw(png, truth_cache["Cs"], truth_cache["gs"], truth_cache["truth"], drawn["maps"], drawn["sweeps"],
         numbers["strategies"], drawn["iC"], drawn["ig"], args.grid)
    numbers["timings_s"]["figure_s"] = round(time.perf_counter() - t0, 2)
    others = [measure(s, tracking_uri=args.tracking_uri, grid=args.grid, truth_cache=truth_cache,
                      settings=settings, overrides=overrides)[1]
              for s in args.extra_seeds if s != args.seed]

    truth = truth_cache["truth"]
    summary = {
        "experiment": "RBF SVC, breast cancer, test_acc over C in [1e-3, 1e5] x gamma in [1e-7, 1e1], both log",
        "command": shlex.join([Path(sys.executable).name, "experiments/svm_maps.py", *sys.argv[1:]]),
        "sweep": {**settings, "deterministic": True},
        "grid": args.grid,
        "metrics": {
            "rmse": f"root mean squared error of the GP posterior mean (fit_multiverse on the sweep's "
                    f"{args.num_trials} trials) against the ground truth, over the grid x grid points of the unit "
                    "square",
            "max_abs_error": "largest absolute error of that posterior mean on the grid",
            "band_coverage": "share of the grid's truth inside the map's mean +- 1.96 sd (the sd of a new trial's "
                             "test_acc: the GP's uncertainty over its hyperparameters' posterior, and its noise)",
            "mean_range": "smallest and largest posterior mean on the grid (inside the declared bounds [0, 1])",
            "gp_spread": f"mean pairwise Euclidean distance of the {args.num_trials - SETTINGS['n_initial']} "
                         "GP-phase points in the unit square (log C, log gamma scaled to [0, 1])",
            "gp_frac_within_0.01_of_best": "fraction of GP-phase points with test_acc >= best found - 0.01",
            "gp_frac_on_edge": "fraction of GP-phase points within 0.01 of an edge of the unit square",
            "sobol_only_rmse": f"RMSE of the GP fitted to the {SETTINGS['n_initial']} shared Sobol points alone",
            "uniform_spread_reference": "mean distance of two uniform points in the unit square",
        },
        "truth": {
            "max": float(truth.max()),
            "min": float(truth.min()),
            "frac_grid_within_0.01_of_max": float(np.mean(truth >= truth.max() - NEAR_BEST)),
        },
        "uniform_spread_reference": UNIFORM_SPREAD,
        **numbers,
        "figure": png.name,
        "other_seeds": others,
        "total_s": round(time.perf_counter() - started, 1),
    }
    (args.out / "svm_ivr_vs_ucb.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")

    for n in [numbers, *others]:
        print_table(n, args.grid)
    print(f"\nground truth max {truth.max():.4f}, min {truth.min():.4f}; uniform points' spread {UNIFORM_SPREAD:.3f}")
    print(f"wrote {png} ({png.stat().st_size / 1024:.0f} KB, seed {args.seed}) and "
          f"{args.out / 'svm_ivr_vs_ucb.json'}; total {summary['total_s']:.0f} s")


if __name__ == "__main__":
    main()
