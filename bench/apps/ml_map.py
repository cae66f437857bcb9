"""A real ML map as a Hydra task: one scikit-learn fit per trial, its test accuracy returned.

The maps of :mod:`bench.ml_maps` (``map=hgb`` or ``map=sgd``; the SVC map is the demo,
``experiments/svm.py``), run through the sweeper by ``python -m bench fidelity``:

    python bench/apps/ml_map.py --multirun hydra/sweeper=multiverse map=hgb \\
        'learning_rate=tag(log, interval(1e-3, 1))' 'max_depth=int(interval(1, 8))'
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

ROOT = str(Path(__file__).resolve().parents[2])  # the repository root, where bench/ is


@hydra.main(config_path="conf", config_name="ml_map", version_base="1.3")
def main(cfg: DictConfig) -> dict[str, float]:
    """Fit the map's model at this trial's point and return its test accuracy."""
    if ROOT not in sys.path:  # in the trial's worker too, not only where the app was started
        sys.path.insert(0, ROOT)
    from bench.ml_maps import MAPS

    m = MAPS[cfg.map]
    return {"test_acc": m.score({name: cfg[name] for name in m.specs})}


if __name__ == "__main__":
    main()
