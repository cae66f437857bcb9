"""Which point to evaluate next: the search strategy, free of Ray and Hydra.

:class:`MultiversePolicy` hands out trials with :meth:`~MultiversePolicy.ask` and takes
their results with :meth:`~MultiversePolicy.tell`. Each strategy is one point source
(:mod:`sweeper.search.point_source`), chosen once from the settings:

- ``random``: i.i.d. uniform points in the unit cube, the only design under which the
  expected-maximum estimator of Dodge et al. (2019) is unbiased;
- ``sobol``: a scrambled Sobol sequence, seeded;
- ``grid``: the full factorial of discrete dimensions (choice, range, int) in a seeded
  random order, each point once; ``grid_repeats`` runs the whole grid again in the same order
  (the sweeper refuses a ``num_trials`` other than grid size x ``grid_repeats``): the design for crossed
  environment conditions (``env.seed x env.threads x env.deterministic``), where Sobol's
  low-discrepancy structure couples the cells of different dimensions;
- ``ivr``: ``n_initial`` Sobol points, then Gaussian-process integrated variance reduction
  (Bell et al. 2022, eq. 6-7), the design that maps the whole space, the variance weighted by
  the slope of the fit's mean (``ivr_slope_weight``: where a map's cliffs are);
- ``ucb``: ``n_initial`` Sobol points, then GP-UCB (GP-BUCB for batches), the optimising
  contrast the multiverse paper compares against.

Points still running are conditioned on when choosing new ones. The GP posterior variance
depends on inputs only, so conditioning on a pending point is exact for IVR, not a
heuristic; failed points are conditioned on the same way (so a crashing region is not
re-sampled) but never enter the fit of the mean.

Categorical dimensions (``choice(...)``) enter the GP as intrinsic-coregionalization
factors (Bell et al. 2022, §5.1; see :mod:`sweeper.search.kernels`); candidates and IVR's
integration points give every combination of categories an equal share, so IVR integrates
the variance over all of them.

With ``stop_on_bayes_factor: T``, an interaction test (additive vs shared kernel, eq. 8;
:mod:`sweeper.search.interaction`) runs before each batch on the results in so far, and the sweep
ends at the first batch boundary where ``K > T`` or ``K < 1/T``.

Without ``deterministic``, a batch is planned at its first ask from whatever results are in by then,
and its points are handed out as workers free up. For ``ivr``, when results have arrived since the
plan was made, the rest of the batch is re-planned at the next ask: the GP is refitted (warm-started
from the previous fit's hyperparameters: that start plus the fixed one, ``WARM_RESTARTS``, instead
of ``gp_restarts``) and the remaining points are chosen again, conditioned on every point asked.
IVR's variance does not depend on the results, but its hyperparameters and its weights (the slope of
the mean) do, and those fitted on the first results move a lot: a sweep whose results come in one at
a time between asks is then designed almost sequentially, at the cost of one cheap refit per result.
It does so only while planning takes at most ``REPLAN_SHARE`` of the time between plans: trials
shorter than a refit keep their batches, since Tune's loop waits for the searcher. Every fit after
the first starts warm, batch starts included. ``ucb`` keeps its batches and full restarts.
NOTE: docs/decisions/0012-replan-ivr-batches.md

With ``deterministic=True`` the GP phase commits to whole batches of ``batch_size`` points,
each computed only from the results of all earlier batches, so one seed yields the same
points whatever order trials finish in and however many run at once. Every random choice
(Sobol scramble, candidates, integration points, optimiser restarts) is drawn from a stream
derived from ``seed``, never from a global RNG.

References:
    Bell, S. J., Kampman, O. P., Dodge, J., Lawrence, N. D. (2022). Modeling the Machine
    Learning Multiverse. NeurIPS 2022.
    Desautels, T., Krause, A., Burdick, J. (2014). Parallelizing exploration-exploitation
    tradeoffs in Gaussian process bandit optimization. JMLR 15.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict
from typing import Any

import numpy as np

from sweeper.blas import one_blas_thread
from sweeper.errors import SweeperConfigError
from sweeper.search.gp_batch import warm_shapes
from sweeper.search.gp_source import REPLAN_SHARE, BatchPlan
from sweeper.search.history import TrialHistory
from sweeper.search.interaction import CONCLUSIVE, interaction_bayes_factor
from sweeper.search.point_source import point_source
from sweeper.search.settings import STREAM_BAYES, PolicySettings
from sweeper.search.space import SearchSpace
from sweeper.search.suggestion import BatchFit, BayesFactorCheck, Suggestion, suggestion_from_dict
from sweeper.search.warping import OutputWarp

__all__ = ["CONCLUSIVE", "MIN_BAYES_FACTOR_TRIALS", "REPLAN_SHARE", "STATE_VERSION", "BatchFit", "BayesFactorCheck",
           "MultiversePolicy", "Suggestion"]

log = logging.getLogger(__name__)

STATE_VERSION = 2
#: Fewest finished trials the interaction test of ``stop_on_bayes_factor`` is run on.
MIN_BAYES_FACTOR_TRIALS = 4


class MultiversePolicy:
    """Ask/tell search over a :class:`~sweeper.search.space.SearchSpace` (no Ray, no Hydra).

    ``clock`` (seconds) tells the policy how long trials take, for the choice to re-plan a
    batch (:data:`REPLAN_SHARE`); a benchmark that evaluates instantly passes a simulated one.

    Example:
        >>> from sweeper.search.grammar import parse_specs
        >>> from sweeper.search.settings import PolicySettings
        >>> space = parse_specs({"x": "interval(0, 1)"})
        >>> policy = MultiversePolicy(space, PolicySettings(strategy="sobol", num_trials=4))
        >>> s = policy.ask()
        >>> policy.tell(s.index, 0.5)
        >>> (s.index, s.phase)
        (0, 'sobol')
    """

    def __init__(self, space: SearchSpace, settings: PolicySettings | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.space = space
        self._clock = clock  # when results come in (a benchmark simulates trials' durations)
        self.settings = settings or PolicySettings()
        problems = self.settings.problems(space)
        if problems:
            raise SweeperConfigError(problems)
        self._suggestions: list[Suggestion] = []
        self._results: dict[int, float] = {}  # index -> value; NaN marks a failed trial
        #: The GP phase's state between asks: the rest of the current batch, the warm starts.
        self._batch_plan = BatchPlan(planned_at=clock())
        self._source = point_source(space, self.settings, self._batch_plan, clock)
        self._bayes_factors: list[BayesFactorCheck] = []
        self._replay: dict[int, Suggestion] = {}  # suggestions made before a restart, handed out again
        self._stop_reason: str | None = None  # set by stop(): the sweep cannot succeed
        #: Called with each :class:`BayesFactorCheck` as it is made (e.g. to log it to MLflow).
        self.on_bayes_factor: Callable[[BayesFactorCheck], None] | None = None
        #: Called with the :class:`BatchFit` of each GP batch as it is planned (not its re-plans): it
        #: runs inside :meth:`ask`, so it must return at once (a live map hands the fit off to draw it).
        self.on_gp_fit: Callable[[BatchFit], None] | None = None

    # ------------------------------------------------------------------ public API
    @property
    def suggestions(self) -> list[Suggestion]:
        """Every trial handed out so far, in index order."""
        return list(self._suggestions)

    @property
    def results(self) -> dict[int, float]:
        """Index -> reported value (NaN for a failed trial)."""
        return dict(self._results)

    @property
    def n_failed(self) -> int:
        return self._history().n_failed()

    @property
    def pending(self) -> list[int]:
        """Indices handed out whose results have not arrived."""
        return self._history().pending()

    @property
    def failure_budget_exceeded(self) -> bool:
        """More trials failed than ``max_failures`` allows, or the sweep was stopped as hopeless (:meth:`stop`)."""
        limit = self.settings.max_failures
        return self._stop_reason is not None or (limit is not None and self.n_failed > limit)

    @property
    def stop_reason(self) -> str | None:
        """Why :meth:`stop` ended the sweep early, or None."""
        return self._stop_reason

    def stop(self, reason: str) -> None:
        """Hand out no further point: the sweep cannot succeed (e.g. the task never returns its metric).

        Trials already running finish; the sweep then ends as if over its failure budget.
        """
        self._stop_reason = reason

    @property
    def bayes_factors(self) -> list[BayesFactorCheck]:
        """Every interaction test made for ``stop_on_bayes_factor``, in batch order."""
        return list(self._bayes_factors)

    @property
    def stopped_on_bayes_factor(self) -> BayesFactorCheck | None:
        """The conclusive test that ended the sweep early, or None."""
        last = self._bayes_factors[-1] if self._bayes_factors else None
        return last if last is not None and last.verdict in CONCLUSIVE else None

    @property
    def is_finished(self) -> bool:
        """No more points will be handed out: all trials asked, too many failed, or a conclusive K."""
        return (len(self._suggestions) >= self.settings.num_trials or self.failure_budget_exceeded
                or self.stopped_on_bayes_factor is not None)

    def ask(self) -> Suggestion | None:
        """Hand out the next trial, or None when there is none to give now.

        None means either the sweep is finished (see :attr:`is_finished`) or, in
        deterministic mode, that the next batch waits for results of the current one.
        """
        if self.is_finished:
            return None
        index = len(self._suggestions)
        if index in self._replay:  # suggested before the driver died: the same point again
            suggestion = self._replay.pop(index)
            self._batch_plan.plan = [p for p in self._batch_plan.plan if p.index != index]
            self._suggestions.append(suggestion)
            return suggestion
        if self._held_by_interaction_test(index):
            return None
        new = self._source.suggest(index, self._history(), self.on_gp_fit)
        if new is not None:
            self._suggestions.append(new)
            log.debug("suggest #%d (%s, batch %d): %s", index, new.phase, new.batch, new.params)
        return new

    def tell(self, index: int, value: float | None) -> None:
        """Record the result of trial ``index``; None, NaN or inf marks it failed."""
        if not 0 <= index < len(self._suggestions):
            raise KeyError(f"trial #{index} was never suggested (suggested so far: {len(self._suggestions)})")
        v = float("nan") if value is None or not math.isfinite(value) else float(value)
        bounds = self.settings.bounds
        if bounds is not None and not math.isnan(v) and not bounds.contains(v):
            # A value the metric cannot take is a failed trial, never clipped into the fit.
            log.warning("trial #%d: %s; counted as failed", index, bounds.violation(v, "the metric"))
            v = float("nan")
        self._results[index] = v

    def replay(self, suggestions: Iterable[Suggestion]) -> None:
        """Hand out these suggestions again, at their indices, instead of choosing new points.

        For a resumed sweep: trials suggested after the searcher's last checkpoint keep the
        point they were given (their MLflow runs say which), so no index gets two points.
        """
        for suggestion in suggestions:
            if suggestion.index >= len(self._suggestions):
                self._replay[suggestion.index] = suggestion

    def __getstate__(self) -> dict[str, Any]:
        # The hooks are the wiring of the process that set them (a live map's queues and threads):
        # a copy made by pickling (Tune's experiment state, a searcher back from the head node) has none.
        return {**self.__dict__, "on_bayes_factor": None, "on_gp_fit": None}

    def state_dict(self) -> dict[str, Any]:
        """JSON-able state; :meth:`load_state_dict` continues with the same suggestions."""
        return {
            "version": STATE_VERSION,
            "space": self.space.to_dict(),
            "settings": asdict(self.settings),
            "suggestions": [asdict(x) for x in self._suggestions],
            "results": {str(k): v for k, v in self._results.items()},
            **self._batch_plan.to_state(),
            "bayes_factors": [asdict(x) for x in self._bayes_factors],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a state saved by :meth:`state_dict`, refusing a different space or strategy."""
        self._check_saved_sweep(state)
        self._suggestions = [suggestion_from_dict(d) for d in state["suggestions"]]
        self._results = {int(k): float(v) for k, v in state["results"].items()}
        self._batch_plan.restore(state, self._history().n_ok(), self._clock())
        self._bayes_factors = [BayesFactorCheck(**d) for d in state["bayes_factors"]]

    # ------------------------------------------------------------------ internals
    def _history(self) -> TrialHistory:
        return TrialHistory(self._suggestions, self._results)

    def _check_saved_sweep(self, state: Mapping[str, Any]) -> None:
        """Refuse a state of another version, search space, strategy or seed."""
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"searcher state version {state.get('version')!r} is not {STATE_VERSION}")
        saved_space = SearchSpace.from_dict(state["space"])
        if saved_space.dims != self.space.dims:  # the fixed overrides are the sweep's to check (sweeper.run.resume)
            raise SweeperConfigError(
                f"the saved sweep searched {saved_space.describe()} but this one searches "
                f"{self.space.describe()}: a sweep cannot continue with a different search space."
            )
        known = PolicySettings.__dataclass_fields__  # a state saved before a setting moved out loads without it
        saved = PolicySettings(**{k: v for k, v in state["settings"].items() if k in known})
        if saved.strategy != self.settings.strategy or saved.seed != self.settings.seed:
            raise SweeperConfigError(
                f"the saved sweep used strategy={saved.strategy!r} seed={saved.seed} but this one "
                f"uses strategy={self.settings.strategy!r} seed={self.settings.seed}: keep them equal to continue it."
            )

    def _starts_batch(self, index: int) -> bool:
        """Whether ``index`` opens a batch not yet tested (the Sobol design counts as batch 0)."""
        batch = self._source.batch_of(index)
        tested = self._bayes_factors[-1].batch if self._bayes_factors else 0
        return index > 0 and batch > tested and batch != self._source.batch_of(index - 1)

    def _held_by_interaction_test(self, index: int) -> bool:
        """Whether trial ``index`` gets no point now: it opens a batch, and ``stop_on_bayes_factor``'s test
        before that batch waits for earlier results (``deterministic``) or ends the sweep."""
        s = self.settings
        if s.stop_on_bayes_factor is None or not self._starts_batch(index):
            return False
        if s.deterministic and not self._history().all_in(index):
            return True  # the test, like the batch, waits for every earlier result
        return self._test_interaction(index)

    def _test_interaction(self, index: int) -> bool:
        """Run the interaction test before the batch ``index`` opens; True if it ends the sweep.

        Uses every finished result in so far; with ``deterministic``, no batch starts
        before every earlier result is in, so that is all of them, whatever the timing.
        """
        s = self.settings
        assert s.stop_on_bayes_factor is not None
        batch = self._source.batch_of(index)
        trials = self._history()
        ok = trials.ok()
        if len(ok) < MIN_BAYES_FACTOR_TRIALS:
            log.info("interaction test before batch %d skipped: %d finished trial(s), fewer than %d",
                     batch, len(ok), MIN_BAYES_FACTOR_TRIALS)
            return False
        X, y = trials.points(ok), trials.values(ok)
        # With bounds each model learns its warp from the last search fit's shapes, else the plain logit.
        plan, bounds = self._batch_plan, s.bounds
        shapes = warm_shapes(plan.warm_bounded) or warm_shapes(plan.warm) or (1.0, 1.0)
        warp = None if bounds is None else OutputWarp.for_data(bounds, y, *shapes)
        try:
            with one_blas_thread():
                bf = interaction_bayes_factor(X, y, categories=self.space.categories(), kernel=s.kernel,
                                              seed=[s.seed, batch, STREAM_BAYES], n_restarts=s.gp_restarts,
                                              max_fit_points=s.gp_max_fit_points,
                                              refine_max_points=s.gp_refine_max_points, warp=warp)
        except (RuntimeError, np.linalg.LinAlgError) as exc:
            log.warning("interaction test before batch %d failed (%s); the sweep goes on", batch, exc)
            return False
        check = BayesFactorCheck(batch, len(ok), float(bf.log10_K), bf.verdict(s.stop_on_bayes_factor))
        self._bayes_factors.append(check)
        log.info("interaction test after %d trials: log10 K = %.3f (%s at K threshold %g)", check.n,
                 check.log10_K, check.verdict, s.stop_on_bayes_factor)
        if self.on_bayes_factor is not None:
            self.on_bayes_factor(check)
        return check.verdict in CONCLUSIVE  # "no evidence" (a constant metric so far) never stops a sweep
