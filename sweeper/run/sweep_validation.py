"""What the sweeper checks before Ray starts: the settings, one composed trial config, Ray's and MLflow's blocks.

Each function returns the problems it finds (or raises :class:`~sweeper.errors.SweeperConfigError` where
nothing after it could be checked); ``SweeperImpl._validate`` (sweeper.run.hydra_sweeper) gathers them and
raises once with every problem: the unknown settings, the search space and a composed trial config, the
settings, the ``ray`` block, then the ``mlflow`` block.
"""

from __future__ import annotations

import copy
import logging
import math
import sys
from dataclasses import dataclass
from typing import Any, cast

from hydra.types import HydraContext
from omegaconf import DictConfig, OmegaConf

from sweeper.environment import ENV_KEY, env_problems
from sweeper.errors import SweeperConfigError
from sweeper.record.redaction import redact_text
from sweeper.record.spool import retry_delays
from sweeper.run.cluster import address_problem
from sweeper.run.compose import TrialComposer
from sweeper.run.ray_connect import unreachable
from sweeper.run.run_settings import PREFIX, RunSettings
from sweeper.run.tune_checkpoints import CheckpointSettings
from sweeper.search.direction import bounds_warning, direction_warning
from sweeper.search.settings import PolicySettings
from sweeper.search.space import SearchSpace

log = logging.getLogger(__name__)

PARAMS_KEY = "hydra.sweeper.params"


@dataclass(frozen=True)
class ValidSweep:
    """A sweep that passed every check: its space, the trials' composer, the search's settings, and the
    resolved ``ray`` and ``mlflow`` blocks."""

    space: SearchSpace
    composer: TrialComposer
    settings: PolicySettings
    ray_cfg: dict[str, Any]
    mlflow_cfg: dict[str, Any]


def settings_problems(settings: PolicySettings, run: RunSettings, checkpoints: CheckpointSettings,
                      space: SearchSpace | None) -> list[str]:
    """The problems of the ``hydra.sweeper.*`` settings, each layer's in the order they are printed."""
    return [*run.problems(PREFIX, ("max_failure_rate",)),
            *settings.search_problems(space, prefix=PREFIX),
            *run.problems(PREFIX, ("trial_timeout_s",)),
            *settings.model_problems(space, prefix=PREFIX),
            *checkpoints.problems(prefix=PREFIX),
            *run.problems(PREFIX, ("metric",))]


def warn_about_the_metric(metric: str, mode: str | None, bounds: Any) -> None:
    """Log a warning for a loss-like metric maximised by default, and for bounds that do not fit its name."""
    for warning in (direction_warning(str(metric), mode), bounds_warning(str(metric), bounds)):
        if warning:
            log.warning(warning)


def ray_problems(ray_block: dict[str, Any]) -> list[str]:
    """The problems of the resolved ``ray`` block: each trial's resources, then the address."""
    problems = []
    resources = ray_block.get("resources_per_trial") or {}
    amounts = {"cpu": resources.get("cpu"), "gpu": resources.get("gpu"),
               **{f"custom.{k}": v for k, v in (resources.get("custom") or {}).items()}}
    for name, amount in amounts.items():
        key = f"ray.resources_per_trial.{name}"
        if isinstance(amount, bool) or not isinstance(amount, int | float) or not 0 <= amount < math.inf:
            problems.append(f"{key}={amount!r} is invalid: a trial reserves a finite amount >= 0. "
                            f"Try {key}={1 if name == 'cpu' else 0}.")
    if all(isinstance(a, int | float) and a == 0 for a in amounts.values()):
        problems.append("ray.resources_per_trial reserves nothing (cpu=0, gpu=0): Ray cannot place a trial "
                        "that needs no resource. Try ray.resources_per_trial.cpu=1.")
    ray_problem = address_problem(ray_block.get("address"))
    if ray_problem:
        problems.append(ray_problem + ".")
    elif not ("ray" in sys.modules and sys.modules["ray"].is_initialized()):  # else the address is not used
        ray_problem = unreachable(ray_block.get("address"))
        if ray_problem:
            problems.append(ray_problem)
    return problems


def mlflow_problems(mlflow_block: dict[str, Any]) -> list[str]:
    """The problems of the tracking URI (its form, then the store behind it) and of the retry delays."""
    from sweeper.record.store_check import store_problem
    from sweeper.record.tracking_uri import tracking_uri_problem

    problems = []
    uri = str(mlflow_block["tracking_uri"])
    uri_problem = tracking_uri_problem(uri)
    if uri_problem:
        problems.append(f"mlflow.tracking_uri={redact_text(uri)!r} is invalid: {uri_problem}.")
    elif store := store_problem(uri):  # the server answers, the file can be written: before Ray starts
        problems.append(redact_text(f"mlflow.tracking_uri={uri!r}: {store}."))
    try:
        retry_delays()
    except ValueError as exc:
        problems.append(str(exc))
    return problems


def rerun_problems(rerun_of: Any, mlflow_block: dict[str, Any]) -> list[str]:
    """The problem of ``hydra.sweeper.rerun_of``: not a run id, or no sweep's run of that id in the sweep's store.

    Read without MLflow (:mod:`sweeper.record.run_lookup`): the driver forks its writer after this, which must
    not share a store the driver opened. A store that cannot be asked so (a database server, a server wanting
    credentials) is not checked here; the link's tag then says whether it was found (``link_rerun``).
    """
    from sweeper.record.run_lookup import FOUND, MISSING, UNKNOWN, sweep_run_state
    from sweeper.record.tracking_uri import absolute_tracking_uri

    if rerun_of is None:
        return []
    key = f"{PREFIX}rerun_of"
    if not isinstance(rerun_of, str) or not rerun_of.isalnum():
        return [f"{key}={rerun_of!r} is invalid: the MLflow run id of a sweep (its parent run, e.g. from `sweeper "
                f"trials --experiment NAME`). Try {key}=null."]
    uri = absolute_tracking_uri(str(mlflow_block["tracking_uri"]))
    state = sweep_run_state(uri, rerun_of)
    if state in (FOUND, UNKNOWN):
        return []
    what = "no run" if state == MISSING else "a run that is not a sweep's (no tag sweeper.role=sweep)"
    return [redact_text(f"{key}={rerun_of}: the store {uri} holds {what} of that id. Give the parent run id of a "
                        f"sweep recorded there (`sweeper trials --experiment NAME --tracking-uri {uri}` shows it), "
                        f"or {key}=null.")]


def params_as_given(params: dict[str, Any], config: DictConfig) -> dict[str, Any]:
    """``hydra.sweeper.params`` as the command line leaves it.

    Hydra merges ``hydra.sweeper.params={...}`` into the YAML's mapping, so ``{}`` would change nothing:
    here the last such override replaces the YAML's entries instead (``{}`` or ``null`` clears them), as
    the docs say, and ``hydra.sweeper.params.KEY=...`` given after it adds to it.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser

    kept: set[str] | None = None  # None: no override of the whole mapping
    texts = OmegaConf.to_container(config.hydra.overrides.hydra, resolve=False)  # as typed: ${...} kept
    assert isinstance(texts, list)
    ours = [str(t) for t in texts if str(t).lstrip("+~").startswith(PARAMS_KEY)]
    for override in OverridesParser.create().parse_overrides(ours):
        key = override.key_or_group
        if key == PARAMS_KEY and not override.is_delete():
            value = override.value()
            kept = set(value) if isinstance(value, dict) else set()
        elif kept is not None and key.startswith(PARAMS_KEY + "."):
            rest = key[len(PARAMS_KEY) + 1:]
            kept.update((rest, rest.split(".")[0]))
    return params if kept is None else {k: v for k, v in params.items() if k in kept}


def checked_composer(hydra_context: HydraContext, config: DictConfig, space: SearchSpace) -> TrialComposer:
    """Compose the config of the space's centre point, as every trial will, before Ray starts.

    Also decides whether trials may take the fast composition path (see sweeper.run.compose).
    """
    composer = TrialComposer(hydra_context, config, space.fixed_overrides)
    point = space.from_unit([0.5] * space.d)[0]
    overrides = space.to_overrides(point)
    try:
        fast = composer.verify(space.dim_overrides(point))
    except Exception as exc:  # Hydra raises several types; all mean the same
        raise SweeperConfigError(
            f"a trial config does not compose with the overrides {overrides}: {exc}. Check that every "
            f"swept key exists in the task's config (prefix a new key with +, e.g. +{space.names[0]}=...)."
        ) from exc
    log.debug("trial configs composed %s", "once per worker, then overridden" if fast else "in full")
    trial_cfg = composer.compose(space.dim_overrides(point))
    problems = output_dir_problems(trial_cfg)
    env = trial_cfg.get(ENV_KEY)
    if isinstance(env, DictConfig):
        env_values = OmegaConf.to_container(env, resolve=True)
        assert isinstance(env_values, dict)
        problems += env_problems(cast(dict[str, Any], env_values), space)  # a config node's keys are strings
    if problems:
        raise SweeperConfigError(problems)
    return composer


def resolved_block(config: DictConfig, name: str) -> dict[str, Any]:
    """The top-level ``ray`` or ``mlflow`` block, resolved, with defaults for what is absent.

    Resolved in the driver, where Hydra has not set its ``HydraConfig`` (it does that per
    job): the sweep's config stands in for it, so ``${hydra:job.name}`` and the like resolve
    as in a job, and ``${...}`` into the app's config resolve against its root. What still
    cannot resolve is a :class:`SweeperConfigError` naming the key.
    """
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict
    from omegaconf.errors import OmegaConfBaseException

    from hydra_plugins.multiverse_sweeper.config import MLflowConf, RayConf

    default = OmegaConf.structured(RayConf if name == "ray" else MLflowConf)
    given = config.get(name)
    merged = OmegaConf.merge(default, given) if given is not None else default
    root = copy.copy(config)  # the app's config with the merged block in place, for interpolations
    with open_dict(root):
        root[name] = merged
    if not HydraConfig.initialized():
        HydraConfig.instance().set_config(config)
    try:
        block = OmegaConf.to_container(root[name], resolve=True)
    except OmegaConfBaseException as exc:
        key = str(getattr(exc, "full_key", None) or name)
        raise SweeperConfigError(
            f"{key} cannot be resolved: {str(exc).splitlines()[0]}. Give it a plain value (e.g. "
            f"{key}=...) or an interpolation that resolves in the app's config.") from None
    resolved = cast(dict[str, Any], block)  # a structured config's node: a dict with str keys
    if name == "mlflow" and resolved.get("experiment_name") in (None, ""):
        resolved["experiment_name"] = str(config.hydra.job.name)
    return resolved


def output_dir_problems(trial_cfg: DictConfig) -> list[str]:
    """Resolve the first trial's ``hydra.sweep.dir`` and ``hydra.sweep.subdir`` as its job will (Hydra's basic
    sweeper fails at once on one that cannot be; here it would fail every trial after Ray started)."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    cfg = copy.deepcopy(trial_cfg)
    with open_dict(cfg.hydra):
        cfg.hydra.job.id, cfg.hydra.job.num = f"{cfg.hydra.job.name}_0", 0  # what the first job gets
    hydra_config = HydraConfig.instance()
    saved = hydra_config.cfg
    hydra_config.set_config(cfg)  # ${hydra:...} resolves against the job's config, as in the job
    problems = []
    try:
        for key, example in (("hydra.sweep.dir", "multirun/sweep"), ("hydra.sweep.subdir", "'${hydra.job.num}'")):
            try:
                str(OmegaConf.select(cfg, key, throw_on_missing=True))
            except Exception as exc:  # noqa: BLE001 - OmegaConf and resolvers raise several types
                sweep = OmegaConf.to_container(cfg.hydra.sweep, resolve=False)
                assert isinstance(sweep, dict)
                text = sweep[key.rsplit(".", 1)[1]]
                problems.append(f"{key}={text!r} cannot be resolved for a trial: {str(exc).splitlines()[0]}. "
                                f"Give it a value that resolves, e.g. {key}={example}.")
    finally:
        hydra_config.cfg = saved
    return problems
