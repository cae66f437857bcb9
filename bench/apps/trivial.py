"""A Hydra task that costs nothing: what remains of a trial's time is orchestration.

    python bench/apps/trivial.py --multirun hydra/sweeper=multiverse hydra.sweeper.num_trials=20

``BENCH_STAMP_FILE`` set, each task appends the time it started to that file (the start-up
benchmark's first trial). ``hold_s=1`` makes each trial last a second, as the live maps' case of the overhead benchmark
runs it: asleep (the cores are left to the sweep's driver and its helpers), or busy on one core
with ``busy=true`` (the trials then compete with them for the cores).
"""

from __future__ import annotations

import os
import time

import hydra
from omegaconf import DictConfig


@hydra.main(config_path="conf", config_name="trivial", version_base="1.3")
def main(cfg: DictConfig) -> float:
    """Return a smooth function of the point (so ``ivr`` has something sensible to fit)."""
    if stamp_file := os.environ.get("BENCH_STAMP_FILE"):  # when the task started (bench/startup.py)
        with open(stamp_file, "a", encoding="utf-8") as stamps:
            stamps.write(f"{time.time()}\n")
    if cfg.hold_s > 0 and cfg.busy:
        until = time.thread_time() + float(cfg.hold_s)  # a second of CPU, however long it takes to get it
        while time.thread_time() < until:
            pass
    elif cfg.hold_s > 0:
        time.sleep(float(cfg.hold_s))
    return 0.5 * float(cfg.x) + 0.25 * float(cfg.y)


if __name__ == "__main__":
    main()
