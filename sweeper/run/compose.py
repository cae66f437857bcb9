"""Compose each trial's Hydra config, fast when the swept keys are plain values.

Hydra's ``load_sweep_config`` rebuilds the whole defaults tree for every job, most of a
trial's overhead when the task itself is quick (NOTE: docs/decisions/0031-compose-once-per-process.md).
When no swept key selects a config group, every trial shares one composition and differs
only in the values of the swept keys. :class:`TrialComposer` then composes that shared
base once per worker process and applies each trial's overrides to a copy with Hydra's own
override machinery (``ConfigLoaderImpl._apply_overrides_to_config``, the step Hydra runs
after composing), filling in the bookkeeping Hydra would (``hydra.overrides.task``,
``hydra.job.override_dirname``). The driver proves the shortcut on the space's centre
point before the sweep (:meth:`TrialComposer.verify`); if the two configs differ in any way
(e.g. a swept key is a config group), every trial takes Hydra's full path.

``_apply_overrides_to_config`` is private to Hydra: it has no public call that applies parsed overrides
to a composed config (``compose`` always rebuilds the defaults tree). What it does is what Hydra does
after composing, so the fast path gives Hydra's config; :meth:`TrialComposer.verify` compares the two
before every sweep and falls back to the full path when they differ. How breakage shows:
tests/integration/test_compose.py (the fast path equals Hydra's config, the split job equals ``run_job``).

On the fast path a trial's config also comes in its two parts (:meth:`TrialComposer.split`):
the task's part, a fresh copy the task may keep, and the ``hydra`` node, one per process
and rewritten in place for each trial. Hydra's ``run_job`` copies the whole config four
times per job (twice in ``HydraConfig.set_config``, then for the task and for the
``JobReturn``); :mod:`sweeper.run.job` runs the task from the two parts without them.
:meth:`~TrialComposer.verify` allows the split only where it gives Hydra's own values,
output directory included. The rest of a trial's composition is kept short too
(NOTE: docs/decisions/0064-per-trial-job-work.md): the task's copy comes from a pickle made once
(:mod:`sweeper.run.config_copy`), the overrides of numbers from parses kept by key
(:mod:`sweeper.run.override_parse`), the output directory's interpolations from parse trees kept by
text (:mod:`sweeper.run.interpolation`).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from hydra._internal.config_loader_impl import ConfigLoaderImpl, get_overrides_dirname
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.types import HydraContext
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from sweeper.run.config_copy import ConfigCopier
from sweeper.run.interpolation import value_of
from sweeper.run.job_yaml import Path, TrialTexts
from sweeper.run.override_parse import OverrideReader


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
        self.split_ok = False  # set by verify() in the driver: split() gives Hydra's values
        self._base: DictConfig | None = None
        self._parts: _SplitBase | None = None
        self._composed: DictConfig | None = None  # compose_full([]), composed once per process
        self._overrides: OverrideReader | None = None  # parses the trials' overrides, once per process

    def __getstate__(self) -> dict[str, Any]:  # each process composes its own
        return {**self.__dict__, "_base": None, "_parts": None, "_composed": None, "_overrides": None}

    def _reader(self) -> OverrideReader:
        if getattr(self, "_overrides", None) is None:  # (a composer pickled before it had one)
            self._overrides = OverrideReader()
        assert self._overrides is not None
        return self._overrides

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
            self._base = self._composed_base()
        cfg = copy.deepcopy(self._base)
        parsed = self._reader().parse(dim_overrides)
        ConfigLoaderImpl._apply_overrides_to_config(parsed, cfg)  # noqa: SLF001 - no public call; test_compose.py
        with open_dict(cfg.hydra):
            cfg.hydra.overrides.task.extend([o.input_line for o in parsed])
            cfg.hydra.job.override_dirname = _override_dirname(
                cfg.hydra, self._reader().parse([*self.fixed_overrides, *dim_overrides]))
        OmegaConf.copy_cache(from_config=self.master_config, to_config=cfg)
        return cfg

    def split(self, dim_overrides: Sequence[str], index: int) -> TrialParts:
        """Trial ``index``'s config in two parts, and its output directory (fast path only).

        The task config is a fresh copy of the task's part of the base with the overrides
        applied, the ``DictConfig`` Hydra's ``run_job`` hands the task. The hydra config is
        ``{"hydra": ...}`` as ``HydraConfig`` holds it, read-only: this process's one copy,
        rewritten here with the trial's overrides, ``job.id``, ``job.num`` and
        ``runtime.output_dir``, and valid until the next call, like its plain-dict mirror
        ``hydra_tree`` (what ``.hydra/hydra.yaml`` holds, kept so it is not rebuilt per trial).
        """
        assert self.split_ok, "split() is the fast path; verify() did not allow it"
        if self._parts is None:
            self._parts = _SplitBase.of(copy.deepcopy(self._composed_base()), self.fixed_overrides)
            OmegaConf.copy_cache(from_config=self.master_config, to_config=self._parts.hydra)
        parts = self._parts
        task_cfg = parts.task_copier.copy()
        parsed = self._reader().parse(dim_overrides)
        ConfigLoaderImpl._apply_overrides_to_config(parsed, task_cfg)  # noqa: SLF001 - no public call; test_compose.py
        OmegaConf.copy_cache(from_config=self.master_config, to_config=task_cfg)
        hydra, tree = parts.hydra.hydra, parts.hydra_tree["hydra"]
        values = (
            [*parts.task_overrides, *(o.input_line for o in parsed)],
            _override_dirname(hydra, [*parts.fixed_parsed, *parsed]),
            f"{hydra.job.name}_{index}",
            index,
        )
        with read_write(hydra), open_dict(hydra):
            for (block, key), value in zip(_REWRITTEN[:-1], values, strict=True):
                hydra[block][key] = value
                tree[block][key] = value
            sweep = hydra.sweep  # its dir and subdir (${hydra.job.num}) are interpolations: parsed once
            output_dir = os.path.abspath(os.path.join(str(value_of(sweep, "dir")), str(value_of(sweep, "subdir"))))
            hydra.runtime.output_dir = tree["runtime"]["output_dir"] = output_dir
        return TrialParts(task_cfg, parts.hydra, output_dir, parts.hydra_tree, _changed_keys(parsed), parts.texts)

    def _composed_base(self) -> DictConfig:
        """The config without the trial's overrides, Hydra's full path, composed once in this process
        (the driver's check and its first trial config share it); callers copy it."""
        if self._composed is None:
            self._composed = self.compose_full([])
        return self._composed

    def verify(self, dim_overrides: Sequence[str]) -> bool:
        """Enable the fast path if it gives exactly Hydra's config for these overrides.

        Raises whatever Hydra raises when the overrides do not compose at all.
        """
        full = self.compose_full(dim_overrides)
        self.fast, self.split_ok, self._base, self._parts = True, False, None, None
        try:
            fast = self.compose(dim_overrides)
        except Exception:  # noqa: BLE001 - any failure just means: no shortcut
            self.fast = False
        else:
            self.fast = _tree(fast) == _tree(full)
        if self.fast:
            self.split_ok = self._split_matches(full, dim_overrides)
        self._base, self._parts = None, None
        return self.fast

    def _split_matches(self, full: DictConfig, dim_overrides: Sequence[str]) -> bool:
        """Whether :meth:`split` gives what ``run_job`` would from ``full``: the same resolved
        task config, hydra node and output directory (a swept ``hydra.*`` key, or a sweep
        directory that interpolates the task's keys, does not)."""
        if any(o.split("=", 1)[0].lstrip("+~").startswith("hydra") for o in dim_overrides):
            return False
        index = 0
        full = copy.deepcopy(full)
        with open_dict(full.hydra):
            full.hydra.job.id, full.hydra.job.num = f"{full.hydra.job.name}_{index}", index
        self.split_ok = True
        try:
            trial = self.split(dim_overrides, index)
            task_cfg, hydra_cfg, output_dir = trial.task, trial.hydra, trial.output_dir
            expected_dir = os.path.abspath(os.path.join(str(OmegaConf.select(full, "hydra.sweep.dir")),
                                                        str(OmegaConf.select(full, "hydra.sweep.subdir"))))
            with open_dict(full.hydra):
                full.hydra.runtime.output_dir = expected_dir
            expected = _tree(full, resolve=True)
            got = {**_tree(task_cfg, resolve=True), **_tree(hydra_cfg, resolve=True)}
            if trial.hydra_tree != OmegaConf.to_container(hydra_cfg, resolve=False, enum_to_str=True):
                return False
        except Exception:  # noqa: BLE001 - an interpolation the split cannot resolve: no split
            return False
        return output_dir == expected_dir and got == expected


#: The hydra node's leaves :meth:`TrialComposer.split` rewrites for each trial, as (block, key) of ``hydra``.
_REWRITTEN = (("overrides", "task"), ("job", "override_dirname"), ("job", "id"), ("job", "num"),
              ("runtime", "output_dir"))


@dataclass(frozen=True)
class TrialParts:
    """One trial's config as :func:`sweeper.run.job.run_split_job` takes it (see :meth:`TrialComposer.split`)."""

    task: DictConfig
    hydra: DictConfig
    output_dir: str
    hydra_tree: dict[str, Any]
    #: The task config's key paths the trial's overrides set (None: any key may differ from the base's).
    task_changed: tuple[Path, ...] | None = None
    #: The writer of the trials' ``.hydra/*.yaml``, one per split base: it keeps the text the trials share.
    texts: TrialTexts = field(default_factory=TrialTexts)
    #: The paths of ``hydra_tree`` that differ between trials.
    hydra_changed: tuple[Path, ...] = tuple(("hydra", *leaf) for leaf in _REWRITTEN)


@dataclass(frozen=True)
class _SplitBase:
    """A process's base config in two parts: the task's (to copy), and ``{"hydra": ...}`` with its plain mirror."""

    hydra: DictConfig
    hydra_tree: dict[str, Any]
    task_overrides: tuple[str, ...]  # hydra.overrides.task of the base: the fixed overrides
    fixed_parsed: tuple[Any, ...]  # the fixed overrides, parsed
    task_copier: ConfigCopier  # fresh copies of the task's part (sweeper.run.config_copy)
    texts: TrialTexts  # the trials' .hydra/*.yaml, with the text they share kept

    @classmethod
    def of(cls, base: DictConfig, fixed_overrides: Sequence[str]) -> _SplitBase:
        hydra = OmegaConf.masked_copy(base, "hydra")
        OmegaConf.set_readonly(hydra.hydra, True)
        task = base  # composed for this split alone: no one else holds it
        with read_write(task), open_dict(task):
            del task["hydra"]
        tree = OmegaConf.to_container(hydra, resolve=False, enum_to_str=True)
        assert isinstance(tree, dict)
        return cls(hydra, cast(dict[str, Any], tree), tuple(hydra.hydra.overrides.task),
                   tuple(OverridesParser.create().parse_overrides(list(fixed_overrides))), ConfigCopier(task),
                   TrialTexts())


def _changed_keys(parsed: Sequence[Any]) -> tuple[Path, ...] | None:
    """The task config's key paths that ``parsed`` (overrides) set; None if one names a package or group."""
    paths = []
    for override in parsed:
        key = override.key_or_group
        if override.package is not None or "/" in key or not key:
            return None
        paths.append(tuple(key.split(".")))
    return tuple(paths)


def _override_dirname(hydra: DictConfig, all_task: Sequence[Any]) -> str:
    """``hydra.job.override_dirname`` of a trial, as Hydra computes it from all its parsed task overrides."""
    dirname = hydra.job.config.override_dirname
    return get_overrides_dirname(overrides=list(all_task), kv_sep=dirname.kv_sep, item_sep=dirname.item_sep,
                                 exclude_keys=dirname.exclude_keys)


def _tree(cfg: DictConfig, resolve: bool = False) -> Any:
    tree = OmegaConf.to_container(cfg, resolve=resolve)
    assert isinstance(tree, dict)
    if "hydra" in tree:
        tree["hydra"]["runtime"].pop("cwd", None)
    return tree
