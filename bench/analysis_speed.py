"""Analysis speed (issue 8, item 5): ``expected_max`` on 10^6 scores and ``sweeper report`` on 10,000 trials.

Why: the report must stay usable for the sweeps the searcher now makes possible. Goals:
``expected_max`` on ``N = 10^6`` values for every budget ``n = 1..N`` in under 1 s, and
``python -m sweeper.cli report`` on a 10,000-trial sweep in SQLite in under 60 s, loading
included.

What:

- **expected_max**: ``N`` (default 10^6) scores, every budget ``1..N``, with replacement
  (the paper's estimator, what the report draws) and without; distinct scores
  (``normal``) and scores with ties (rounded to 1,000 distinct values, as accuracies
  of a finite test set are). Median of ``--repeats`` after one untimed warm-up call.
- **store**: a synthetic sweep of ``--trials`` runs (default 10,000) written with the
  recorder's own calls (:func:`bench.sweep_report.write_synthetic_sweep`: 2 swept params,
  ~20 config leaves, ~30 tags, 3 metrics, 2 % failures, a QRA block), on tmpfs. Writing
  10,000 runs takes 5-7 minutes here, so ``--store-dir`` keeps the store between runs
  (it is rebuilt if it holds a different number of trials).
- **load_sweep**: in a fresh interpreter (imports of mlflow and pandas included), through
  the SQLite fast path and, for comparison, through MLflow's ``search_runs`` (the path
  used for other stores and before issue 8; ``--no-search-runs`` skips it: about a
  minute at 10,000 trials).
- **report**: ``python -m sweeper.cli report`` on the whole sweep, wall time of the whole
  command (interpreter start, imports, loading, GP surrogate, figures, files, logging
  every file to MLflow as an artifact), median of ``--report-repeats``; and once more with
  ``--bounds 0 1`` (the synthetic score lies in [0, 1]): the bounded model, whose surrogate
  averages slice-sampled hyperparameters (:mod:`sweeper.search.hyperposterior`, issue 15).

    python -m bench analysis_speed                 # N = 10^6, 10,000 trials (~10 min with the store)
    python -m bench analysis_speed --smoke         # N = 10^5, 500 trials (about 2 minutes)
    python -m bench.analysis_speed --store-dir /dev/shm/sweeper-bench-store   # keep the store
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.report import fmt, markdown_table, median, write_results

EXPERIMENT = "bench-analysis"
REPO = Path(__file__).resolve().parent.parent


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n-values", type=int, default=10**6, help="scores for expected_max (default 10^6)")
    parser.add_argument("--repeats", type=int, default=5, help="repeats of each expected_max call (default 5)")
    parser.add_argument("--trials", type=int, default=10_000, help="trials of the synthetic sweep (default 10,000)")
    parser.add_argument("--report-repeats", type=int, default=2, help="runs of the report command (default 2)")
    parser.add_argument("--store-dir", type=Path, default=None,
                        help="keep the synthetic store here and reuse it (default: a temporary folder)")
    parser.add_argument("--no-search-runs", action="store_true",
                        help="skip timing load_sweep through MLflow's search_runs")
    parser.add_argument("--smoke", action="store_true", help="N = 10^5, 500 trials, 1 repeat")


def run(args: argparse.Namespace) -> None:
    if args.smoke:
        args.n_values, args.repeats, args.trials, args.report_repeats = 10**5, 1, 500, 1
    em_rows = time_expected_max(args.n_values, args.repeats)
    for row in em_rows:
        print("   ", row, flush=True)
    if args.store_dir is not None:
        report_rows = time_report(args, args.store_dir)
    else:
        shm = "/dev/shm" if Path("/dev/shm").is_dir() else None  # writing 10,000 runs: one fsync per call
        with tempfile.TemporaryDirectory(dir=shm) as tmp:
            report_rows = time_report(args, Path(tmp))
    write_results("analysis_speed", analysis_markdown(em_rows, report_rows, args),
                  {"settings": {k: str(v) for k, v in vars(args).items()}, "expected_max": em_rows,
                   "report": report_rows})


# ---------------------------------------------------------------- expected_max
def time_expected_max(n_values: int, repeats: int) -> list[dict[str, Any]]:
    """Seconds of ``expected_max`` for every budget ``1..N``, per variant: median of ``repeats``."""
    from sweeper.analysis.expected_max import expected_max

    rng = np.random.default_rng(0)
    scores = {"distinct": rng.normal(size=n_values),
              "1,000 distinct values": np.round(rng.uniform(0.0, 1.0, size=n_values), 3)}
    rows = []
    for kind, values in scores.items():
        for without in (False, True):
            expected_max(values[:1000], without_replacement=without)  # warm-up: imports, caches
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                em = expected_max(values, without_replacement=without)
                times.append(time.perf_counter() - t0)
            rows.append({"values": kind, "n_values": n_values, "without_replacement": without,
                         "budgets": int(em.n.size), "seconds": median(times), "runs": times})
    return rows


# ---------------------------------------------------------------- the report
def _trials_in_store(db: Path) -> int:
    """Trial runs of the benchmark's sweep already in ``db`` (0 if none or unreadable)."""
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True) as con:
            row = con.execute(
                "SELECT COUNT(*) FROM tags t JOIN runs r ON r.run_uuid = t.run_uuid JOIN experiments e "
                "ON e.experiment_id = r.experiment_id WHERE t.key = 'mlflow.parentRunId' AND e.name = ?",
                (EXPERIMENT,)).fetchone()
        return int(row[0])
    except sqlite3.Error:
        return 0


def _store(args: argparse.Namespace, folder: Path) -> tuple[str, float | None]:
    """The store's URI, building it first unless it already holds ``--trials`` trials; seconds it took."""
    from bench.sweep_report import write_synthetic_sweep

    db = folder / "mlruns.db"
    if _trials_in_store(db) == args.trials:
        print(f"reusing the store {db} ({args.trials} trials)", flush=True)
        return f"sqlite:///{db}", None
    if folder.exists():
        for stale in (db, folder / "artifacts"):
            if stale.is_dir():
                shutil.rmtree(stale)
            elif stale.exists():
                stale.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    print(f"writing {args.trials} trials to {db} ...", flush=True)
    t0 = time.perf_counter()
    write_synthetic_sweep(f"sqlite:///{db}", EXPERIMENT, args.trials)
    return f"sqlite:///{db}", time.perf_counter() - t0


def _fresh_load(uri: str, via_search_runs: bool) -> tuple[float, int]:
    """Seconds of ``load_sweep`` in a fresh interpreter, imports included; trials loaded."""
    code = ("import sys, time; t0 = time.perf_counter(); from sweeper.analysis import runs\n"
            "if sys.argv[3] == '1':\n"
            "    runs.sqlite_child_runs = lambda *a: (_ for _ in ()).throw(runs.sqlite3.Error('bench'))\n"
            "r = runs.load_sweep(sys.argv[1], sys.argv[2]); print(time.perf_counter() - t0, len(r.trials))")
    out = subprocess.run([sys.executable, "-c", code, EXPERIMENT, uri, "1" if via_search_runs else "0"],
                         capture_output=True, text=True, check=True, cwd=REPO).stdout.split()
    return float(out[-2]), int(out[-1])


def _report_once(uri: str, out: Path, *extra: str) -> float:
    cmd = [sys.executable, "-m", "sweeper.cli", "report", "--experiment", EXPERIMENT, "--tracking-uri", uri,
           "--out", str(out), *extra]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, cwd=REPO)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"sweeper report failed:\n{proc.stdout}\n{proc.stderr}")
    return elapsed


def time_report(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """Build (or reuse) the store, then time loading and the whole report command."""
    uri, write_s = _store(args, folder)
    print("load_sweep (SQLite fast path) ...", flush=True)
    load_s, n_loaded = _fresh_load(uri, via_search_runs=False)
    search_s = None
    if not args.no_search_runs:
        print("load_sweep (MLflow search_runs) ...", flush=True)
        search_s, _ = _fresh_load(uri, via_search_runs=True)
    times, summary = [], {}
    for i in range(args.report_repeats):
        print(f"sweeper report, run {i + 1} ...", flush=True)
        out = folder / f"report-{i}"
        times.append(_report_once(uri, out))
        summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
        shutil.rmtree(out, ignore_errors=True)
    print("sweeper report --bounds 0 1 ...", flush=True)
    bounded_s = _report_once(uri, folder / "report-bounded", "--bounds", "0", "1")
    bounded_summary = (folder / "report-bounded" / "summary.json").read_text(encoding="utf-8")
    bounded_build_s = json.loads(bounded_summary).get("build_s")
    shutil.rmtree(folder / "report-bounded", ignore_errors=True)
    return {"trials": n_loaded, "write_s": write_s, "load_s": load_s, "load_search_runs_s": search_s,
            "report_s": median(times), "report_runs": times, "build_s": summary.get("build_s"),
            "bounded_report_s": bounded_s, "bounded_build_s": bounded_build_s,
            "surrogate_fit_points": (summary.get("surrogate") or {}).get("n_fit")}


# ---------------------------------------------------------------- tables
def analysis_markdown(em_rows: list[dict[str, Any]], rep: dict[str, Any], args: argparse.Namespace) -> str:
    em_table = markdown_table(
        ["scores", "N", "budgets", "with replacement s", "without replacement s"],
        [[kind, f"{em_rows[0]['n_values']:,}", f"1..{em_rows[0]['budgets']:,}",
          *(fmt(next(r["seconds"] for r in em_rows if r["values"] == kind and r["without_replacement"] is w))
            for w in (False, True))]
         for kind in dict.fromkeys(r["values"] for r in em_rows)])
    runs = ", ".join(fmt(t) for t in rep["report_runs"])
    rows = [
        ["load_sweep, fresh interpreter, SQLite fast path (imports included)", fmt(rep["load_s"])],
        ["load_sweep, fresh interpreter, MLflow `search_runs` (other stores; before issue 8)",
         fmt(rep["load_search_runs_s"]) if rep["load_search_runs_s"] is not None else "not run"],
        [f"`python -m sweeper.cli report`, whole command (median of {len(rep['report_runs'])}: {runs})",
         fmt(rep["report_s"])],
        ["  of which `build_report` (sections, GP surrogate, figures, files)", fmt(rep["build_s"])],
        ["`... report --bounds 0 1` (the bounded, hyperparameter-averaged surrogate), one run",
         fmt(rep["bounded_report_s"])],
        ["  of which `build_report`", fmt(rep["bounded_build_s"])],
    ]
    if rep["write_s"] is not None:
        rows.insert(0, ["writing the synthetic store (not part of the goal)", fmt(rep["write_s"])])
    report_table = markdown_table([f"{rep['trials']:,} trials in SQLite", "seconds"], rows)
    em_goal = next(r["seconds"] for r in em_rows if r["values"] == "distinct" and not r["without_replacement"])
    em_without = next(r["seconds"] for r in em_rows if r["values"] == "distinct" and r["without_replacement"])
    return (f"### expected_max, every budget (median of {args.repeats})\n\n{em_table}\n\n"
            f"Goal: N = 10^6, all n, < 1 s. Measured at N = {em_rows[0]['n_values']:,}, distinct scores: "
            f"{fmt(em_goal)} s with replacement, {fmt(em_without)} s without.\n\n"
            f"### sweeper report on a synthetic sweep\n\n{report_table}\n\n"
            f"Goal: 10,000 trials, < 60 s whole command. Measured at {rep['trials']:,} trials: "
            f"{fmt(rep['report_s'])} s; the GP surrogate is fitted on "
            f"{rep['surrogate_fit_points']} of the finished trials (a seeded subset).\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.analysis_speed", description=__doc__.splitlines()[0])
    add_arguments(parser)
    run(parser.parse_args(argv))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
