"""A Hydra task for the integration tests: Branin on the unit square, with injectable faults.

- ``fail_above``: raise ValueError when x is above it;
- ``nan_above``: return NaN when y is above it;
- ``sleep_s``: sleep a random time up to this, so trials finish in random order (at least
  ``sleep_min_s``, for a test that must catch the sweep with trials still to run);
- ``steps``: report this many per-step metrics through ``sweeper.log_metrics``;
- ``executions_log``: append the trial's index (Hydra's job number) to this file when it
  starts, so a test can count how often each trial really ran.

Faults for ``hydra.sweeper.trial_timeout_s`` and out-of-memory, each when x is above it:

- ``hang_above``: sleep forever in C (``time.sleep``, the GIL released);
- ``hang_python_above``: loop forever in Python bytecode;
- ``hang_gil_above``: loop (practically) forever in C holding the GIL (``sum(range(...))``):
  no other thread of the worker runs;
- ``oom_above``: cap the process's address space at its size + ``oom_limit_mb`` (RLIMIT_AS)
  and allocate until a real ``MemoryError``; the cap is lifted again before returning;
- ``oom_kill_above``: allocate (and touch) memory in 128 MiB steps, up to ``oom_kill_mb``,
  for Ray's memory monitor to kill the worker; raise if it did not;
- ``no_metric_above``: return a dict without the metric ``score``.
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
    return ((b - 5.1 / (4 * math.pi**2) * a**2 + 5 / math.pi * a - 6) ** 2
            + 10 * (1 - 1 / (8 * math.pi)) * math.cos(a) + 10)


@hydra.main(config_path="conf", config_name="toy", version_base="1.3")
def main(cfg: DictConfig) -> dict[str, float]:
    if cfg.executions_log:
        with open(cfg.executions_log, "a", encoding="utf-8") as log:
            log.write(f"{HydraConfig.get().job.num}\n")
    if cfg.sleep_s:
        time.sleep(random.Random(os.urandom(8)).uniform(cfg.sleep_min_s, cfg.sleep_s))
    for step in range(cfg.steps):
        log_metrics({"partial": branin01(cfg.x, cfg.y) * (step + 1) / cfg.steps}, step=step)
    if cfg.x > cfg.hang_gil_above:
        sum(range(10**15))  # C code that never lets go of the GIL
    if cfg.x > cfg.hang_above:
        time.sleep(10**6)
    if cfg.x > cfg.hang_python_above:
        while True:
            pass
    if cfg.x > cfg.oom_above:
        allocate_under_rlimit(cfg.oom_limit_mb)
    if cfg.x > cfg.oom_kill_above:
        allocate_until_killed(cfg.oom_kill_mb)
    if cfg.x > cfg.fail_above:
        raise ValueError(f"x={cfg.x:.3f} is above fail_above={cfg.fail_above}")
    if cfg.x > cfg.no_metric_above:
        return {"x_seen": float(cfg.x)}
    value = float("nan") if cfg.y > cfg.nan_above else branin01(cfg.x, cfg.y)
    return {"score": value, "x_seen": float(cfg.x)}


def allocate_under_rlimit(headroom_mb: int) -> None:
    """Allocate 64 MiB blocks under an address-space cap of the current size + headroom: MemoryError."""
    import resource

    import numpy as np

    with open("/proc/self/status", encoding="ascii") as status:
        vm_size = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    blocks = []
    resource.setrlimit(resource.RLIMIT_AS, (vm_size + headroom_mb * 2**20, hard))
    try:
        while True:  # ends in numpy's MemoryError ("Unable to allocate 64.0 MiB ...")
            blocks.append(np.ones(2**23))
    finally:
        blocks.clear()
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def allocate_until_killed(limit_mb: int) -> None:
    """Touch memory 128 MiB at a time up to limit_mb, slowly enough for Ray's memory monitor to see it."""
    import numpy as np

    blocks = []
    for _ in range(limit_mb // 128):
        blocks.append(np.ones(2**24))
        time.sleep(0.05)
    time.sleep(5)
    raise RuntimeError(f"allocated {len(blocks) * 128} MiB and Ray's memory monitor did not kill the worker")


if __name__ == "__main__":
    main()
