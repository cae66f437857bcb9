"""hydra.job.chdir=true: the task writes relative paths into its job folder."""
import os
from pathlib import Path

import hydra
from omegaconf import DictConfig


@hydra.main(version_base=None, config_path=".", config_name="config")
def main(cfg: DictConfig) -> float:
    Path("metrics.txt").write_text(f"{cfg.x}\n")
    return float(len(os.path.basename(os.getcwd())) > 0) + cfg.x


if __name__ == "__main__":
    main()
