"""Fresh copies of one config, node for node what ``copy.deepcopy`` gives, from a pickle made once.

Why: every trial gets its own copy of the task's config (the task may change it), and
``DictConfig.__deepcopy__`` walks every node in Python: about 0.6 ms for the benchmark's small task
config, most of a trial's composition (NOTE: docs/decisions/0064-per-trial-job-work.md).

What: :class:`ConfigCopier` pickles the config once; each :meth:`~ConfigCopier.copy` unpickles it
(OmegaConf's ``__getstate__`` and ``__setstate__``: content, metadata, flags, parents; the flags'
cache is left to rebuild, as it is on any change), about a sixth of the cost. What deepcopy shares
with the original rather than copies (classes, functions, enum members) the copy shares too: the
pickle refers to them by their place in a list kept beside it. So a structured config's class need
not be found by its name (Hydra's plugin scan runs the plugins' modules again, and the class a
config holds is then no longer the one its module holds by that name). A config that does not
pickle is deep-copied.
"""

from __future__ import annotations

import copy
import io
import pickle
import types
from enum import Enum
from typing import Any, cast

from omegaconf import DictConfig

#: What copy.deepcopy returns as is (copy._deepcopy_atomic, Enum.__deepcopy__): kept by reference.
_SHARED = (type, Enum, types.FunctionType, types.BuiltinFunctionType)


class ConfigCopier:
    """Copies of ``cfg`` as it is now (``cfg`` must not change afterwards: the copies are of the pickle)."""

    def __init__(self, cfg: DictConfig) -> None:
        self._cfg = cfg
        self._shared: list[Any] = []
        self._data: bytes | None = None
        file = io.BytesIO()
        try:
            _SharingPickler(file, self._shared).dump(cfg)
            _SharingUnpickler(io.BytesIO(file.getvalue()), self._shared).load()
        except Exception:  # noqa: BLE001 - whatever pickle refuses, the config is deep-copied instead
            self._shared = []
            return
        self._data = file.getvalue()

    @property
    def pickled(self) -> bool:
        """Whether copies come from the pickle (else from ``copy.deepcopy``)."""
        return self._data is not None

    def copy(self) -> DictConfig:
        """A fresh copy, what ``copy.deepcopy(cfg)`` gives."""
        if self._data is None:
            return copy.deepcopy(self._cfg)
        return cast(DictConfig, _SharingUnpickler(io.BytesIO(self._data), self._shared).load())


class _SharingPickler(pickle.Pickler):
    """Pickles what deepcopy treats as atomic as a reference into ``shared``."""

    def __init__(self, file: io.BytesIO, shared: list[Any]) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.shared = shared

    def persistent_id(self, obj: Any) -> int | None:
        if isinstance(obj, _SHARED):
            self.shared.append(obj)
            return len(self.shared) - 1
        return None


class _SharingUnpickler(pickle.Unpickler):
    """Unpickles what :class:`_SharingPickler` wrote, its references taken from ``shared``."""

    def __init__(self, file: io.BytesIO, shared: list[Any]) -> None:
        super().__init__(file)
        self.shared = shared

    def persistent_load(self, pid: Any) -> Any:
        return self.shared[pid]
