"""Where a strategy's points come from: one :class:`PointSource` per strategy, chosen once per policy.

The policy asks its source for trial ``index``'s point and does its own bookkeeping (results,
replays, the interaction test); what differs between strategies lives in the source:
:class:`~sweeper.search.design_source.DesignSource` for ``random``, ``sobol`` and ``grid``,
:class:`~sweeper.search.gp_source.GPSource` (with the batch step of ``ivr`` or ``ucb``) for the GP strategies.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from sweeper.search.design_source import DESIGNS, DesignSource
from sweeper.search.gp_batch import gp_batch_step
from sweeper.search.gp_source import BatchPlan, GPSource
from sweeper.search.history import TrialHistory
from sweeper.search.settings import PolicySettings, Strategy
from sweeper.search.space import SearchSpace
from sweeper.search.suggestion import BatchFit, Suggestion


class PointSource(Protocol):
    """The points of one strategy, trial by trial."""

    def batch_of(self, index: int) -> int:
        """The batch trial ``index`` belongs to."""
        ...

    def suggest(self, index: int, trials: TrialHistory,
                on_fit: Callable[[BatchFit], None] | None = None) -> Suggestion | None:
        """Trial ``index``'s suggestion given the trials so far, or None when it must wait for results.

        ``on_fit`` is called with the GP of each batch as it is planned (GP strategies only).
        """
        ...


def point_source(space: SearchSpace, settings: PolicySettings, plan: BatchPlan,
                 clock: Callable[[], float]) -> PointSource:
    """The source of ``settings.strategy``; a GP strategy keeps its state between asks in ``plan``."""
    strategy = Strategy(settings.strategy)
    if strategy.uses_gp:
        return GPSource(space, settings, gp_batch_step(space, settings), plan, clock)
    return DesignSource(DESIGNS[strategy](space, settings), space, settings.batch_size)
