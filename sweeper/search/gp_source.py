"""The points of a GP strategy (``ivr``, ``ucb``): ``n_initial`` Sobol points, then batches of ``batch_size``
chosen by a GP fitted on the results so far.

A batch is planned at its first ask and its points handed out one per ask (:class:`BatchPlan` keeps
the rest). With ``deterministic`` a batch waits for every earlier result and draws from a stream of
its batch number, so one seed yields the same points however trials finish. Otherwise it draws from
a stream of its first index, and an :attr:`~sweeper.search.gp_batch.GPBatchStep.adaptive` step (``ivr``)
re-plans the rest of the batch at the next ask once results have arrived, while planning takes at
most :data:`REPLAN_SHARE` of the time between plans. NOTE: docs/decisions/0012-replan-ivr-batches.md
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from sweeper.blas import one_blas_thread
from sweeper.search.design_source import SobolDesign
from sweeper.search.ensemble import GPEnsemble
from sweeper.search.gp import GPFit
from sweeper.search.gp_batch import GPBatchStep
from sweeper.search.history import TrialHistory
from sweeper.search.settings import PolicySettings
from sweeper.search.space import SearchSpace
from sweeper.search.suggestion import BatchFit, Suggestion, make_suggestion, model_suggestions, suggestion_from_dict

log = logging.getLogger(__name__)

#: Re-plan a batch only while planning takes at most this share of the time between plans:
#: with trials shorter than a refit, re-planning would stall Tune's loop, which waits for it.
REPLAN_SHARE = 0.25


@dataclass
class BatchPlan:
    """The GP phase's state between asks, saved with the policy's state (:meth:`to_state`)."""

    #: The clock's reading when the last plan was made.
    planned_at: float
    #: The rest of the current batch, handed out one per ask.
    plan: list[Suggestion] = field(default_factory=list)
    #: Successful results the plan was made from (more: an adaptive step re-plans it).
    plan_ok: int = 0
    #: The last GP's hyperparameters (GPFit.hyperparameters()): the warm start of the next fit.
    warm: dict[str, Any] | None = None
    #: With metric_bounds under ``ivr``: the bounded fit's, which tags the points.
    warm_bounded: dict[str, Any] | None = None
    #: How long the last plan took, seconds.
    planning_s: float = 0.0
    #: The model behind the plan just made, for the policy's ``on_gp_fit``.
    tagger: GPFit | GPEnsemble | None = None

    def to_state(self) -> dict[str, Any]:
        """The JSON-able part of the policy's state this plan holds."""
        return {"plan": [asdict(x) for x in self.plan], "plan_ok": self.plan_ok, "warm_start": self.warm,
                "warm_start_bounded": self.warm_bounded, "planning_s": self.planning_s}

    def restore(self, state: Mapping[str, Any], n_ok: int, now: float) -> None:
        """Take the plan of a saved state (:meth:`to_state`); ``n_ok``: successful results in it."""
        self.plan = [suggestion_from_dict(d) for d in state["plan"]]
        # Without plan_ok, the plan counts as made from every result in (no re-plan until the next).
        self.plan_ok = int(state.get("plan_ok", n_ok))
        self.warm = state.get("warm_start")
        self.warm_bounded = state.get("warm_start_bounded")
        # The saved plan's cost, its clock restarted: a resumed sweep re-plans as the first did.
        self.planning_s, self.planned_at = float(state.get("planning_s", 0.0)), now


class GPSource:
    """The point source of a GP strategy: the Sobol design, then batches of ``step``'s choosing.

    ``clock`` (seconds) says how long trials take, for the choice to re-plan (:meth:`_replan_affordable`).
    """

    def __init__(self, space: SearchSpace, settings: PolicySettings, step: GPBatchStep, plan: BatchPlan,
                 clock: Callable[[], float]) -> None:
        self._space, self._settings, self._step, self._plan, self._clock = space, settings, step, plan, clock
        self._initial = SobolDesign(space, settings)

    def batch_of(self, index: int) -> int:
        """0 for the Sobol design, then 1, 2, ... for the blocks of ``batch_size`` after it."""
        s = self._settings
        return 0 if index < s.n_initial else 1 + (index - s.n_initial) // s.batch_size

    def suggest(self, index: int, trials: TrialHistory,
                on_fit: Callable[[BatchFit], None] | None = None) -> Suggestion | None:
        """Trial ``index``'s point, or None while a deterministic batch waits for earlier results.

        ``on_fit`` is called with the fit of each new batch (not its re-plans) before its first point returns.
        """
        if index < self._settings.n_initial:
            return self._sobol(index)
        if self._plan.plan and self._plan.plan[0].index == index:
            return self._next_planned(index, trials)
        return self._new_batch(index, trials, on_fit)

    def _sobol(self, index: int) -> Suggestion:
        """Point ``index`` of the Sobol design: the initial phase, and where no usable GP is."""
        return make_suggestion(self._space, index, self._initial.unit(index), self._initial.phase,
                               self.batch_of(index))

    def _replan_affordable(self) -> bool:
        """Whether the last plan took at most ``REPLAN_SHARE`` of the time since it was made.

        Trials of minutes always re-plan; trials shorter than a refit (a benchmark's trivial
        task) keep their batches, as the searcher would otherwise hold up every next trial.
        """
        return self._plan.planning_s <= REPLAN_SHARE * (self._clock() - self._plan.planned_at)

    def _next_planned(self, index: int, trials: TrialHistory) -> Suggestion:
        """The plan's next point, or with an adaptive step and new results, the first of a fresh plan of the rest."""
        plan = self._plan
        if not self._step.adaptive or trials.n_ok() <= plan.plan_ok or not self._replan_affordable():
            return plan.plan.pop(0)
        # Results arrived since the plan: refit and choose the rest of the batch again.
        size, batch = len(plan.plan), plan.plan[0].batch
        with one_blas_thread():
            points = self._plan_batch(trials, index, size, batch, [self._settings.seed, index])
        if not points:  # the refit failed: keep the old plan
            plan.plan_ok = trials.n_ok()
            return plan.plan.pop(0)
        log.debug("re-planned the %d remaining point(s) of batch %d at trial #%d", size, batch, index)
        plan.plan = points[1:]
        return points[0]

    def _new_batch(self, index: int, trials: TrialHistory,
                   on_fit: Callable[[BatchFit], None] | None) -> Suggestion | None:
        """Plan the batch that trial ``index`` opens and hand out its first point."""
        s = self._settings
        batch = self.batch_of(index)
        start = s.n_initial + (batch - 1) * s.batch_size
        if s.deterministic:
            if not trials.all_in(start):
                return None  # this batch waits for every earlier result
            stream = [s.seed, batch]
        else:
            stream = [s.seed, index]
        with one_blas_thread():
            points = self._plan_batch(trials, index, min(start + s.batch_size, s.num_trials) - index, batch, stream)
        if not points:
            return self._sobol(index)  # no usable GP: keep filling the space
        self._plan.plan = points[1:]
        tagger, self._plan.tagger = self._plan.tagger, None
        if on_fit is not None and tagger is not None:
            on_fit(BatchFit(batch, tagger, trials.failed_points(self._space.d)))
        return points[0]

    def _plan_batch(self, trials: TrialHistory, first: int, size: int, batch: int,
                    stream: list[int]) -> list[Suggestion]:
        """:meth:`_choose_batch`, timed for :meth:`_replan_affordable`."""
        started = time.perf_counter()
        try:
            return self._choose_batch(trials, first, size, batch, stream)
        finally:
            self._plan.planning_s = time.perf_counter() - started
            self._plan.planned_at = self._clock()

    def _choose_batch(self, trials: TrialHistory, first: int, size: int, batch: int,
                      stream: list[int]) -> list[Suggestion]:
        """Choose the rest of a batch (``size`` points) greedily, conditioning on everything asked.

        The GP is fitted on every result in so far (warm-started from the previous fit when the
        step is adaptive); the step fits and picks. Empty when there is no result to fit or the fit failed.
        """
        X_all = trials.asked_points(self._space.d)
        ok = trials.ok()
        if not ok:
            log.warning("no successful trial yet to fit the GP: trial #%d continues the Sobol design", first)
            return []
        plan, adaptive = self._plan, self._step.adaptive
        try:
            gp, tagger = self._step.fit(X_all[ok], trials.values(ok), stream, plan.warm if adaptive else None,
                                        plan.warm_bounded if adaptive else None)
        except (RuntimeError, np.linalg.LinAlgError) as exc:
            log.warning("the GP fit failed (%s): trial #%d continues the Sobol design", exc, first)
            return []
        plan.plan_ok = len(ok)
        if adaptive:
            plan.warm = gp.hyperparameters()
            plan.warm_bounded = getattr(tagger, "point", tagger).hyperparameters() if tagger is not gp else None
        plan.tagger = tagger
        cand, pick = self._step.pick(gp, X_all, size, stream, tagger)
        return model_suggestions(self._space, first, cand[pick.indices], self._step.phase,
                                 batch, [float(v) for v in pick.values], tagger)
