"""A Hydra task that talks as people's tasks do: Python logging at DEBUG and INFO, print(), a warning on stderr.

It logs through ``logging.getLogger(__name__)`` (``__main__`` under Hydra's basic launcher), at
module level and in the task, and fails with a ValueError when ``x`` is above ``fail_above`` after
printing, so a test can see where what a job said ends up.
"""

from __future__ import annotations

import logging
import sys

import hydra
from omegaconf import DictConfig

log = logging.getLogger(__name__)


@hydra.main(config_path="conf", config_name="talkative", version_base="1.3")
def main(cfg: DictConfig) -> float:
    log.debug("debug line x=%s", cfg.x)
    logging.getLogger(__name__).info("info line x=%s", cfg.x)
    print(f"printed line x={cfg.x}")
    print(f"stderr line x={cfg.x}", file=sys.stderr)
    if cfg.x > cfg.fail_above:
        raise ValueError(f"x={cfg.x} is above fail_above={cfg.fail_above}")
    return float(cfg.x)


if __name__ == "__main__":
    main()
