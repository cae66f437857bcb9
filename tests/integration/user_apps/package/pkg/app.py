"""An app run as a module, ``python -m pkg.app``, with a relative import inside its package."""
import hydra
from omegaconf import DictConfig

from .helpers import double


@hydra.main(version_base=None, config_path=".", config_name="config")
def main(cfg: DictConfig) -> float:
    return double(cfg.x) + 0.125


if __name__ == "__main__":
    main()
