"""Start-up: how long a sweep takes to start its first trial, and a short sweep's whole time.

Why: a researcher's first sweep is a short one, and every second before the first trial
is a second of Ray, MLflow and imports, not of research. The goals: the first trial of a
sweep starts within 3 s of what ``ray.init()`` alone takes in a fresh process, and a
16-trial sweep of a task that costs nothing is compared, as a ratio, with Hydra's basic
sweeper running the same 16 jobs one after another in its own process (no Ray, no records).

What, in one run, each variant ``--repeats`` times in alternating order, each a fresh process
(times from the moment the parent launched it):

1. **ray.init alone**: ``python -c "import ray; ray.init(...)"`` with the sweeper's own
   arguments for a local Ray (no dashboard, ``num_cpus``): until ``ray.init`` returns.
2. **ours**: ``bench/apps/trivial.py --multirun`` (``strategy=sobol``, ``--trials`` trials,
   MLflow into a new SQLite file): until the first trial's task starts (``time.time()`` the
   task writes to ``BENCH_STAMP_FILE``), and until the command exits; and, from the
   sweep's own console lines, when validation ended (the start line), the sweep's MLflow
   run was open, Ray was up, and the sweep said it finished.
3. **basic sweeper**: the same task, ``hydra/sweeper=basic`` over a 4 x 4 grid of ``x`` and
   ``y`` (16 jobs, Hydra's basic launcher, in process).
4. **Tune reuse_actors=True**: ``bench/apps/tune_trivial.py`` (plain ``tune.Tuner``, the
   same 16 trials, without Tune's default loggers as the sweep runs it): until the first
   trial starts (``time.time()`` in the trainable), and until the command exits.

    python -m bench startup                  # 5 repeats (~6 min on 2 cores)
    python -m bench startup --repeats 1      # smoke
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.report import fmt, markdown_table, median, timed_run, write_results

APPS = Path(__file__).resolve().parent / "apps"
VARIANTS = ("ray.init alone", "ours", "basic sweeper", "Tune reuse_actors=True")
#: The sweep's console lines that mark its phases (Hydra's ``[%(asctime)s][HYDRA]`` prefix).
PHASES = {"validated": "MultiverseSweeper(", "MLflow run open": "MLflow: experiment", "Ray up": "Ray: ",
          "finished line": "Finished "}
RAY_INIT = ("import json, sys, time, ray; ray.init(address='local', include_dashboard=False, logging_level=30, "
            "num_cpus={cpus}, _system_config={{'prestart_worker_first_driver': False}}); "
            "print(json.dumps({{'t': time.time()}})); ray.shutdown()")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trials", type=int, default=16, help="trials (jobs) per sweep (default 16; a square)")
    parser.add_argument("--repeats", type=int, default=5, help="runs of each variant (default 5)")
    parser.add_argument("--num-cpus", type=int, default=2, help="CPUs of the local Ray (default 2)")
    parser.add_argument("--timeout", type=int, default=600, help="seconds allowed per subprocess")
    parser.add_argument("--smoke", action="store_true", help="one repeat")


def run(args: argparse.Namespace) -> None:
    repeats = 1 if args.smoke else args.repeats
    raw: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        for r in range(repeats):
            order = VARIANTS if r % 2 == 0 else tuple(reversed(VARIANTS))
            for variant in order:
                folder = Path(tmp) / f"{r}-{VARIANTS.index(variant)}"
                folder.mkdir()
                result = _one(variant, args, folder)
                raw[variant].append(result)
                print(f"[{r + 1}/{repeats}] {variant}: {json.dumps(result)}", flush=True)
    summary = _summary(raw)
    write_results("startup", startup_markdown(summary, args.trials, repeats),
                  {"raw": raw, "summary": summary, "trials": args.trials, "repeats": repeats})


def _one(variant: str, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    if variant == "ray.init alone":
        proc, launched, wall = timed_run([sys.executable, "-c", RAY_INIT.format(cpus=args.num_cpus)], folder,
                                      args.timeout)
        return {"ray_init_s": json.loads(proc.stdout.strip().splitlines()[-1])["t"] - launched, "wall_s": wall}
    stamps = folder / "stamps.txt"
    env = {"BENCH_STAMP_FILE": str(stamps)}
    if variant == "ours":
        cmd = [sys.executable, str(APPS / "trivial.py"), "--multirun", "hydra.sweeper.strategy=sobol",
               f"hydra.sweeper.num_trials={args.trials}", f"ray.num_cpus={args.num_cpus}",
               f"mlflow.tracking_uri=sqlite:///{folder / 'mlruns.db'}", f"hydra.sweep.dir={folder / 'multirun'}"]
    elif variant == "basic sweeper":
        side = round(args.trials ** 0.5)
        values = ",".join(f"{(i + 0.5) / side:.4g}" for i in range(side))
        cmd = [sys.executable, str(APPS / "trivial.py"), "--multirun", "--config-name", "trivial_basic",
               f"x={values}", f"y={values}", f"hydra.sweep.dir={folder / 'multirun'}"]
    else:  # without Tune's default loggers, as the sweep runs it (TensorBoard's imports torch)
        cmd = [sys.executable, str(APPS / "tune_trivial.py"), "--trials", str(args.trials), "--reuse-actors",
               "--num-cpus", str(args.num_cpus), "--storage", str(folder / "tune"), "--out", str(folder / "t.json")]
        env["TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"] = "1"
    proc, launched, wall = timed_run(cmd, folder, args.timeout, env)
    starts = ([start for start, _ in json.loads((folder / "t.json").read_text())["worker"]]
              if variant.startswith("Tune") else _stamps(stamps))
    result: dict[str, Any] = {"first_trial_s": min(starts) - launched, "wall_s": wall, "trials": len(starts)}
    if variant == "ours":
        result.update({name: at - launched for name, at in _phases(proc.stdout + proc.stderr).items()})
    return result


def _stamps(path: Path) -> list[float]:
    """The epoch times at which the tasks started (one line each, from ``BENCH_STAMP_FILE``)."""
    return [float(line) for line in path.read_text(encoding="utf-8").split()]


def _phases(console: str) -> dict[str, float]:
    """Epoch time of the first console line of each of :data:`PHASES` (Hydra's local-time stamps)."""
    found: dict[str, float] = {}
    for line in console.splitlines():
        if not line.startswith("[") or "][HYDRA] " not in line:
            continue
        stamp, message = line[1:line.index("]")], line.split("][HYDRA] ", 1)[1]
        for name, prefix in PHASES.items():
            if name not in found and message.startswith(prefix):
                found[name] = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()
    return found


def _summary(raw: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, float]]:
    """Per variant, the median of each measured key over the repeats."""
    return {variant: {key: median([r[key] for r in runs if key in r]) for key in runs[0]}
            for variant, runs in raw.items() if runs}


def startup_markdown(summary: dict[str, dict[str, float]], trials: int, repeats: int) -> str:
    ours, basic, tune = summary["ours"], summary["basic sweeper"], summary["Tune reuse_actors=True"]
    ray_init = summary["ray.init alone"]["ray_init_s"]
    rows = [["ray.init alone (fresh process)", fmt(ray_init), "—", "—"],
            ["ours (Hydra CLI, MLflow SQLite)", "—", fmt(ours["first_trial_s"]), fmt(ours["wall_s"])],
            ["Tune reuse_actors=True", "—", fmt(tune["first_trial_s"]), fmt(tune["wall_s"])],
            ["basic sweeper (no Ray, no records)", "—", fmt(basic["first_trial_s"]), fmt(basic["wall_s"])]]
    phases = [[name, fmt(ours[name])] for name in (*PHASES, "first_trial_s", "wall_s") if name in ours]
    ratios = [["ours first trial − ray.init alone (goal ≤ 3 s)", f"{fmt(ours['first_trial_s'] - ray_init)} s"],
              ["ours first trial − Tune's first trial", f"{fmt(ours['first_trial_s'] - tune['first_trial_s'])} s"],
              [f"ours / basic sweeper, whole {trials}-trial command", f"{fmt(ours['wall_s'] / basic['wall_s'])}×"],
              [f"ours / Tune reuse_actors=True, whole {trials}-trial command",
               f"{fmt(ours['wall_s'] / tune['wall_s'])}×"]]
    return "\n\n".join([
        f"Medians of {repeats} runs per variant, variants alternating; seconds from the process's launch.",
        markdown_table(["variant", "ray.init returned s", "first trial starts s", f"whole {trials}-trial command s"],
                       rows),
        markdown_table(["ours: phase (seconds from launch)", "s"], phases),
        markdown_table(["comparison", "value"], ratios)])
