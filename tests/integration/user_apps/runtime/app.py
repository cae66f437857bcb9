"""HydraConfig.get() in the task, a file written to hydra.runtime.output_dir, Python logging (DEBUG and INFO)."""
import logging
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

log = logging.getLogger(__name__)


@hydra.main(version_base=None, config_path=".", config_name="config")
def main(cfg: DictConfig) -> float:
    hc = HydraConfig.get()
    out = Path(hc.runtime.output_dir)
    (out / "result.txt").write_text(f"{hc.job.name} x={cfg.x}\n")
    log.debug("training with x=%s", cfg.x)
    log.info("trained with x=%s", cfg.x)
    return float(cfg.x) ** 2


if __name__ == "__main__":
    main()
