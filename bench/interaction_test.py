"""The multiverse's interaction verdicts (Bell et al. 2022, eq. 8) against truths whose interactions are known.

``sweeper multiverse`` compares an additive GP with the shared one, over all dims and per pair, and reads
``log10 K > 1`` as "no interaction", ``< -2`` as "interaction" (decision 0085; ``< -1`` before). With a bounded
metric each model now learns its own warp and the likelihoods are of the metric's own values; before, both models
took the warp learned by the analysis's shared fit. This measures the verdicts both ways, where the answer is known:

- **additive truths**: a choice that shifts the metric beside two smooth dims; three smooth dims; a choice beside
  two dims near the ceiling of 1, where a warp bends most (clipping the noisy scores at 1 gives the expected
  metric 0.2-0.5 % of interaction);
- **interacting truths**: a choice that sets a dim's slope (11 % of the variance); a product of two dims (89 %);
- **real maps** (the committed truths of :mod:`bench.ml_maps`): sgd's choice of loss barely interacts with either
  dim (0.0 and 0.5 %), mlp's two dims hardly (1.2 %); the others interact (17-62 %).

Each test's true share of interaction variance comes from an ANOVA of a dense grid (:func:`anova_shares`); at most
``ABSENT`` counts as none, at least ``PRESENT`` as an interaction. Every sweep is Sobol points, bounded in ``[0, 1]``
(krr in ``(-inf, 1]``), the GP fitted as the analysis fits it. Beside the verdicts, each row keeps the share of
interaction in the fitted map's own Sobol indices (``map_interaction``, ``1 - Σ main``).

    python -m bench interaction --jobs 2       # 3 seeds per cell (~6 min on 2 cores)
    python -m bench interaction --smoke        # three sweeps of 32 trials: a check that it runs
"""

from __future__ import annotations

import argparse
import itertools
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from bench.ml_maps import HELD_OUT, MAPS, load_grid, truth_at
from bench.report import markdown_table, run_jobs, write_results

CHOICE = {"c": "choice(a, b, c)", "x0": "interval(0, 1)", "x1": "interval(0, 1)"}
SMOOTH = {"x0": "interval(0, 1)", "x1": "interval(0, 1)", "x2": "interval(0, 1)"}
OFFSET = np.array([0.0, 0.03, -0.02])
SLOPE = np.array([0.0, 0.08, -0.08])


def _level(u: NDArray[np.float64]) -> NDArray[np.int64]:
    return np.minimum((u * 3).astype(np.int64), 2)


#: name -> (search space, truth on the unit cube, the pairs of columns that interact).
TRUTHS: dict[str, tuple[dict[str, str], Callable[[NDArray[np.float64]], NDArray[np.float64]], set[tuple[int, int]]]] = {
    "choice shifts": (CHOICE, lambda X: 0.8 + OFFSET[_level(X[:, 0])] + 0.05 * np.sin(4 * X[:, 1]) + 0.03 * X[:, 2],
                      set()),
    "smooth, additive": (SMOOTH, lambda X: 0.8 + 0.05 * np.sin(4 * X[:, 0]) + 0.05 * X[:, 1] ** 2 + 0.03 * X[:, 2],
                         set()),
    "near the ceiling": (CHOICE, lambda X: 0.955 + OFFSET[_level(X[:, 0])] + 0.03 * X[:, 1] ** 2 - 0.02 * X[:, 2],
                         set()),
    "choice sets a slope": (CHOICE, lambda X: 0.8 + OFFSET[_level(X[:, 0])] + SLOPE[_level(X[:, 0])] * X[:, 1]
                            + 0.03 * X[:, 2], {(0, 1)}),
    "product": (SMOOTH, lambda X: 0.8 + 0.3 * (X[:, 0] - 0.5) * (X[:, 1] - 0.5) + 0.03 * X[:, 2], {(0, 1)}),
}
SIZES = (32, 64)
NOISES = (0.005, 0.02)
#: A real map's test counts as "no interaction" in truth at or below this share of the variance, "interaction" at or
#: above ``PRESENT``; in between it is not scored.
ABSENT, PRESENT = 0.02, 0.05


def anova_shares(v: NDArray[np.float64]) -> dict[tuple[int, ...], float]:
    """Each pair's share of the variance of a grid of values, and all interactions' (key ``()``), by ANOVA.

    Functional ANOVA on the grid with equal weights per node: the main effect of a dim is the grid's mean over
    the others less the grand mean; a pair's effect what its two-dim mean adds to both mains.
    """
    d, mu, var = v.ndim, float(v.mean()), float(v.var())
    mains = [v.mean(axis=tuple(k for k in range(d) if k != i)) - mu for i in range(d)]
    shares: dict[tuple[int, ...], float] = {(): 1.0 - sum(float(np.var(m)) for m in mains) / var}
    for i, j in itertools.combinations(range(d), 2):
        others = tuple(k for k in range(d) if k not in (i, j))
        joint = (v.mean(axis=others) if others else v) - mu - mains[i][:, None] - mains[j][None, :]
        shares[(i, j)] = float(np.mean(joint**2)) / var
    return shares


def grid_interaction_shares(name: str) -> dict[tuple[int, ...], float]:
    """:func:`anova_shares` of map ``name``'s committed grid."""
    return anova_shares(load_grid(name)[0])


def truth_interaction_shares(name: str, noise: float, nodes: int = 48) -> dict[tuple[int, ...], float]:
    """:func:`anova_shares` of the expected metric of truth ``name``: ``E[clip(f + N(0, noise²), 0, 1)]``.

    Near the ceiling the clipping of noisy scores at 1 bends an additive ``f``, so what a sweep measures can
    interact where ``f`` does not: the expectation is the truth the verdicts are scored against. Upper clip in
    closed form, ``E[min(g, 1)] = f - ((f - 1) Φ(z) + σ φ(z))`` with ``z = (f - 1) / σ`` (no truth comes near 0).
    """
    from scipy.stats import norm

    specs, f, _ = TRUTHS[name]
    axes = [np.array([0.5, 1.5, 2.5]) / 3 if "choice" in spec else (np.arange(nodes) + 0.5) / nodes
            for spec in specs.values()]
    grid = np.stack([g.ravel() for g in np.meshgrid(*axes, indexing="ij")], axis=1)
    mean = f(grid)
    z = (mean - 1.0) / noise
    expected = mean - ((mean - 1.0) * norm.cdf(z) + noise * norm.pdf(z))
    return anova_shares(expected.reshape([a.size for a in axes]))


def _verdicts(specs: dict[str, str], X: NDArray[np.float64], y: NDArray[np.float64],
              bounds: tuple[float | None, float | None], seed: int) -> dict[str, Any]:
    """``log10 K`` of every test as shipped (each model its own warp) and as before (the shared fit's warp for both)."""
    from bench.efficiency import _one_thread
    from sweeper.analysis.multiverse import fit_multiverse, interaction_tests, posterior_sensitivity
    from sweeper.search.grammar import parse_specs
    from sweeper.search.interaction import interaction_bayes_factor
    from sweeper.search.warping import MetricBounds

    _one_thread()
    space = parse_specs(specs)
    fit = fit_multiverse(space, X, y, seed=seed, bounds=MetricBounds(*bounds), kept=1)
    t0 = time.perf_counter()
    shipped = interaction_tests(fit, seed=seed)
    seconds = time.perf_counter() - t0
    metric: dict[tuple[int, ...], float] = {(): shipped.overall.log10_K}
    if space.d > 2:  # with two dims the pair test is the overall test
        metric.update({tuple(space.names.index(n) for n in pair): bf.log10_K for pair, bf in shipped.pairs.items()})
    modelled: dict[tuple[int, ...], float] = {}
    cats = space.categories()
    t0 = time.perf_counter()
    overall = interaction_bayes_factor(X, y, categories=cats, seed=[seed, 1], warp=fit.gp.warp, learn_warp=False)
    modelled[()] = overall.log10_K
    for key in metric:
        if key:
            modelled[key] = interaction_bayes_factor(
                X, y, categories=cats, pair=(key[0], key[1]), seed=[seed, 1], warp=fit.gp.warp, learn_warp=False,
                additive_log_likelihood=overall.additive_log_likelihood).log10_K
    before_s = time.perf_counter() - t0
    mains = posterior_sensitivity(fit, n_base=512, repeats=2, seed=seed).main
    return {"tests": [{"dims": list(k), "shipped": metric[k], "before": modelled[k]} for k in metric],
            "test_s": seconds, "before_s": before_s, "map_interaction": 1.0 - float(np.sum(mains))}


def truth_case(name: str, n: int, noise: float, seed: int) -> dict[str, Any]:
    from sweeper.search.design import sobol_design

    specs, f, pairs = TRUTHS[name]
    X = sobol_design(n, len(specs), seed=seed)
    y = np.clip(f(X) + np.random.default_rng(seed).normal(0.0, noise, n), 0.0, 1.0)
    row = {"case": "truth", "name": name, "n": n, "noise": noise, "seed": seed, **_verdicts(specs, X, y, (0, 1), seed)}
    _score(row["tests"], truth_interaction_shares(name, noise))
    return row


def map_case(name: str, n: int, seed: int) -> dict[str, Any]:
    from sweeper.search.design import sobol_design

    m = MAPS[name]
    X = sobol_design(n, m.space.d, seed=seed)
    row = {"case": "map", "name": name, "n": n, "noise": 0.0, "seed": seed,
           **_verdicts(m.specs, X, truth_at(name, X), m.bounds, seed)}
    _score(row["tests"], grid_interaction_shares(name))
    return row


def _score(tests: list[dict[str, Any]], shares: dict[tuple[int, ...], float]) -> None:
    """Each test's true share of interaction variance, and whether it counts as an interaction (None: unscored)."""
    for t in tests:
        t["share"] = share = shares[tuple(t["dims"])]
        t["interacts"] = True if share >= PRESENT else (False if share <= ABSENT else None)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seeds", type=int, default=3, help="seeds per cell (default 3)")
    parser.add_argument("--jobs", type=int, default=1, help="sweeps in parallel processes (default 1)")
    parser.add_argument("--smoke", action="store_true", help="three sweeps of 32 trials: a check that it runs")


def run(args: argparse.Namespace) -> None:
    jobs: list[tuple[Any, tuple[Any, ...]]]
    if args.smoke:
        jobs = [(truth_case, ("near the ceiling", 32, 0.005, 0))]
        jobs += [(map_case, (name, 32, 0)) for name in ("svm", "mlp")]
    else:
        jobs = [(truth_case, (name, n, noise, seed)) for name in TRUTHS for n in SIZES for noise in NOISES
                for seed in range(args.seeds)]
        jobs += [(map_case, (name, n, seed)) for name in MAPS for n in SIZES for seed in range(args.seeds)]
    rows = run_jobs(jobs, args.jobs)
    write_results("interaction_test" + ("_smoke" if args.smoke else ""), interaction_markdown(rows), {"rows": rows})


def _said(tests: list[dict[str, Any]], scale: str, verdict: str) -> int:
    """How many of ``tests`` the analysis's own rule (:meth:`sweeper.search.interaction.BayesFactor.verdict`) reads
    as ``verdict`` from their ``log10 K`` on ``scale``."""
    from sweeper.search.interaction import BayesFactor

    return sum(BayesFactor(t[scale], 0.0, 0.0, (), 0).verdict() == verdict for t in tests)


def interaction_markdown(rows: list[dict[str, Any]]) -> str:
    """Per truth and kind of test: how many said "interaction" and "no interaction", on each scale."""
    cells: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in rows:
        for t in r["tests"]:
            if t["interacts"] is None:
                continue
            kind = "overall" if not t["dims"] else "pair " + "×".join(map(str, t["dims"]))
            held = " (held out)" if r["case"] == "map" and r["name"] in HELD_OUT else ""
            truth = "interaction" if t["interacts"] else "none"
            if r["case"] == "map":
                truth += f" ({t['share']:.1%})"
            cells.setdefault((f"{r['case']}: {r['name']}{held}", kind, truth), []).append(t)
    body = [[case, kind, truth, str(len(ts)),
             f"{_said(ts, 'shipped', 'interaction')} / {_said(ts, 'shipped', 'no interaction')}",
             f"{_said(ts, 'before', 'interaction')} / {_said(ts, 'before', 'no interaction')}"]
            for (case, kind, truth), ts in cells.items()]
    table = markdown_table(["sweeps", "test", "truth", "tests", "each model its own warp (shipped): interaction / none",
                            "one warp, the shared fit's (before)"], body)
    tests = [t for r in rows for t in r["tests"] if t["interacts"] is not None]
    wrong = {scale: _said([t for t in tests if not t["interacts"]], scale, "interaction")
             + _said([t for t in tests if t["interacts"]], scale, "no interaction") for scale in ("shipped", "before")}
    none = [t for t in tests if not t["interacts"]]
    seconds, before = (np.median([r[k] for r in rows]) for k in ("test_s", "before_s"))
    found = [t for t in tests if t["interacts"]]
    return (f"Wrong verdicts in {len(tests)} scored tests: {wrong['shipped']} with each model's own warp (shipped), "
            f"{wrong['before']} with the shared fit's warp for both (before). Where the truth has no interaction "
            f"({len(none)} tests), 'interaction' was said on {_said(none, 'shipped', 'interaction')} and "
            f"{_said(none, 'before', 'interaction')}; where it has one ({len(found)}), it was found on "
            f"{_said(found, 'shipped', 'interaction')} and {_said(found, 'before', 'interaction')}. "
            f"Median time of a sweep's tests: {seconds:.1f} s as shipped, {before:.1f} s before.\n\n"
            f"{table}\n")
