"""The predictive checks of a sweep's GP from its records: which dims are replicates, what the searcher predicted.

:mod:`sweeper.search.calibration` scores a GP; this module reads what it needs from a sweep:
the dims whose values are conditions of measurement rather than choices (``env.*`` and
seeds: their replicates leave together), and each trial's prediction, recorded by the searcher
before the trial ran (the ``sweeper.predicted_mean`` / ``sweeper.predicted_sd`` tags, and the predictive's
quantiles, ``sweeper.predicted_quantiles``, where the sweep recorded them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from sweeper.analysis.runs import SEED_KEYS, is_environment_param
from sweeper.search.calibration import Calibration, calibration, prospective_check
from sweeper.search.loo import PredictiveCheck
from sweeper.search.space import SearchSpace
from sweeper.search.suggestion import quantiles_from_tag

if TYPE_CHECKING:
    import pandas as pd

def replicate_columns(space: SearchSpace | None) -> list[int]:
    """Columns of ``space`` that are conditions of measurement: ``env.*`` and seed dims."""
    if space is None:
        return []
    return [i for i, name in enumerate(space.names) if is_environment_param(name) or name in SEED_KEYS]


def searcher_predictions(kept: pd.DataFrame, metric: str) -> PredictiveCheck | None:
    """The prospective check of the searcher's recorded predictions of the ``kept`` trials (None: it made none).

    Judged as a prediction of the model fitted on every ``kept`` trial with a result: those made from fewer
    than half as many trials (the ``sweeper.predicted_from`` tag; sweeps from before it score them all) are
    not scored (:func:`sweeper.search.calibration.prospective_check`).
    """
    columns = ("tag.predicted_mean", "tag.predicted_sd", f"metric.{metric}")
    if not all(c in kept for c in columns):
        return None
    mean, sd, y = (np.asarray(kept[c].map(_number), dtype=np.float64) for c in columns)
    made_from = np.asarray(kept["tag.predicted_from"].map(_number), dtype=np.float64) \
        if "tag.predicted_from" in kept else None
    quantiles = [quantiles_from_tag(v) for v in kept["tag.predicted_quantiles"]] \
        if "tag.predicted_quantiles" in kept else None
    return prospective_check(y, mean, sd, made_from, n_model=int(np.isfinite(y).sum()), quantiles=quantiles)


def sweep_calibration(model: Any, space: SearchSpace | None, kept: pd.DataFrame, metric: str) -> Calibration:
    """The checks of ``model`` fitted to the ``kept`` trials: LOO, LOCO and the searcher's own predictions."""
    return calibration(model, replicate_columns(space), searcher_predictions(kept, metric))


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")
