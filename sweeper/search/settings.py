"""The settings of a search besides its space (:class:`PolicySettings`, checked all at once),
the strategies, and the tags of the random streams every random choice draws from.

Every random choice of the search comes from the sweep's one seed, through a stream of its
own: ``[seed, STREAM_..., ...]`` (see :func:`sweeper.search.design.as_generator`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

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
    """The number of points of ``space``'s full factorial; None when a dimension is a float interval."""
    levels = space.levels()
    return None if any(lv is None for lv in levels) else math.prod(len(lv) for lv in levels if lv is not None)


def default_num_trials(strategy: str, space: SearchSpace | None, grid_repeats: int = 1) -> int:
    """``num_trials`` when it is not set: every point of the grid ``grid_repeats`` times for the grid strategy
    (as Hydra's basic sweeper and Optuna's grid run each point once), 32 otherwise."""
    size = grid_size(space) if strategy == "grid" and space is not None and space.d > 0 else None
    return size * max(grid_repeats, 1) if size is not None and size <= MAX_GRID else 32


@dataclass(frozen=True)
class PolicySettings:
    """Everything that defines a search besides its space. Field names are the option names."""

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
    #: see sweeper.search.gp_fit.dimension_scaled_prior); false fits by maximum likelihood. Off by default: it
    #: did not make the efficiency benchmark's maps better (bench/efficiency.py).
    gp_lengthscale_prior: bool = False
    #: IVR only: add local random-search candidates around the best Sobol candidates
    #: (sweeper.search.acquisition.local_ivr_candidates). Off by default: it helped Hartmann-6 at
    #: n = 50 and hurt it at n = 30 and on SVC.
    ivr_local_search: bool = False
    kernel: str = "matern52-ard"
    coregion_rank: int = 1
    stop_on_bayes_factor: float | None = None
    #: A trial running longer ends TIMEOUT and counts as failed (None: no limit); see sweeper.run.faults.
    trial_timeout_s: float | None = None
    #: ``[low, high]`` of the metric (either may be None): the GP models it warped so that its
    #: predictions respect them (sweeper.search.warping, sweeper.search.bounded); None models the raw values.
    metric_bounds: Sequence[float | None] | None = None

    def _grid_problems(self, space: SearchSpace, prefix: str) -> list[str]:
        """What keeps the grid strategy from running every point of ``space``'s grid ``grid_repeats`` times."""
        floats = [d.name for d, lv in zip(space.dims, space.levels()) if lv is None]
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

    @property
    def bounds(self) -> MetricBounds | None:
        """The parsed :attr:`metric_bounds` (None without bounds; ValueError when malformed)."""
        return MetricBounds.parse(self.metric_bounds)

    def problems(self, space: SearchSpace | None, prefix: str = "") -> list[str]:
        """List every invalid setting, each naming ``prefix + key``, the value and a fix.

        ``space`` None (it failed to parse) skips the checks that need it.
        """
        p: list[str] = []

        def bad(key: str, rule: str, fix: Any) -> None:
            p.append(f"{prefix}{key}={getattr(self, key)!r} is invalid: {rule}. Try {prefix}{key}={fix}.")

        if self.strategy not in STRATEGIES:
            bad("strategy", f"must be one of {', '.join(STRATEGIES)}", "ivr")
        if self.mode not in ("max", "min"):
            bad("mode", "must be max or min", "max")
        if self.num_trials < 1:
            bad("num_trials", "a sweep needs at least 1 trial", 32)
        if self.batch_size < 1:
            bad("batch_size", "a batch holds at least 1 point", 8)
        if self.strategy in GP_STRATEGIES:
            if self.n_initial < 1:
                bad("n_initial", "the Sobol phase needs at least 1 point (a power of 2 is best)", 8)
            elif self.n_initial > self.num_trials >= 1:  # num_trials < 1 is reported on its own
                bad("n_initial", f"the Sobol phase cannot be longer than num_trials={self.num_trials}",
                    min(8, self.num_trials))
        if self.strategy == "grid" and space is not None:
            p.extend(self._grid_problems(space, prefix))
        elif self.grid_repeats != 1:
            bad("grid_repeats", "the grid strategy alone repeats its grid", 1)
        if space is not None and space.d == 0:
            p.append(
                "the search space has no dimension to search: give one in hydra.sweeper.params "
                "or on the command line, e.g. C='tag(log, interval(1e-3, 1e3))'."
            )
        if self.ucb_beta < 0:
            bad("ucb_beta", "the exploration weight must be >= 0", 2.0)
        if self.n_candidates < 1:
            bad("n_candidates", "the acquisition needs at least 1 candidate", 2048)
        if self.n_integration < 1:
            bad("n_integration", "the IVR integral needs at least 1 point", 1024)
        if self.gp_restarts < 1:
            bad("gp_restarts", "the GP needs at least 1 optimiser start", 3)
        if self.gp_max_fit_points is not None and (isinstance(self.gp_max_fit_points, bool)
                                                   or not isinstance(self.gp_max_fit_points, int)
                                                   or self.gp_max_fit_points < 2):
            bad("gp_max_fit_points", "the hyperparameters need at least 2 points to fit on (null: all)", 300)
        if self.gp_refine_max_points is not None and (isinstance(self.gp_refine_max_points, bool)
                                                      or not isinstance(self.gp_refine_max_points, int)
                                                      or self.gp_refine_max_points < 1):
            bad("gp_refine_max_points", "a number of results >= 1 (null: never refine on all)", 1000)
        if not isinstance(self.gp_lengthscale_prior, bool):
            bad("gp_lengthscale_prior", "must be true or false (a LogNormal lengthscale prior, MAP fit)", "false")
        if not isinstance(self.ivr_local_search, bool):
            bad("ivr_local_search", "must be true or false (local search around the best IVR candidates)", "false")
        if self.kernel not in KERNELS:
            bad("kernel", f"must be one of {', '.join(KERNELS)}", "matern52-ard")
        if self.coregion_rank < 1:
            bad("coregion_rank", "the coregionalization matrix W Wᵀ + diag(kappa) needs rank >= 1", 1)
        k = self.stop_on_identical_failures
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 0):
            bad("stop_on_identical_failures", "a number of trials, an integer >= 0 (0 or null: never stop on "
                "identical failures)", 3)
        if self.trial_timeout_s is not None and not (isinstance(self.trial_timeout_s, int | float)
                                                     and 0 < self.trial_timeout_s < math.inf):
            bad("trial_timeout_s", "a trial's time limit is a positive number of seconds (null: no limit)", 3600)
        try:
            self.bounds  # noqa: B018 - parses, or says why not
        except ValueError as exc:
            p.append(f"{prefix}metric_bounds={self.metric_bounds!r} is invalid: {exc}. "
                     f"Try {prefix}metric_bounds=[0,1] for an accuracy, [0,null] for a loss, or null.")
        if self.stop_on_bayes_factor is not None:
            if not self.stop_on_bayes_factor > 1:
                bad("stop_on_bayes_factor", "the sweep stops once K > T or K < 1/T, so T must be > 1", 10)
            elif space is not None and space.d < 2:
                p.append(f"{prefix}stop_on_bayes_factor={self.stop_on_bayes_factor!r} needs at least 2 "
                         f"dimensions (it tests whether they interact); the space has {space.d}. "
                         f"Try {prefix}stop_on_bayes_factor=null.")
        return p
