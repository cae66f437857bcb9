"""Which point to evaluate next: the search strategy, free of Ray and Hydra.

:class:`MultiversePolicy` hands out trials with :meth:`~MultiversePolicy.ask` and takes
their results with :meth:`~MultiversePolicy.tell`. Strategies:

- ``random``: i.i.d. uniform points in the unit cube, the only design under which the
  expected-maximum estimator of Dodge et al. (2019) is unbiased;
- ``sobol``: a scrambled Sobol sequence, seeded;
- ``grid``: the full factorial of discrete dimensions (choice, range, int) in a seeded
  random order, each point once; ``grid_repeats`` runs the whole grid again in the same order
  (the sweeper refuses a ``num_trials`` other than grid size x ``grid_repeats``): the design for crossed
  environment conditions (``env.seed x env.threads x env.deterministic``), where Sobol's
  low-discrepancy structure couples the cells of different dimensions;
- ``ivr``: ``n_initial`` Sobol points, then Gaussian-process integrated variance reduction
  (Bell et al. 2022, eq. 6-7), the design that maps the whole space;
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

Without ``deterministic``, a batch is planned at its first ask from whatever results are
in by then, and its points are handed out as workers free up. For ``ivr``, when results have arrived
since the plan was made, the rest of the batch is re-planned at the next ask: the GP is
refitted (warm-started from the previous fit's hyperparameters: that start plus the fixed
one, ``WARM_RESTARTS``, instead of ``gp_restarts``) and the remaining points are chosen
again, conditioned on every point asked. IVR's variance does not depend on the results, but
its hyperparameters do, and those fitted on the first 8-30 results move a lot (a lengthscale
of 3.3 from 8 SVC results, 0.2 from 30): a sweep whose results come in one at a time between
asks is then designed almost sequentially, at the cost of one cheap refit per result (the
efficiency benchmark, ``python -m bench efficiency``). It does so only while planning takes
at most ``REPLAN_SHARE`` of the time between plans: trials shorter than a refit keep their
batches, since Tune's loop waits for the searcher. Every fit after the first starts warm,
batch starts included. ``ucb`` keeps its batches and full restarts (see
``MultiversePolicy._adaptive``).

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
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sweeper.errors import SweeperConfigError
from sweeper.search.design import balance_categories, factorial_design, random_design, sobol_design
from sweeper.search.ensemble import GPEnsemble
from sweeper.search.gp import GPFit
from sweeper.search.gp_batch import fit_batch_gps, pick_batch, single_threaded_blas, warm_shapes
from sweeper.search.interaction import interaction_bayes_factor
from sweeper.search.settings import (
    GP_STRATEGIES,
    STREAM_BALANCE,
    STREAM_BAYES,
    STREAM_RANDOM,
    PolicySettings,
)
from sweeper.search.space import SearchSpace
from sweeper.search.warping import OutputWarp

log = logging.getLogger(__name__)
#: The verdicts that end a sweep with ``stop_on_bayes_factor`` ("inconclusive" and "no evidence" do not).
CONCLUSIVE = ("interaction", "no interaction")

STATE_VERSION = 2
#: Re-plan a batch only while planning takes at most this share of the time between plans:
#: with trials shorter than a refit, re-planning would stall Tune's loop, which waits for it.
REPLAN_SHARE = 0.25
#: Fewest finished trials the interaction test of ``stop_on_bayes_factor`` is run on.
MIN_BAYES_FACTOR_TRIALS = 4


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
    """The GP a batch was planned with, handed to :attr:`MultiversePolicy.on_gp_fit` (e.g. for a live map).

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
        phase: ``random``, ``sobol``, ``ivr`` or ``ucb``.
        batch: which block of ``batch_size`` points the trial belongs to (the Sobol design
            of a GP strategy is batch 0).
        acquisition: the acquisition value when the point was chosen (GP phases only).
        predicted_mean: the mean of the GP's predictive of the trial's result, original units.
        predicted_sd: its standard deviation (observation noise included), original units: what
            the prospective check scores (:mod:`sweeper.search.calibration`).
    """

    index: int
    x: tuple[float, ...]
    params: dict[str, Any]
    phase: str
    batch: int
    acquisition: float | None = None
    predicted_mean: float | None = None
    predicted_sd: float | None = None


class MultiversePolicy:
    """Ask/tell search over a :class:`~sweeper.search.space.SearchSpace` (no Ray, no Hydra).

    ``clock`` (seconds) tells the policy how long trials take, for the choice to re-plan a
    batch (:meth:`_replan_affordable`); a benchmark that evaluates instantly passes a
    simulated one.

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
        self._plan: list[Suggestion] = []  # the rest of the current batch, issued one per ask
        self._plan_ok = 0  # successful results the plan was made from (more: re-plan it)
        #: The last GP's hyperparameters (GPFit.hyperparameters()): the warm start of the next fit.
        self._warm: dict[str, Any] | None = None
        #: With metric_bounds under ``ivr``: the bounded fit's, which tags the points (see _choose_batch).
        self._warm_bounded: dict[str, Any] | None = None
        self._planned_at = clock()  # when the last plan was made, and how long it took (seconds)
        self._planning_s = 0.0
        self._sobol: NDArray[np.float64] | None = None
        self._grid: NDArray[np.float64] | None = None
        self._bayes_factors: list[BayesFactorCheck] = []
        self._replay: dict[int, Suggestion] = {}  # suggestions made before a restart, handed out again
        self._stop_reason: str | None = None  # set by stop(): the sweep cannot succeed
        #: Called with each :class:`BayesFactorCheck` as it is made (e.g. to log it to MLflow).
        self.on_bayes_factor: Callable[[BayesFactorCheck], None] | None = None
        #: Called with the :class:`BatchFit` of each GP batch as it is planned (not its re-plans): it
        #: runs inside :meth:`ask`, so it must return at once (a live map hands the fit off to draw it).
        self.on_gp_fit: Callable[[BatchFit], None] | None = None
        self._tagger: GPFit | GPEnsemble | None = None  # the model behind the plan just made, for on_gp_fit

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
        return sum(1 for v in self._results.values() if math.isnan(v))

    @property
    def pending(self) -> list[int]:
        """Indices handed out whose results have not arrived."""
        return [s.index for s in self._suggestions if s.index not in self._results]

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
            self._plan = [p for p in self._plan if p.index != index]
            self._suggestions.append(suggestion)
            return suggestion
        s = self.settings
        if s.stop_on_bayes_factor is not None and self._starts_batch(index):
            if s.deterministic and any(i not in self._results for i in range(index)):
                return None  # the test, like the batch, waits for every earlier result
            if self._test_interaction(index):
                return None
        if s.strategy in ("random", "grid"):
            suggestion = self._design_point(index, s.strategy)
        elif s.strategy == "sobol" or index < s.n_initial:
            suggestion = self._design_point(index, "sobol")
        else:
            suggestion = self._gp_point(index)
        if suggestion is not None:
            self._suggestions.append(suggestion)
            log.debug("suggest #%d (%s, batch %d): %s", index, suggestion.phase, suggestion.batch,
                      suggestion.params)
        return suggestion

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
            "plan": [asdict(x) for x in self._plan],
            "plan_ok": self._plan_ok,
            "warm_start": self._warm,
            "warm_start_bounded": self._warm_bounded,
            "planning_s": self._planning_s,
            "bayes_factors": [asdict(x) for x in self._bayes_factors],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a state saved by :meth:`state_dict`, refusing a different space or strategy."""
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"searcher state version {state.get('version')!r} is not {STATE_VERSION}")
        saved_space = SearchSpace.from_dict(state["space"])
        if saved_space.dims != self.space.dims:  # the fixed overrides are the sweep's to check (sweeper.run.resume)
            raise SweeperConfigError(
                f"the saved sweep searched {saved_space.describe()} but this one searches "
                f"{self.space.describe()}: a sweep cannot continue with a different search space."
            )
        saved = PolicySettings(**state["settings"])
        if saved.strategy != self.settings.strategy or saved.seed != self.settings.seed:
            raise SweeperConfigError(
                f"the saved sweep used strategy={saved.strategy!r} seed={saved.seed} but this one "
                f"uses strategy={self.settings.strategy!r} seed={self.settings.seed}: keep them equal to continue it."
            )
        self._suggestions = [_suggestion_from_dict(d) for d in state["suggestions"]]
        self._results = {int(k): float(v) for k, v in state["results"].items()}
        self._plan = [_suggestion_from_dict(d) for d in state["plan"]]
        # Older states lack it: treat the plan as made from every result in (no re-plan until the next).
        self._plan_ok = int(state.get("plan_ok", self._n_ok()))
        self._warm = state.get("warm_start")
        self._warm_bounded = state.get("warm_start_bounded")
        # The saved plan's cost, its clock restarted: a resumed sweep re-plans as the first did.
        self._planning_s, self._planned_at = float(state.get("planning_s", 0.0)), self._clock()
        self._bayes_factors = [BayesFactorCheck(**d) for d in state["bayes_factors"]]

    # ------------------------------------------------------------------ internals
    @property
    def _adaptive(self) -> bool:
        """Re-plan on new results and warm-start fits: ``ivr`` without ``deterministic``.

        Not ``ucb``: sequential UCB exploits harder than its batches (on Branin its best value
        after 50 trials fell from 283 to 250, the efficiency benchmark's five seeds), and it is
        the optimising contrast the multiverse paper compares against, so it stays as it was.
        """
        return self.settings.strategy == "ivr" and not self.settings.deterministic

    def _replan_affordable(self) -> bool:
        """Whether the last plan took at most ``REPLAN_SHARE`` of the time since it was made.

        Trials of minutes always re-plan; trials shorter than a refit (a benchmark's trivial
        task) keep their batches, as the searcher would otherwise hold up every next trial.
        """
        return self._planning_s <= REPLAN_SHARE * (self._clock() - self._planned_at)

    def _n_ok(self) -> int:
        return sum(1 for v in self._results.values() if not math.isnan(v))

    def _batch_of(self, index: int) -> int:
        s = self.settings
        if s.strategy in GP_STRATEGIES:
            return 0 if index < s.n_initial else 1 + (index - s.n_initial) // s.batch_size
        return index // s.batch_size

    def _starts_batch(self, index: int) -> bool:
        """Whether ``index`` opens a batch not yet tested (the Sobol design counts as batch 0)."""
        batch = self._batch_of(index)
        tested = self._bayes_factors[-1].batch if self._bayes_factors else 0
        return index > 0 and batch > tested and batch != self._batch_of(index - 1)

    def _test_interaction(self, index: int) -> bool:
        """Run the interaction test before batch ``_batch_of(index)``; True if it ends the sweep.

        Uses every finished result in so far; with ``deterministic``, no batch starts
        before every earlier result is in, so that is all of them, whatever the timing.
        """
        s = self.settings
        assert s.stop_on_bayes_factor is not None
        batch = self._batch_of(index)
        ok = [i for i in sorted(self._results) if not math.isnan(self._results[i])]
        if len(ok) < MIN_BAYES_FACTOR_TRIALS:
            log.info("interaction test before batch %d skipped: %d finished trial(s), fewer than %d",
                     batch, len(ok), MIN_BAYES_FACTOR_TRIALS)
            return False
        X = np.array([self._suggestions[i].x for i in ok], dtype=np.float64)
        y = np.array([self._results[i] for i in ok])
        bounds = s.bounds
        # With bounds both models share one warp: the last search fit's shapes, else the plain logit.
        shapes = warm_shapes(self._warm_bounded) or warm_shapes(self._warm) or (1.0, 1.0)
        warp = None if bounds is None else OutputWarp.for_data(bounds, y, *shapes)
        try:
            with single_threaded_blas():
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

    def _design_point(self, index: int, phase: str) -> Suggestion:
        s = self.settings
        if phase == "random":
            u = random_design(1, self.space.d, [s.seed, STREAM_RANDOM, index])[0]
        elif phase == "grid":
            if self._grid is None:
                self._grid = factorial_design([lv for lv in self.space.levels() if lv is not None], s.seed)
            u = self._grid[index % self._grid.shape[0]]  # beyond the grid: replicate it, same order
        else:
            if self._sobol is None:
                # Each combination of categories gets an equal share: a Sobol design's cells of
                # two discrete dims can be coupled (each model paired with one dataset only).
                self._sobol = balance_categories(sobol_design(s.num_trials, self.space.d, s.seed),
                                                 self.space.categories(), [s.seed, STREAM_BALANCE])
            u = self._sobol[index]
        return self._make(index, u, phase, self._batch_of(index))

    def _make(
        self,
        index: int,
        u: NDArray[np.float64],
        phase: str,
        batch: int,
        acquisition: float | None = None,
        gp: GPFit | GPEnsemble | None = None,
    ) -> Suggestion:
        params = self.space.from_unit(u)[0]
        x = self.space.to_unit([params])[0]  # snapped to legal values of discrete dims
        mean = sd = None
        if gp is not None:
            m, v = gp.predict(x[None, :], noise=True)  # the predictive of its result, original units
            mean, sd = float(m[0]), float(v[0])
        return Suggestion(index, tuple(float(t) for t in x), params, phase, batch, acquisition, mean, sd)

    def _gp_point(self, index: int) -> Suggestion | None:
        s = self.settings
        if self._plan and self._plan[0].index == index:
            if not self._adaptive or self._n_ok() <= self._plan_ok or not self._replan_affordable():
                return self._plan.pop(0)
            # Results arrived since the plan: refit and choose the rest of the batch again.
            size, batch = len(self._plan), self._plan[0].batch
            with single_threaded_blas():
                points = self._plan_batch(index, size, batch, [s.seed, index])
            if not points:  # the refit failed: keep the old plan
                self._plan_ok = self._n_ok()
                return self._plan.pop(0)
            log.debug("re-planned the %d remaining point(s) of batch %d at trial #%d", size, batch, index)
            self._plan = points[1:]
            return points[0]
        batch = self._batch_of(index)
        start = s.n_initial + (batch - 1) * s.batch_size
        if s.deterministic:
            if any(i not in self._results for i in range(start)):
                return None  # this batch waits for every earlier result
            stream = [s.seed, batch]
        else:
            stream = [s.seed, index]
        with single_threaded_blas():
            points = self._plan_batch(index, min(start + s.batch_size, s.num_trials) - index, batch, stream)
        if not points:
            return self._design_point(index, "sobol")  # no usable GP: keep filling the space
        self._plan = points[1:]
        tagger, self._tagger = self._tagger, None
        if self.on_gp_fit is not None and tagger is not None:
            failed = [i for i, v in sorted(self._results.items()) if math.isnan(v)]
            X_failed = np.array([self._suggestions[i].x for i in failed], dtype=np.float64).reshape(-1, self.space.d)
            self.on_gp_fit(BatchFit(batch, tagger, X_failed))
        return points[0]

    def _plan_batch(self, first: int, size: int, batch: int, stream: list[int]) -> list[Suggestion]:
        """:meth:`_choose_batch`, timed for :meth:`_replan_affordable`."""
        started = time.perf_counter()
        try:
            return self._choose_batch(first, size, batch, stream)
        finally:
            self._planning_s = time.perf_counter() - started
            self._planned_at = self._clock()

    def _choose_batch(self, first: int, size: int, batch: int, stream: list[int]) -> list[Suggestion]:
        """Choose the rest of a batch (``size`` points) greedily, conditioning on everything asked.

        The GP is fitted on every result in so far (warm-started from the previous fit
        outside deterministic mode); :mod:`sweeper.search.gp_batch` fits and picks. Outside
        deterministic mode the caller still re-plans when results arrived, because they move
        the hyperparameters.
        """
        s = self.settings
        X_all = np.array([sg.x for sg in self._suggestions], dtype=np.float64).reshape(-1, self.space.d)
        ok = [i for i in sorted(self._results) if not math.isnan(self._results[i])]
        if not ok:
            log.warning("no successful trial yet to fit the GP: trial #%d continues the Sobol design", first)
            return []
        y = np.array([self._results[i] for i in ok])
        try:
            gp, tagger = fit_batch_gps(X_all[ok], y, self.space, s, stream, self._warm if self._adaptive else None,
                                       self._warm_bounded if self._adaptive else None)
        except (RuntimeError, np.linalg.LinAlgError) as exc:
            log.warning("the GP fit failed (%s): trial #%d continues the Sobol design", exc, first)
            return []
        self._plan_ok = len(ok)
        if self._adaptive:
            self._warm = gp.hyperparameters()
            self._warm_bounded = getattr(tagger, "point", tagger).hyperparameters() if tagger is not gp else None
        self._tagger = tagger
        cand, pick = pick_batch(gp, X_all, size, self.space, s, stream)
        return [
            self._make(first + k, cand[i], s.strategy, batch, float(v), tagger)
            for k, (i, v) in enumerate(zip(pick.indices, pick.values))
        ]


def _suggestion_from_dict(d: Mapping[str, Any]) -> Suggestion:
    return Suggestion(**{**d, "x": tuple(d["x"])})
