"""The settings of a search besides its space (:class:`PolicySettings`, checked all at once),
the strategies, and the tags of the random streams every random choice draws from.

Every random choice of the search comes from the sweep's one seed, through a stream of its
own: ``[seed, STREAM_..., ...]`` (see :func:`sweeper.search.design.as_generator`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sweeper.search.configurations import joint_grid_size
from sweeper.search.kernels import KERNELS
from sweeper.search.space import SearchSpace
from sweeper.search.warping import MetricBounds

#: Key of a trial's config that carries its suggestion's metadata (index, phase, batch, ...). Here,
#: not in policy.py, so a trial's worker reads it without importing the GP machinery.
TRIAL_KEY = "sweeper_trial"


class Strategy(StrEnum):
    """How a sweep chooses its points. A ``StrEnum``: equal to its name, so configs and records keep strings."""

    RANDOM = "random"  # independent uniform points
    SOBOL = "sobol"  # a scrambled Sobol sequence
    GRID = "grid"  # the full factorial of the discrete dims, each point once, in a seeded order
    IVR = "ivr"  # Sobol points, then GP integrated variance reduction (a map of the space)
    UCB = "ucb"  # Sobol points, then GP-UCB (the optimum)

    @property
    def uses_gp(self) -> bool:
        """Whether points after the Sobol phase come from a GP fit."""
        return self in GP_STRATEGIES


STRATEGIES = tuple(Strategy)
GP_STRATEGIES = (Strategy.IVR, Strategy.UCB)
#: Largest full factorial the grid strategy enumerates.
MAX_GRID = 1_000_000

# Stream tags: independent random streams derived from the one seed.
STREAM_RANDOM, STREAM_CANDIDATES, STREAM_INTEGRATION, STREAM_GP, STREAM_BAYES, STREAM_BALANCE = 1, 2, 3, 4, 5, 6
STREAM_LOCAL = 7
STREAM_TAG = 8


def grid_size(space: SearchSpace) -> int | None:
    """The number of points of ``space``'s full factorial (its configurations crossed with the other dims' values,
    when it has configurations); None when a dimension is a float interval."""
    if space.joint:
        return joint_grid_size(space)
    levels = space.levels()
    return None if any(lv is None for lv in levels) else math.prod(len(lv) for lv in levels if lv is not None)


def default_num_trials(strategy: str, space: SearchSpace | None, grid_repeats: int = 1) -> int:
    """``num_trials`` when it is not set: every point of the grid ``grid_repeats`` times for the grid strategy
    (as Hydra's basic sweeper and Optuna's grid run each point once), 32 otherwise."""
    size = grid_size(space) if strategy == "grid" and space is not None and space.d > 0 else None
    return size * max(grid_repeats, 1) if size is not None and size <= MAX_GRID else 32


def _count_or_none(value: Any, least: int) -> bool:
    """Whether ``value`` is None or an integer (not a bool) >= ``least``."""
    return value is None or (not isinstance(value, bool) and isinstance(value, int) and value >= least)


@dataclass(frozen=True)
class _Rule:
    """One setting's check: ``invalid(settings)`` true means ``key=value is invalid: rule. Try key=fix.``

    ``rule`` and ``fix`` are the text and the value, or functions of the settings that give them.
    """

    key: str
    invalid: Callable[[PolicySettings], bool]
    rule: str | Callable[[PolicySettings], str]
    fix: Any

    def message(self, settings: PolicySettings, prefix: str) -> str:
        rule = self.rule(settings) if callable(self.rule) else self.rule
        return settings.invalid_message(self.key, rule, self.fix(settings) if callable(self.fix) else self.fix, prefix)


#: The checks of single settings, in the order their messages are printed.
_OPTION_RULES = (
    _Rule("ucb_beta", lambda s: s.ucb_beta < 0, "the exploration weight must be >= 0", 2.0),
    _Rule("n_candidates", lambda s: s.n_candidates < 1, "the acquisition needs at least 1 candidate", 2048),
    _Rule("n_integration", lambda s: s.n_integration < 1, "the IVR integral needs at least 1 point", 1024),
    _Rule("gp_restarts", lambda s: s.gp_restarts < 1, "the GP needs at least 1 optimiser start", 3),
    _Rule("gp_max_fit_points", lambda s: not _count_or_none(s.gp_max_fit_points, 2),
          "the hyperparameters need at least 2 points to fit on (null: all)", 300),
    _Rule("gp_refine_max_points", lambda s: not _count_or_none(s.gp_refine_max_points, 1),
          "a number of results >= 1 (null: never refine on all)", 1000),
    _Rule("gp_lengthscale_prior", lambda s: not isinstance(s.gp_lengthscale_prior, bool),
          "must be true or false (a LogNormal lengthscale prior, MAP fit)", "false"),
    _Rule("ivr_slope_weight", lambda s: isinstance(s.ivr_slope_weight, bool)
          or not isinstance(s.ivr_slope_weight, int | float) or not 0 <= s.ivr_slope_weight < float("inf"),
          "the slope weight must be a number >= 0 (0: plain IVR)", 2.0),
    _Rule("ivr_mixture", lambda s: not isinstance(s.ivr_mixture, bool),
          "must be true or false (IVR over the bounded mixture)", "false"),
    _Rule("ivr_local_search", lambda s: not isinstance(s.ivr_local_search, bool),
          "must be true or false (local search around the best IVR candidates)", "false"),
    _Rule("kernel", lambda s: s.kernel not in KERNELS, f"must be one of {', '.join(KERNELS)}", "matern52-ard"),
    _Rule("coregion_rank", lambda s: s.coregion_rank < 1,
          "the coregionalization matrix W Wᵀ + diag(kappa) needs rank >= 1", 1),
    _Rule("stop_on_identical_failures", lambda s: not _count_or_none(s.stop_on_identical_failures, 0),
          "a number of trials, an integer >= 0 (0 or null: never stop on identical failures)", 3),
)

#: The checks of the strategy and its budget, in the order their messages are printed (before the space's).
_BUDGET_RULES = (
    _Rule("strategy", lambda s: s.strategy not in STRATEGIES, f"must be one of {', '.join(STRATEGIES)}", "ivr"),
    _Rule("mode", lambda s: s.mode not in ("max", "min"), "must be max or min", "max"),
    _Rule("num_trials", lambda s: s.num_trials < 1, "a sweep needs at least 1 trial", 32),
    _Rule("batch_size", lambda s: s.batch_size < 1, "a batch holds at least 1 point", 8),
    _Rule("n_initial", lambda s: s.strategy in GP_STRATEGIES and s.n_initial < 1,
          "the Sobol phase needs at least 1 point (a power of 2 is best)", 8),
    # num_trials < 1 is reported on its own.
    _Rule("n_initial", lambda s: s.strategy in GP_STRATEGIES and s.n_initial >= 1 and s.n_initial > s.num_trials >= 1,
          lambda s: f"the Sobol phase cannot be longer than num_trials={s.num_trials}", lambda s: min(8, s.num_trials)),
)


@dataclass(frozen=True)
class PolicySettings:
    """Everything that defines a search besides its space. Field names are the option names.

    The sweeper's ``hydra.sweeper.*`` settings (``MultiverseSweeperConf``) declare the same fields with the same
    defaults, except ``mode`` and ``num_trials`` (null there: resolved by the driver) and ``max_failures``
    (computed there from ``max_failure_rate``); tests/unit/test_settings_agree.py checks it.
    """

    strategy: str = "ivr"
    mode: str = "max"
    num_trials: int = 32
    #: strategy grid only: how many times the whole grid runs (num_trials = grid size x grid_repeats).
    grid_repeats: int = 1
    n_initial: int = 8
    batch_size: int = 8
    seed: int = 0
    deterministic: bool = False
    max_failures: int | None = None  # stop suggesting once more than this many failed
    #: Stop once the first this many trials to end all raised the same exception and none succeeded: a bug in
    #: the task, not a region of the space (see sweeper.run.searcher.IdenticalFailures). None or 0: never.
    stop_on_identical_failures: int | None = 3
    ucb_beta: float = 2.0
    n_candidates: int = 2048
    n_integration: int = 1024
    gp_restarts: int = 3
    #: Above this many results, the GP's restarts run on a seeded random subset of them and the
    #: posterior still conditions on all (None: always fit all; see sweeper.search.gp_fit.fit_gp) ...
    gp_max_fit_points: int | None = 300
    #: ... and up to this many, the best restart is refined on all results (None: never).
    gp_refine_max_points: int | None = 1000
    #: LogNormal prior on the lengthscales of continuous dims, fitted as MAP (Hvarfner et al. 2024;
    #: see sweeper.search.gp_fit.dimension_scaled_prior); false fits by maximum likelihood. Off by default.
    #: NOTE: docs/decisions/0029-gp-options-off-by-default.md
    gp_lengthscale_prior: bool = False
    #: IVR only: add local random-search candidates around the best Sobol candidates
    #: (sweeper.search.local_search.local_ivr_candidates). Off by default.
    #: NOTE: docs/decisions/0029-gp-options-off-by-default.md
    ivr_local_search: bool = False
    #: IVR only: weight the integrated variance by ``1 + w * slope / mean slope`` of the fit's mean
    #: (sweeper.search.slope_weights.slope_weights), so trials go where a stationary GP's map errs most:
    #: cliffs and steep edges. 0 is Bell et al.'s plain IVR. NOTE: docs/decisions/0062-slope-weighted-ivr.md
    ivr_slope_weight: float = 2.0
    #: IVR with metric_bounds only: choose by IVR summed over the posterior mixture that tags the points and
    #: draws the maps (up to gp_batch.TAG_MIXTURE_MAX_TRIALS results), each member's variance in the metric's
    #: units, instead of the single raw fit's. NOTE: docs/decisions/0070-ivr-over-the-bounded-mixture.md
    ivr_mixture: bool = False
    kernel: str = "matern52-ard"
    coregion_rank: int = 1
    stop_on_bayes_factor: float | None = None
    #: ``[low, high]`` of the metric (either may be None): the GP models it warped so that its
    #: predictions respect them (sweeper.search.warping, sweeper.search.bounded); None models the raw values.
    metric_bounds: Sequence[float | None] | None = None

    @property
    def bounds(self) -> MetricBounds | None:
        """The parsed :attr:`metric_bounds` (None without bounds; ValueError when malformed)."""
        return MetricBounds.parse(self.metric_bounds)

    def problems(self, space: SearchSpace | None, prefix: str = "") -> list[str]:
        """List every invalid setting, each naming ``prefix + key``, the value and a fix.

        ``space`` None (it failed to parse) skips the checks that need it. The same as
        :meth:`search_problems` followed by :meth:`model_problems`.
        """
        return [*self.search_problems(space, prefix), *self.model_problems(space, prefix)]

    def search_problems(self, space: SearchSpace | None, prefix: str = "") -> list[str]:
        """The problems of the strategy, its budget, the space and the GP's options, in this order."""
        return [*self._broken(_BUDGET_RULES, prefix), *self._space_problems(space, prefix),
                *self._broken(_OPTION_RULES, prefix)]

    def model_problems(self, space: SearchSpace | None, prefix: str = "") -> list[str]:
        """The problems of the metric's bounds, of ``ivr_mixture`` (which needs them) and of the Bayes-factor stop."""
        found = []
        try:
            self.bounds  # noqa: B018 - parses, or says why not
        except ValueError as exc:
            found.append(f"{prefix}metric_bounds={self.metric_bounds!r} is invalid: {exc}. "
                         f"Try {prefix}metric_bounds=[0,1] for an accuracy, [0,null] for a loss, or null.")
        if self.ivr_mixture is True and (self.strategy != "ivr" or self.metric_bounds is None):
            found.append(f"{prefix}ivr_mixture=true needs {prefix}strategy=ivr and {prefix}metric_bounds: it chooses "
                         f"ivr's points with the bounded metric's posterior mixture, which nothing else fits. Try "
                         f"{prefix}metric_bounds=[0,1] for an accuracy, or {prefix}ivr_mixture=false.")
        threshold = self.stop_on_bayes_factor
        if threshold is not None and not threshold > 1:
            found.append(self.invalid_message("stop_on_bayes_factor",
                                              "the sweep stops once K > T or K < 1/T, so T must be > 1", 10, prefix))
        elif threshold is not None and space is not None and space.d < 2:
            found.append(f"{prefix}stop_on_bayes_factor={threshold!r} needs at least 2 dimensions (it tests whether "
                         f"they interact); the space has {space.d}. Try {prefix}stop_on_bayes_factor=null.")
        return found

    def invalid_message(self, key: str, rule: str, fix: Any, prefix: str) -> str:
        """``prefix+key=value is invalid: rule. Try prefix+key=fix.``"""
        return f"{prefix}{key}={getattr(self, key)!r} is invalid: {rule}. Try {prefix}{key}={fix}."

    def _broken(self, rules: Sequence[_Rule], prefix: str) -> list[str]:
        """The message of each rule ``self`` breaks, in the rules' order."""
        return [r.message(self, prefix) for r in rules if r.invalid(self)]

    def _space_problems(self, space: SearchSpace | None, prefix: str) -> list[str]:
        """The grid's problems (strategy grid) or a stray ``grid_repeats``, then an empty space."""
        found = []
        if self.strategy == "grid" and space is not None:
            found += self._grid_problems(space, prefix)
        elif self.grid_repeats != 1:
            found.append(self.invalid_message("grid_repeats", "the grid strategy alone repeats its grid", 1, prefix))
        if space is not None and space.d == 0:
            found.append("the search space has no dimension to search: give one in hydra.sweeper.params "
                         "or on the command line, e.g. C='tag(log, interval(1e-3, 1e3))'.")
        return found

    def _grid_problems(self, space: SearchSpace, prefix: str) -> list[str]:
        """What keeps the grid strategy from running every point of ``space``'s grid ``grid_repeats`` times."""
        floats = [d.name for d, lv in zip(space.dims, space.levels(), strict=True) if lv is None]
        if floats:
            return [f"{prefix}strategy='grid' needs every dimension discrete, but {', '.join(floats)} "
                    f"{'is a float interval' if len(floats) == 1 else 'are float intervals'}: make it "
                    f"choice(...), range(...) or int(interval(...)), or use {prefix}strategy=sobol."]
        size = grid_size(space)
        assert size is not None
        if size > MAX_GRID:
            return [f"{prefix}strategy='grid' would enumerate {size} combinations, more than {MAX_GRID}: "
                    f"narrow the dimensions or use {prefix}strategy=sobol."]
        if self.grid_repeats < 1:
            return [f"{prefix}grid_repeats={self.grid_repeats!r} is invalid: the grid runs at least once. "
                    f"Try {prefix}grid_repeats=1."]
        if self.num_trials == size * self.grid_repeats or self.num_trials < 1 or space.d == 0:  # < 1: said above
            return []
        runs = f", run {self.grid_repeats} times" if self.grid_repeats > 1 else ""
        fix = f"set {prefix}num_trials={size * self.grid_repeats}, or leave it unset"
        if self.num_trials > 0 and self.num_trials % size == 0 and self.num_trials != size * self.grid_repeats:
            fix += f" (or {prefix}grid_repeats={self.num_trials // size} to run the whole grid that many times)"
        return [f"{prefix}num_trials={self.num_trials} is invalid with strategy=grid, which runs each point "
                f"of its grid once: the grid has {size} points{runs}: {fix}."]
