"""A Hydra task for the integration tests: Branin on the unit square, with injectable faults.

- ``fail_above``: raise ValueError when x is above it;
- ``nan_above``: return NaN when y is above it;
- ``sleep_s``: sleep a random time up to this, so trials finish in random order;
- ``steps``: report this many per-step metrics through ``sweeper.log_metrics``;
- ``executions_log``: append the trial's index (Hydra's job number) to this file when it
  starts, so a test can count how often each trial really ran.
"""

from __future__ import annotations

import math
import os
import random
import time

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from sweeper import log_metrics


def branin01(x: float, y: float) -> float:
    a, b = 15 * x - 5, 15 * y
    return (b - 5.1 / (4 * math.pi**2) * a**2 + 5 / math.pi * a - 6) ** 2 + 10 * (1 - 1 / (8 * math.pi)) * math.cos(a) + 10


@hydra.main(config_path="conf", config_name="toy", version_base="1.3")
def main(cfg: DictConfig) -> dict[str, float]:
    if cfg.executions_log:
        with open(cfg.executions_log, "a", encoding="utf-8") as log:
            log.write(f"{HydraConfig.get().job.num}\n")
    if cfg.sleep_s:
        time.sleep(random.Random(os.urandom(8)).uniform(0, cfg.sleep_s))
    for step in range(cfg.steps):
        log_metrics({"partial": branin01(cfg.x, cfg.y) * (step + 1) / cfg.steps}, step=step)
    if cfg.x > cfg.fail_above:
        raise ValueError(f"x={cfg.x:.3f} is above fail_above={cfg.fail_above}")
    value = float("nan") if cfg.y > cfg.nan_above else branin01(cfg.x, cfg.y)
    return {"score": value, "x_seen": float(cfg.x)}


if __name__ == "__main__":
    main()
