"""A task that returns None when it has nothing to report, and a number otherwise."""
import hydra
from omegaconf import DictConfig


@hydra.main(version_base=None, config_path=".", config_name="config")
def main(cfg: DictConfig) -> float | None:
    return None if cfg.x == 2 else 0.5 * cfg.x


if __name__ == "__main__":
    main()
