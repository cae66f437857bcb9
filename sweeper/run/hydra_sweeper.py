"""Hydra adaptor: from ``--multirun hydra/sweeper=multiverse`` to a Ray Tune run.

:class:`SweeperImpl` validates everything before Ray starts (search space, settings,
tracking URI, and one composed trial config: :mod:`sweeper.run.sweep_validation`), opens the
sweep's MLflow parent run (:mod:`sweeper.run.sweep_records`), starts or joins Ray, runs a
``ray.tune.Tuner`` with :class:`~sweeper.run.searcher.MultiverseSearch`, and writes
``optimization_results.yaml`` to the sweep directory (:mod:`sweeper.run.sweep_finish`).
"""

from __future__ import annotations

import inspect
import json
import logging
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from hydra.core.singleton import Singleton
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, ListConfig, OmegaConf

from sweeper.errors import SweeperConfigError
from sweeper.record.conditions import shipped_code
from sweeper.record.redaction import redact_overrides
from sweeper.record.spool import SPOOL_FILE
from sweeper.record.tracker_protocol import Tracker
from sweeper.record.writer_process import WriterStart
from sweeper.run.cluster import is_client_address, tune_experiment_path, tune_location
from sweeper.run.code_identity import code_warning
from sweeper.run.ray_connect import start_ray
from sweeper.run.resume import SweepManifest, current_command, reconcile
from sweeper.run.run_settings import RunSettings
from sweeper.run.stops import INTERRUPTED_STATUS
from sweeper.run.sweep_finish import RESULTS_FILE, finish, interrupted_at_once, next_commands, stopped
from sweeper.run.sweep_records import SweepOrigin, open_records
from sweeper.run.sweep_start import beside_ray, set_tune_env
from sweeper.run.sweep_validation import (
    PARAMS_KEY,
    ValidSweep,
    checked_composer,
    mlflow_problems,
    params_as_given,
    ray_problems,
    rerun_problems,
    resolved_block,
    settings_problems,
    warn_about_the_metric,
)
from sweeper.run.task_ref import task_ref
from sweeper.run.tune_checkpoints import CheckpointSettings, newest_checkpoint, storage_filesystem
from sweeper.search.configurations import configurations_changed, with_configurations
from sweeper.search.grammar import parse_search_space
from sweeper.search.settings import PolicySettings, default_num_trials
from sweeper.search.space import SearchSpace

if TYPE_CHECKING:
    from sweeper.run.recorder import TrialRecorder
    from sweeper.run.searcher import MultiverseSearch
    from sweeper.run.tune_run import TuneJob

__all__ = ["PARAMS_KEY", "RESULTS_FILE", "SweeperImpl", "fixed_values_text", "next_commands", "tune_location"]

log = logging.getLogger(__name__)

SEARCHER_STATE_FILE = "searcher_state.json"


class SweeperImpl:
    """The multiverse sweeper behind the Hydra plugin.

    The keyword arguments are the settings of ``MultiverseSweeperConf`` (hydra_plugins.multiverse_sweeper.config),
    which holds their defaults and meanings; each goes to the one layer that owns it: the search
    (:attr:`search`, a :class:`PolicySettings`), the run (:attr:`run`), the trials' checkpoints
    (:attr:`checkpoints`), or the search space (:attr:`params`). ``unknown`` holds the keys Hydra took only
    because they came with a + (``+hydra.sweeper.num_trails=8``): :meth:`_validate` reports each.
    """

    def __init__(self, *, strategy: str, metric: str, mode: str | None, n_initial: int, batch_size: int,
                 num_trials: int | None, grid_repeats: int, params: Mapping[str, Any] | None,
                 configurations: Sequence[Any] | None, rerun_of: str | None, seed: int,
                 deterministic: bool, max_failure_rate: float, stop_on_identical_failures: int | None,
                 trial_timeout_s: float | None, ucb_beta: float, n_candidates: int, n_integration: int,
                 gp_restarts: int, gp_max_fit_points: int | None, gp_refine_max_points: int | None,
                 gp_lengthscale_prior: bool, ivr_local_search: bool, ivr_slope_weight: float, ivr_mixture: bool,
                 kernel: str,
                 coregion_rank: int,
                 stop_on_bayes_factor: float | None, metric_bounds: Sequence[float | None] | None, resume: bool,
                 live_maps: bool, keep_checkpoints: int, keep_finished_checkpoints: bool, preempt_grace_s: float,
                 **unknown: Any) -> None:
        unknown.pop("_target_", None)  # Hydra's instantiation target, when a caller passes the whole node
        self.unknown = unknown
        self.params: dict[str, Any] = _plain_params(params)
        self.configurations = _plain_container(configurations)  # the space's too (sweeper.search.configurations)
        self.rerun_of = rerun_of  # the sweep's run's link to the sweep it re-runs (sweeper.run.sweep_records)
        self.run = RunSettings(metric=metric, max_failure_rate=max_failure_rate, trial_timeout_s=trial_timeout_s,
                               resume=bool(resume), live_maps=bool(live_maps))
        self.checkpoints = CheckpointSettings(keep_checkpoints=keep_checkpoints,
                                              keep_finished_checkpoints=keep_finished_checkpoints,
                                              preempt_grace_s=preempt_grace_s)
        self.mode = mode  # None: not set, so max (questioned in _validate for a loss-like metric)
        self.num_trials = num_trials  # None: not set, so resolved with the space (policy_settings)
        self.search = PolicySettings(
            strategy=strategy, mode="max" if mode is None else mode,
            num_trials=default_num_trials(strategy, None) if num_trials is None else num_trials,
            grid_repeats=grid_repeats, n_initial=n_initial, batch_size=batch_size, seed=seed,
            deterministic=deterministic, stop_on_identical_failures=stop_on_identical_failures, ucb_beta=ucb_beta,
            n_candidates=n_candidates, n_integration=n_integration, gp_restarts=gp_restarts,
            gp_max_fit_points=gp_max_fit_points, gp_refine_max_points=gp_refine_max_points,
            gp_lengthscale_prior=gp_lengthscale_prior, ivr_local_search=ivr_local_search,
            ivr_slope_weight=ivr_slope_weight, ivr_mixture=ivr_mixture, kernel=kernel,
            coregion_rank=coregion_rank, stop_on_bayes_factor=stop_on_bayes_factor,
            metric_bounds=_plain_bounds(metric_bounds))
        self.hydra_context: HydraContext | None = None
        self.task_function: TaskFunction | None = None
        self.config: DictConfig | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.hydra_context, self.task_function, self.config = hydra_context, task_function, config

    def policy_settings(self, space: SearchSpace | None) -> PolicySettings:
        """The search's settings for ``space``: ``num_trials`` unset is every point of the grid ``grid_repeats``
        times with strategy grid, 32 otherwise; ``max_failures`` follows from ``max_failure_rate``."""
        s = self.search
        num_trials = self.num_trials
        if num_trials is None:
            num_trials = default_num_trials(str(s.strategy), space,
                                            s.grid_repeats if isinstance(s.grid_repeats, int) else 1)
        return replace(s, num_trials=num_trials, max_failures=self.run.max_failures(int(num_trials)))

    # ---------------------------------------------------------------- sweep
    def sweep(self, arguments: list[str]) -> None:
        assert self.config is not None and self.hydra_context is not None and self.task_function is not None
        valid = self._validate(arguments)
        space, settings = valid.space, valid.settings
        sweep_dir = Path(str(self.config.hydra.sweep.dir)).absolute()
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")

        manifest = self._resumed_sweep(sweep_dir, space, settings) if self.run.resume else None
        log.info(
            "MultiverseSweeper(strategy=%s, metric=%s, mode=%s, n_initial=%d, batch_size=%d, num_trials=%d, "
            "seed=%d, deterministic=%s) over %s%s",
            settings.strategy, self.run.metric, settings.mode, settings.n_initial,
            settings.batch_size, settings.num_trials, settings.seed,
            settings.deterministic, ", ".join(f"{k}: {v}" for k, v in space.describe().items()),
            fixed_values_text(space),
        )
        # The MLflow writer process, forked while this process has no other thread (through Ray
        # Client the writer is a thread on the head instead). A resumed sweep keeps the store its manifest names.
        tracking_uri = manifest.tracking_uri if manifest is not None else str(valid.mlflow_cfg["tracking_uri"])
        writer_start = None if is_client_address(valid.ray_cfg.get("address")) else WriterStart.fork(
            sweep_dir / SPOOL_FILE, tracking_uri)
        # The code's warning, the sweep's MLflow run (a resumed sweep keeps the store and run its manifest
        # names) and the Tune run's imports, in a thread while Ray starts; the trials wait for them.
        origin = self._origin(arguments)
        opening = beside_ray(
            lambda: code_warning(self.task_function, self.hydra_context, self._code_dir()),
            lambda: open_records(manifest, valid.mlflow_cfg, valid.ray_cfg, space, settings, self.run, sweep_dir,
                                 origin))
        recorder, searcher = self._run_closing_on_failure(valid, opening, sweep_dir, manifest, writer_start)
        tracker, parent_run_id = opening.result()
        if recorder.suspended is not None:
            stopped(tracker, parent_run_id, recorder, sweep_dir, settings, self.run)
        finish(tracker, parent_run_id, recorder, searcher, sweep_dir, settings, self.run)

    def _run_closing_on_failure(self, valid: ValidSweep, opening: Future[tuple[Tracker, str]], sweep_dir: Path,
                                manifest: SweepManifest | None,
                                writer_start: WriterStart | None) -> tuple[TrialRecorder, MultiverseSearch]:
        """Run the trials; if that raises, close the sweep's run FAILED (KILLED on a second Ctrl-C) first."""
        status = "FAILED"  # what the sweep's run is closed as if the trials' run raises
        try:
            recorder, searcher = self._run_tune(valid, opening, sweep_dir, manifest, writer_start)
            status = "ENDED"
        except KeyboardInterrupt:  # a second Ctrl-C: at once, without Tune's last save
            status = "KILLED"
            interrupted_at_once(sweep_dir)
        finally:
            if writer_start is not None:
                writer_start.discard()  # unless the sweep's writer adopted it
            if status != "ENDED":
                try:
                    tracker, parent_run_id = opening.result()
                    if status == "KILLED":
                        tracker.log(parent_run_id, tags={"status": INTERRUPTED_STATUS})
                    tracker.finish(parent_run_id, status)
                except Exception as exc:  # noqa: BLE001 - never hide why the sweep ended
                    log.error("could not mark the sweep's MLflow run %s: %s", status, exc)
        return recorder, searcher

    # ---------------------------------------------------------------- validation
    def _validate(self, arguments: list[str]) -> ValidSweep:
        """Check everything that can be checked before Ray starts; raise once with every problem."""
        from hydra_plugins.multiverse_sweeper.config import unknown_setting_problem

        assert self.config is not None and self.hydra_context is not None
        problems: list[str] = [unknown_setting_problem(k, v) for k, v in self.unknown.items()]
        space: SearchSpace | None = None
        composer = None
        try:
            space = parse_search_space(params_as_given(self.params, self.config), arguments)
        except SweeperConfigError as exc:
            problems.extend(exc.problems)
        try:
            space = with_configurations(space, self.configurations, strategy=str(self.search.strategy))
            composer = checked_composer(self.hydra_context, self.config, space) if space is not None else None
        except SweeperConfigError as exc:
            problems.extend(exc.problems)
            space = None
        settings = self.policy_settings(space)
        problems.extend(settings_problems(settings, self.run, self.checkpoints, space))
        warn_about_the_metric(self.run.metric, self.mode, self.search.metric_bounds)
        ray_block = resolved_block(self.config, "ray")
        problems.extend(ray_problems(ray_block))
        mlflow_block = resolved_block(self.config, "mlflow")
        problems.extend(mlflow_problems(mlflow_block) or rerun_problems(self.rerun_of, mlflow_block))
        if problems:
            raise SweeperConfigError(problems)
        assert space is not None and composer is not None
        return ValidSweep(space, composer, settings, ray_block, mlflow_block)

    def _resumed_sweep(self, sweep_dir: Path, space: SearchSpace, settings: PolicySettings) -> SweepManifest:
        """The manifest of the sweep in ``sweep_dir``, if this command may continue it."""
        manifest = SweepManifest.load(sweep_dir)
        problems = manifest.problems(space, settings.strategy, settings.seed, settings.num_trials)
        changed = configurations_changed(SearchSpace.from_dict(manifest.space), space)
        problems += [changed] if changed else []
        if problems:
            raise SweeperConfigError([f"cannot resume the sweep in {sweep_dir}: {p}" for p in problems])
        return manifest

    def _origin(self, arguments: list[str]) -> SweepOrigin:
        assert self.config is not None and self.hydra_context is not None and self.task_function is not None
        return SweepOrigin(self.config, self.hydra_context, self.task_function, self._code_dir(), arguments,
                           self.rerun_of)

    def _code_dir(self) -> str | None:
        try:
            source = inspect.getsourcefile(self.task_function)  # type: ignore[arg-type]  # None: TypeError, below
        except TypeError:
            return None
        return str(Path(source).parent) if source else None

    # ---------------------------------------------------------------- Ray Tune
    def _run_tune(self, valid: ValidSweep, opening: Future[tuple[Tracker, str]], sweep_dir: Path,
                  manifest: SweepManifest | None = None,
                  writer_start: WriterStart | None = None) -> tuple[TrialRecorder, MultiverseSearch]:
        set_tune_env()
        import ray

        from sweeper.run.tune_run import run_on_head, run_tune

        client = is_client_address(valid.ray_cfg.get("address"))
        started_ray, env = start_ray(valid.ray_cfg, self._code_dir(), client)
        try:
            tracker, parent_run_id = opening.result()
            job = self._tune_job(valid, env, tracker, parent_run_id, sweep_dir, manifest, writer_start)
            recorder, searcher = run_on_head(job) if client else run_tune(job)
            (sweep_dir / SEARCHER_STATE_FILE).write_text(json.dumps(searcher.get_state()), encoding="utf-8")
            return recorder, searcher
        finally:
            if started_ray:
                ray.shutdown()

    def _tune_job(self, valid: ValidSweep, env: dict[str, Any], tracker: Tracker, parent_run_id: str,
                  sweep_dir: Path, manifest: SweepManifest | None, writer_start: WriterStart | None) -> TuneJob:
        """The sweep's Tune run: a new experiment, or a resumed sweep's restored from its manifest and MLflow."""
        from sweeper.run.trial import TrialContext
        from sweeper.run.tune_run import TuneJob

        assert self.hydra_context is not None and self.task_function is not None
        space, settings, metric = valid.space, valid.settings, self.run.metric
        ctx = TrialContext(
            hydra_context=self.hydra_context,
            composer=valid.composer,
            task_function=task_ref(self.task_function, env.get("working_dir")),
            singleton_state=Singleton.get_state(),
            space=space,
            metric=metric,
            metric_bounds=settings.bounds,
            code_dir=self._code_dir(),
            shipped_code=shipped_code(env.get("working_dir"), self._code_dir()),
            launch_dir=os.getcwd(),
        )
        ledger = None
        tune_storage: str | None
        if manifest is not None:
            fs = storage_filesystem(manifest.tune_path)[0]
            ledger = reconcile(tracker, parent_run_id, lambda folder: newest_checkpoint(fs, [folder]) is not None)
            tune_storage, tune_name = str(Path(manifest.tune_path).parent), Path(manifest.tune_path).name
            ctx.replayed = {i: ledger.result_of(i, metric) for i in ledger.records(space, metric)}
            log.info("MLflow holds %d ended trials (not run again); %d trials in flight continue from their "
                     "checkpoints; %d runs left RUNNING were closed as KILLED and their trials run again",
                     len(ledger.ended), len(ledger.in_flight), len(ledger.killed))
        else:
            tune_storage, tune_name = tune_location(valid.ray_cfg, sweep_dir, parent_run_id)
            tune_path = tune_experiment_path(tune_storage, tune_name)
            SweepManifest(parent_run_id, tracker.tracking_uri, tracker.experiment_name, tune_path,
                          space.to_dict(), settings.strategy, settings.seed, settings.num_trials,
                          current_command(), os.getcwd()).save(sweep_dir)
        return TuneJob(space, settings, self.run, valid.ray_cfg, tracker, parent_run_id, ctx, tune_storage,
                       tune_name, ledger, str(sweep_dir / SPOOL_FILE), checkpoints=self.checkpoints,
                       writer_start=writer_start)


def _plain_params(params: Mapping[str, Any] | None) -> dict[str, Any]:
    """``hydra.sweeper.params`` as a plain dict, its ``${...}`` kept as typed (the grammar reads them)."""
    if isinstance(params, DictConfig):
        return cast(dict[str, Any], OmegaConf.to_container(params, resolve=False))  # a DictConfig gives a dict
    return dict(params or {})


def _plain_container(value: Any) -> Any:
    """A setting's list or mapping as plain Python (OmegaConf's containers as lists and dicts), its ``${...}`` kept
    as typed, as in ``params``: a trial's config resolves them."""
    return OmegaConf.to_container(value, resolve=False) if isinstance(value, DictConfig | ListConfig) else value


def _plain_bounds(bounds: Sequence[float | None] | None) -> Sequence[float | None] | None:
    """``hydra.sweeper.metric_bounds`` as a plain list: PolicySettings records and compares it."""
    if isinstance(bounds, ListConfig):
        plain = OmegaConf.to_container(bounds, resolve=True)
        assert isinstance(plain, list)
        return plain
    return bounds


def fixed_values_text(space: SearchSpace) -> str:
    """The start line's tail naming the values every trial shares (the overrides that sweep nothing)."""
    return f"; fixed: {' '.join(redact_overrides(space.fixed_overrides))}" if space.fixed_overrides else ""
