"""A Hydra task for the checkpoint tests: a "training" of ``epochs`` epochs that checkpoints each one.

Each epoch sleeps ``epoch_s``, draws from a NumPy generator whose state is checkpointed,
logs ``loss`` and ``draw`` at step = epoch through ``sweeper.log_metrics`` and saves
``{epoch, total, rng}`` with ``sweeper.save_checkpoint``. A run continued from a checkpoint
therefore ends with the same ``score`` as one that never stopped. With ``executions_log``
it appends ``<trial index> <epoch> <pid>`` when an epoch's work is done (before its
checkpoint), so a test counts epochs executed per trial and finds the worker to kill.
"""

from __future__ import annotations

import os
import time

import hydra
import numpy as np
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from sweeper import load_checkpoint, log_metrics, save_checkpoint


@hydra.main(config_path="conf", config_name="epochs", version_base="1.3")
def main(cfg: DictConfig) -> dict[str, float]:
    state = load_checkpoint()
    if state is None:
        rng = np.random.default_rng(int(cfg.seed))
        state = {"epoch": -1, "total": 0.0, "rng": rng.bit_generator.state}
    rng = np.random.default_rng()
    rng.bit_generator.state = state["rng"]
    total = state["total"]
    for epoch in range(state["epoch"] + 1, int(cfg.epochs)):
        time.sleep(float(cfg.epoch_s))
        draw = float(rng.random())
        total += draw * float(cfg.x)
        if cfg.executions_log:
            with open(cfg.executions_log, "a", encoding="utf-8") as log:
                log.write(f"{OmegaConf.select(HydraConfig.get(), 'job.num', default=0)} {epoch} {os.getpid()}\n")
        log_metrics({"loss": 1.0 / (1.0 + total), "draw": draw}, step=epoch)
        save_checkpoint({"epoch": epoch, "total": total, "rng": rng.bit_generator.state,
                         "weights": np.full(int(cfg.state_floats), total)}, step=epoch)
    return {"score": total}


if __name__ == "__main__":
    main()
