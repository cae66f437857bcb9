"""The ``sweeper_trial`` entry of a trial's config, in a module of its own.

Every trial's worker unpickles its config, and with it this class's module: kept apart from
:mod:`sweeper.run.searcher` (the policy, the GP, SciPy), a worker imports none of the search's
math it never runs (NOTE: docs/decisions/0033-light-worker-imports.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class TrialInfo(Mapping[str, Any]):
    """A trial's metadata in its config (index, phase, batch, acquisition value, the GP's prediction).

    A read-only mapping, not a ``dict``: Tune names each trial's folder after its config,
    flattening every nested dict into it (``..._acquisition=0.0238,batch=1,index=6,phase=ivr,
    predicted_mean=0.5022,...``), but writes any other value as ``str(value)``: here the index,
    so the folder says ``sweeper_trial=6``. The trainable reads it like the dict it was.
    """

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._data = dict(data)

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Any:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __str__(self) -> str:
        return str(self._data.get("index", ""))

    def __repr__(self) -> str:
        return f"TrialInfo({self._data!r})"

    def __getstate__(self) -> dict[str, Any]:
        return self._data

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._data = state
