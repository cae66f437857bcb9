"""The task imports a module that sits next to the script."""
import hydra
from omegaconf import DictConfig

from helpers import Scaler


@hydra.main(version_base=None, config_path=".", config_name="config")
def main(cfg: DictConfig) -> float:
    return Scaler(3.0)(cfg.x)


if __name__ == "__main__":
    main()
