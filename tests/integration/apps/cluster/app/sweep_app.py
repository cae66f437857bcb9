"""The cluster tests' task: launched from this folder's parent, its code reaches the nodes by upload.

``shipped.py`` beside it is imported as a sibling module, as a user's helper would be. The
task reports whether that module came from Ray's uploaded ``working_dir`` (the nodes have
no other copy on their import path) and holds each trial for ``hold_s``. With ``meet_dir``
set, the first ``meet`` trials wait for each other (``shipped.meet``), so they run at once,
one a node. A module-level ``lru_cache`` helper checks that the script runs as a module on
the nodes, as under Hydra's basic launcher (issue 16).
"""

from __future__ import annotations

import functools

import hydra
import shipped
from omegaconf import DictConfig


@functools.cache
def scale() -> float:
    return 1.0


@hydra.main(config_path="conf", config_name="sweep_app", version_base="1.3")
def main(cfg: DictConfig) -> dict[str, float]:
    if cfg.meet_dir:
        shipped.meet(cfg.meet_dir, cfg.meet)
    shipped.hold(cfg.hold_s)
    return {"score": scale() * shipped.bowl(cfg.x, cfg.y), "shipped": float(shipped.came_from_upload())}


if __name__ == "__main__":
    main()
