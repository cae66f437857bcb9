"""The analysis sampler's speed: its log posterior per evaluation, and a whole posterior mixture.

Why: the slice sampler of :mod:`sweeper.search.hyperposterior` evaluates the log posterior some 10^5 times
per analysis (every bounded report curve, multiverse map and interaction test, and the searcher's tags of
each GP batch): in a profile of the unit tests (2026-12-07) it took 43 % of their CPU.
:class:`sweeper.search.log_posterior.LogPosterior` works the fixed parts out once per fit (decision 0083).

What, on real maps (:mod:`bench.ml_maps`: the demo's svm, wine with its plateau on the bound, and sgd with a
categorical dim), the first ``--trials`` points of a Sobol design (their true values):

- **per evaluation**: the median time of one evaluation along a walk from the fit's point that moves one
  coordinate at a time (:func:`sampler_walk`, as the sampler moves), ours and the composition it
  replaced (:func:`composed_log_posterior`: ``unpack -> warp_inputs -> sum_of_terms -> cholesky_with_jitter
  -> warped_log_likelihood`` plus the prior), and their ratio, both in this run;
- **whole mixture**: ``fit_posterior`` (the bounded fit, then its 64 slice-sampled members), wall seconds with
  ours and with the composition put in its place, and whether both drew the very same members (they must:
  the same bits, so the same chains).

    python -m bench sampler            # three maps, 32 trials (about a minute)
    python -m bench sampler --smoke    # the svm map, 16 trials, 8 members
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.linalg
from numpy.typing import NDArray

from bench.report import fmt, markdown_table, median, write_results
from sweeper.search.bounded import warped_log_likelihood
from sweeper.search.gp import GPFit, warp_inputs
from sweeper.search.gp_linalg import cholesky_with_jitter, sum_of_terms
from sweeper.search.hyper_vector import pack, parameter_slots, unpack


def composed_log_posterior(gp: GPFit, X: NDArray[np.float64], y: NDArray[np.float64]) -> Callable[
        [NDArray[np.float64]], float]:
    """The log posterior as the sampler computed it before decision 0083: a fit's public pieces per call."""
    slots = parameter_slots(gp)
    z_plain = (y - gp.y_mean) / gp.y_std

    def logp(theta: NDArray[np.float64]) -> float:
        lp, start = 0.0, 0
        for slot in slots:
            block = theta[start:start + slot.size]
            start += slot.size
            value = np.exp(block) if slot.log else block
            if np.any(value < slot.box[0]) or np.any(value > slot.box[1]):
                return -math.inf
            lp -= 0.5 * float(np.sum(((block - slot.prior[0]) / slot.prior[1]) ** 2))
        terms, noise, warp, inputs, metric_noise = unpack(theta, gp)
        Xw = warp_inputs(X, inputs)
        K = sum_of_terms(terms, Xw, Xw)
        K[np.diag_indices_from(K)] += noise
        if metric_noise > 0.0 and gp.warp is not None:  # GPFit.noise_at's share, on the point fit's warp
            spread = gp.warp.spread(y, metric_noise)
            spread /= gp.y_std
            K[np.diag_indices_from(K)] += spread * spread
        try:
            L = cholesky_with_jitter(K, max_tries=2)
        except np.linalg.LinAlgError:
            return -math.inf
        if warp is None:
            v = scipy.linalg.solve_triangular(L, z_plain, lower=True, check_finite=False)
            ll = -0.5 * float(v @ v) - float(np.sum(np.log(np.diag(L))))
        else:
            ll = warped_log_likelihood(warp, y, L)
        return ll + lp if math.isfinite(ll) else -math.inf

    return logp


def sampler_walk(logp: Callable[[NDArray[np.float64]], float], theta: NDArray[np.float64], calls: int,
                 seed: int = 0) -> list[NDArray[np.float64]]:
    """``calls`` points as the slice sampler visits them: each moves one coordinate (in turn, in a shuffled
    order, as its sweeps do) of the current point by a small step, and the walk goes on from it where its
    ``logp`` is finite; so blocks that do not read the coordinate repeat."""
    rng = np.random.default_rng(seed)
    points, x = [], theta.copy()
    while len(points) < calls:
        for j in rng.permutation(theta.size):
            trial = x.copy()
            trial[j] += rng.normal(0.0, 0.05)
            points.append(trial)
            if math.isfinite(logp(trial)):
                x = trial
    return points[:calls]


def _per_call_us(logp: Callable[[NDArray[np.float64]], float], theta: NDArray[np.float64], calls: int) -> float:
    """The median over 5 repeats of the time per evaluation along :func:`sampler_walk`'s points."""
    points = sampler_walk(logp, theta, calls)
    logp(theta)
    times = []
    for _ in range(5):
        started = time.perf_counter()
        for point in points:
            logp(point)
        times.append((time.perf_counter() - started) / calls * 1e6)
    return median(times)


def _mixture(X: NDArray[np.float64], y: NDArray[np.float64], bounds: Any, categories: dict[int, int],
             kept: int | None, composed: bool) -> tuple[float, NDArray[np.float64]]:
    """Wall seconds of ``fit_posterior`` and its members' parameter vectors (with the composition put in)."""
    from sweeper.search import hyperposterior

    original = hyperposterior.LogPosterior
    if composed:
        hyperposterior.LogPosterior = composed_log_posterior  # type: ignore[assignment,misc]  # the composition before decision 0083
    try:
        started = time.perf_counter()
        ensemble = hyperposterior.fit_posterior(X, y, seed=0, bounds=bounds, categories=categories, kept=kept)
        seconds = time.perf_counter() - started
    finally:
        hyperposterior.LogPosterior = original  # type: ignore[misc]  # the module's own class put back
    return seconds, np.array([pack(m) for m in ensemble.members])


def measure(name: str, trials: int, calls: int, kept: int | None = None) -> dict[str, Any]:
    from bench.ml_maps import MAPS, truth_at
    from sweeper.search.design import sobol_design
    from sweeper.search.hyperposterior import fit_posterior
    from sweeper.search.log_posterior import LogPosterior
    from sweeper.search.warping import MetricBounds

    space = MAPS[name].space
    X = space.to_unit(space.from_unit(sobol_design(trials, space.d, seed=0)))
    y = truth_at(name, X)
    categories = space.categories()
    bounds = MetricBounds(*MAPS[name].bounds)
    gp = fit_posterior(X, y, seed=0, bounds=bounds, categories=categories, kept=1).point
    theta = pack(gp)
    ours, composed = LogPosterior(gp, gp.X, gp.y), composed_log_posterior(gp, gp.X, gp.y)
    ours_us, composed_us = _per_call_us(ours, theta, calls), _per_call_us(composed, theta, calls)
    ours_s, ours_members = _mixture(X, y, bounds, categories, kept, composed=False)
    composed_s, composed_members = _mixture(X, y, bounds, categories, kept, composed=True)
    return {"map": name, "trials": trials, "members": len(ours_members), "parameters": int(theta.size),
            "ours_us": ours_us,
            "composed_us": composed_us, "ratio": composed_us / ours_us, "mixture_ours_s": ours_s,
            "mixture_composed_s": composed_s, "mixture_ratio": composed_s / ours_s,
            "same_members": bool(np.array_equal(ours_members, composed_members))}


def sampler_markdown(rows: list[dict[str, Any]]) -> str:
    return markdown_table(
        ["map", "trials", "members", "parameters", "per evaluation µs: ours", "before", "ratio", "mixture s: ours",
         "before", "ratio", "same members"],
        [[r["map"], str(r["trials"]), str(r["members"]), str(r["parameters"]), fmt(r["ours_us"], 1),
          fmt(r["composed_us"], 1), fmt(r["ratio"], 2), fmt(r["mixture_ours_s"], 2), fmt(r["mixture_composed_s"], 2),
          fmt(r["mixture_ratio"], 2), "yes" if r["same_members"] else "**no**"] for r in rows])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--maps", default="svm,wine,sgd", help="maps of bench/ml_maps.py (default svm,wine,sgd)")
    parser.add_argument("--trials", type=int, default=32, help="trials of each map's Sobol design (default 32)")
    parser.add_argument("--calls", type=int, default=400, help="evaluations per timed repeat (default 400)")
    parser.add_argument("--smoke", action="store_true", help="the svm map, 16 trials, 8 members: a check that it runs")


def run(args: argparse.Namespace) -> None:
    if args.smoke:
        rows = [measure("svm", 16, 20, kept=8)]
    else:
        rows = [measure(name, args.trials, args.calls) for name in args.maps.split(",")]
    write_results("sampler_speed" + ("_smoke" if args.smoke else ""), sampler_markdown(rows), {"rows": rows})
