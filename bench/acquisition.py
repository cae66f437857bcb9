"""Acquisition latency: GP fit and IVR picks of the sweeper against Emukit's IVR.

Why: the searcher runs in Tune's driver loop, so every suggestion's latency delays the
whole sweep; and the vectorised greedy IVR of :mod:`sweeper.acquisition` should choose what
Emukit's ``IntegratedVarianceReduction`` chooses, only faster.

What, for every ``n`` (observations) and ``d`` (dimensions):

- data: ``X`` = scrambled Sobol points in the unit cube, ``y = sum_i sin(2 pi x_i) + 0.01 N(0, 1)``;
  candidates = 2048 Sobol points, integration points = 1024 Sobol points (other seeds);
- **fit**: ``sweeper.gp.fit_gp(X, y, seed=0, n_restarts=3)``;
- **ours 1 / ours 32**: ``select_ivr_batch(gp, X_cond=X, X_cand=cand, X_mc=mc, q=1 | 32)``;
- **emukit 1**: a GPy ``GPRegression`` with the *same* fitted hyperparameters (standardised
  outputs, Matern-5/2 ARD, noise) in ``GPyModelWrapper``, ``IntegratedVarianceReduction``
  with ``x_monte_carlo=mc``, evaluated on the same candidates, argmax (model construction
  not timed);
- **emukit 32**: the greedy loop Emukit users write: pick the argmax, add it to the model
  with the predicted mean as its fantasised y (``model.set_data``), evaluate again. Emukit
  evaluates its acquisition one candidate at a time, so this is slow: the full 32 steps run
  only for ``n <= --emukit-batch-max-n``; above it ``--emukit-steps`` steps run and the time
  is extrapolated to 32 (marked ``≈``; each step costs the same, one full evaluation);
- **agreement**: whether both pick the same first point, how many of the 32 picks the two
  batches share, and the largest relative difference between the two IVR vectors;
- **IPV**: the integrated posterior variance over the integration points given ``X`` plus
  each method's batch of 32 (one shared function, the fitted hyperparameters; lower is
  better, standardised units), and given ``X`` alone for scale.

Timings are medians over ``--repeats`` (Emukit: ``--emukit-repeats``).

    python -m bench acquisition                       # full (about an hour, mostly Emukit)
    python -m bench acquisition --smoke               # 1 repeat, Emukit only at n=50
    python -m bench acquisition --n 50 200 800 2000   # add n=2000
"""

from __future__ import annotations

import argparse
import time
import warnings
from typing import Any

import numpy as np
import scipy.linalg
from numpy.typing import NDArray

from bench.report import fmt, markdown_table, median, write_results
from sweeper.acquisition import integrated_variance_reduction, select_ivr_batch
from sweeper.design import sobol_design
from sweeper.gp import GPY_JITTER, GPFit, cholesky_with_jitter, fit_gp


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n", type=int, nargs="+", default=[50, 200, 800], help="observations (default 50 200 800)")
    parser.add_argument("--d", type=int, nargs="+", default=[2, 6], help="dimensions (default 2 6)")
    parser.add_argument("--repeats", type=int, default=3, help="repeats of the fit and of ours (default 3)")
    parser.add_argument("--candidates", type=int, default=2048, help="Sobol candidates (default 2048)")
    parser.add_argument("--mc", type=int, default=1024, help="Sobol integration points (default 1024)")
    parser.add_argument("--batch", type=int, default=32, help="greedy batch size (default 32)")
    parser.add_argument("--restarts", type=int, default=3, help="GP fit restarts (the sweeper's default)")
    parser.add_argument("--emukit-repeats", type=int, default=1, help="repeats of Emukit (default 1)")
    parser.add_argument("--emukit-max-n", type=int, default=800, help="run Emukit only up to this n (default 800)")
    parser.add_argument("--emukit-batch-max-n", type=int, default=50,
                        help="run Emukit's whole greedy batch up to this n (default 50); above it, extrapolate")
    parser.add_argument("--emukit-steps", type=int, default=2, help="greedy steps timed when extrapolating (default 2)")
    parser.add_argument("--smoke", action="store_true",
                        help="1 repeat; Emukit only at n<=50 and extrapolated from 2 steps")


def run(args: argparse.Namespace) -> None:
    if args.smoke:
        args.repeats, args.emukit_repeats, args.emukit_max_n, args.emukit_batch_max_n = 1, 1, 50, 0
    X, y = make_data(8, 2)  # warm-up, untimed: imports GPy and fills numpy's and scipy's caches
    select_ivr_batch(fit_gp(X, y, seed=0, n_restarts=1), X, X, X, q=2)
    rows = []
    for d in args.d:
        for n in args.n:
            print(f"n={n} d={d} ...", flush=True)
            rows.append(measure(n, d, args))
            print("   ", {k: v for k, v in rows[-1].items() if not isinstance(v, list)}, flush=True)
    write_results("acquisition", acquisition_markdown(rows, args), {"settings": vars(args), "rows": rows})


# ---------------------------------------------------------------------- one (n, d)
def make_data(n: int, d: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Seeded observations: ``X`` (n, d) in the unit cube and ``y`` (n,)."""
    X = sobol_design(n, d, seed=0)
    y = np.sin(2.0 * np.pi * X).sum(axis=1) + 0.01 * np.random.default_rng(0).standard_normal(n)
    return X, y


def measure(n: int, d: int, args: argparse.Namespace) -> dict[str, Any]:
    X, y = make_data(n, d)
    cand = sobol_design(args.candidates, d, seed=1)
    mc = sobol_design(args.mc, d, seed=2)
    fit_s, ours1_s, ours_q_s = [], [], []
    for _ in range(args.repeats):
        t = time.perf_counter()
        gp = fit_gp(X, y, seed=0, n_restarts=args.restarts)
        fit_s.append(time.perf_counter() - t)
        t = time.perf_counter()
        first = select_ivr_batch(gp, X_cond=X, X_cand=cand, X_mc=mc, q=1)
        ours1_s.append(time.perf_counter() - t)
        t = time.perf_counter()
        ours = select_ivr_batch(gp, X_cond=X, X_cand=cand, X_mc=mc, q=args.batch)
        ours_q_s.append(time.perf_counter() - t)
    row: dict[str, Any] = {
        "n": n, "d": d, "fit_s": median(fit_s), "ours_1_s": median(ours1_s), "ours_q_s": median(ours_q_s),
        "fit_s_all": fit_s, "ours_1_s_all": ours1_s, "ours_q_s_all": ours_q_s,
        "lengthscales": gp.lengthscales.tolist(), "variance": gp.variance, "noise_variance": gp.noise_variance,
        "ipv_before": integrated_posterior_variance(gp, X, mc),
        "ipv_ours": integrated_posterior_variance(gp, np.vstack([X, cand[ours.indices]]), mc),
    }
    if n > args.emukit_max_n:
        return row
    steps = args.batch if n <= args.emukit_batch_max_n else min(args.emukit_steps, args.batch)
    em1_s, em_q_s = [], []
    for _ in range(args.emukit_repeats):
        picks, eval_s, update_s, ivr_emukit = emukit_greedy(gp, cand, mc, steps)
        em1_s.append(eval_s[0])
        if steps == args.batch:
            em_q_s.append(sum(eval_s) + sum(update_s[: args.batch - 1]))
        else:  # every step costs one full evaluation (+ one model update): scale to the batch
            em_q_s.append(args.batch * float(np.mean(eval_s)) + (args.batch - 1) * float(np.mean(update_s)))
    ivr_ours = integrated_variance_reduction(gp, X, cand, mc)
    common = len(set(picks) & set(ours.indices.tolist()))
    row.update({
        "emukit_1_s": median(em1_s), "emukit_q_s": median(em_q_s), "emukit_q_steps_run": steps,
        "emukit_1_s_all": em1_s, "emukit_q_s_all": em_q_s,
        "same_first_pick": picks[0] == int(first.indices[0]),
        "common_picks": common, "picks_compared": steps,
        "ivr_max_rel_diff": float(np.max(np.abs(ivr_ours - ivr_emukit)) / np.max(np.abs(ivr_emukit))),
    })
    if steps == args.batch:
        row["ipv_emukit"] = integrated_posterior_variance(gp, np.vstack([X, cand[picks]]), mc)
    return row


def integrated_posterior_variance(gp: GPFit, X_cond: NDArray[np.float64], X_mc: NDArray[np.float64]) -> float:
    """Mean over ``X_mc`` of the latent posterior variance given noisy observations at ``X_cond``.

    Uses only ``gp``'s hyperparameters (standardised scale), so both methods' batches are
    scored by the same yardstick.
    """
    K = gp.kernel(X_cond, X_cond)
    K[np.diag_indices_from(K)] += gp.noise_variance
    V = scipy.linalg.solve_triangular(cholesky_with_jitter(K), gp.kernel(X_cond, X_mc), lower=True)
    return float(np.mean(gp.variance - np.einsum("ij,ij->j", V, V)))


# ---------------------------------------------------------------------- Emukit
def emukit_greedy(
    gp: GPFit, cand: NDArray[np.float64], mc: NDArray[np.float64], steps: int
) -> tuple[list[int], list[float], list[float], NDArray[np.float64]]:
    """Emukit's IVR, greedily, with fantasised observations at the predicted mean.

    Returns the picks (indices into ``cand``), each step's seconds to evaluate the
    acquisition and take the argmax, each step's seconds to add the pick to the model
    (``steps - 1`` of them, at least one), and the IVR of every candidate at the first
    step, shape ``(c,)``.
    """
    import GPy
    from emukit.core import ContinuousParameter, ParameterSpace
    from emukit.experimental_design.acquisitions import IntegratedVarianceReduction
    from emukit.model_wrappers import GPyModelWrapper

    d = gp.dim
    z = (gp.y - gp.y_mean) / gp.y_std  # the standardised outputs the hyperparameters belong to
    kern = GPy.kern.Matern52(d, variance=gp.variance, lengthscale=gp.lengthscales.copy(), ARD=True)
    # GPy adds its own 1e-8 jitter to the likelihood variance; GPFit's noise includes it.
    gpy = GPy.models.GPRegression(gp.X, z[:, None], kernel=kern, noise_var=gp.noise_variance - GPY_JITTER)
    model = GPyModelWrapper(gpy)
    space = ParameterSpace([ContinuousParameter(f"x{i}", 0.0, 1.0) for i in range(d)])
    acquisition = IntegratedVarianceReduction(model, space, x_monte_carlo=mc)
    picks: list[int] = []
    eval_s: list[float] = []
    update_s: list[float] = []
    first_values = np.empty(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k in range(steps):
            t = time.perf_counter()
            values = acquisition.evaluate(cand)[:, 0]
            p = int(np.argmax(values))
            eval_s.append(time.perf_counter() - t)
            picks.append(p)
            if k == 0:
                first_values = values
            if k + 1 < steps or not update_s:  # time at least one update, for extrapolation
                t = time.perf_counter()
                x = cand[p : p + 1]
                mean, _ = model.predict(x)
                model.set_data(np.vstack([model.X, x]), np.vstack([model.Y, mean]))
                update_s.append(time.perf_counter() - t)
    return picks, eval_s, update_s, first_values


# ---------------------------------------------------------------------- table
def acquisition_markdown(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    q = args.batch
    header = ["n", "d", "fit s", "ours 1 s", f"ours {q} s", "emukit 1 s", f"emukit {q} s", "speed-up 1",
              f"speed-up {q}", "same 1st pick", "common picks", "IVR max rel. diff", "IPV before",
              "IPV ours", "IPV emukit"]
    table = []
    for r in rows:
        has_emukit = "emukit_1_s" in r
        estimated = has_emukit and r["emukit_q_steps_run"] < q
        table.append([
            str(r["n"]), str(r["d"]), fmt(r["fit_s"]), fmt(r["ours_1_s"]), fmt(r["ours_q_s"]),
            fmt(r.get("emukit_1_s")), ("≈" if estimated else "") + fmt(r.get("emukit_q_s")),
            fmt(r["emukit_1_s"] / r["ours_1_s"]) + "×" if has_emukit else "—",
            ("≈" if estimated else "") + fmt(r["emukit_q_s"] / r["ours_q_s"]) + "×" if has_emukit else "—",
            ("yes" if r["same_first_pick"] else "NO") if has_emukit else "—",
            f"{r['common_picks']}/{r['picks_compared']}" if has_emukit else "—",
            fmt(r.get("ivr_max_rel_diff"), 2), fmt(r["ipv_before"], 4), fmt(r["ipv_ours"], 4),
            fmt(r.get("ipv_emukit"), 4),
        ])
    note = (f"{args.candidates} Sobol candidates, {args.mc} Sobol integration points, GP fit with "
            f"{args.restarts} restarts; medians of {args.repeats} repeat(s) (Emukit: {args.emukit_repeats}). "
            f"Emukit ran up to n={args.emukit_max_n}; its greedy batch of {q} ran whole up to "
            f"n={args.emukit_batch_max_n}, else {args.emukit_steps} steps were timed and scaled to {q} (≈). "
            f"Common picks: of the Emukit steps run, how many are in our batch. IPV: integrated posterior "
            f"variance over the integration points (standardised units; lower is better) given X alone "
            f"(before) and X plus each method's batch of {q}.")
    return f"### IVR latency: ours vs Emukit\n\n{note}\n\n{markdown_table(header, table)}"
