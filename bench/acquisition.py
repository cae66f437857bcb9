"""Acquisition latency: GP fit and IVR picks of the sweeper against Emukit's IVR and BoTorch's qNIPV.

Why: the searcher runs in Tune's driver loop, so every suggestion's latency delays the
whole sweep; and the vectorised greedy IVR of :mod:`sweeper.search.acquisition` should choose what
Emukit's ``IntegratedVarianceReduction`` chooses, only faster.

What, for every ``n`` (observations) and ``d`` (dimensions):

- data: ``X`` = scrambled Sobol points in the unit cube, ``y = sum_i sin(2 pi x_i) + 0.01 N(0, 1)``;
  candidates = 2048 Sobol points, integration points = 1024 Sobol points (other seeds);
- **refit**: the searcher's ``fit_gp(X, y, seed=0, n_restarts=3, max_fit_points=300,
  refine_max_points=1000)`` (exact below 300 points; above, restarts on a random 300 and one
  refinement on all up to n = 1000; see bench/scale.py), and for ``n <= --exact-fit-max-n``
  the exact ``fit_gp`` on all points too, timed apart; and the **warm refit** a sweep's
  searcher makes at ``n``: the same call started from its fit one batch earlier
  (``init=``, ``WARM_RESTARTS`` starts; sweeper.search.policy); every method below uses the
  searcher's fitted hyperparameters;
- **ours 1 / ours 32**: ``select_ivr_batch(gp, X_cond=X, X_cand=cand, X_mc=mc, q=1 | 32)``, plain IVR
  (the criterion Emukit and BoTorch compute); **slope weights**: the searcher's weights of the
  integration points (``slope_weights(gp, mc, ivr_slope_weight)``, issue 37), timed apart and added
  to the refit + batch totals, as the searcher computes them before each batch;
- **emukit 1**: a GPy ``GPRegression`` with the *same* fitted hyperparameters (standardised
  outputs, Matern-5/2 ARD, noise) in ``GPyModelWrapper``, ``IntegratedVarianceReduction``
  with ``x_monte_carlo=mc``, evaluated on the same candidates, argmax (model construction
  not timed);
- **emukit 32**: the greedy loop Emukit users write: pick the argmax, add it to the model
  with the predicted mean as its fantasised y (``model.set_data``), evaluate again. Emukit
  evaluates its acquisition one candidate at a time, so this is slow: the full 32 steps run
  only for ``n <= --emukit-batch-max-n``; above it one evaluation on ``--emukit-timed``
  candidates and one model update are timed and scaled to all candidates and 32 steps
  (marked ``≈``; Emukit's cost is linear in the candidates, one at a time);
- **botorch 1 / 32**: a ``SingleTaskGP`` with the same fixed hyperparameters (Matern-5/2
  ARD ``ScaleKernel``, the same noise, standardised outputs, no transforms) and
  ``qNegIntegratedPosteriorVariance(model, mc_points=mc)``, picked over the same
  candidates by ``optimize_acqf_discrete(acq, q=32, choices=cand)``, BoTorch's API for a
  finite candidate set (a sequential greedy: each step evaluates every remaining
  candidate with the earlier picks as ``X_pending``). It fantasises one GP per candidate,
  0.06 s (n = 50) to 5 s (n = 2000) each here, so a step over 2048 candidates takes minutes to hours: one
  evaluation on ``--botorch-timed`` candidates is timed and scaled to all candidates and
  32 steps (always ``≈``, a lower bound: later steps carry up to 31 pending points);
- **agreement**: whether both pick the same first point, how many of the 32 picks the two
  batches share (where Emukit ran whole), and the largest relative difference between our
  IVR and Emukit's, and between ``IPV(X) - IVR`` and BoTorch's ``-qNIPV`` (the same
  quantity), on the candidates evaluated: the same criterion to rounding gives the same
  greedy picks, so where a batch could not be run whole its IPV is ours (marked ``=``);
- **IPV**: the integrated posterior variance over the integration points given ``X`` plus
  each method's batch of 32 (one shared function, the fitted hyperparameters; lower is
  better, standardised units), and given ``X`` alone for scale.

Timings are medians over ``--repeats`` (Emukit: ``--emukit-repeats``).

    python -m bench acquisition                       # full (about 30 min on 2 cores)
    python -m bench acquisition --smoke               # n = 50 and 200, 1 repeat, few candidates timed
"""

from __future__ import annotations

import argparse
import contextlib
import time
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import scipy.linalg
from numpy.typing import NDArray

from bench.report import fmt, markdown_table, median, write_results
from sweeper.blas import one_blas_thread
from sweeper.search.acquisition import integrated_variance_reduction, select_ivr_batch
from sweeper.search.design import sobol_design
from sweeper.search.gp import GPY_JITTER, GPFit, cholesky_with_jitter
from sweeper.search.gp_batch import WARM_RESTARTS
from sweeper.search.gp_fit import fit_gp
from sweeper.search.settings import PolicySettings
from sweeper.search.slope_weights import slope_weights


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n", type=int, nargs="+", default=[50, 200, 800, 2000],
                        help="observations (default 50 200 800 2000)")
    parser.add_argument("--d", type=int, nargs="+", default=[2, 6], help="dimensions (default 2 6)")
    parser.add_argument("--repeats", type=int, default=3, help="repeats of the fit and of ours (default 3)")
    parser.add_argument("--candidates", type=int, default=2048, help="Sobol candidates (default 2048)")
    parser.add_argument("--mc", type=int, default=1024, help="Sobol integration points (default 1024)")
    parser.add_argument("--batch", type=int, default=32, help="greedy batch size (default 32)")
    parser.add_argument("--restarts", type=int, default=3, help="GP fit restarts (the sweeper's default)")
    parser.add_argument("--max-fit-points", type=int, default=300,
                        help="the searcher's gp_max_fit_points (default 300)")
    parser.add_argument("--refine-max-points", type=int, default=1000,
                        help="the searcher's gp_refine_max_points (default 1000)")
    parser.add_argument("--exact-fit-max-n", type=int, default=800,
                        help="also time the exact fit on all points up to this n (default 800)")
    parser.add_argument("--emukit-repeats", type=int, default=1, help="repeats of Emukit (default 1)")
    parser.add_argument("--emukit-max-n", type=int, default=2000, help="run Emukit only up to this n (default 2000)")
    parser.add_argument("--emukit-batch-max-n", type=int, default=50,
                        help="run Emukit's whole greedy batch up to this n (default 50); above it, extrapolate")
    parser.add_argument("--emukit-timed", type=int, default=128,
                        help="candidates Emukit evaluates when extrapolating (default 128)")
    parser.add_argument("--botorch-max-n", type=int, default=2000, help="run BoTorch only up to this n (default 2000)")
    parser.add_argument("--botorch-timed", type=int, default=32,
                        help="candidates BoTorch's qNIPV evaluates, timed and scaled to all (default 32)")
    parser.add_argument("--smoke", action="store_true",
                        help="n = 50 and 200, 1 repeat; Emukit and BoTorch extrapolated from 16 candidates")


def run(args: argparse.Namespace) -> None:
    if args.smoke:
        args.n, args.repeats, args.emukit_repeats, args.emukit_batch_max_n = [50, 200], 1, 1, 0
        args.emukit_timed, args.botorch_timed = 16, 16
    X, y = make_data(8, 2)  # warm-up, untimed: fills numpy's and scipy's caches
    select_ivr_batch(fit_gp(X, y, seed=0, n_restarts=1), X, X, X, q=2)
    rows = []
    with one_blas_thread(), torch_threads(1):  # the searcher's setting, for every method
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
    fit_s, exact_fit_s, ours1_s, ours_q_s, warm_fit_s, slope_s = [], [], [], [], [], []
    # The fit a sweep's searcher makes at n: warm-started from its fit one batch earlier (untimed).
    previous = fit_gp(X[:n - args.batch], y[:n - args.batch], seed=0, n_restarts=args.restarts,
                      max_fit_points=args.max_fit_points, refine_max_points=args.refine_max_points)
    for _ in range(args.repeats):
        t = time.perf_counter()
        fit_gp(X, y, seed=0, n_restarts=WARM_RESTARTS, max_fit_points=args.max_fit_points,
               refine_max_points=args.refine_max_points, init=previous)
        warm_fit_s.append(time.perf_counter() - t)
        t = time.perf_counter()
        gp = fit_gp(X, y, seed=0, n_restarts=args.restarts, max_fit_points=args.max_fit_points,
                    refine_max_points=args.refine_max_points)
        fit_s.append(time.perf_counter() - t)
        if n <= args.exact_fit_max_n:
            if n <= args.max_fit_points:
                exact_fit_s.append(fit_s[-1])  # the same fit
            else:
                t = time.perf_counter()
                fit_gp(X, y, seed=0, n_restarts=args.restarts)
                exact_fit_s.append(time.perf_counter() - t)
        t = time.perf_counter()
        first = select_ivr_batch(gp, X_cond=X, X_cand=cand, X_mc=mc, q=1)
        ours1_s.append(time.perf_counter() - t)
        t = time.perf_counter()
        ours = select_ivr_batch(gp, X_cond=X, X_cand=cand, X_mc=mc, q=args.batch)
        ours_q_s.append(time.perf_counter() - t)
        t = time.perf_counter()
        slope_weights(gp, mc, PolicySettings().ivr_slope_weight)
        slope_s.append(time.perf_counter() - t)
    ipv_before = integrated_posterior_variance(gp, X, mc)
    ivr_ours = integrated_variance_reduction(gp, X, cand, mc)
    row: dict[str, Any] = {
        "n": n, "d": d, "fit_s": median(fit_s), "exact_fit_s": median(exact_fit_s) if exact_fit_s else None,
        "warm_fit_s": median(warm_fit_s), "warm_fit_s_all": warm_fit_s,
        "ours_1_s": median(ours1_s), "ours_q_s": median(ours_q_s), "slope_s": median(slope_s), "slope_s_all": slope_s,
        "fit_s_all": fit_s, "exact_fit_s_all": exact_fit_s, "ours_1_s_all": ours1_s, "ours_q_s_all": ours_q_s,
        "lengthscales": gp.lengthscales.tolist(), "variance": gp.variance, "noise_variance": gp.noise_variance,
        "ipv_before": ipv_before,
        "ipv_ours": integrated_posterior_variance(gp, np.vstack([X, cand[ours.indices]]), mc),
    }
    if n <= args.emukit_max_n:
        row.update(measure_emukit(gp, cand, mc, ivr_ours, first, ours, row, args))
    if n <= args.botorch_max_n:
        row.update(measure_botorch(gp, cand, mc, ivr_ours, ipv_before, args))
    return row


def measure_emukit(
    gp: GPFit, cand: NDArray[np.float64], mc: NDArray[np.float64], ivr_ours: NDArray[np.float64],
    first: Any, ours: Any, row: dict[str, Any], args: argparse.Namespace,
) -> dict[str, Any]:
    """Emukit's greedy batch, whole up to ``--emukit-batch-max-n``, else timed on a few candidates."""
    q, c = args.batch, cand.shape[0]
    whole = row["n"] <= args.emukit_batch_max_n
    em1_s, em_q_s = [], []
    for _ in range(args.emukit_repeats):
        if whole:
            picks, eval_s, update_s, ivr_emukit = emukit_greedy(gp, cand, mc, q)
            em1_s.append(eval_s[0])
            em_q_s.append(sum(eval_s) + sum(update_s[: q - 1]))
        else:  # Emukit evaluates one candidate at a time: its cost is linear in the candidates
            k = min(args.emukit_timed, c)
            picks, eval_s, update_s, ivr_emukit = emukit_greedy(gp, cand[:k], mc, 1)
            em1_s.append(eval_s[0] * c / k)
            em_q_s.append(q * em1_s[-1] + (q - 1) * update_s[0])
    k = ivr_emukit.shape[0]
    out: dict[str, Any] = {
        "emukit_whole": whole, "emukit_1_s": median(em1_s), "emukit_q_s": median(em_q_s),
        "emukit_1_s_all": em1_s, "emukit_q_s_all": em_q_s, "emukit_candidates_evaluated": k,
        "ivr_max_rel_diff": float(np.max(np.abs(ivr_ours[:k] - ivr_emukit)) / np.max(np.abs(ivr_emukit))),
    }
    if whole:
        out.update({
            "same_first_pick": picks[0] == int(first.indices[0]),
            "common_picks": len(set(picks) & set(ours.indices.tolist())), "picks_compared": q,
            "ipv_emukit": integrated_posterior_variance(gp, np.vstack([gp.X, cand[picks]]), mc),
        })
    return out


def measure_botorch(
    gp: GPFit, cand: NDArray[np.float64], mc: NDArray[np.float64], ivr_ours: NDArray[np.float64],
    ipv_before: float, args: argparse.Namespace,
) -> dict[str, Any]:
    """BoTorch's qNIPV on a few candidates, timed and scaled to a whole greedy batch (always ≈)."""
    import torch
    from botorch.acquisition.active_learning import qNegIntegratedPosteriorVariance

    q, c = args.batch, cand.shape[0]
    k = min(args.botorch_timed, c)
    acquisition = qNegIntegratedPosteriorVariance(botorch_model(gp), mc_points=torch.tensor(mc))
    per_candidate = []
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        for _ in range(args.emukit_repeats):
            t = time.perf_counter()
            # optimize_acqf_discrete evaluates choices as a t-batch of q=1 points, like this
            values = acquisition(torch.tensor(cand[:k])[:, None, :]).numpy()
            per_candidate.append((time.perf_counter() - t) / k)
    one = median(per_candidate) * c
    ipv_after = ipv_before - ivr_ours[:k]  # what -qNIPV estimates, by our numbers
    return {
        "botorch_1_s": one, "botorch_q_s": q * one, "botorch_candidates_evaluated": k,
        "botorch_per_candidate_s_all": per_candidate,
        "botorch_max_rel_diff": float(np.max(np.abs(-values - ipv_after)) / np.max(np.abs(ipv_after))),
    }


def botorch_model(gp: GPFit) -> Any:
    """A BoTorch ``SingleTaskGP`` holding ``gp``'s hyperparameters, fixed (float64, eval mode).

    Standardised outputs (``gp``'s scale), no outcome or input transform, and a noise
    constraint loose enough for ``gp``'s noise (BoTorch's default floor is 1e-4).
    """
    import torch
    from botorch.models import SingleTaskGP
    from gpytorch.constraints import GreaterThan
    from gpytorch.kernels import MaternKernel, ScaleKernel
    from gpytorch.likelihoods import GaussianLikelihood

    z = (gp.y - gp.y_mean) / gp.y_std
    kernel = ScaleKernel(MaternKernel(nu=2.5, ard_num_dims=gp.dim))
    likelihood = GaussianLikelihood(noise_constraint=GreaterThan(1e-12))
    model = SingleTaskGP(torch.tensor(gp.X), torch.tensor(z)[:, None], likelihood=likelihood, covar_module=kernel,
                         outcome_transform=None)
    model.to(torch.float64)
    kernel.base_kernel.lengthscale = torch.tensor(gp.lengthscales, dtype=torch.float64)
    kernel.outputscale = torch.tensor(gp.variance, dtype=torch.float64)
    likelihood.noise = torch.tensor(gp.noise_variance, dtype=torch.float64)
    return model.eval()


@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run torch on ``n`` threads (as our numpy runs on one BLAS thread), restored after."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


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

    def approx(r: dict[str, Any], key: str) -> str:
        return ("" if r.get("emukit_whole") and key.startswith("emukit") else "≈") + fmt(r.get(key))

    header = ["n", "d", "refit s (searcher, cold)", "warm refit s (searcher in a sweep)", "exact fit s", "ours 1 s",
              f"ours {q} s", "slope weights s", f"cold refit + weights + ours {q} s",
              f"warm refit + weights + ours {q} s", "Emukit 1 s", f"Emukit {q} s",
              "BoTorch 1 s", f"BoTorch {q} s",
              f"speed-up {q} vs Emukit", "vs BoTorch", "same picks (Emukit)", "criterion rel. diff Emukit / BoTorch",
              "IPV before", "IPV ours", "IPV Emukit", "IPV BoTorch"]
    table = []
    for r in rows:
        em, bt = "emukit_1_s" in r, "botorch_1_s" in r
        table.append([
            str(r["n"]), str(r["d"]), fmt(r["fit_s"]), fmt(r["warm_fit_s"]), fmt(r["exact_fit_s"]), fmt(r["ours_1_s"]),
            fmt(r["ours_q_s"]), fmt(r.get("slope_s", 0.0)), fmt(r["fit_s"] + r.get("slope_s", 0.0) + r["ours_q_s"]),
            fmt(r["warm_fit_s"] + r.get("slope_s", 0.0) + r["ours_q_s"]),
            approx(r, "emukit_1_s") if em else "—", approx(r, "emukit_q_s") if em else "—",
            approx(r, "botorch_1_s") if bt else "—", approx(r, "botorch_q_s") if bt else "—",
            (("" if r["emukit_whole"] else "≈") + fmt(r["emukit_q_s"] / r["ours_q_s"]) + "×") if em else "—",
            ("≈" + fmt(r["botorch_q_s"] / r["ours_q_s"]) + "×") if bt else "—",
            f"{r['common_picks']}/{r['picks_compared']}" if "common_picks" in r else "—",
            f"{fmt(r.get('ivr_max_rel_diff'), 2)} / {fmt(r.get('botorch_max_rel_diff'), 2)}",
            fmt(r["ipv_before"], 4), fmt(r["ipv_ours"], 4),
            fmt(r["ipv_emukit"], 4) if "ipv_emukit" in r else ("= ours" if em else "—"),
            "= ours" if bt else "—",
        ])
    note = (f"{args.candidates} Sobol candidates, {args.mc} Sobol integration points; one BLAS/torch thread. "
            f"Refit: the searcher's fit_gp ({args.restarts} restarts, max_fit_points={args.max_fit_points}, "
            f"refine_max_points={args.refine_max_points}); warm refit: the same, as a sweep makes it, started from "
            f"its fit on the first n - {q} points plus the fixed start ({WARM_RESTARTS} starts); exact fit: all "
            f"points, up to n={args.exact_fit_max_n}. "
            f"Medians of {args.repeats} repeat(s) (Emukit, BoTorch: {args.emukit_repeats}). Emukit's greedy batch "
            f"(fantasised means) ran whole up to n={args.emukit_batch_max_n}; above, one evaluation on "
            f"{args.emukit_timed} candidates and one model update were timed and scaled to {args.candidates} "
            f"candidates and {q} steps (≈). BoTorch: SingleTaskGP with the same fixed hyperparameters, "
            f"qNegIntegratedPosteriorVariance as optimize_acqf_discrete(q={q}) evaluates it, timed on "
            f"{args.botorch_timed} candidates and scaled likewise (≈; a lower bound). Criterion rel. diff: largest "
            f"difference between our IVR and Emukit's, and between IPV(X) - IVR and BoTorch's -qNIPV, relative to "
            f"the largest value: the same criterion gives the same greedy picks, so an IPV marked '= ours' is ours. "
            f"IPV: integrated posterior variance over the integration points (standardised units; lower is "
            f"better) given X (before) and X plus the batch of {q}.")
    return f"### IVR latency: ours vs Emukit and BoTorch\n\n{note}\n\n{markdown_table(header, table)}"
