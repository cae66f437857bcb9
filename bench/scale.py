"""Scale: suggestion time and map quality of the GP searcher from n = 100 to 5,000 trials.

Why: an exact GP fit costs ``O(n^3)`` per likelihood evaluation, times the hundreds an
optimiser needs: at n = 800 the fit alone took 11.8 s, so a sweep of thousands of trials
would stall its driver. ``fit_gp(..., max_fit_points=M)`` fits the hyperparameters on a
seeded random subset of ``M`` observations and then conditions on all of them exactly;
this benchmark measures what that costs in time and what it loses in map quality.

What, for every test function, ``n`` and seed:

- data: ``X`` = ``n`` scrambled Sobol points (seed ``s``) in the unit cube, ``y = f(X)``
  with ``f`` from :mod:`bench.functions` (Branin, d = 2; Hartmann-6, d = 6), noise-free;
- **refit**: ``fit_gp(X, y, seed=s, n_restarts=--restarts, max_fit_points=M,
  refine_max_points=R)`` (the searcher's path), and for ``n <= --exact-max-n`` the exact
  ``fit_gp`` on all points;
- **batch of 32**: ``select_ivr_batch`` of the scaled fit, conditioning on ``X`` plus
  ``--pending`` pending points (the trials still running when a batch is planned), from
  2048 Sobol candidates with 1024 Sobol integration points (the searcher's defaults);
- **suggestion** = refit + batch: what the driver waits for before a batch of 32 starts;
- **map quality**: normalised RMSE of the posterior mean against ``f`` on ``--test``
  Sobol points (another seed): ``RMSE / sd(f(test))``; lower is better. ``loss`` is
  ``nRMSE(scaled) / nRMSE(exact) - 1`` per seed, then the median over seeds.

Timings and nRMSE are medians over ``--seeds`` seeds.

    python -m bench scale                  # full (about 30 min on 2 cores)
    python -m bench scale --smoke          # n = 100 and 2000, Hartmann-6, one seed (a few minutes)
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from bench.functions import branin, hartmann6
from bench.report import fmt, markdown_table, median, write_results
from sweeper.blas import one_blas_thread
from sweeper.search.acquisition import select_ivr_batch
from sweeper.search.design import sobol_design
from sweeper.search.gp import GPFit
from sweeper.search.gp_fit import fit_gp

FUNCTIONS: dict[str, tuple[Callable[[NDArray[np.float64]], NDArray[np.float64]], int]] = {
    "branin": (branin, 2),
    "hartmann6": (hartmann6, 6),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n", type=int, nargs="+", default=[100, 200, 500, 1000, 2000, 5000],
                        help="observations (default 100 200 500 1000 2000 5000)")
    parser.add_argument("--functions", nargs="+", choices=sorted(FUNCTIONS), default=["branin", "hartmann6"])
    parser.add_argument("--seeds", type=int, default=3, help="seeds per (function, n) (default 3)")
    parser.add_argument("--max-fit-points", type=int, nargs="+", default=[300],
                        help="subset sizes M of the restarts to compare (default 300, the searcher's default)")
    parser.add_argument("--refine-max-points", type=int, default=1000,
                        help="refine a subset fit on all n points up to this n "
                             "(default 1000, the searcher's); 0: never")
    parser.add_argument("--exact-max-n", type=int, default=1000,
                        help="fit the exact GP up to this n (default 1000; it takes minutes above)")
    parser.add_argument("--restarts", type=int, default=3, help="GP fit restarts (the searcher's default)")
    parser.add_argument("--batch", type=int, default=32, help="batch size (default 32)")
    parser.add_argument("--pending", type=int, default=8, help="pending points conditioned on (default 8)")
    parser.add_argument("--candidates", type=int, default=2048, help="Sobol candidates (default 2048)")
    parser.add_argument("--mc", type=int, default=1024, help="Sobol integration points (default 1024)")
    parser.add_argument("--test", type=int, default=4096, help="Sobol test points for the nRMSE (default 4096)")
    parser.add_argument("--smoke", action="store_true", help="n = 100 and 2000, one seed, Hartmann-6 only")


def run(args: argparse.Namespace) -> None:
    if args.smoke:
        args.n, args.seeds, args.functions = [100, 2000], 1, ["hartmann6"]
    X, y = sobol_design(8, 2, seed=0), np.arange(8.0)  # warm-up, untimed: imports GPy, fills caches
    select_ivr_batch(fit_gp(X, y, seed=0, n_restarts=1), X, X, X, q=2)
    rows = []
    with one_blas_thread():  # the searcher's setting: trials keep the other cores busy
        for name in args.functions:
            for n in args.n:
                for m in args.max_fit_points:
                    print(f"{name} n={n} M={m} ...", flush=True)
                    rows.append(measure(name, n, m, args))
                    print("   ", {k: v for k, v in rows[-1].items() if not isinstance(v, list)}, flush=True)
    write_results("scale", scale_markdown(rows, args), {"settings": vars(args), "rows": rows})


def normalised_rmse(gp: GPFit, X_test: NDArray[np.float64], f_test: NDArray[np.float64]) -> float:
    """``RMSE(posterior mean, f) / sd(f)`` over the test points (0: perfect; 1: the mean of f)."""
    return float(np.sqrt(np.mean((gp.predict_mean(X_test) - f_test) ** 2)) / np.std(f_test))


def measure(name: str, n: int, max_fit_points: int, args: argparse.Namespace) -> dict[str, Any]:
    f, d = FUNCTIONS[name]
    X_test = sobol_design(args.test, d, seed=10_000)
    f_test = f(X_test)
    cand = sobol_design(args.candidates, d, seed=1)
    mc = sobol_design(args.mc, d, seed=2)
    fit_s, batch_s, exact_fit_s, nrmse, nrmse_exact, loss = [], [], [], [], [], []
    for seed in range(args.seeds):
        X_all = sobol_design(n + args.pending, d, seed=[seed, 7])
        X = X_all[:n]  # finished trials; the rest are pending (asked, no result yet)
        y = f(X)
        t = time.perf_counter()
        gp = fit_gp(X, y, seed=seed, n_restarts=args.restarts, max_fit_points=max_fit_points,
                    refine_max_points=args.refine_max_points or None)
        fit_s.append(time.perf_counter() - t)
        t = time.perf_counter()
        select_ivr_batch(gp, X_all, cand, mc, args.batch)
        batch_s.append(time.perf_counter() - t)
        nrmse.append(normalised_rmse(gp, X_test, f_test))
        if n <= args.exact_max_n:
            if n <= max_fit_points:  # the scaled path is the exact one (tested bit-identical)
                exact_fit_s.append(fit_s[-1])
                nrmse_exact.append(nrmse[-1])
            else:
                t = time.perf_counter()
                exact = fit_gp(X, y, seed=seed, n_restarts=args.restarts)
                exact_fit_s.append(time.perf_counter() - t)
                nrmse_exact.append(normalised_rmse(exact, X_test, f_test))
            loss.append(nrmse[-1] / nrmse_exact[-1] - 1.0)
    suggestion_s = [a + b for a, b in zip(fit_s, batch_s, strict=True)]
    return {
        "function": name, "d": d, "n": n, "max_fit_points": max_fit_points, "subset": n > max_fit_points,
        "refined": max_fit_points < n <= args.refine_max_points,
        "fit_s": median(fit_s), "batch_s": median(batch_s), "suggestion_s": median(suggestion_s),
        "exact_fit_s": median(exact_fit_s) if exact_fit_s else None,
        "nrmse": median(nrmse), "nrmse_exact": median(nrmse_exact) if nrmse_exact else None,
        "loss": median(loss) if loss else None, "loss_max": max(loss) if loss else None,
        "fit_s_all": fit_s, "batch_s_all": batch_s, "exact_fit_s_all": exact_fit_s,
        "nrmse_all": nrmse, "nrmse_exact_all": nrmse_exact, "loss_all": loss,
    }


def scale_markdown(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    q = args.batch
    header = ["function", "n", "M", "hyperparameters fitted on", "refit s", f"batch of {q} s",
              f"suggestion s (refit + {q})", "exact fit s", "nRMSE", "nRMSE exact", "quality loss (median, max)"]
    table = []
    for r in rows:
        pct = "—" if r["loss"] is None else f"{100 * r['loss']:+.1f} %, {100 * r['loss_max']:+.1f} %"
        table.append([
            r["function"], str(r["n"]), str(r["max_fit_points"]),
            (f"restarts on random {r['max_fit_points']}, refined on all" if r["refined"]
             else f"random {r['max_fit_points']} of {r['n']}") if r["subset"] else "all (exact)",
            fmt(r["fit_s"]), fmt(r["batch_s"]), fmt(r["suggestion_s"]), fmt(r["exact_fit_s"]),
            fmt(r["nrmse"], 3), fmt(r["nrmse_exact"], 3), pct if r["subset"] else "0 (same fit)",
        ])
    note = (f"Noise-free test functions on Sobol designs; refit = `fit_gp(..., n_restarts={args.restarts}, "
            f"max_fit_points=M, refine_max_points={args.refine_max_points})` (restarts on a seeded random subset "
            f"of M; up to n = {args.refine_max_points} the best is refined by one L-BFGS-B run on all n; the "
            f"posterior conditions on all n); batch = "
            f"`select_ivr_batch` of {q} from {args.candidates} Sobol candidates with {args.mc} integration points, "
            f"conditioning on the n results plus {args.pending} pending points; one BLAS thread. nRMSE = RMSE of "
            f"the posterior mean over {args.test} Sobol test points / sd of f there. Quality loss = nRMSE(M) / "
            f"nRMSE(exact) - 1 per seed (exact: all n points fitted, up to n = {args.exact_max_n}). Medians over "
            f"{args.seeds} seed(s).")
    return f"### Scale: suggestion time and map quality vs n\n\n{note}\n\n{markdown_table(header, table)}"
