"""A Hydra task for the multiverse tests: two model families whose best learning rate differs.

``test_acc`` falls off quadratically in ``log10(lr)`` around an optimum that depends on
the ``family`` (a categorical decision) and shifts with ``width``, so every pair of
dimensions interacts; ``train_acc`` is low for tiny learning rates (the filter drops those
trials), and ``width > fail_above`` raises (a failed trial, drawn as a cross).
"""

from __future__ import annotations

import math

import hydra
from omegaconf import DictConfig

BEST_LOG_LR = {"plain": -2.0, "residual": -1.0}


@hydra.main(config_path="conf", config_name="forks", version_base="1.3")
def main(cfg: DictConfig) -> dict[str, float]:
    if cfg.width > cfg.fail_above:
        raise ValueError(f"width={cfg.width:.3f} is above fail_above={cfg.fail_above}")
    gap = math.log10(cfg.lr) - BEST_LOG_LR[cfg.family] - cfg.width
    return {"test_acc": 0.95 - 0.04 * gap**2, "train_acc": 1.0 if cfg.lr > 3e-4 else 0.5}


if __name__ == "__main__":
    main()
