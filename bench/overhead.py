"""Orchestration overhead per trial: the sweeper's Hydra command line against plain Ray Tune.

Why: with a task that costs nothing, all of a trial's time is the machinery around it
(Hydra composition and ``run_job``, the Ray actor, Tune's bookkeeping, MLflow records,
the searcher). The issue's target is the sweeper within 1.5x of Ray Tune with
``reuse_actors=True``, all-in.

What, in one run, each variant ``--repeats`` times and in alternating order:

1. **ours**: ``python bench/apps/trivial.py --multirun hydra/sweeper=multiverse ...`` in a
   subprocess, ``strategy=sobol`` (no searcher cost), then ``strategy=ivr`` (n_initial 8,
   batch_size 8). The span runs from the first trial's MLflow ``start_time`` to the last
   trial's ``end_time`` (the recorder opens a run when Tune starts a trial and closes it
   once the result is in; where it writes from a background thread, the span ends when
   the last record is written), so Ray start-up and process start are left out;
   per-trial overhead = span / N. The command's wall time is reported beside it.
2. **Tune defaults**: ``bench/apps/tune_trivial.py``, plain ``tune.Tuner`` with the default
   searcher and ``reuse_actors=False`` (TuneConfig's default in Ray 2.60), fresh Ray.
3. **Tune reuse_actors=True**: the same with actors reused (as the sweeper does).
   For both, the span is measured twice: inside the trainable (``time.time()`` at start
   and end, read from the ResultGrid) and in the driver (a Tune callback at trial start
   and completion: where our recorder writes, so the like-for-like comparison with 1).
4. **ours, MLflow writes off** (a diagnostic, ``bench/apps/trivial_no_records.py``): ours
   (sobol) with the trial runs' writes replaced by timestamps taken where MLflow would
   stamp the runs, to say how much of ours is MLflow.
5. **MLflow SQLite alone**: the tracker's calls per trial as the recorder makes them
   (create the run with its params and tags, log metrics and the other tags, write
   ``conditions.json``, close), with the numbers of params, tags and metrics of a real
   trial run, median over ``--mlflow-runs`` runs, and the CPU time they take; the tracker's
   fast SQLite writes (``sweeper.record.sqlite_writes``, what a sweep uses) and MLflow's
   client path, run by run alternately (``--mlflow-alone`` runs only this, with the
   payload of the README's trial run).

Also: the searcher's own time for ``ivr`` (``MultiversePolicy`` alone, outside Ray, with
the same settings and N, fed results as two concurrent workers would), and a cProfile of
one trial run in this process the way a Ray worker runs it, without Tune, with its CPU time
unprofiled, user and system apart (the system part, creating the job's files, moves with the
disk's load; ``--profile`` runs only that).

**Live maps** (issue 19: at most 5 % slower with 1-second trials and batches of 8): ``ivr``
sweeps of ``--live-trials`` 1-second trials (n_initial 8, batch_size 8) through the same
command line, ``hydra.sweeper.live_maps`` true and false alternating, ``--repeats`` each;
the trials asleep (``hold_s=1``) and, as a harder case, busy for a second of CPU
(``busy=true``), when they compete with the painter for the cores. Per variant the driver
span and the wall time as above; for live maps on, the painter's CPU per map (its
``live_draw_cpu_s`` metrics) and the maps logged; and the driver's own cost per batch, the
``submit`` that hands a fit to the painter, timed here on the policy's fits (``--live-maps``
runs only this case).

    python -m bench overhead                          # full: 200 trials, 3 repeats, then live maps
    python -m bench overhead --trials 20 --repeats 1  # smoke
    python -m bench overhead --profile                # only the per-trial profile
    python -m bench overhead --live-maps              # only live maps on vs off
    python -m bench overhead --mlflow-alone           # only one trial's MLflow records, fast path vs client
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pickle
import pstats
import shutil
import sys
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Any

from bench.report import fmt, markdown_table, median, timed_run, write_results

APPS = Path(__file__).resolve().parent / "apps"
#: The diagnostic variant: ours with the trial runs' MLflow writes replaced by timestamps.
NO_RECORDS = "ours sobol, MLflow writes off (diagnostic)"
EXPERIMENT = "bench-trivial"
#: A real trial run's numbers of params, tags and metrics (bench/README.md §1), for ``--mlflow-alone``.
TRIAL_RUN_PAYLOAD = {"params": 2, "tags": 41, "metrics": 2}
#: The tracker's two ways of writing a SQLite store, timed by :func:`mlflow_alone`.
WRITE_PATHS = ("fast sqlite3 path", "MLflow client path")
SPACE = {"x": "interval(0, 1)", "y": "interval(0, 1)"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trials", type=int, default=200, help="trials per sweep (default 200)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each variant (default 3)")
    parser.add_argument("--defaults-trials", type=int, default=50,
                        help="trials of the Tune-defaults variant, which starts an actor per trial (default 50; "
                             "its per-trial cost does not depend on N; 0: --trials)")
    parser.add_argument("--num-cpus", type=int, default=2, help="CPUs of the local Ray (default 2)")
    parser.add_argument("--mlflow-runs", type=int, default=200, help="runs timed for MLflow alone (default 200)")
    parser.add_argument("--profile-trials", type=int, default=50, help="trials in the cProfile (default 50)")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds allowed per subprocess")
    parser.add_argument("--profile", action="store_true", help="only profile one trial's time, no sweeps")
    parser.add_argument("--live-maps", action="store_true", help="only the live maps' case, on vs off")
    parser.add_argument("--mlflow-alone", action="store_true",
                        help="only one trial's MLflow records in SQLite, fast path vs MLflow's client")
    parser.add_argument("--live-trials", type=int, default=64,
                        help="1-second trials per sweep of the live maps' case (default 64: 7 GP batches of 8)")
    parser.add_argument("--live-kinds", default="sleep,busy",
                        help="trials of the live maps' case: sleep (asleep for 1 s), busy (1 s of CPU); default both")
    parser.add_argument("--smoke", action="store_true",
                        help="20 trials, 1 repeat, 20 MLflow runs, 20 profiled, 16 live-map trials (asleep)")


def run(args: argparse.Namespace) -> None:
    if args.smoke:
        args.trials, args.repeats, args.mlflow_runs, args.profile_trials, args.defaults_trials = 20, 1, 20, 20, 20
        args.live_trials, args.live_kinds = 16, "sleep"
    if args.profile:
        prof = profile_trial(args.profile_trials)
        write_results("overhead-profile", profile_markdown(prof), {"profile": prof})
        return
    if args.mlflow_alone:
        with tempfile.TemporaryDirectory(prefix="bench-mlflow-") as tmp:
            mlflow = mlflow_alone(args.mlflow_runs, Path(tmp), TRIAL_RUN_PAYLOAD)
        write_results("overhead-mlflow", markdown_table(["measurement", "value"], mlflow_rows(mlflow)),
                      {"mlflow_alone": mlflow})
        return
    if args.live_maps:
        live = live_maps_overhead(args)
        write_results("overhead-live-maps", live_maps_markdown(live, args), {"live_maps": live})
        return
    variants = {
        "ours sobol": lambda tmp: run_ours("sobol", args.trials, args.num_cpus, tmp, args.timeout),
        "ours ivr": lambda tmp: run_ours("ivr", args.trials, args.num_cpus, tmp, args.timeout),
        NO_RECORDS: lambda tmp: run_ours("sobol", args.trials, args.num_cpus, tmp, args.timeout, records=False),
        "Tune defaults (reuse_actors=False)": lambda tmp: run_tune(False, args.defaults_trials or args.trials,
                                                                   args.num_cpus, tmp, args.timeout),
        "Tune reuse_actors=True": lambda tmp: run_tune(True, args.trials, args.num_cpus, tmp, args.timeout),
    }
    raw: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
    for r in range(args.repeats):
        order = list(variants) if r % 2 == 0 else list(reversed(variants))  # alternate the order
        for name in order:
            with tempfile.TemporaryDirectory(prefix="bench-overhead-") as tmp:
                print(f"[repeat {r + 1}/{args.repeats}] {name} ...", flush=True)
                raw[name].append(variants[name](Path(tmp)))
                print(f"    {_describe(raw[name][-1])}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-mlflow-") as tmp:
        mlflow = mlflow_alone(args.mlflow_runs, Path(tmp), raw["ours sobol"][0]["trial_run_payload"])
    searcher = searcher_time(args.trials, args.num_cpus)
    prof = profile_trial(args.profile_trials)
    live = live_maps_overhead(args)
    md = (overhead_markdown(raw, mlflow, searcher, args) + "\n\n" + profile_markdown(prof) + "\n\n"
          + live_maps_markdown(live, args))
    write_results("overhead", md, {"trials": args.trials, "repeats": args.repeats, "variants": raw,
                                   "mlflow_alone": mlflow, "searcher": searcher, "profile": prof, "live_maps": live})


# ---------------------------------------------------------------------- the variants
def run_ours(strategy: str, n: int, num_cpus: int, tmp: Path, timeout: int, records: bool = True,
             overrides: tuple[str, ...] = ()) -> dict[str, Any]:
    """One sweep through the real Hydra command line; the span from its MLflow child runs.

    ``records=False`` runs ``bench/apps/trivial_no_records.py``: the same sweep with the
    trial runs' MLflow writes replaced by timestamps taken where MLflow would stamp them.
    ``overrides``: more of the command line's (the live maps' case: the trials' hold, live maps).
    """
    uri = f"sqlite:///{tmp / 'mlruns.db'}"
    app = "trivial.py" if records else "trivial_no_records.py"
    cmd = [sys.executable, str(APPS / app), "--multirun", "hydra/sweeper=multiverse",
           f"hydra.sweeper.strategy={strategy}", f"hydra.sweeper.num_trials={n}", f"ray.num_cpus={num_cpus}",
           f"hydra.sweep.dir={tmp / 'sweep'}", f"mlflow.tracking_uri={uri}"]
    if strategy == "ivr":
        cmd += ["hydra.sweeper.n_initial=8", "hydra.sweeper.batch_size=8"]
    cmd += list(overrides)
    spans_file = tmp / "spans.json"
    _, launched, wall = timed_run(cmd, tmp, timeout, {"BENCH_SPANS_OUT": str(spans_file)})
    if records:
        spans, payload = _child_runs(uri)
    else:
        spans, payload = [tuple(s) for s in json.loads(spans_file.read_text())], {}
    return {**_span_stats(spans, n), "wall_s": wall, "startup_s": min(s for s, _ in spans) - launched,
            "trial_run_payload": payload, "command": " ".join(cmd), **(_live_maps_logged(uri) if records else {})}


def run_tune(reuse_actors: bool, n: int, num_cpus: int, tmp: Path, timeout: int) -> dict[str, Any]:
    """Plain Ray Tune on the trivial task in a fresh process; spans in the worker and the driver."""
    out = tmp / "tune.json"
    cmd = [sys.executable, str(APPS / "tune_trivial.py"), "--trials", str(n), "--num-cpus", str(num_cpus),
           "--storage", str(tmp / "ray_results"), "--out", str(out)]
    if reuse_actors:
        cmd.append("--reuse-actors")
    _, launched, wall = timed_run(cmd, tmp, timeout)
    data = json.loads(out.read_text())
    driver = _span_stats([tuple(t) for t in data["driver"]], n)
    worker = _span_stats([tuple(t) for t in data["worker"]], n)
    return {**driver, "worker_span_s": worker["span_s"], "worker_per_trial_ms": worker["per_trial_ms"],
            "wall_s": wall, "startup_s": min(s for s, _ in data["driver"]) - launched,
            "ray_init_s": data["t_ray_ready"] - data["t_process"], "command": " ".join(cmd)}


def mlflow_alone(n_runs: int, tmp: Path, payload: dict[str, int]) -> dict[str, Any]:
    """Median time of one trial's MLflow records in a SQLite store, as the recorder writes them
    (create the run with its params and tags, log the rest, ``conditions.json``, close it), by
    each of :data:`WRITE_PATHS`: the tracker's fast SQLite writes (what a sweep uses) and MLflow's
    client (what any other store gets), one store each, run by run alternately so that a busy
    machine slows both alike.

    The driver writes them one trial after another (in Tune's loop or in one writer
    thread), so this bounds how many trials per second the records keep up with,
    whatever the number of workers. ``payload`` gives the numbers of params, tags and metrics
    of a real trial run: params and ten tags go in with the run's creation, the metrics and
    the other tags at its end. CPU time is per run too (``time.process_time``): it depends
    less on the machine's load than wall time.
    """
    from sweeper.record.tracking import MLflowTracker

    trackers = {}
    for name in WRITE_PATHS:
        (tmp / name).mkdir()
        trackers[name] = MLflowTracker(f"sqlite:///{tmp / name / 'mlruns.db'}", "bench-mlflow")
    assert trackers[WRITE_PATHS[0]]._rows is not None, "the fast path is off for this store"
    trackers[WRITE_PATHS[1]]._rows = None  # MLflow's client, as for a tracking server or PostgreSQL
    parents = {name: t.start_run("sweep", params={"strategy": "sobol"}, tags={"role": "sweep"})
               for name, t in trackers.items()}
    n_tags = max(payload["tags"] - 2, 0)  # the run name and parent tags come with create_run
    start_tags = {f"start_{i}": i for i in range(min(10, n_tags))}
    end_tags = {f"end_{i}": f"value {i}" for i in range(n_tags - len(start_tags))}
    metrics = {f"metric_{i}": 0.5 for i in range(payload["metrics"])}
    conditions = json.dumps({"measurement_procedure": end_tags, "object": params_of(0, payload)}, indent=1)
    parts = {name: {k: [] for k in ("start_run", "log", "log_text", "finish", "total", "cpu")}
             for name in WRITE_PATHS}
    load = os.getloadavg()[0]
    for i in range(n_runs):
        for name in WRITE_PATHS if i % 2 == 0 else WRITE_PATHS[::-1]:
            tracker, timed = trackers[name], parts[name]
            cpu, t0 = time.process_time(), time.perf_counter()
            run_id = tracker.start_run(f"trial-{i:04d}", parent_run_id=parents[name], params=params_of(i, payload),
                                       tags=start_tags)
            t1 = time.perf_counter()
            tracker.log(run_id, metrics=metrics, tags=end_tags)
            t2 = time.perf_counter()
            tracker.log_text(run_id, conditions, "conditions.json")
            t3 = time.perf_counter()
            tracker.finish(run_id)
            t4 = time.perf_counter()
            for key, seconds in zip(timed, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0,
                                            time.process_time() - cpu), strict=True):
                timed[key].append(seconds)
    out: dict[str, Any] = {"runs": n_runs, "payload": payload, "load_average": [load, os.getloadavg()[0]]}
    for name, timed in parts.items():
        total = timed["total"]
        out[name] = {"median_ms": 1e3 * median(total), "min_ms": 1e3 * min(total), "max_ms": 1e3 * max(total),
                     "cpu_ms_per_run": 1e3 * median(timed["cpu"]),
                     "median_ms_by_call": {k: 1e3 * median(v) for k, v in timed.items() if k not in ("total", "cpu")}}
    return out


def mlflow_rows(mlflow: dict[str, Any]) -> list[list[str]]:
    """The table rows of :func:`mlflow_alone`: one per write path, then the ratio of their medians."""
    what = ("MLflow SQLite alone, {path}: one trial's records as the recorder writes them (create the run with its "
            "params and tags, log the rest, conditions.json, close; {params} params, {tags} tags, {metrics} metrics "
            "as a real trial run)")
    rows = [[what.format(path=name, **mlflow["payload"]),
             f"{fmt(m['median_ms'])} ms median of {mlflow['runs']} runs (min {fmt(m['min_ms'])}, max "
             f"{fmt(m['max_ms'])}), {fmt(m['cpu_ms_per_run'])} ms CPU (median); by call: " + ", ".join(
                 f"{k} {fmt(v)} ms" for k, v in m["median_ms_by_call"].items())]
            for name, m in ((name, mlflow[name]) for name in WRITE_PATHS)]
    fast, client = (mlflow[name] for name in WRITE_PATHS)
    return [*rows, ["MLflow SQLite alone: fast path / client path (medians; load average {} at the start, {} at the "
                    "end)".format(*(fmt(x) for x in mlflow["load_average"])),
                    f"wall {fmt(fast['median_ms'] / client['median_ms'], 3)}×, "
                    f"CPU {fmt(fast['cpu_ms_per_run'] / client['cpu_ms_per_run'], 3)}×"]]


def params_of(i: int, payload: dict[str, int]) -> dict[str, float]:
    return {f"param_{k}": 0.1 * i for k in range(payload["params"])}


def searcher_time(n: int, concurrency: int) -> dict[str, Any]:
    """Time ``MultiversePolicy.ask`` for ``ivr`` (n_initial 8, batch 8), results arriving as from 2 workers.

    As in Tune with ``concurrency`` trials running: ``concurrency`` asks, then for every
    result one tell and one ask. GP fits, IVR batches and Sobol designs are timed
    separately by wrapping the functions the policy calls. GPy is imported before timing
    (the real driver pays that once, at its first GP ask).
    """
    import sweeper.search.design_source as design_source_module
    import sweeper.search.gp_batch as gp_batch_module
    from sweeper.search.gp_fit import fit_gp
    from sweeper.search.grammar import parse_specs
    from sweeper.search.policy import MultiversePolicy
    from sweeper.search.settings import PolicySettings

    fit_gp([[0.0], [1.0]], [0.0, 1.0], seed=0, n_restarts=1)  # import GPy, untimed
    # The policy's GP fits, its batches and its Sobol designs.
    spent: dict[str, list[float]] = {"fit_gp": [], "select_ivr_batch": [], "sobol_design": []}

    def timed(name: str, fn: Any) -> Any:
        def wrapper(*a: Any, **k: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[name].append(time.perf_counter() - t)
        return wrapper

    # Where the policy's point sources call them: the design source (the Sobol design) and the GP batch.
    originals = {(module, name): getattr(module, name) for module in (design_source_module, gp_batch_module)
                 for name in spent if hasattr(module, name)}
    for (module, name), fn in originals.items():
        setattr(module, name, timed(name, fn))
    try:
        policy = MultiversePolicy(parse_specs(SPACE),
                                  PolicySettings(strategy="ivr", num_trials=n, n_initial=8, batch_size=8, seed=0))
        asks: list[float] = []

        def ask() -> Any:
            t = time.perf_counter()
            s = policy.ask()
            asks.append(time.perf_counter() - t)
            return s

        running = deque(s for s in (ask() for _ in range(concurrency)) if s is not None)
        while running:
            s = running.popleft()
            policy.tell(s.index, 0.5 * s.x[0] + 0.25 * s.x[1])  # the trivial task's value
            if not policy.is_finished and (nxt := ask()) is not None:
                running.append(nxt)
    finally:
        for (module, name), fn in originals.items():
            setattr(module, name, fn)
    gp_asks = asks[8:]
    return {"trials": n, "concurrency": concurrency, "total_s": sum(asks),
            "median_gp_ask_ms": 1e3 * median(gp_asks), "max_ask_ms": 1e3 * max(asks),
            "gp_fits": len(spent["fit_gp"]), "fit_s": sum(spent["fit_gp"]),
            "ivr_batches": len(spent["select_ivr_batch"]), "ivr_s": sum(spent["select_ivr_batch"]),
            "sobol_designs": len(spent["sobol_design"]), "sobol_s": sum(spent["sobol_design"])}


# ---------------------------------------------------------------------- live maps (issue 19)
def live_maps_overhead(args: argparse.Namespace) -> dict[str, Any]:
    """``ivr`` sweeps of 1-second trials, batches of 8, live maps on and off alternating (see the module docstring)."""
    raw: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for kind in [k.strip() for k in args.live_kinds.split(",") if k.strip()]:
        trial = ("hold_s=1.0", f"busy={str(kind == 'busy').lower()}")
        raw[kind] = {"on": [], "off": []}
        for r in range(args.repeats):
            for live in (("on", "off") if r % 2 == 0 else ("off", "on")):
                with tempfile.TemporaryDirectory(prefix="bench-live-maps-") as tmp:
                    print(f"[repeat {r + 1}/{args.repeats}] live maps {live}, {kind} trials ...", flush=True)
                    result = run_ours("ivr", args.live_trials, args.num_cpus, Path(tmp), args.timeout, overrides=(
                        *trial, f"hydra.sweeper.live_maps={str(live == 'on').lower()}"))
                    raw[kind][live].append(result)
                    print(f"    {_describe(result)}; {result['live_maps']} live maps", flush=True)
    return {"trials": args.live_trials, "repeats": args.repeats, "variants": raw, "submit": live_maps_submit_cost()}


def _live_maps_logged(uri: str) -> dict[str, Any]:
    """How many live maps the sweep in ``uri`` logged, and the painter's CPU seconds for each."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(EXPERIMENT)
    parent = client.search_runs([exp.experiment_id], filter_string="tags.`sweeper.role` = 'sweep'")[0]
    cpu = [m.value for m in client.get_metric_history(parent.info.run_id, "live_draw_cpu_s")]
    return {"live_maps": len(cpu), "draw_cpu_s": cpu}


def live_maps_submit_cost(n_trials: int = 64, repeats: int = 50) -> dict[str, Any]:
    """The driver's cost per batch: ``LiveMaps.submit`` of the policy's own fits (``ivr``, batches of 8), timed.

    The painter runs as in a sweep (a spawned process); its maps go to a writer that drops them.
    """
    from sweeper.run.live_map_painter import LiveMaps
    from sweeper.search.grammar import parse_specs
    from sweeper.search.policy import MultiversePolicy
    from sweeper.search.settings import PolicySettings

    space = parse_specs(SPACE)
    policy = MultiversePolicy(space, PolicySettings(strategy="ivr", num_trials=n_trials, n_initial=8, batch_size=8))
    fits: list[Any] = []
    policy.on_gp_fit = fits.append
    while (s := policy.ask()) is not None:
        policy.tell(s.index, 0.5 * s.x[0] + 0.25 * s.x[1])
    dropped = type("Dropped", (), {"log_bytes": lambda *a: None, "log": lambda *a, **k: None})()
    live = LiveMaps(dropped, "run", space, "score")
    times, pickled = [], []
    try:
        for k in range(repeats):
            t = time.perf_counter()
            live.submit(fits[k % len(fits)])
            times.append(time.perf_counter() - t)
    finally:
        live.close()
    for k in range(repeats):  # what the queue's feeder thread does with each, beside Tune's loop
        t = time.perf_counter()
        size = len(pickle.dumps(fits[k % len(fits)]))
        pickled.append((time.perf_counter() - t, size))
    return {"fits": len(fits), "largest_fit_points": max(f.gp.X.shape[0] for f in fits), "submits": repeats,
            "median_ms": 1e3 * median(times), "max_ms": 1e3 * max(times), "maps_drawn": len(live.logged),
            "pickle_median_ms": 1e3 * median([t for t, _ in pickled]),
            "pickle_max_kb": max(n for _, n in pickled) / 1e3}


def live_maps_markdown(live: dict[str, Any], args: argparse.Namespace) -> str:
    rows, ratios = [], []
    for kind, variants in live["variants"].items():
        for name in ("off", "on"):
            results = variants[name]
            cpu = [c for r in results for c in r.get("draw_cpu_s", [])]
            rows.append([f"{kind}, live maps {name}", str(results[0]["trials"]), fmt(_med(results, "span_s")),
                         fmt(_med(results, "wall_s")), fmt(_med(results, "startup_s")),
                         "—" if name == "off" else f"{fmt(median([r['live_maps'] for r in results]), 2)}",
                         fmt(median(cpu)) if cpu else "—"])
        on, off = variants["on"], variants["off"]
        paired = ", ".join(fmt(a["span_s"] / b["span_s"], 3) for a, b in zip(on, off, strict=True))
        ratios.append([f"{kind}: live maps on / off — target ≤ 1.05×",
                       fmt(_med(on, "span_s") / _med(off, "span_s"), 3) + "×",
                       fmt(_med(on, "wall_s") / _med(off, "wall_s"), 3) + "×", paired])
    table = markdown_table(["variant", "N", "span s (first trial start → last trial end)", "wall s", "start-up s",
                            "live maps logged", "painter CPU per map s (median)"], rows)
    ratio_table = markdown_table(["ratio (medians of this run)", "span", "wall",
                                  "span, each repeat's pair (run back to back)"], ratios)
    sub = live["submit"]
    note = (f"`ivr` sweeps of {live['trials']} trials lasting 1 s each (asleep, or busy for 1 s of CPU), n_initial 8, "
            f"batch_size 8, {args.num_cpus} CPUs for Ray, `hydra.sweeper.live_maps` on and off alternating; medians "
            f"of {live['repeats']} run(s) per variant. The driver's own cost per batch (`LiveMaps.submit` of the "
            f"policy's {sub['fits']} fits, up to {sub['largest_fit_points']} trials each, {sub['submits']} times): "
            f"median {fmt(sub['median_ms'])} ms, max {fmt(sub['max_ms'])} ms; pickling a fit for the queue, done by "
            f"its feeder thread in the driver: median {fmt(sub['pickle_median_ms'])} ms, up to "
            f"{fmt(sub['pickle_max_kb'])} KB.")
    return f"### Live maps (issue 19)\n\n{note}\n\n{table}\n\n{ratio_table}"


# ---------------------------------------------------------------------- per-trial profile
#: (label, file suffix, function) of the parts of one trial, by cumulative time.
PROFILE_GROUPS = [
    ("whole trial (run_trial)", "sweeper/run/trial.py", "run_trial"),
    ("split composition (TrialComposer.split: task copy + overrides)", "sweeper/run/compose.py", "split"),
    ("full composition (TrialComposer.compose; only without the split)", "sweeper/run/compose.py", "compose"),
    ("  of which Hydra's full composition (load_sweep_config)", "config_loader_impl.py", "load_sweep_config"),
    ("the job (sweeper.run.job.run_split_job, incl. the task)", "sweeper/run/job.py", "run_split_job"),
    ("  of which writing .hydra/*.yaml", "sweeper/run/job.py", "_save_configs"),
    ("Hydra run_job (only without the split)", "hydra/core/utils.py", "run_job"),
    ("  of which saving .hydra/*.yaml (_save_config)", "hydra/core/utils.py", "_save_config"),
    ("job logging (sweeper.run.job_logging.configure_job_log, per job)", "sweeper/run/job_logging.py",
     "configure_job_log"),
    ("Hydra's configure_log (in run_job; in configure_job_log for a process's first job)", "hydra/core/utils.py",
     "configure_log"),
    ("the task itself", "apps/trivial.py", "main"),
    ("capture_conditions", "sweeper/record/conditions.py", "capture_conditions"),
    ("  of which threadpoolctl scanning the loaded libraries", "threadpoolctl.py", "_load_libraries"),
    ("_flat_task_config", "sweeper/run/trial.py", "_flat_task_config"),
    ("across the above: HydraConfig.set_config (copies the config)", "hydra/core/hydra_config.py", "set_config"),
    ("across the above: DictConfig.__deepcopy__", "omegaconf/dictconfig.py", "__deepcopy__"),
]


def profile_trial(n: int) -> dict[str, Any]:
    """Run ``n`` trials of the trivial app in this process, as a Ray worker does, under cProfile.

    The trial context is built as the sweeper's driver builds it (``SweeperImpl``), and a
    one-CPU Ray is started first, as in a worker (``ray.get_runtime_context()`` would
    otherwise start one inside the first trial).
    """
    import ray
    from hydra import initialize_config_dir
    from hydra._internal.callbacks import Callbacks
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import HydraContext, RunMode

    from sweeper.run.trial import run_trial

    sys.path.insert(0, str(APPS))
    import trivial  # bench/apps/trivial.py

    tmp = tempfile.mkdtemp(prefix="bench-profile-")
    cwd = os.getcwd()
    started_ray = not ray.is_initialized()
    if started_ray:  # "local": a Ray left running by a sweep before must not be joined (num_cpus is refused there)
        ray.init(address="local", num_cpus=1, include_dashboard=False, logging_level="WARNING")
    try:
        os.chdir(tmp)
        with initialize_config_dir(config_dir=str(APPS / "conf"), version_base="1.3"):
            loader = GlobalHydra.instance().config_loader()
            cfg = loader.load_configuration("trivial", overrides=[f"hydra.sweep.dir={tmp}/sweep"],
                                            run_mode=RunMode.MULTIRUN)
            HydraConfig.instance().set_config(cfg)
            ctx = _trial_context(HydraContext(loader, Callbacks(cfg)), cfg, trivial.main.__wrapped__)

            def one(i: int) -> dict[str, Any]:
                return run_trial(ctx, {"x": 0.3, "y": 0.4, "sweeper_trial": {"index": i}})

            first = one(0)  # the first trial also reads what is cached per process (git, packages)
            if first["sweeper_status"] != "FINISHED":
                raise RuntimeError(f"the profiled trial failed: {first.get('sweeper_traceback')}")
            t, times = time.perf_counter(), os.times()
            for i in range(1, n + 1):
                one(i)
            plain_ms, after = 1e3 * (time.perf_counter() - t) / n, os.times()
            user_ms, system_ms = (1e3 * (after.user - times.user) / n, 1e3 * (after.system - times.system) / n)
            profiler = cProfile.Profile()
            profiler.enable()
            for i in range(n + 1, 2 * n + 1):
                one(i)
            profiler.disable()
    finally:
        os.chdir(cwd)
        shutil.rmtree(tmp, ignore_errors=True)
        if started_ray:
            ray.shutdown()
    stats = pstats.Stats(profiler)
    groups = []
    for label, file_suffix, func in PROFILE_GROUPS:
        ct = sum(v[3] for (f, _, name), v in stats.stats.items()  # type: ignore[attr-defined]  # pstats' raw table
                 if name == func and f.replace(os.sep, "/").endswith(file_suffix))
        groups.append({"part": label, "ms_per_trial": 1e3 * ct / n})
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(30)
    top = "\n".join(line for line in out.getvalue().splitlines() if line.strip())
    return {"trials": n, "unprofiled_ms_per_trial": plain_ms, "user_cpu_ms_per_trial": user_ms,
            "system_cpu_ms_per_trial": system_ms, "groups": groups, "top_cumulative": top}


def _trial_context(hydra_context: Any, cfg: Any, task: Any) -> Any:
    """The ``TrialContext`` the driver ships to workers, built by the same ``SweeperImpl`` steps."""
    import dataclasses

    from hydra.core.singleton import Singleton
    from omegaconf import OmegaConf

    from sweeper.run.hydra_sweeper import SweeperImpl
    from sweeper.run.sweep_validation import checked_composer
    from sweeper.run.trial import TrialContext

    settings = OmegaConf.to_container(cfg.hydra.sweeper, resolve=True)
    impl = SweeperImpl(**settings)  # type: ignore[arg-type]  # the container of a DictConfig is a dict
    impl.setup(hydra_context=hydra_context, task_function=task, config=cfg)
    valid = impl._validate([])
    fields = {f.name for f in dataclasses.fields(TrialContext)}
    kwargs = {"hydra_context": hydra_context, "task_function": task, "singleton_state": Singleton.get_state(),
              "space": valid.space, "metric": impl.run.metric, "code_dir": str(APPS), "master_config": cfg}
    if "composer" in fields:  # composition strategy decided in the driver (sweeper.run.compose)
        kwargs["composer"] = checked_composer(hydra_context, cfg, valid.space)
    return TrialContext(**{k: v for k, v in kwargs.items() if k in fields})


# ---------------------------------------------------------------------- helpers and tables
def _child_runs(uri: str) -> tuple[list[tuple[float, float]], dict[str, int]]:
    """(start, end) in epoch seconds of every trial run of the one sweep in ``uri``, and the
    numbers of params, tags and metrics of the first."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(EXPERIMENT)
    runs = client.search_runs([exp.experiment_id], max_results=50000)
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    first = children[0].data
    payload = {"params": len(first.params), "tags": len(first.tags), "metrics": len(first.metrics)}
    return [(r.info.start_time / 1e3, r.info.end_time / 1e3) for r in children if r.info.end_time], payload


def _span_stats(spans: list[tuple[float, float]], n: int) -> dict[str, Any]:
    if len(spans) != n:
        raise RuntimeError(f"expected {n} finished trials, found {len(spans)}")
    span = max(e for _, e in spans) - min(s for s, _ in spans)
    return {"trials": n, "span_s": span, "per_trial_ms": 1e3 * span / n}


def _describe(result: dict[str, Any]) -> str:
    return (f"{result['per_trial_ms']:.1f} ms/trial, span {result['span_s']:.2f} s, "
            f"wall {result['wall_s']:.2f} s, start-up {result['startup_s']:.2f} s")


def _med(results: list[dict[str, Any]], key: str) -> float:
    return median([r[key] for r in results if key in r])


def overhead_markdown(raw: dict[str, list[dict[str, Any]]], mlflow: dict[str, Any], searcher: dict[str, Any],
                      args: argparse.Namespace) -> str:
    rows = []
    for name, results in raw.items():
        rows.append([name, str(results[0]["trials"]), fmt(_med(results, "per_trial_ms")),
                     fmt(_med(results, "worker_per_trial_ms")), fmt(_med(results, "span_s")),
                     fmt(_med(results, "startup_s")), fmt(_med(results, "wall_s"))])
    table = markdown_table(
        ["variant", "N", "ms/trial (driver span / N)", "ms/trial (in-worker span / N)", "span s",
         "start-up s", "wall s"], rows)
    ours, reuse = raw["ours sobol"], raw["Tune reuse_actors=True"]
    default, ivr = raw["Tune defaults (reuse_actors=False)"], raw["ours ivr"]

    def ratio(a: list[dict[str, Any]], b: list[dict[str, Any]], key: str) -> str:
        return fmt(_med(a, key) / _med(b, key), 3) + "×"

    ratios = markdown_table(["ratio (medians of this run)", "per trial", "wall"], [
        ["ours (sobol) / Tune reuse_actors=True — target ≤ 1.5×", ratio(ours, reuse, "per_trial_ms"),
         ratio(ours, reuse, "wall_s")],
        ["Tune defaults / ours (sobol)", ratio(default, ours, "per_trial_ms"), ratio(default, ours, "wall_s")],
        ["ours ivr / ours sobol", ratio(ivr, ours, "per_trial_ms"), ratio(ivr, ours, "wall_s")],
        ["ours sobol, MLflow writes off / Tune reuse_actors=True", ratio(raw[NO_RECORDS], reuse, "per_trial_ms"),
         ratio(raw[NO_RECORDS], reuse, "wall_s")],
    ])
    extra = markdown_table(["measurement", "value"], [
        *mlflow_rows(mlflow),
        ["ivr searcher alone (MultiversePolicy, N={}, 2 workers)".format(searcher["trials"]),
         f"{fmt(searcher['total_s'])} s in ask = {fmt(1e3 * searcher['total_s'] / searcher['trials'])} ms/trial; "
         f"{searcher['gp_fits']} GP fits ({fmt(searcher['fit_s'])} s), {searcher['ivr_batches']} IVR batches "
         f"({fmt(searcher['ivr_s'])} s), {searcher['sobol_designs']} Sobol designs ({fmt(searcher['sobol_s'])} s); "
         f"median GP ask {fmt(searcher['median_gp_ask_ms'])} ms, "
         f"max {fmt(searcher['max_ask_ms'])} ms"],
        ["ivr − sobol, per trial (driver span)", f"{fmt(_med(ivr, 'per_trial_ms') - _med(ours, 'per_trial_ms'))} ms"],
        ["MLflow writes' share: ours sobol − the same with writes off, per trial (driver span)",
         f"{fmt(_med(ours, 'per_trial_ms') - _med(raw[NO_RECORDS], 'per_trial_ms'))} ms"],
    ])
    note = (f"Medians of {args.repeats} run(s) per variant, {args.num_cpus} CPUs for Ray. Driver span: first "
            "trial start to last trial end as the driver sees them (ours: MLflow child runs' start/end "
            "times; Tune: a callback at on_trial_start/on_trial_complete). In-worker span: time.time() "
            "inside the trainable. Start-up: launch of the command to the first trial's start.")
    return f"### Per-trial overhead\n\n{note}\n\n{table}\n\n{ratios}\n\n{extra}"


def profile_markdown(prof: dict[str, Any]) -> str:
    rows = [[g["part"], fmt(g["ms_per_trial"])] for g in prof["groups"]]
    table = markdown_table(["part of one trial (cProfile, cumulative)", "ms per trial"], rows)
    return (f"### Where one trial's time goes (in process, as a Ray worker runs it; {prof['trials']} trials)\n\n"
            f"Unprofiled: {fmt(prof['unprofiled_ms_per_trial'])} ms per trial; CPU of this process "
            f"{fmt(prof.get('user_cpu_ms_per_trial', float('nan')))} ms user, "
            f"{fmt(prof.get('system_cpu_ms_per_trial', float('nan')))} ms system (the system part is mostly "
            f"creating the job's files, and moves with the disk's load). Under cProfile (inflated, "
            f"use for shares):\n\n{table}\n\n<details><summary>top cumulative entries</summary>\n\n```\n"
            f"{prof['top_cumulative']}\n```\n</details>")
