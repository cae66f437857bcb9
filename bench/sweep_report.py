"""How fast ``sweeper report`` reads and reports a big sweep: a synthetic SQLite store.

Why: the issue asks that thousands of trial runs load in seconds and that the report of a
1,000-trial sweep takes seconds. A real sweep of that size takes too long to run for a
benchmark, so this writes one with the recorder's own calls (``MLflowTracker.start_run``
with the point and the trial tags, one ``log`` with the composed config, metrics and
conditions, ``finish``), the same shape as a real sweep: a parent run with the settings,
``space.*`` params and ``search_space.json``; children with 2 swept params, ~20 config
leaves, ~30 tags and 3 metrics; 2 % failed trials; a block of repeated measurements
under two thread counts and 4 seeds (a QRA group and a paired environment comparison).

Measured: (1) ``load_sweep`` of ``--load-trials`` runs (default 2,000): once in a fresh
interpreter (importing mlflow and pandas included), then in-process, best of ``--repeats``;
(2) ``python -m sweeper.cli report`` on ``--report-trials`` runs
(default 1,000), wall time of the whole command (interpreter start, imports, loading,
the GP surrogate, figures, writing and logging every file as an artifact).

    python -m bench.sweep_report                       # 2,000 / 1,000 trials
    python -m bench.sweep_report --load-trials 200 --report-trials 100 --repeats 1   # smoke
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.report import fmt, machine, markdown_table

RESULTS = Path(__file__).resolve().parent / "results"


def write_synthetic_sweep(tracking_uri: str, experiment: str, n_trials: int, *, strategy: str = "ivr",
                          seed: int = 0, fail_rate: float = 0.02, repeats: int = 8) -> str:
    """Write a sweep of ``n_trials`` trial runs to MLflow; return the parent run id.

    The task is ``score = 0.9 - (x - 0.3)^2 - (y - 0.6)^2 + noise(seed, threads)``
    (mode max). The last ``repeats`` trials repeat the point ``x=0.3, y=0.6`` with
    ``env.seed = i // 2`` and ``env.threads = 1 + i % 2``.
    """
    from mlflow.tracking import MlflowClient

    from sweeper.record.tracking import MLflowTracker
    from sweeper.search.space import SearchSpace

    rng = np.random.default_rng(seed)
    if tracking_uri.startswith("sqlite:///"):
        # Artifacts next to the store: MLflow's default is ./mlruns in the working directory.
        client = MlflowClient(tracking_uri)
        if client.get_experiment_by_name(experiment) is None:
            artifacts = Path(tracking_uri[len("sqlite:///"):]).resolve().parent / "artifacts"
            client.create_experiment(experiment, artifact_location=artifacts.as_uri())
    tracker = MLflowTracker(tracking_uri, experiment)
    space = SearchSpace.from_dict({"dims": [
        {"kind": "float", "name": "x", "low": 0.0, "high": 1.0, "log": False},
        {"kind": "float", "name": "y", "low": 0.0, "high": 1.0, "log": False},
    ]})
    settings = {"strategy": strategy, "mode": "max", "num_trials": n_trials, "n_initial": 8, "batch_size": 8,
                "seed": seed, "deterministic": False, "metric": "score", "max_failure_rate": 0.5,
                "space.x": "interval(0, 1)", "space.y": "interval(0, 1)", "fixed_overrides": ""}
    parent = tracker.start_run(f"{experiment}-synthetic", params=settings,
                               tags={"role": "sweep", "strategy": strategy, "command": "synthetic"})
    tracker.log_text(parent, json.dumps(space.to_dict()), "search_space.json")
    conditions = {"host": "bench-host", "os": "Linux", "python": "3.11.9", "cpu.model": "Synthetic CPU @ 2 GHz",
                  "cpu.count": "2", "cpu.available": "2", "git.commit": "0" * 40, "git.dirty": "false",
                  **{f"pkg.{p}": "1.0" for p in ("numpy", "scipy", "ray", "mlflow", "hydra-core", "GPy")},
                  **{f"blas.lib{i}.version": "openblas 0.3" for i in range(3)}}
    n_free = n_trials - repeats
    for i in range(n_trials):
        if i < n_free:
            x, y, env_seed, threads = float(rng.random()), float(rng.random()), 0, 1
        else:
            x, y, env_seed, threads = 0.3, 0.6, (i - n_free) // 2, 1 + (i - n_free) % 2
        noise = 0.01 * np.random.default_rng([env_seed]).standard_normal() + 0.002 * np.random.default_rng(
            [env_seed, threads]).standard_normal()
        point = {"x": x, "y": y}
        run = tracker.start_run(f"trial-{i:04d}", parent_run_id=parent, params=point, tags={
            "trial_index": i, "phase": strategy, "batch": i // 8, "strategy": strategy, "status": "RUNNING"})
        failed = i < n_free and rng.random() < fail_rate
        score = 0.9 - (x - 0.3) ** 2 - (y - 0.6) ** 2 + noise
        config = {"env.seed": env_seed, "env.threads": threads, "epochs": 10, "data.name": "synthetic",
                  **{f"model.layer{j}.width": 64 for j in range(8)}, **{f"optim.opt{j}": 0.9 for j in range(8)}}
        duration = float(rng.uniform(1.0, 3.0))
        tags = {**conditions, "seed": str(env_seed), "threads.openblas": str(threads), "pid": str(1000 + i % 2),
                "status": "FAILED" if failed else "FINISHED", "duration_s": duration,
                "error": "ValueError: synthetic failure" if failed else None}
        metrics = {} if failed else {"score": score, "train_score": min(1.0, score + 0.05), "loss": 1 - score}
        tracker.log(run, params=config, metrics={**metrics, "sweeper.duration_s": duration}, tags=tags)
        tracker.finish(run, "FAILED" if failed else "FINISHED")
    tracker.log(parent, tags={"status": "FINISHED"})
    tracker.finish(parent)
    return parent


def _time_load(uri: str, experiment: str, repeats: int) -> tuple[float, float, int]:
    """Seconds of the first ``load_sweep`` in a fresh interpreter (imports included), best of the others, runs."""
    code = ("import sys, time; t0 = time.perf_counter(); from sweeper.analysis.runs import load_sweep; "
            "r = load_sweep(sys.argv[1], sys.argv[2]); print(time.perf_counter() - t0)")
    first = float(subprocess.run([sys.executable, "-c", code, experiment, uri], capture_output=True, text=True,
                                 check=True).stdout.split()[-1])
    from sweeper.analysis.runs import load_sweep

    best, n = math.inf, 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        records = load_sweep(experiment, uri)
        best = min(best, time.perf_counter() - t0)
        n = len(records.trials)
    return first, best, n


def _time_report(uri: str, experiment: str, out: Path) -> tuple[float, str]:
    cmd = [sys.executable, "-m", "sweeper.cli", "report", "--experiment", experiment, "--tracking-uri", uri,
           "--out", str(out)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"sweeper report failed:\n{proc.stdout}\n{proc.stderr}")
    return elapsed, proc.stdout


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m bench.sweep_report", description=__doc__.splitlines()[0])
    parser.add_argument("--load-trials", type=int, default=2000)
    parser.add_argument("--report-trials", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    # Writing 3,000 runs to SQLite costs one fsync per call: on tmpfs that takes a minute, not five.
    # Reading is from the page cache either way, so the measured times do not depend on it.
    shm = "/dev/shm" if Path("/dev/shm").is_dir() else None
    with tempfile.TemporaryDirectory(dir=shm) as tmp:
        uri = f"sqlite:///{Path(tmp) / 'mlruns.db'}"
        t0 = time.perf_counter()
        write_synthetic_sweep(uri, "bench-load", args.load_trials)
        write_s = time.perf_counter() - t0
        first_s, load_s, n_loaded = _time_load(uri, "bench-load", args.repeats)
        write_synthetic_sweep(uri, "bench-report", args.report_trials)
        report_s, stdout = _time_report(uri, "bench-report", Path(tmp) / "report")
    raw = {"load_trials": n_loaded, "load_s": load_s, "load_first_s": first_s, "write_s": write_s,
           "report_trials": args.report_trials, "report_s": report_s}
    m = machine()
    table = markdown_table(["measure", "trials", "seconds"], [
        ["write the synthetic sweep (MLflowTracker, SQLite)", str(args.load_trials), fmt(write_s)],
        ["load_sweep, fresh interpreter (imports mlflow and pandas)", str(n_loaded), fmt(first_s)],
        [f"load_sweep, warm (best of {args.repeats})", str(n_loaded), fmt(load_s)],
        ["`python -m sweeper.cli report` (whole command)", str(args.report_trials), fmt(report_s)],
    ])
    text = (f"## sweep_report\n\nCommand: `python -m bench.sweep_report {' '.join(argv or sys.argv[1:])}`  \n"
            f"Machine: {m['cpu_model']}, {m['cpus_available']} of {m['cpu_count']} cores, load average "
            f"{m['load_average_1_5_15']}; Python {m['python']}\n\n{table}\n")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "sweep_report.md").write_text(text, encoding="utf-8")
    (RESULTS / "sweep_report.json").write_text(json.dumps({**raw, "machine": m}, indent=2, default=str),
                                               encoding="utf-8")
    print(text)
    return raw


if __name__ == "__main__":
    main()
