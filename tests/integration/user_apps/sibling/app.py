"""The task imports a module that sits next to the script."""
import hydra
from helpers import Scaler
from omegaconf import DictConfig


@hydra.main(version_base=None, config_path=".", config_name="config")
def main(cfg: DictConfig) -> float:
    return Scaler(3.0)(cfg.x)


if __name__ == "__main__":
    main()
