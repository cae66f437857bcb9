"""A data file found through hydra.utils.to_absolute_path and get_original_cwd."""
from pathlib import Path

import hydra
from hydra.utils import get_original_cwd, to_absolute_path
from omegaconf import DictConfig


@hydra.main(version_base=None, config_path=".", config_name="config")
def main(cfg: DictConfig) -> float:
    rows = Path(to_absolute_path(cfg.data)).read_text().split()
    same = Path(get_original_cwd(), cfg.data).read_text().split()
    assert rows == same
    return float(rows[int(cfg.x)])


if __name__ == "__main__":
    main()
