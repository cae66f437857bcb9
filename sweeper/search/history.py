"""The trials a search handed out and the results back, read as the GP step needs them.

A result is a float; NaN marks a failed trial. Failed and pending trials are conditioned on when
a batch is chosen (the GP's posterior variance depends on the inputs only) but never enter the
fit of the mean, so the history tells them apart: :meth:`TrialHistory.ok`, :meth:`TrialHistory.failed`,
:meth:`TrialHistory.pending`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from sweeper.search.suggestion import Suggestion


@dataclass(frozen=True)
class TrialHistory:
    """A read-only view of a policy's trials: ``suggestions[i]`` is trial ``i``; ``results`` maps index -> value."""

    suggestions: Sequence[Suggestion]
    results: Mapping[int, float]

    def ok(self) -> list[int]:
        """Indices of the successful trials, ascending."""
        return [i for i in sorted(self.results) if not math.isnan(self.results[i])]

    def failed(self) -> list[int]:
        """Indices of the failed trials, ascending."""
        return [i for i, v in sorted(self.results.items()) if math.isnan(v)]

    def pending(self) -> list[int]:
        """Indices handed out whose results have not arrived."""
        return [s.index for s in self.suggestions if s.index not in self.results]

    def n_ok(self) -> int:
        return sum(1 for v in self.results.values() if not math.isnan(v))

    def n_failed(self) -> int:
        return sum(1 for v in self.results.values() if math.isnan(v))

    def all_in(self, stop: int) -> bool:
        """Whether every trial before ``stop`` has its result (a deterministic batch waits for them)."""
        return all(i in self.results for i in range(stop))

    def points(self, indices: Iterable[int]) -> NDArray[np.float64]:
        """The unit-cube points of these trials, one row each."""
        return np.array([self.suggestions[i].x for i in indices], dtype=np.float64)

    def values(self, indices: Iterable[int]) -> NDArray[np.float64]:
        """The results of these trials."""
        return np.array([self.results[i] for i in indices])

    def asked_points(self, d: int) -> NDArray[np.float64]:
        """Every point handed out (finished, failed and pending), shape ``(n, d)``."""
        return np.array([s.x for s in self.suggestions], dtype=np.float64).reshape(-1, d)

    def failed_points(self, d: int) -> NDArray[np.float64]:
        """The points of the failed trials, shape ``(n_failed, d)``."""
        return self.points(self.failed()).reshape(-1, d)
