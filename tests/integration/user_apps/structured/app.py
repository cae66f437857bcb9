"""A structured config: a dataclass with an Enum field, registered in the ConfigStore; returns a dict."""
from dataclasses import dataclass, field
from enum import Enum

import hydra
from hydra.core.config_store import ConfigStore


class Act(Enum):
    relu = "relu"
    tanh = "tanh"


@dataclass
class Optim:
    lr: float = 0.1
    momentum: float = 0.9


@dataclass
class Config:
    x: int = 0
    act: Act = Act.relu
    optim: Optim = field(default_factory=Optim)


ConfigStore.instance().store(name="config", node=Config)


@hydra.main(version_base=None, config_name="config")
def main(cfg: Config) -> dict:
    assert isinstance(cfg.act, Act), type(cfg.act)
    return {"score": cfg.x * cfg.optim.lr + (1.0 if cfg.act is Act.relu else 2.0), "momentum": cfg.optim.momentum}


if __name__ == "__main__":
    main()
