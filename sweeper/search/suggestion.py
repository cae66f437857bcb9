"""What the search hands out and reports: a trial's :class:`Suggestion`, the GP a batch was planned with
(:class:`BatchFit`) and an interaction test of ``stop_on_bayes_factor`` (:class:`BayesFactorCheck`).

They are plain frozen records: the policy makes them, the searcher, the recorder and the live map read them,
and a suggestion round-trips through the policy's JSON state (:func:`suggestion_from_dict`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from sweeper.search.ensemble import GPEnsemble
    from sweeper.search.gp import GPFit
    from sweeper.search.space import SearchSpace


#: Where a suggestion records its predictive's quantiles: the ends of the central 95 % and 68 % intervals the
#: prospective check counts (:mod:`sweeper.search.loo`), and the median between them.
PREDICTED_PROBS = (0.025, 0.15865525393145707, 0.5, 0.8413447460685429, 0.975)


@dataclass(frozen=True)
class BayesFactorCheck:
    """One interaction test of ``stop_on_bayes_factor``, run when a batch was about to start.

    Attributes:
        batch: The batch about to start (its points were not handed out if the test stopped the sweep).
        n: Finished trials the test used.
        log10_K: ``log10`` of the Bayes factor additive / shared (eq. 8 of Bell et al.).
        verdict: ``interaction``, ``no interaction`` or ``inconclusive`` at the sweep's threshold.
    """

    batch: int
    n: int
    log10_K: float
    verdict: str


@dataclass(frozen=True)
class BatchFit:
    """The GP a batch was planned with, handed to :attr:`sweeper.search.policy.MultiversePolicy.on_gp_fit`
    (e.g. for a live map).

    Attributes:
        batch: The batch planned from it (1 for the first GP batch).
        gp: The model that tagged the batch's points with predictions (``predicted_mean``,
            ``predicted_sd``): the metric in original units, inside its bounds when it has them
            (a posterior mixture for a bounded metric, :func:`sweeper.search.gp_batch.bounded_tagger`).
            Its ``X`` and ``y`` are the trials it was fitted on.
        failed: Points of the trials failed so far, unit cube, shape ``(n_failed, d)``.
    """

    batch: int
    gp: GPFit | GPEnsemble
    failed: NDArray[np.float64]


@dataclass(frozen=True)
class Suggestion:
    """One trial handed out: where, why, and what the GP expected there.

    Attributes:
        index: position in the sweep, 0-based; also the Hydra job number.
        x: the point in the unit cube, shape (d,), snapped to legal values of discrete dims.
        params: the point in original units, dimension name -> value.
        phase: ``random``, ``sobol``, ``grid``, ``ivr`` or ``ucb``.
        batch: which block of ``batch_size`` points the trial belongs to (the Sobol design
            of a GP strategy is batch 0).
        acquisition: the acquisition value when the point was chosen (GP phases only).
        predicted_mean: the mean of the GP's predictive of the trial's result, original units.
        predicted_sd: its standard deviation (observation noise included), original units (the
            prospective check, :mod:`sweeper.search.calibration`, reads the quantiles below instead).
        predicted_from: how many trials the model that made the prediction was fitted on: the
            prospective check judges a map's model by predictions made from comparable evidence.
        predicted_quantiles: the predictive's quantiles at :data:`PREDICTED_PROBS`, original units: the
            model's own distribution, which the prospective check reads where it has them (a bounded
            metric's predictive is skewed near its bound, and its mean and sd describe it badly there).
    """

    index: int
    x: tuple[float, ...]
    params: dict[str, Any]
    phase: str
    batch: int
    acquisition: float | None = None
    predicted_mean: float | None = None
    predicted_sd: float | None = None
    predicted_from: int | None = None
    predicted_quantiles: tuple[float, ...] | None = None


def make_suggestion(space: SearchSpace, index: int, u: NDArray[np.float64], phase: str, batch: int) -> Suggestion:
    """The suggestion of trial ``index`` at unit-cube point ``u`` of a design (no model's prediction), snapped to
    legal values of discrete dims."""
    params = space.from_unit(u)[0]
    x = space.to_unit([params])[0]  # snapped to legal values of discrete dims
    return Suggestion(index, tuple(float(t) for t in x), params, phase, batch)


def model_suggestions(space: SearchSpace, first: int, units: NDArray[np.float64], phase: str, batch: int,
                      acquisitions: Sequence[float], gp: GPFit | GPEnsemble) -> list[Suggestion]:
    """Trials ``first, first + 1, ...`` at unit-cube points ``units`` ``(k, d)`` chosen by a model, snapped to legal
    values of discrete dims, each with ``gp``'s predictive of its result (noise included): its mean and sd, and
    its quantiles at :data:`PREDICTED_PROBS` (for the whole batch at once: the mixture's quantiles are found by
    one bisection, :meth:`~sweeper.search.ensemble.GPEnsemble.quantiles`)."""
    from sweeper.search.ensemble import predictive_quantiles

    params = space.from_unit(units)
    if not params:
        return []
    x = space.to_unit(params)
    mean, sd = gp.predict(x, noise=True)  # the predictive of each result, original units
    quantiles = predictive_quantiles(gp, x, PREDICTED_PROBS)
    made_from = int(gp.X.shape[0])
    return [Suggestion(first + k, tuple(float(t) for t in x[k]), params[k], phase, batch, float(acquisitions[k]),
                       float(mean[k]), float(sd[k]), made_from, tuple(float(q) for q in quantiles[k]))
            for k in range(len(params))]


def quantiles_tag(quantiles: Sequence[float]) -> str:
    """The ``sweeper.predicted_quantiles`` tag's text: a JSON list."""
    return json.dumps([float(q) for q in quantiles])


def quantiles_from_tag(text: Any) -> tuple[float, ...] | None:
    """The quantiles a ``sweeper.predicted_quantiles`` tag holds; None when absent or not one per level of
    :data:`PREDICTED_PROBS` (a trial recorded before the tag, or a tag edited by hand)."""
    try:
        quantiles = tuple(float(q) for q in json.loads(text))
    except (TypeError, ValueError):
        return None
    return quantiles if len(quantiles) == len(PREDICTED_PROBS) else None


def suggestion_from_dict(d: Mapping[str, Any]) -> Suggestion:
    """A suggestion from its ``dataclasses.asdict`` form (JSON turns the tuples into lists)."""
    quantiles = d.get("predicted_quantiles")
    return Suggestion(**{**d, "x": tuple(d["x"]), "predicted_quantiles": None if quantiles is None
                         else tuple(float(q) for q in quantiles)})
