"""multiverse-sweeper: hyperparameter sweeps that map how a result depends on every choice.

Cheap to import: heavy parts (Ray, MLflow) load only when their names are used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sweeper.checkpoint import load_checkpoint, save_checkpoint
from sweeper.errors import MissingDependencyError, SweeperConfigError, TrialFailuresExceeded
from sweeper.record.metrics import log_metrics

if TYPE_CHECKING:
    from sweeper.environment import apply_environment
    from sweeper.run.searcher import MultiverseSearch
    from sweeper.search.policy import MultiversePolicy, Suggestion
    from sweeper.search.settings import PolicySettings
    from sweeper.search.space import SearchSpace

__version__ = "0.1.0"

__all__ = [
    "MissingDependencyError",
    "MultiversePolicy",
    "MultiverseSearch",
    "PolicySettings",
    "SearchSpace",
    "Suggestion",
    "SweeperConfigError",
    "TrialFailuresExceeded",
    "apply_environment",
    "load_checkpoint",
    "log_metrics",
    "save_checkpoint",
]

_LAZY = {
    "MultiverseSearch": "sweeper.run.searcher",
    "MultiversePolicy": "sweeper.search.policy",
    "PolicySettings": "sweeper.search.settings",
    "Suggestion": "sweeper.search.policy",
    "SearchSpace": "sweeper.search.space",
    "apply_environment": "sweeper.environment",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'sweeper' has no attribute {name!r}")
