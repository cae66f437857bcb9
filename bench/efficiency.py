"""Sample efficiency: how well a GP maps the whole space after n trials, per search strategy.

Why: the ``ivr`` searcher exists to map a space (the multiverse of Bell et al. 2022), not
to find its maximum; the figure that matters is the error of the posterior mean over the
whole space after a given number of trials, against the tools users would otherwise take.

Functions (all on the unit cube, deterministic):

- ``svc``: cross-validated accuracy of an RBF SVC on breast cancer over log10 C x log10
  gamma, looked up in the committed grid ``bench/data/svc_grid.npz`` (:mod:`bench.svc_grid`);
  test set = the 40 x 40 grid nodes, where the value is exact;
- ``branin`` (d=2): test set = a 50 x 50 grid of cell centres;
- ``hartmann6`` (d=6): test set = 4096 scrambled Sobol points (seed 12345);
- ``svm``, ``hgb``, ``sgd``, ``wine``: the real ML maps of :mod:`bench.ml_maps` (the demo's SVC,
  boosting and SGD on digits, an SVC on wine), each searched in its own space (integer and
  categorical dims included; a tool's continuous points are snapped to the values a trial would
  run at); test set = the grid's nodes, where the value is exact;
- ``mlp``, ``krr``: two more real maps (an MLP on breast cancer; kernel ridge regression's test R^2 on
  diabetes, a metric with no lower bound), made after issue 37's settings were chosen
  (:data:`bench.ml_maps.HELD_OUT`): they check those choices on model families they were not tuned on.

Strategies, each run once per (function, seed) up to the largest n (every n of the table
is a prefix of that run: each strategy picks its points one after another):

- ``ours``: :class:`sweeper.search.policy.MultiversePolicy`, ``strategy=ivr``, driven as the Tune
  searcher drives it (ask, evaluate, tell; one trial at a time), with its defaults:
  ``n_initial=8`` Sobol points, then greedy IVR batches of ``batch_size=8``, the variance weighted
  by the slope of the fit's mean (``ivr_slope_weight``; ``--policy ivr_slope_weight=0`` gives plain IVR), over 2048
  Sobol candidates and 1024 integration points; the rest of a batch is re-planned (GP refitted,
  warm-started from the previous fit: 2 starts; the first fit 3 restarts) whenever results
  arrived since it was planned and the refit is short next to a trial (each trial is
  simulated as ``TRIAL_SECONDS`` = 600 s on the policy's clock), which with one worker is
  after every trial;
- ``ours-b1``: the same with ``batch_size=1`` (a new batch, so a refit, at every trial);
- ``ucb``: the same policy with ``strategy=ucb`` (beta 2, batches of 8);
- ``sobol`` / ``random``: the policy's space-filling designs;
- ``emukit``: Emukit's ``ExperimentalDesignLoop`` with ``IntegratedVarianceReduction``
  (1024 Sobol integration points) on ``GPyModelWrapper(GPRegression(Matern52 ARD,
  normalizer=True))``, ``GradientAcquisitionOptimizer`` with 250 random anchors
  (default 1000, which Emukit scores one at a time: 5 minutes per run) then L-BFGS-B, one
  point per iteration, model re-optimised every iteration;
- ``botorch``: ``SingleTaskGP`` (BoTorch's defaults, ``Standardize`` outcome transform)
  fitted with ``fit_gpytorch_mll`` every iteration, ``qNegIntegratedPosteriorVariance``
  (512 of the Sobol integration points) maximised with ``optimize_acqf`` (q=1, 4 restarts,
  128 raw samples; with 8, 256 and 1024 one step cost 38 s of CPU, so ``--botorch-max-n``
  can stop it early);
- ``oracle``: a design that CHEATS (:func:`oracle_points`): each next point the candidate whose true value
  most cuts the same surrogate's true error; what the goals ask of a design, against what one that reads
  the truth reaches one point at a time.

Every model-based strategy starts from the same 8 scrambled Sobol points (the first 8 of
the policy's design for that seed).

Error: normalised RMSE, ``sqrt(mean((mu(x) - f(x))^2)) / sd(f)`` over the test set, where
``sd(f)`` is the population standard deviation of the ground truth there; 1 is what
predicting the mean scores, 0 is a perfect map. (Dividing by the range instead would make
Hartmann-6's figures ten times smaller; the issue's quoted numbers match the sd.) Both are
kept in the JSON. Two tables per run:

- **same surrogate**: every strategy's first n points scored by one model,
  ``sweeper.search.gp_fit.fit_gp`` (Matern-5/2 ARD, 3 restarts, seed 0) with no output or input
  transform: only the choice of points differs;
- **own model**: each tool's own map where it has one: Emukit's GPy model, BoTorch's
  ``SingleTaskGP`` posterior mean, ours the model the policy fits; ``sobol`` / ``random`` / ``ucb`` have none of their
  own and show the same surrogate.

Runs are checkpointed per (function, strategy, seed) in ``bench/results/efficiency_runs.json``
so an interrupted benchmark resumes where it stopped (``--fresh`` starts over). Variants of
the policy (``--policy gp_lengthscale_prior=true``) go to their own ``--checkpoint`` and
``--results-name``, so the committed runs and tables stay as they are.

    python -m bench efficiency                     # 5 seeds, n up to 100 (hours on 2 cores: Emukit, BoTorch)
    python -m bench efficiency --smoke             # 1 seed, n up to 20 (a few minutes)
    python -m bench efficiency --jobs 2 --seeds 10
    python -m bench efficiency --functions svm --strategies botorch --first-seed 3 --seeds 4 --botorch-steps 10

References:
    Bell, S. J., Kampman, O. P., Dodge, J., Lawrence, N. D. (2022). Modeling the Machine
    Learning Multiverse. NeurIPS 2022.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from bench import analysis_map
from bench.report import RESULTS_DIR, fmt, markdown_table, write_results
from sweeper.search.space import SearchSpace

FUNCTIONS = ("svc", "branin", "hartmann6", "svm", "hgb", "sgd", "wine", "mlp", "krr")
#: The real ML maps of :mod:`bench.ml_maps` (a committed grid each, read by interpolation); the last two
#: (:data:`bench.ml_maps.HELD_OUT`) were left out of issue 37's choices and check them afterwards.
ML_MAPS = ("svm", "hgb", "sgd", "wine", "mlp", "krr")
STRATEGIES = ("ours", "ours-b1", "ucb", "sobol", "random", "emukit", "botorch", "oracle")
#: Candidates the oracle scores per step (a fresh draw of a 4096-point Sobol design each step).
ORACLE_CANDIDATES = 400
N_DEFAULT = (10, 20, 30, 50, 100)
#: A trial's simulated duration for the policy's clock: ten minutes, a training run. The policy re-plans a
#: batch only when its refit is short next to the trials (sweeper.search.policy.REPLAN_SHARE); with a minute,
#: a bounded map's plans (the tagger's sampler, 3-15 s on a loaded machine) made the re-plans, and so the
#: points, depend on the load (bench/README.md §3, round 8). As in bench/calibration.py.
TRIAL_SECONDS = 600.0
#: Extra n scored for the trials-to-reach-Sobol figure (same-surrogate table only).
N_REACH = (15, 25, 35, 40, 45)
N_INITIAL = 8
N_INTEGRATION = 1024
TEST_SEED = 12345
EMUKIT_ANCHORS = 250
# One BoTorch qNIPV step cost 38 s of CPU at n=60 with 8 restarts, 256 raw samples and 1024
# integration points (2D); with these it costs 4.5 s.
BOTORCH_RESTARTS, BOTORCH_RAW_SAMPLES, BOTORCH_INTEGRATION = 4, 128, 512
CHECKPOINT = RESULTS_DIR / "efficiency_runs.json"
#: The metric bounds a user declares for each map (an accuracy: [0, 1]); ``--no-bounds`` leaves them out.
BOUNDS = {"svc": [0.0, 1.0], **{name: [0.0, 1.0] for name in ML_MAPS}, "krr": [None, 1.0]}  # krr: a test R^2
POLICY_STRATEGIES = {"ours": ("ivr", 8), "ours-b1": ("ivr", 1), "ucb": ("ucb", 8),
                     "sobol": ("sobol", 8), "random": ("random", 8)}
MODEL_FREE = ("sobol", "random", "ucb", "oracle")  # no map of their own: scored by the shared surrogate


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--functions", nargs="+", default=list(FUNCTIONS), choices=FUNCTIONS)
    parser.add_argument("--strategies", nargs="+", default=list(STRATEGIES), choices=STRATEGIES)
    parser.add_argument("--n", type=int, nargs="+", default=list(N_DEFAULT),
                        help="trials scored (default 10 20 30 50 100)")
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0..S-1 (default 5)")
    parser.add_argument("--first-seed", type=int, default=0, metavar="K",
                        help="run seeds K..S-1 only (e.g. one BoTorch run per process: its memory grows with every "
                             "run a process makes, 18 GB after 13 runs here)")
    parser.add_argument("--botorch-max-n", type=int, default=None,
                        help="stop BoTorch at this many trials (its IVR costs seconds per step); default: max of --n")
    parser.add_argument("--botorch-steps", type=int, default=None, metavar="K",
                        help="pause each BoTorch run after K steps (its memory grows per step: 16 GB on "
                             "Hartmann-6); its points so far stay in bench/results/botorch_partial/, and "
                             "the same command again continues it in a fresh process")
    parser.add_argument("--jobs", type=int, default=1, help="runs in parallel processes (default 1)")
    parser.add_argument("--checkpoint", type=Path, default=CHECKPOINT, help="JSON of finished runs (resumed)")
    parser.add_argument("--fresh", action="store_true", help="ignore runs already in the checkpoint")
    parser.add_argument("--skip", nargs="*", default=[], metavar="FUNCTION/STRATEGY",
                        help="pairs not to run, e.g. hartmann6/botorch (its qNIPV used 16 GB here)")
    parser.add_argument("--merge", type=Path, nargs="*", default=[],
                        help="other checkpoints whose runs count too (e.g. from a parallel invocation)")
    parser.add_argument("--tables-only", action="store_true",
                        help="run nothing: write the tables from the runs already checkpointed")
    parser.add_argument("--smoke", action="store_true", help="1 seed, n in 10 20: a check that everything runs")
    parser.add_argument("--policy", nargs="*", default=[], metavar="KEY=VALUE",
                        help="PolicySettings overrides for ours / ours-b1 / ucb (JSON values, e.g. "
                             "gp_lengthscale_prior=true); recorded in each run. Use with its own --checkpoint.")
    parser.add_argument("--no-bounds", action="store_true",
                        help="declare no metric bounds for the svc map (as before they existed): the policy "
                             "and ours' own map model raw accuracies")
    parser.add_argument("--analysis-n", type=int, nargs="*", default=None, metavar="N",
                        help="also score each run (new or saved: its points are not chosen again) by the map "
                             "`sweeper multiverse` draws, at these n (bench/analysis_map.py; with no N: "
                             f"{' '.join(map(str, analysis_map.ANALYSIS_N))})")
    parser.add_argument("--results-name", default=None, metavar="NAME",
                        help="write the tables to bench/results/NAME.md/.json (default efficiency, "
                             "efficiency_smoke with --smoke)")


def policy_overrides(items: list[str]) -> dict[str, Any]:
    """``["gp_lengthscale_prior=true", "gp_restarts=2"]`` -> ``{"gp_lengthscale_prior": True, "gp_restarts": 2}``."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--policy {item!r}: expected KEY=VALUE")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def run(args: argparse.Namespace) -> None:
    overrides = policy_overrides(getattr(args, "policy", []))
    bounds = {} if getattr(args, "no_bounds", False) else BOUNDS
    if args.smoke:
        args.seeds, args.n = 1, [10, 20]
        if args.checkpoint == CHECKPOINT:
            args.checkpoint = RESULTS_DIR / "efficiency_runs_smoke.json"
    name = getattr(args, "results_name", None) or "efficiency" + ("_smoke" if args.smoke else "")
    if (RESULTS_DIR / f"{name}.json").resolve() == Path(args.checkpoint).resolve():
        raise SystemExit(f"--checkpoint {args.checkpoint} is where --results-name {name} writes its tables: the "
                         f"tables would replace the runs. Name them apart, e.g. --results-name {name}_tables.")
    n_max = max(args.n)
    ns = sorted(set(args.n) | {n for n in N_REACH if n < n_max})
    runs = {} if args.fresh else load_checkpoint(args.checkpoint)
    for path in args.merge:
        for key, value in load_checkpoint(path).items():
            runs.setdefault(key, value)

    def done(f: str, s: str, seed: int) -> bool:
        r = runs.get(run_key(f, s, seed))
        return r is not None and r["n_max"] >= max(_capped(ns, s, args))

    todo = [(f, s, seed) for seed in range(args.first_seed, args.seeds) for f in args.functions for s in args.strategies
            if not done(f, s, seed) and f"{f}/{s}" not in args.skip]
    if args.tables_only:
        todo = []
    print(f"{len(todo)} runs to do, {len(runs)} in {args.checkpoint}", flush=True)
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs, initializer=_one_thread) as pool:
            futures = [pool.submit(one_run, f, s, seed, _capped(ns, s, args), _with_bounds(overrides, bounds, f),
                                   args.botorch_steps) for f, s, seed in todo]
            for fut in as_completed(futures):
                if (result := fut.result()) is not None:
                    _store(runs, result, args)
    else:
        _one_thread()
        for f, s, seed in todo:
            if (result := one_run(f, s, seed, _capped(ns, s, args), _with_bounds(overrides, bounds, f),
                                  args.botorch_steps)) is not None:
                _store(runs, result, args)
    def selected(r: dict[str, Any]) -> bool:  # runs of the output-warping investigation (commit 16f456c) stay out
        return (r["function"] in args.functions and r["strategy"] in args.strategies and r["seed"] < args.seeds
                and done(r["function"], r["strategy"], r["seed"]) and not r.get("warping"))

    if args.analysis_n is not None:
        analysis_map.add_scores(runs, [k for k, r in runs.items() if selected(r)],
                                args.analysis_n or analysis_map.ANALYSIS_N, args.jobs,
                                functools.partial(_store, runs, args=args), _one_thread)
    rows = [r for r in runs.values() if selected(r)]
    write_results(name, efficiency_markdown(rows, args),
                  {"settings": {k: str(v) for k, v in vars(args).items()}, "runs": rows})


def _with_bounds(overrides: dict[str, Any], bounds: dict[str, list[float]], function: str) -> dict[str, Any]:
    """The policy overrides of one map: its declared metric bounds added (recorded in each run)."""
    return {**overrides, "metric_bounds": bounds[function]} if function in bounds else overrides


def _capped(ns: list[int], strategy: str, args: argparse.Namespace) -> list[int]:
    """The n a strategy's run scores: every n, or for BoTorch those up to ``--botorch-max-n``."""
    cap = args.botorch_max_n if strategy == "botorch" and args.botorch_max_n else max(ns)
    return [n for n in ns if n <= cap]


def _one_thread() -> None:
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        pass


def run_key(function: str, strategy: str, seed: int) -> str:
    return f"{function}/{strategy}/{seed}"


def load_checkpoint(path: Path) -> dict[str, dict[str, Any]]:
    if not path.exists():
        return {}
    return json.loads(path.read_text(encoding="utf-8"))


def _store(runs: dict[str, dict[str, Any]], result: dict[str, Any], args: argparse.Namespace) -> None:
    runs[run_key(result["function"], result["strategy"], result["seed"])] = result
    args.checkpoint.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.checkpoint.with_suffix(".tmp")
    tmp.write_text(json.dumps(runs), encoding="utf-8")
    tmp.replace(args.checkpoint)
    own = {n: round(v, 4) for n, v in result["own_nrmse"].items()}
    shared = {n: round(v, 4) for n, v in result["shared_nrmse"].items()}
    analysis = {n: round(v, 4) for n, v in result.get(analysis_map.FIELD, {}).items()}
    print(f"{result['function']:9s} {result['strategy']:8s} seed {result['seed']}: {result['seconds']:.0f} s; "
          f"shared {shared}; own {own}" + (f"; analysis map {analysis}" if analysis else ""), flush=True)


# ---------------------------------------------------------------------- functions
def objective(name: str) -> tuple[Callable[[NDArray[np.float64]], NDArray[np.float64]], int]:
    """The function on the unit cube and its dimension."""
    from bench import functions, ml_maps, svc_grid

    if name in ML_MAPS:
        return functools.partial(ml_maps.truth_at, name), ml_maps.MAPS[name].space.d
    return {"svc": (svc_grid.svc_accuracy, 2), "branin": (functions.branin, 2),
            "hartmann6": (functions.hartmann6, 6)}[name]


def search_space(name: str) -> SearchSpace:
    """The space the policy searches: a real map's own (its integer and categorical dims), else the unit cube."""
    from bench import ml_maps
    from sweeper.search.grammar import parse_specs

    if name in ML_MAPS:
        return ml_maps.MAPS[name].space
    return parse_specs({f"x{i}": "interval(0, 1)" for i in range(objective(name)[1])})


def test_set(name: str) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The fixed dense points the map is scored on, and the ground truth there."""
    from bench import ml_maps, svc_grid
    from sweeper.search.design import sobol_design

    if name == "svc":
        return svc_grid.grid_points()
    if name in ML_MAPS:  # the grid's nodes, where the value is exact
        values, axes = ml_maps.load_grid(name)
        X = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, len(axes))
        return X, values.reshape(-1)
    f, d = objective(name)
    if d == 2:
        axis = (np.arange(50) + 0.5) / 50
        X = np.stack(np.meshgrid(axis, axis, indexing="ij"), axis=-1).reshape(-1, 2)
    else:
        X = sobol_design(4096, d, seed=TEST_SEED)
    return X, f(X)


def normalised_errors(mean: NDArray[np.float64], truth: NDArray[np.float64]) -> tuple[float, float]:
    """``(RMSE / sd(truth), RMSE / (max - min)(truth))``."""
    rmse = float(np.sqrt(np.mean((mean - truth) ** 2)))
    return rmse / float(np.std(truth)), rmse / float(np.ptp(truth))


# ---------------------------------------------------------------------- one run
def one_run(function: str, strategy: str, seed: int, ns: list[int],
            overrides: dict[str, Any] | None = None, botorch_steps: int | None = None) -> dict[str, Any] | None:
    """Run ``strategy`` on ``function`` up to ``max(ns)`` trials; score the map after each n.

    ``overrides``: PolicySettings fields for the policy's strategies (recorded in the result).
    None when a BoTorch run paused after ``botorch_steps`` steps (see :func:`botorch_points`).
    """
    f, d = objective(function)
    X_test, truth = test_set(function)
    n_max = max(ns)
    start = time.perf_counter()
    own: dict[int, NDArray[np.float64]] = {}  # n -> the tool's own posterior mean on the test set
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if strategy in POLICY_STRATEGIES:
            X = policy_points(strategy, search_space(function), seed, n_max, f, overrides)
        elif strategy == "oracle":
            X = oracle_points(function, seed, n_max, f, X_test, truth)
        elif strategy == "emukit":
            X = emukit_points(d, seed, n_max, f, ns, X_test, own)
        else:
            X = botorch_points(d, seed, n_max, f, ns, X_test, own, RESULTS_DIR / "botorch_partial"
                               / f"{function}-{seed}-n{n_max}.json", botorch_steps)
            if X is None:
                print(f"{function:9s} botorch  seed {seed}: paused after {botorch_steps} steps; "
                      f"run the command again to continue", flush=True)
                return None
    seconds = time.perf_counter() - start
    space = search_space(function)
    X = space.to_unit(space.from_unit(np.clip(X, 0.0, 1.0)))  # the values a trial runs at (a tool's points too)
    y = f(X)
    categories = space.categories()
    shared = {n: shared_surrogate_mean(X[:n], y[:n], X_test, categories) for n in ns}
    if strategy.startswith("ours"):
        bounds = (overrides or {}).get("metric_bounds")
        own = {n: policy_model_mean(X[:n], y[:n], X_test, bounds, categories) for n in ns
               if n in N_DEFAULT or n == n_max}
    result: dict[str, Any] = {
        "function": function, "strategy": strategy, "seed": seed, "n_max": n_max,
        "seconds": seconds, "X": X.tolist(),
        "shared_nrmse": {str(n): normalised_errors(m, truth)[0] for n, m in shared.items()},
        "shared_range_nrmse": {str(n): normalised_errors(m, truth)[1] for n, m in shared.items()},
        "own_nrmse": {str(n): normalised_errors(m, truth)[0] for n, m in own.items()},
        "own_range_nrmse": {str(n): normalised_errors(m, truth)[1] for n, m in own.items()},
    }
    if overrides and strategy in POLICY_STRATEGIES:
        result["policy_overrides"] = dict(overrides)
    return result


def shared_surrogate_mean(X: NDArray[np.float64], y: NDArray[np.float64], X_test: NDArray[np.float64],
                          categories: dict[int, int] | None = None) -> NDArray[np.float64]:
    """The yardstick: plain ``fit_gp`` (Matern-5/2 ARD, 3 restarts, seed 0), posterior mean; a categorical
    dim (the SGD map's loss) enters as the policy's coregionalization factor."""
    from sweeper.search.gp_fit import fit_gp

    return fit_gp(X, y, seed=0, n_restarts=3, categories=categories or None).predict(X_test)[0]


def policy_model_mean(X: NDArray[np.float64], y: NDArray[np.float64], X_test: NDArray[np.float64],
                      bounds: list[float] | None = None, categories: dict[int, int] | None = None
                      ) -> NDArray[np.float64]:
    """Ours' own map, the model the policy fits (its fit_gp settings, the seed of the yardstick): without
    bounds the plain fit's posterior mean (the yardstick itself); with the map's declared bounds the fit
    with its output warp learned (:func:`sweeper.search.bounded.fit_bounded_gp`), the one that tags its points.

    (``sweeper multiverse`` averages that model over its hyperparameters' posterior draws,
    :func:`sweeper.search.hyperposterior.fit_posterior`, for bands that hold; its mean is scored in bench/README.md
    §6, and at n = 10 it is the worse map: 0.78 against this fit's 0.59.)
    """
    if bounds is None:
        return shared_surrogate_mean(X, y, X_test, categories)
    from sweeper.search.bounded import fit_bounded_gp
    from sweeper.search.warping import MetricBounds

    return fit_bounded_gp(X, y, MetricBounds.parse(bounds), seed=0, n_restarts=3,
                          categories=categories or None).predict(X_test)[0]


def policy_points(strategy: str, space: SearchSpace, seed: int, n: int, f: Callable[..., Any],
                  overrides: dict[str, Any] | None = None) -> NDArray[np.float64]:
    """Drive :class:`MultiversePolicy` as the Tune searcher does with one worker: ask, evaluate, tell."""
    from sweeper.search.policy import MultiversePolicy
    from sweeper.search.settings import PolicySettings

    name, batch = POLICY_STRATEGIES[strategy]
    elapsed = [0.0]  # simulated seconds: each trial takes TRIAL_SECONDS (the policy re-plans by time)
    # ``--policy n_initial=K`` measures another length of the Sobol phase; by default every strategy shares 8.
    policy = MultiversePolicy(space, PolicySettings(**{"n_initial": N_INITIAL, **(overrides or {}), "strategy": name,
                                                      "num_trials": n, "batch_size": batch, "seed": seed}),
                              clock=lambda: elapsed[0])
    points = []
    while (s := policy.ask()) is not None:
        x = np.array(s.x)
        points.append(x)
        elapsed[0] += TRIAL_SECONDS
        policy.tell(s.index, float(f(x[None, :])[0]))
    return np.array(points)


def initial_design(d: int, seed: int, n: int) -> NDArray[np.float64]:
    """The 8 Sobol points every model-based strategy starts from (the policy's own, for this seed)."""
    from sweeper.search.design import sobol_design

    return sobol_design(n, d, seed)[:N_INITIAL]


def integration_points(d: int, seed: int) -> NDArray[np.float64]:
    from sweeper.search.design import sobol_design

    return sobol_design(N_INTEGRATION, d, seed=[seed, 99])


def oracle_points(function: str, seed: int, n: int, f: Callable[..., Any], X_test: NDArray[np.float64],
                  truth: NDArray[np.float64]) -> NDArray[np.float64]:
    """A design that CHEATS, for what the goals ask: each next point the candidate whose true value most cuts
    the same surrogate's true error over the test set.

    After the 8 Sobol points, every step fits the yardstick (:func:`shared_surrogate_mean`'s fit) on the points
    so far and scores ``ORACLE_CANDIDATES`` candidates (a seeded draw of a Sobol design, snapped to the values a
    trial runs at) by the test-set RMSE of its posterior mean with that candidate's true value added, the
    hyperparameters held for the step (a rank-one update of the mean). One step ahead and on a finite set, so it
    is not the best design there is, but no design that does not read the truth is expected to draw a better
    map with this surrogate one point at a time.
    """
    from sweeper.search.design import sobol_design
    from sweeper.search.gp_fit import fit_gp

    space = search_space(function)
    categories = space.categories() or None
    pool = space.to_unit(space.from_unit(sobol_design(4096, space.d, [seed, 5])))
    X = initial_design(space.d, seed, n)
    y = f(X)
    while X.shape[0] < n:
        gp = fit_gp(X, y, seed=0, n_restarts=3, categories=categories)
        cand = pool[np.random.default_rng([seed, X.shape[0]]).choice(pool.shape[0], ORACLE_CANDIDATES, replace=False)]
        y_cand = f(cand)
        mean = means_with_one_more(gp, X_test, cand, y_cand)
        best = int(np.argmin(np.mean((mean - truth[:, None]) ** 2, axis=0)))
        X, y = np.vstack([X, cand[best]]), np.append(y, y_cand[best])
    return X


def means_with_one_more(gp: Any, X_test: NDArray[np.float64], cand: NDArray[np.float64],
                        y_cand: NDArray[np.float64]) -> NDArray[np.float64]:
    """Column ``j``: ``gp``'s posterior mean at ``X_test`` with ``(cand[j], y_cand[j])`` added, its hyperparameters
    (and standardisation) held: the rank-one update ``mu(u) + cov(u, x) (y - mu(x)) / (var(x) + noise)``, ``(t, c)``."""
    import scipy.linalg

    V_test = scipy.linalg.solve_triangular(gp.cholesky, gp.kernel(gp.X, X_test), lower=True, check_finite=False)
    V_cand = scipy.linalg.solve_triangular(gp.cholesky, gp.kernel(gp.X, cand), lower=True, check_finite=False)
    cov = gp.kernel(X_test, cand) - V_test.T @ V_cand  # (t, c), standardised
    var = gp.kernel_diag(cand) - np.sum(V_cand * V_cand, axis=0) + gp.noise_variance
    step = (y_cand - gp.predict_mean(cand)) / var  # original units per unit of standardised covariance
    means: NDArray[np.float64] = gp.predict_mean(X_test)[:, None] + cov * step[None, :]
    return means


def emukit_points(d: int, seed: int, n: int, f: Callable[..., Any], ns: list[int],
                  X_test: NDArray[np.float64], own: dict[int, NDArray[np.float64]]) -> NDArray[np.float64]:
    """Emukit's experimental-design loop with integrated variance reduction, as its docs run it."""
    import GPy
    from emukit.core import ContinuousParameter, ParameterSpace
    from emukit.core.optimization import GradientAcquisitionOptimizer
    from emukit.experimental_design import ExperimentalDesignLoop
    from emukit.experimental_design.acquisitions import IntegratedVarianceReduction
    from emukit.model_wrappers import GPyModelWrapper

    np.random.seed(seed)  # GPy's restarts and Emukit's random anchors draw from numpy's global RNG
    X0 = initial_design(d, seed, n)
    gpy = GPy.models.GPRegression(X0, f(X0)[:, None], GPy.kern.Matern52(d, ARD=True), normalizer=True)
    model = GPyModelWrapper(gpy)
    space = ParameterSpace([ContinuousParameter(f"x{i}", 0.0, 1.0) for i in range(d)])
    acquisition = IntegratedVarianceReduction(model, space, x_monte_carlo=integration_points(d, seed))
    # 250 random anchors instead of the default 1000: Emukit scores them one at a time (about
    # 3 ms each through GPy), which made a 100-trial run take 5 minutes.
    optimizer = GradientAcquisitionOptimizer(space, num_samples=EMUKIT_ANCHORS)
    loop = ExperimentalDesignLoop(space, model, acquisition, acquisition_optimizer=optimizer)
    user_function = lambda x: f(x)[:, None]  # noqa: E731 - a one-line adapter to Emukit's (n, 1) outputs
    done = N_INITIAL
    for target in sorted(m for m in ns if m > N_INITIAL):
        loop.run_loop(user_function, target - done)  # ends by refitting the model on every point
        done = target
        own[target] = model.predict(X_test)[0][:, 0]
    return np.array(loop.loop_state.X[:n])


def botorch_points(d: int, seed: int, n: int, f: Callable[..., Any], ns: list[int],
                   X_test: NDArray[np.float64], own: dict[int, NDArray[np.float64]], partial: Path,
                   max_steps: int | None = None) -> NDArray[np.float64] | None:
    """BoTorch's qNegIntegratedPosteriorVariance, one point per iteration, the model refitted each time.

    Resumable: every step is seeded by its index and its points (and own-map errors) are saved
    to ``partial``, so a run stopped anywhere (killed, out of memory, or paused after
    ``max_steps`` steps: then None) continues there, with the points it would have chosen.
    """
    import torch
    from botorch.acquisition.active_learning import qNegIntegratedPosteriorVariance
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import SingleTaskGP
    from botorch.models.transforms.outcome import Standardize
    from botorch.optim import optimize_acqf
    from gpytorch.mlls import ExactMarginalLogLikelihood

    dtype = torch.float64
    X = torch.tensor(initial_design(d, seed, n), dtype=dtype)
    if partial.exists():
        saved = json.loads(partial.read_text(encoding="utf-8"))
        X = torch.tensor(saved["X"], dtype=dtype)
        own.update({int(k): np.array(v) for k, v in saved["own"].items()})
    Y = torch.tensor(f(X.numpy()), dtype=dtype)[:, None]
    mc = torch.tensor(integration_points(d, seed)[:BOTORCH_INTEGRATION], dtype=dtype)
    bounds = torch.stack([torch.zeros(d, dtype=dtype), torch.ones(d, dtype=dtype)])
    test = torch.tensor(X_test, dtype=dtype)

    def fitted() -> SingleTaskGP:
        model = SingleTaskGP(X, Y, outcome_transform=Standardize(m=1))
        fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        return model

    steps = 0
    while X.shape[0] < n:
        if max_steps is not None and steps >= max_steps:
            return None
        torch.manual_seed(seed * 100_003 + X.shape[0])
        model = fitted()
        acq = qNegIntegratedPosteriorVariance(model, mc_points=mc)
        # init_batch_limit: the 128 raw samples scored 32 at a time (the same scores, less memory).
        x, _ = optimize_acqf(acq, bounds=bounds, q=1, num_restarts=BOTORCH_RESTARTS, raw_samples=BOTORCH_RAW_SAMPLES,
                             options={"init_batch_limit": 32})
        X = torch.cat([X, x.detach()])
        Y = torch.cat([Y, torch.tensor(f(x.detach().numpy()), dtype=dtype)[:, None]])
        if X.shape[0] in ns:
            model = fitted()
            with torch.no_grad():
                own[X.shape[0]] = model.posterior(test).mean[:, 0].numpy()
        steps += 1
        partial.parent.mkdir(parents=True, exist_ok=True)
        tmp = partial.with_suffix(".tmp")
        tmp.write_text(json.dumps({"X": X.tolist(), "own": {str(k): v.tolist() for k, v in own.items()}}),
                       encoding="utf-8")
        tmp.replace(partial)
    partial.unlink(missing_ok=True)
    return X.numpy()


# ---------------------------------------------------------------------- tables
def _stats(rows: list[dict[str, Any]], field: str, n: int) -> tuple[float, float, int]:
    vals = [r[field][str(n)] for r in rows if str(n) in r[field]]
    if not vals:
        return math.nan, math.nan, 0
    return float(np.mean(vals)), float(np.std(vals, ddof=1)) if len(vals) > 1 else math.nan, len(vals)


def against_sobol(rows: list[dict[str, Any]], functions: Iterable[str], strategies: Iterable[str],
                  field: str = "shared_nrmse") -> Iterator[tuple[str, str, float, list[dict[str, Any]]]]:
    """``(function, strategy, Sobol's mean n = 50 error, the strategy's rows)`` for each pair with rows scored by
    ``field``, on the functions whose Sobol runs reach n = 50: what the reach tables compare."""
    for fn in functions:
        target, _, k = _stats([r for r in rows if r["function"] == fn and r["strategy"] == "sobol" and field in r],
                              field, 50)
        if not k:
            continue
        for st in strategies:
            if sel := [r for r in rows if r["function"] == fn and r["strategy"] == st and field in r]:
                yield fn, st, target, sel


def trials_to_reach(rows: list[dict[str, Any]], target: float, field: str = "shared_nrmse") -> str:
    """Fewest scored n at which the mean error (``field``: the same surrogate's) is at or below ``target``.

    Only some n are scored, so a hit after a gap is a range: ``51-100`` means more than 50
    trials and at most 100, and ``≤ 30`` a hit at the first n scored.
    """
    ns = sorted({int(n) for r in rows for n in r[field]})
    previous = 0
    for n in ns:
        mean, _, k = _stats(rows, field, n)
        if k and mean <= target:
            return str(n) if n - previous <= 5 else f"≤ {n}" if previous == 0 else f"{previous + 1}-{n}"
        previous = n
    return f"> {previous}"


def efficiency_markdown(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    ns = sorted(args.n)
    out = []
    seeds_of = {(r["function"], r["strategy"]) for r in rows}
    for field, title in (("shared_nrmse", "same surrogate (plain `fit_gp` on each strategy's points)"),
                         ("own_nrmse", "own model (each tool's own map; sobol/random/ucb: same surrogate)")):
        header = ["function", "strategy", *[f"n={n}" for n in ns], "seeds"]
        table = []
        for fn in args.functions:
            for st in args.strategies:
                sel = [r for r in rows if r["function"] == fn and r["strategy"] == st]
                if (fn, st) not in seeds_of:
                    continue
                use = "shared_nrmse" if field == "own_nrmse" and st in MODEL_FREE else field
                cells = []
                for n in ns:
                    mean, sd, _ = _stats(sel, use, n)
                    cells.append(f"{fmt(mean)} ± {fmt(sd, 2)}" if sd == sd else fmt(mean))
                table.append([fn, st, *cells, str(len(sel))])
        out.append(f"### Normalised RMSE, {title}\n\nRMSE / sd of the ground truth over the test set, "
                   f"mean ± sd over seeds; lower is better.\n\n{markdown_table(header, table)}")
    reach = [[fn, st, fmt(target), trials_to_reach(sel, target)]
             for fn, st, target, sel in against_sobol(rows, args.functions, args.strategies)]
    if analysis := analysis_map.reach_markdown(rows, args.functions, args.strategies):
        out.append(analysis)
    if reach:
        out.append("### Trials to reach Sobol's n=50 error (same surrogate)\n\nFewest n (of "
                   f"{sorted(set(ns) | set(N_REACH))}) at which the mean error is at or below Sobol's at "
                   f"n=50.\n\n{markdown_table(['function', 'strategy', 'Sobol n=50 error', 'trials'], reach)}")
    note = (f"Every model-based strategy starts from the same {N_INITIAL} Sobol points; "
            f"integration points: {N_INTEGRATION} Sobol. ours: policy defaults (IVR, batches of 8, 2048 "
            f"candidates, the rest of a batch re-planned when a result arrives; trials of {TRIAL_SECONDS:g} s "
            f"simulated); ours-b1: batches of 1. BoTorch steps seeded by index (resumable). "
            f"Emukit: ExperimentalDesignLoop + IntegratedVarianceReduction, "
            f"GPy Matern52 ARD, GradientAcquisitionOptimizer(num_samples={EMUKIT_ANCHORS}). "
            f"BoTorch: SingleTaskGP + Standardize, "
            f"qNegIntegratedPosteriorVariance ({BOTORCH_INTEGRATION} integration points), optimize_acqf(q=1, "
            f"num_restarts={BOTORCH_RESTARTS}, raw_samples={BOTORCH_RAW_SAMPLES}); BoTorch stopped at n="
            f"{args.botorch_max_n or max(args.n)}.")
    return note + "\n\n" + "\n\n".join(out)


if __name__ == "__main__":  # also runnable on its own: python -m bench.efficiency --smoke
    _parser = argparse.ArgumentParser(prog="python -m bench.efficiency", description=__doc__,
                                      formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(_parser)
    run(_parser.parse_args())
