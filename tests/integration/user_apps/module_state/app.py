"""A plain app with module-level state: an lru_cache'd helper and a module counter, no mlflow block."""
import functools

import hydra
from omegaconf import DictConfig

CALLS = {"n": 0}


@functools.cache
def table(k: int) -> tuple[float, ...]:
    CALLS["n"] += 1
    return tuple(0.5 * i for i in range(k + 3))


@hydra.main(version_base=None, config_path=".", config_name="config")
def main(cfg: DictConfig) -> float:
    values = table(int(cfg.x))
    table(int(cfg.x))  # cached: the module's state, not a copy per call
    return float(sum(values)) + CALLS["n"] * 0.0 + cfg.offset


if __name__ == "__main__":
    main()
