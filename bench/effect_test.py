"""How often the multiverse analysis's effect test shows an effect where there is none, and where there is one.

:mod:`sweeper.analysis.effect_test` asks whether a sweep's metric depends on any choice before the maps and the
Sobol indices are read. This measures it where the answer is known:

- **no effect**: scores of pure noise, ``0.8 + N(0, 0.05)``, modelled inside the bounds ``[0, 1]`` as a bounded
  accuracy is, and unbounded; 1, 2, 3 and 5 continuous dims and a space with a 3-level choice; 12, 32 and 64
  Sobol points. The share shown should be near the test's level, 0.05. Beside it, the share that the GP's
  likelihood alone, read as a Bayes factor, would have called an effect (``log10 K < -1``), and the most
  extreme ``log10 K`` noise gave;
- **real seed noise**: SGD on breast cancer, whose test accuracy varies with its shuffling seed only, over
  three choices the model never reads;
- **an effect**: the real maps of :mod:`bench.ml_maps` (their committed truths) at 12, 20 and 32 Sobol points.

    python -m bench effect --jobs 2            # 10 seeds per cell (~25 min on 2 cores)
    python -m bench effect --smoke             # one small cell of each: a check that it runs
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from bench.ml_maps import HELD_OUT, MAPS, truth_at
from bench.report import markdown_table, run_jobs, write_results

BOUNDS = (0.0, 1.0)
NOISE_SPACES = {"1 dim": {"x0": "interval(0, 1)"},
                "2 dims": {f"x{i}": "interval(0, 1)" for i in range(2)},
                "3 dims": {f"x{i}": "interval(0, 1)" for i in range(3)},
                "5 dims": {f"x{i}": "interval(0, 1)" for i in range(5)},
                "choice + 2 dims": {"c": "choice(a, b, c)", "x0": "interval(0, 1)", "x1": "interval(0, 1)"}}
SIZES = (12, 32, 64)
MAP_SIZES = (12, 20, 32)


def _test(specs: dict[str, str], X: np.ndarray, y: np.ndarray, bounds: tuple[float | None, float | None] | None,
          seed: int) -> dict[str, Any]:
    """The effect test as ``sweeper multiverse`` runs it: through the warp of the fit inside ``bounds`` (if any)."""
    from bench.efficiency import _one_thread
    from sweeper.analysis.effect_test import effect_test
    from sweeper.analysis.multiverse import fit_multiverse
    from sweeper.search.grammar import parse_specs
    from sweeper.search.warping import MetricBounds

    _one_thread()
    space = parse_specs(specs)
    warp = None if bounds is None else fit_multiverse(space, X, y, seed=0, bounds=MetricBounds(*bounds), kept=1).gp.warp
    t0 = time.perf_counter()
    test = effect_test(space, X, y, warp=warp, seed=seed)
    return {"log10_K": test.log10_K, "p_value": test.p_value, "as_good": test.as_good, "shown": test.shown,
            "test_s": time.perf_counter() - t0}


def noise_case(space_name: str, n: int, bounded: bool, seed: int) -> dict[str, Any]:
    from sweeper.search.design import sobol_design

    specs = NOISE_SPACES[space_name]
    X = sobol_design(n, len(specs), seed=seed)
    y = 0.8 + np.random.default_rng(seed).normal(0.0, 0.05, n)
    y = np.clip(y, *BOUNDS) if bounded else y
    return {"case": "noise", "space": space_name, "n": n, "bounds": BOUNDS if bounded else None, "seed": seed,
            **_test(specs, X, y, BOUNDS if bounded else None, seed)}


def seed_noise_scores(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """32 Sobol points over 3 dims and, at each, SGD (5 epochs) on breast cancer: its shuffling seed the only
    thing that differs between trials, so the scores are real noise over choices the model never reads."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.linear_model import SGDClassifier
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    from sweeper.search.design import sobol_design

    data = load_breast_cancer()
    X_tr, X_te, y_tr, y_te = train_test_split(data.data, data.target, test_size=0.3, random_state=0)
    scaler = StandardScaler().fit(X_tr)
    X_tr, X_te = scaler.transform(X_tr), scaler.transform(X_te)
    U = sobol_design(32, 3, seed=seed)
    y = np.array([SGDClassifier(max_iter=5, tol=None, random_state=100 * seed + t).fit(X_tr, y_tr).score(X_te, y_te)
                  for t in range(len(U))])
    return U, y


def seed_noise_case(seed: int) -> dict[str, Any]:
    U, y = seed_noise_scores(seed)
    return {"case": "seed noise", "space": "3 dims", "n": len(y), "bounds": BOUNDS, "seed": seed,
            **_test(NOISE_SPACES["3 dims"], U, y, BOUNDS, seed)}


def map_case(name: str, n: int, seed: int) -> dict[str, Any]:
    from sweeper.search.design import sobol_design

    m = MAPS[name]
    X = sobol_design(n, m.space.d, seed=seed)
    return {"case": "map", "space": name, "n": n, "bounds": m.bounds, "seed": seed,
            **_test(m.specs, X, truth_at(name, X), m.bounds, seed)}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seeds", type=int, default=10, help="noise seeds per cell (default 10; maps: 3)")
    parser.add_argument("--jobs", type=int, default=1, help="tests in parallel processes (default 1)")
    parser.add_argument("--smoke", action="store_true", help="one small cell of each kind: a check that it runs")


def run(args: argparse.Namespace) -> None:
    if args.smoke:
        jobs = [(noise_case, ("2 dims", 12, True, 0)), (seed_noise_case, (0,)), (map_case, ("svm", 32, 0))]
    else:
        jobs = [(noise_case, (s, n, b, seed)) for s in NOISE_SPACES for n in SIZES for b in (True, False)
                for seed in range(args.seeds)]
        jobs += [(seed_noise_case, (seed,)) for seed in range(args.seeds)]
        jobs += [(map_case, (name, n, seed)) for name in MAPS for n in MAP_SIZES for seed in range(3)]
    rows = run_jobs(jobs, args.jobs)
    write_results("effect_test" + ("_smoke" if args.smoke else ""), effect_markdown(rows), {"rows": rows})


def effect_markdown(rows: list[dict[str, Any]]) -> str:
    """Per cell: tests, shown, ``log10 K < -1``, the most extreme ``log10 K``, the median time."""
    cells: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in rows:
        cells.setdefault((r["case"], r["space"], tuple(r["bounds"] or ()), r["n"]), []).append(r)

    def line(key: tuple[Any, ...], group: list[dict[str, Any]]) -> list[str]:
        case, space, bounds, n = key
        held = " (held out)" if case == "map" and space in HELD_OUT else ""
        shown_bounds = "[" + ", ".join("open" if b is None else f"{b:g}" for b in bounds) + "]" if bounds else "none"
        return [case, f"{space}{held}", shown_bounds, str(n), str(len(group)),
                str(sum(r["shown"] for r in group)), str(sum(r["log10_K"] < -1.0 for r in group)),
                f"{min(r['log10_K'] for r in group):.2f}",
                f"{np.median([r['test_s'] for r in group]):.1f}"]

    table = markdown_table(["case", "space", "bounds", "n", "tests", "effect shown", "log10 K < -1",
                            "lowest log10 K", "median s"],
                           [line(k, g) for k, g in cells.items()])
    none = [r for r in rows if r["case"] != "map"]
    return (f"Where there is no effect ({len(none)} tests): shown in {sum(r['shown'] for r in none)} "
            f"({np.mean([r['shown'] for r in none]):.1%}; the test's level is 5 %); the likelihood read as a Bayes "
            f"factor would say 'effect' in {sum(r['log10_K'] < -1.0 for r in none)}; the lowest log10 K is "
            f"{min(r['log10_K'] for r in none):.2f}.\n\n{table}\n")
