"""Plain Ray Tune on the same trivial task, as the baseline of the overhead benchmark.

Run in its own process (a fresh Ray each time) by ``bench/overhead.py``; writes JSON with
each trial's start and end as seen inside the worker (``time.time()`` in the trainable)
and as seen by the driver (a Tune callback at trial start and completion, where the
sweeper's recorder creates and closes the MLflow runs).

    python bench/apps/tune_trivial.py --trials 20 --out /tmp/t.json [--reuse-actors]
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import ray
from ray import tune


def trivial(config: dict[str, Any]) -> dict[str, float]:
    start = time.time()
    score = 0.5 * config["x"] + 0.25 * config["y"]
    return {"score": score, "t_start": start, "t_end": time.time()}


class DriverClock(tune.Callback):
    """Driver-side start and completion time of each trial."""

    def __init__(self) -> None:
        self.start: dict[str, float] = {}
        self.end: dict[str, float] = {}

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.start[trial.trial_id] = time.time()

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.end[trial.trial_id] = time.time()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--num-cpus", type=int, default=2)
    parser.add_argument("--reuse-actors", action="store_true")
    parser.add_argument("--storage", required=True, help="Tune's storage_path (a temporary folder)")
    parser.add_argument("--out", required=True, help="where to write the JSON timings")
    args = parser.parse_args()

    t0 = time.time()
    ray.init(address="local", num_cpus=args.num_cpus, include_dashboard=False, logging_level="WARNING")
    t_ray = time.time()
    clock = DriverClock()
    tuner = tune.Tuner(
        trivial,
        param_space={"x": tune.uniform(0, 1), "y": tune.uniform(0, 1)},
        tune_config=tune.TuneConfig(num_samples=args.trials, reuse_actors=args.reuse_actors),
        run_config=tune.RunConfig(storage_path=args.storage, name="tune", callbacks=[clock]),
    )
    grid = tuner.fit()
    t_fit = time.time()
    worker = [(r.metrics["t_start"], r.metrics["t_end"]) for r in grid if r.error is None]
    driver = [(clock.start[k], clock.end[k]) for k in clock.end if k in clock.start]
    ray.shutdown()
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"t_process": t0, "t_ray_ready": t_ray, "t_fit_done": t_fit, "errors": grid.num_errors,
                   "worker": worker, "driver": driver}, f)


if __name__ == "__main__":
    main()
