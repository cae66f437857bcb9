"""Config groups and a defaults list, with interpolations: ${model.width}, ${oc.env:...}, ${hydra:job.name}."""
import hydra
from omegaconf import DictConfig


@hydra.main(version_base=None, config_path="conf", config_name="config")
def main(cfg: DictConfig) -> dict:
    assert cfg.run_name == "app", cfg.run_name
    return {"objective": cfg.x * cfg.hidden + float(cfg.scale), "layers": float(cfg.model.layers)}


if __name__ == "__main__":
    main()
