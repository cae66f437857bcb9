"""Environment variables set by hydra.job.env_set, read by the task."""
import os

import hydra
from omegaconf import DictConfig


@hydra.main(version_base=None, config_path=".", config_name="config")
def main(cfg: DictConfig) -> float:
    return float(os.environ["APP_FACTOR"]) * cfg.x


if __name__ == "__main__":
    main()
