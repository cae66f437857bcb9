"""The points of the model-free strategies: ``random``, ``sobol`` and ``grid``, one unit-cube point per index.

A :class:`UnitDesign` gives trial ``index`` its point; :class:`DesignSource` makes it a suggestion in
batches of ``batch_size``. The GP strategies start with the :class:`SobolDesign` too
(:class:`~sweeper.search.gp_source.GPSource`). Each design draws from its own stream of the sweep's seed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from sweeper.search.configurations import joint_grid
from sweeper.search.design import balance_categories, factorial_design, random_design, sobol_design
from sweeper.search.history import TrialHistory
from sweeper.search.settings import STREAM_BALANCE, STREAM_RANDOM, PolicySettings, Strategy
from sweeper.search.space import SearchSpace
from sweeper.search.suggestion import BatchFit, Suggestion, make_suggestion


class UnitDesign(Protocol):
    """A design: the unit-cube point of trial ``index``, and the phase its suggestions record."""

    @property
    def phase(self) -> str: ...

    def unit(self, index: int) -> NDArray[np.float64]: ...


class RandomDesign:
    """I.i.d. uniform points, point ``index`` from its own stream: the only design under which the
    expected-maximum estimator of Dodge et al. (2019) is unbiased."""

    phase = Strategy.RANDOM.value

    def __init__(self, space: SearchSpace, settings: PolicySettings) -> None:
        self._d, self._seed = space.d, settings.seed

    def unit(self, index: int) -> NDArray[np.float64]:
        u: NDArray[np.float64] = random_design(1, self._d, [self._seed, STREAM_RANDOM, index])[0]
        return u


class SobolDesign:
    """A scrambled Sobol sequence of ``num_trials`` points, seeded, made on first use.

    Each combination of categories gets an equal share (:func:`sweeper.search.design.balance_categories`):
    a Sobol design's cells of two discrete dims can be coupled (each model paired with one dataset only).
    """

    phase = Strategy.SOBOL.value

    def __init__(self, space: SearchSpace, settings: PolicySettings) -> None:
        self._space, self._settings = space, settings
        self._points: NDArray[np.float64] | None = None

    def unit(self, index: int) -> NDArray[np.float64]:
        if self._points is None:
            s = self._settings
            self._points = balance_categories(sobol_design(s.num_trials, self._space.d, s.seed),
                                              self._space.categories(), [s.seed, STREAM_BALANCE])
        u: NDArray[np.float64] = self._points[index]
        return u


class GridDesign:
    """The full factorial of the discrete dimensions in a seeded random order, made on first use; with
    configurations, each configuration crossed with the other dims' values (:func:`joint_grid`).

    Beyond the grid's size it starts over in the same order (``grid_repeats``).
    """

    phase = Strategy.GRID.value

    def __init__(self, space: SearchSpace, settings: PolicySettings) -> None:
        self._space, self._seed = space, settings.seed
        self._points: NDArray[np.float64] | None = None

    def unit(self, index: int) -> NDArray[np.float64]:
        if self._points is None:
            self._points = joint_grid(self._space, self._seed) if self._space.joint else factorial_design(
                [lv for lv in self._space.levels() if lv is not None], self._seed)
        u: NDArray[np.float64] = self._points[index % self._points.shape[0]]
        return u


#: The design of each model-free strategy.
DESIGNS: dict[Strategy, Callable[[SearchSpace, PolicySettings], UnitDesign]] = {
    Strategy.RANDOM: RandomDesign, Strategy.SOBOL: SobolDesign, Strategy.GRID: GridDesign}


class DesignSource:
    """The point source of a model-free strategy: its design's points, in blocks of ``batch_size``."""

    def __init__(self, design: UnitDesign, space: SearchSpace, batch_size: int) -> None:
        self._design, self._space, self._batch_size = design, space, batch_size

    def batch_of(self, index: int) -> int:
        return index // self._batch_size

    def suggest(self, index: int, trials: TrialHistory,
                on_fit: Callable[[BatchFit], None] | None = None) -> Suggestion:
        """The design's point ``index``; the results so far do not change it."""
        return make_suggestion(self._space, index, self._design.unit(index), self._design.phase,
                               self.batch_of(index))
