"""hydra.utils.instantiate of a class defined in the script itself (``_target_: __main__.Model``)."""
import hydra
from hydra.utils import instantiate
from omegaconf import DictConfig


class Model:
    def __init__(self, width: int, x: int) -> None:
        self.width, self.x = width, x

    def score(self) -> float:
        return self.width * 0.5 + self.x


@hydra.main(version_base=None, config_path=".", config_name="config")
def main(cfg: DictConfig) -> float:
    model = instantiate(cfg.model)
    assert isinstance(model, Model), type(model)
    return model.score()


if __name__ == "__main__":
    main()
