"""A Hydra task that costs nothing: what remains of a trial's time is orchestration.

    python bench/apps/trivial.py --multirun hydra/sweeper=multiverse hydra.sweeper.num_trials=20
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig


@hydra.main(config_path="conf", config_name="trivial", version_base="1.3")
def main(cfg: DictConfig) -> float:
    """Return a smooth function of the point (so ``ivr`` has something sensible to fit)."""
    return 0.5 * float(cfg.x) + 0.25 * float(cfg.y)


if __name__ == "__main__":
    main()
