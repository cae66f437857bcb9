"""A Hydra task for the report tests: a smooth score plus noise drawn from the environment.

``score = 0.9 - (x - 0.3)^2 - (y - 0.6)^2 + 0.02 N(env.seed) + 0.005 N(env.seed, env.threads)``:
the seed moves the score, the thread count moves it a little (as real BLAS reductions
do), so repeated measurements of one ``(x, y)`` spread (QRA) and two thread counts paired
on the seed differ (Crane's statistics). ``train_score`` is ``score + 0.05``.
"""

from __future__ import annotations

import hydra
import numpy as np
from omegaconf import DictConfig


@hydra.main(config_path="conf", config_name="noisy", version_base="1.3")
def main(cfg: DictConfig) -> dict[str, float]:
    seed, threads = int(cfg.env.seed), int(cfg.env.threads)
    noise = 0.02 * np.random.default_rng([seed]).standard_normal()
    noise += 0.005 * np.random.default_rng([seed, threads]).standard_normal()
    score = 0.9 - (cfg.x - 0.3) ** 2 - (cfg.y - 0.6) ** 2 + noise
    return {"score": float(score), "train_score": float(score + 0.05)}


if __name__ == "__main__":
    main()
