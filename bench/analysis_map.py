"""Each design scored by the map ``sweeper multiverse`` draws from its points, as well as by the yardstick.

Why: ``python -m bench efficiency`` scores every strategy's points with one plain model, the yardstick
(:func:`bench.efficiency.shared_surrogate_mean`: one maximum-likelihood stationary GP, no warps). On a map
with a cliff, IVR spends trials on both sides of it; the stationary fit cannot bend that fast and calls the
jump noise (on the svm map at n = 35, a fitted noise variance of 0.14 of the data's on IVR's points, 0.03 on
Sobol's), which smooths the whole map. The map a user sees is not drawn by that fit: the analysis draws
it with the hyperparameter posterior mixture of :func:`sweeper.search.hyperposterior.fit_posterior`,
input-warped and, for a metric with declared bounds, output-warped inside them. This module scores every
design with that model too, so the benchmark says how many trials a design needs for the map users get.

The bounds are the map's declared ones (:data:`bench.efficiency.BOUNDS`, whatever ``--no-bounds`` told the
policy: IVR chooses on the raw scale either way, so its points are the same), and a map without bounds
(Branin, Hartmann-6) is drawn, as the analysis draws it, with the single maximum-likelihood fit.
NOTE: docs/decisions/0067-score-designs-by-the-analysis-map.md
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from bench.report import fmt, markdown_table

if TYPE_CHECKING:
    from sweeper.search.warping import MetricBounds

#: The n each run is scored at by default: a fit of the mixture costs 2-8 s at these n on one core.
ANALYSIS_N = (30, 35, 40, 45, 50)
#: Where a run keeps its scores: n -> normalised RMSE of the analysis's map over the test set.
FIELD = "analysis_nrmse"
#: The sampler's seed: one for every design, as the yardstick's restarts share seed 0.
SEED = 0

Run = dict[str, Any]


def declared_bounds(function: str) -> MetricBounds | None:
    """The bounds a user declares for the map's metric (:data:`bench.efficiency.BOUNDS`), or None."""
    from bench.efficiency import BOUNDS
    from sweeper.search.warping import MetricBounds

    return MetricBounds.parse(BOUNDS[function]) if function in BOUNDS else None


def analysis_map_mean(function: str, X: NDArray[np.float64], y: NDArray[np.float64],
                      X_test: NDArray[np.float64]) -> NDArray[np.float64]:
    """The mean of the analysis's model fitted on ``(X, y)`` at ``X_test``: ``sweeper multiverse``'s map."""
    from bench.efficiency import search_space
    from sweeper.search.hyperposterior import fit_posterior

    categories = search_space(function).categories() or None
    model = fit_posterior(X, y, seed=SEED, bounds=declared_bounds(function), categories=categories)
    mean: NDArray[np.float64] = model.predict_mean(X_test)
    return mean


def missing(run: Run, ns: Iterable[int]) -> list[int]:
    """The n of ``ns`` the run reaches and has no analysis score for yet."""
    have = run.get(FIELD, {})
    return [n for n in sorted(set(ns)) if n <= run["n_max"] and str(n) not in have]


def score_run(run: Run, ns: list[int]) -> dict[str, float]:
    """The analysis map's normalised RMSE after each of the run's first ``ns`` points (its saved points; nothing
    reruns)."""
    from bench.efficiency import normalised_errors, objective, test_set

    function = run["function"]
    f, _ = objective(function)
    X_test, truth = test_set(function)
    X = np.asarray(run["X"], dtype=np.float64)
    y = f(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {str(n): normalised_errors(analysis_map_mean(function, X[:n], y[:n], X_test), truth)[0] for n in ns}


def add_scores(runs: dict[str, Run], keys: list[str], ns: Iterable[int], jobs: int,
               saved: Callable[[Run], None], initializer: Callable[[], None]) -> None:
    """Score each run of ``keys`` at the ``ns`` it lacks, in ``jobs`` processes; ``saved(run)`` after each.

    A run that cannot be scored is named as it fails, the others go on and are saved, and the command then
    exits with the failures listed (SystemExit), so no table is written from a partial set without saying so.
    """
    todo = {key: need for key in keys if (need := missing(runs[key], ns))}
    print(f"{len(todo)} runs to score with the analysis's map", flush=True)
    failed: list[str] = []

    def merge(key: str, scored: Callable[[], dict[str, float]]) -> None:
        try:
            errors = scored()
        except (ValueError, RuntimeError, np.linalg.LinAlgError) as exc:
            failed.append(f"{key}: {exc}")
            print(f"{key}: not scored with the analysis's map: {exc}", flush=True)
            return
        runs[key][FIELD] = {**runs[key].get(FIELD, {}), **errors}
        saved(runs[key])

    if jobs > 1:
        with ProcessPoolExecutor(jobs, initializer=initializer) as pool:
            futures = {pool.submit(score_run, runs[key], need): key for key, need in todo.items()}
            for fut in as_completed(futures):
                merge(futures[fut], fut.result)
    else:
        initializer()
        for key, need in todo.items():
            merge(key, functools.partial(score_run, runs[key], need))
    if failed:
        raise SystemExit(f"{len(failed)} of {len(todo)} runs could not be scored with the analysis's map "
                         "(the others are saved):\n  " + "\n  ".join(failed))


def reach_markdown(rows: list[Run], functions: Iterable[str], strategies: Iterable[str]) -> str:
    """Trials each strategy needs for the analysis's map to reach Sobol's n = 50 error with the same model."""
    from bench.efficiency import _stats, against_sobol, trials_to_reach

    table = [[fn, st, fmt(target), fmt(_stats(sel, FIELD, 35)[0]), trials_to_reach(sel, target, FIELD), str(len(sel))]
             for fn, st, target, sel in against_sobol(rows, functions, strategies, FIELD)]
    if not table:
        return ""
    return ("### Trials to reach Sobol's n=50 error, the analysis's map\n\nEach design scored by the model "
            "`sweeper multiverse` draws its map with (`fit_posterior`, the map's declared bounds; "
            "bench/analysis_map.py), Sobol's target scored by the same model; fewest scored n at which the mean "
            "error is at or below it.\n\n"
            + markdown_table(["function", "strategy", "Sobol n=50 error", "error at n=35", "trials", "seeds"], table))
