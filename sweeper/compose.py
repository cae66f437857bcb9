"""Compose each trial's Hydra config, fast when the swept keys are plain values.

Hydra's ``load_sweep_config`` rebuilds the whole defaults tree for every job: about 90 ms
on a small app, which is most of a trial's overhead when the task itself is quick. When
no swept key selects a config group, every trial shares one composition and differs
only in the values of the swept keys. :class:`TrialComposer` then composes that shared
base once per worker process and applies each trial's overrides to a copy with Hydra's own
override machinery (``ConfigLoaderImpl._apply_overrides_to_config``, the step Hydra runs
after composing), filling in the bookkeeping Hydra would (``hydra.overrides.task``,
``hydra.job.override_dirname``). The driver proves the shortcut on the space's centre
point before the sweep (:meth:`TrialComposer.verify`); if the two configs differ in any way
(e.g. a swept key is a config group), every trial takes Hydra's full path.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from hydra._internal.config_loader_impl import ConfigLoaderImpl, get_overrides_dirname
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.types import HydraContext
from omegaconf import DictConfig, OmegaConf, open_dict


class TrialComposer:
    """Builds trial configs from a sweep's master config (picklable; caches per process).

    Args:
        hydra_context: the sweep's Hydra context (its config loader composes).
        master_config: the sweep's master config.
        fixed_overrides: overrides every trial shares (group selections allowed).
    """

    def __init__(self, hydra_context: HydraContext, master_config: DictConfig,
                 fixed_overrides: Sequence[str]) -> None:
        self.hydra_context = hydra_context
        self.master_config = master_config
        self.fixed_overrides = list(fixed_overrides)
        self.fast = False  # set by verify() in the driver
        self._base: DictConfig | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_base": None}  # each process composes its own base

    def compose_full(self, dim_overrides: Sequence[str]) -> DictConfig:
        """Hydra's own path: the whole defaults tree, composed anew."""
        return self.hydra_context.config_loader.load_sweep_config(
            self.master_config, [*self.fixed_overrides, *dim_overrides]
        )

    def compose(self, dim_overrides: Sequence[str]) -> DictConfig:
        """The config of one trial; the fast path when :meth:`verify` allowed it."""
        if not self.fast:
            return self.compose_full(dim_overrides)
        if self._base is None:
            self._base = self.compose_full([])
        cfg = copy.deepcopy(self._base)
        parsed = OverridesParser.create().parse_overrides(list(dim_overrides))
        ConfigLoaderImpl._apply_overrides_to_config(parsed, cfg)
        all_task = OverridesParser.create().parse_overrides([*self.fixed_overrides, *dim_overrides])
        with open_dict(cfg.hydra):
            cfg.hydra.overrides.task.extend([o.input_line for o in parsed])
            dirname = cfg.hydra.job.config.override_dirname
            cfg.hydra.job.override_dirname = get_overrides_dirname(
                overrides=all_task, kv_sep=dirname.kv_sep, item_sep=dirname.item_sep,
                exclude_keys=dirname.exclude_keys,
            )
        OmegaConf.copy_cache(from_config=self.master_config, to_config=cfg)
        return cfg

    def verify(self, dim_overrides: Sequence[str]) -> bool:
        """Enable the fast path if it gives exactly Hydra's config for these overrides.

        Raises whatever Hydra raises when the overrides do not compose at all.
        """
        full = self.compose_full(dim_overrides)
        self.fast, self._base = True, None
        try:
            fast = self.compose(dim_overrides)
        except Exception:  # noqa: BLE001 - any failure just means: no shortcut
            self.fast = False
        else:
            self.fast = _tree(fast) == _tree(full)
        self._base = None
        return self.fast


def _tree(cfg: DictConfig) -> Any:
    tree = OmegaConf.to_container(cfg, resolve=False)
    assert isinstance(tree, dict)
    tree["hydra"]["runtime"].pop("cwd", None)
    return tree
