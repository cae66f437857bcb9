"""Hydra adaptor: from ``--multirun hydra/sweeper=multiverse`` to a Ray Tune run.

:class:`SweeperImpl` validates everything before Ray starts (search space, settings,
tracking URI, and one composed trial config), opens the sweep's MLflow parent run, starts
or joins Ray, runs a ``ray.tune.Tuner`` with :class:`~sweeper.run.searcher.MultiverseSearch`,
and writes ``optimization_results.yaml`` to the sweep directory.
"""

from __future__ import annotations

import copy
import inspect
import json
import logging
import math
import os
import shlex
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

from hydra.core.singleton import Singleton
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, ListConfig, OmegaConf

from sweeper.environment import ENV_KEY, env_problems
from sweeper.errors import RecordsIncomplete, SweeperConfigError, TrialFailuresExceeded
from sweeper.record.conditions import capture_conditions, shipped_code
from sweeper.record.note import NOTE_TAG, render_note
from sweeper.record.redaction import redact_overrides, redact_text
from sweeper.record.spool import SPOOL_FILE, DurableWriter, retry_delays
from sweeper.record.writer_process import WriterStart
from sweeper.run.checkpoints import CheckpointSettings, newest_checkpoint, storage_filesystem
from sweeper.run.cluster import address_problem, is_client_address, storage_path, tune_experiment_path
from sweeper.run.code_identity import code_conditions, code_warning
from sweeper.run.compose import TrialComposer
from sweeper.run.outcome import SweepOutcome, format_params, records_gap
from sweeper.run.ray_connect import start_ray, unreachable
from sweeper.run.resume import SweepManifest, current_command, reconcile
from sweeper.run.stops import INTERRUPTED_EXIT_STATUS, INTERRUPTED_STATUS, PREEMPTED_EXIT_STATUS, PREEMPTED_STATUS
from sweeper.run.task_ref import task_ref
from sweeper.search.calibration import sweep_prospective_check
from sweeper.search.direction import bounds_warning, direction_warning
from sweeper.search.grammar import parse_search_space
from sweeper.search.settings import PolicySettings, default_num_trials
from sweeper.search.space import SearchSpace

log = logging.getLogger(__name__)

RESULTS_FILE = "optimization_results.yaml"
PARAMS_KEY = "hydra.sweeper.params"
SEARCHER_STATE_FILE = "searcher_state.json"

# Ray Tune behaviour the sweeper relies on; set before Tune is imported.
_TUNE_ENV = {
    "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1",  # MLflow is the record: no Tune result logs
    "TUNE_DISABLE_STRICT_METRIC_CHECKING": "1",  # per-step results carry no objective
    "RAY_CHDIR_TO_TRIAL_DIR": "0",  # tasks see the launch directory, as in a plain Hydra run
    "RAY_AIR_NEW_OUTPUT": "0",
    # Tune saves its experiment state whenever a trial has checkpointed keep_checkpoints times since the last
    # save, and warns when that is more than every 5 s: with one checkpoint per epoch, it is meant to.
    "TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S": "0",
}


class SweeperImpl:
    """The multiverse sweeper behind the Hydra plugin (see ``MultiverseSweeperConf``)."""

    def __init__(self, **settings: Any) -> None:
        settings.pop("_target_", None)
        params = settings.pop("params", None)
        self.params: dict[str, Any] = (
            OmegaConf.to_container(params, resolve=False) if isinstance(params, DictConfig) else dict(params or {})
        )  # type: ignore[assignment]
        self.metric: str = settings.pop("metric")
        self.max_failure_rate: float = settings.pop("max_failure_rate")
        self.resume: bool = bool(settings.pop("resume", False))
        self.live_maps: bool = bool(settings.pop("live_maps", True))
        self.checkpoints = CheckpointSettings(**{k: settings.pop(k) for k in CheckpointSettings.__dataclass_fields__
                                                 if k in settings})
        # Keys Hydra took only because they came with a + (e.g. +hydra.sweeper.num_trails=8): reported in _validate.
        self.unknown = {k: settings.pop(k) for k in list(settings) if k not in PolicySettings.__dataclass_fields__}
        bounds = settings.get("metric_bounds")
        if isinstance(bounds, ListConfig):  # a plain list: PolicySettings records and compares it
            settings["metric_bounds"] = OmegaConf.to_container(bounds, resolve=True)
        self.settings = settings  # the rest are PolicySettings fields
        self.hydra_context: HydraContext | None = None
        self.task_function: TaskFunction | None = None
        self.config: DictConfig | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.hydra_context, self.task_function, self.config = hydra_context, task_function, config

    # ---------------------------------------------------------------- sweep
    def sweep(self, arguments: list[str]) -> None:
        assert self.config is not None and self.hydra_context is not None and self.task_function is not None
        space, composer, policy_settings, ray_cfg, mlflow_cfg = self._validate(arguments)
        sweep_dir = Path(str(self.config.hydra.sweep.dir)).absolute()
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")

        manifest = self._resumed_sweep(sweep_dir, space, policy_settings) if self.resume else None
        log.info(
            "MultiverseSweeper(strategy=%s, metric=%s, mode=%s, n_initial=%d, batch_size=%d, num_trials=%d, "
            "seed=%d, deterministic=%s) over %s%s",
            policy_settings.strategy, self.metric, policy_settings.mode, policy_settings.n_initial,
            policy_settings.batch_size, policy_settings.num_trials, policy_settings.seed,
            policy_settings.deterministic, ", ".join(f"{k}: {v}" for k, v in space.describe().items()),
            fixed_values_text(space),
        )
        if (unidentified := code_warning(self.task_function, self.hydra_context, self._code_dir())) is not None:
            log.warning(unidentified)
        # The MLflow writer process, forked while this process has no other thread (through Ray
        # Client the writer is a thread on the head instead).
        # A resumed sweep keeps the store and run its manifest names.
        tracking_uri = manifest.tracking_uri if manifest is not None else str(mlflow_cfg["tracking_uri"])
        writer_start = None if is_client_address(ray_cfg.get("address")) else WriterStart.fork(
            sweep_dir / SPOOL_FILE, tracking_uri)
        # MLflow's store (its schema migrations on a new SQLite file take seconds) and the
        # sweep's run open in a thread while Ray starts; the trials wait for both.
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mlflow-open")
        opening = pool.submit(self._open_records, manifest, mlflow_cfg, ray_cfg, space, policy_settings, sweep_dir,
                              arguments)
        pool.shutdown(wait=False)
        status = "FAILED"  # what the sweep's run is closed as if the trials' run raises
        try:
            recorder, searcher = self._run_tune(space, composer, policy_settings, ray_cfg, opening, sweep_dir,
                                               manifest, writer_start)
            status = "ENDED"
        except KeyboardInterrupt:  # a second Ctrl-C: at once, without Tune's last save
            status = "KILLED"
            self._interrupted_at_once(sweep_dir)
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
        tracker, parent_run_id = opening.result()
        if recorder.suspended is not None:
            self._stopped(tracker, parent_run_id, recorder, sweep_dir, policy_settings)
        self._finish(tracker, parent_run_id, recorder, searcher, sweep_dir, policy_settings)

    # ---------------------------------------------------------------- validation
    def _validate(self, arguments: list[str]) -> tuple[SearchSpace, TrialComposer, PolicySettings, dict[str, Any],
                                                       dict[str, Any]]:
        """Check everything that can be checked before Ray starts; raise once with every problem.

        Returns the space, the trials' composer, the policy's settings and the resolved ``ray`` and ``mlflow``
        blocks.
        """
        from hydra_plugins.multiverse_sweeper.config import unknown_setting_problem

        problems: list[str] = [unknown_setting_problem(k, v) for k, v in self.unknown.items()]
        space: SearchSpace | None = None
        composer: TrialComposer | None = None
        try:
            space = parse_search_space(self._params(), arguments)
            composer = self._composer(space)
        except SweeperConfigError as exc:
            problems.extend(exc.problems)
        grid_repeats = self.settings.get("grid_repeats", 1)
        if self.settings.get("num_trials") is None:  # unset: 32, or every point of the grid
            self.settings["num_trials"] = default_num_trials(str(self.settings.get("strategy")), space,
                                                             grid_repeats if isinstance(grid_repeats, int) else 1)
        num_trials = int(self.settings["num_trials"])
        if not 0.0 <= self.max_failure_rate <= 1.0:
            problems.append(
                f"hydra.sweeper.max_failure_rate={self.max_failure_rate!r} is invalid: it is a fraction "
                f"between 0 and 1. Try hydra.sweeper.max_failure_rate=0.5."
            )
        max_failures = math.floor(min(max(self.max_failure_rate, 0.0), 1.0) * num_trials)
        mode = self.settings.get("mode")  # None: not set, so max (questioned below for a loss-like metric)
        settings = PolicySettings(**{**self.settings, "mode": "max" if mode is None else mode},
                                  max_failures=max_failures)
        problems.extend(settings.problems(space, prefix="hydra.sweeper."))
        problems.extend(self.checkpoints.problems(prefix="hydra.sweeper."))
        if not self.metric or not str(self.metric).strip():
            problems.append(f"hydra.sweeper.metric={self.metric!r} is invalid: name the key of the task's returned "
                            f"dict to model (a plain number returned is named by it). "
                            f"Try hydra.sweeper.metric=objective.")
        for warning in (direction_warning(str(self.metric), mode),
                        bounds_warning(str(self.metric), self.settings.get("metric_bounds"))):
            if warning:
                log.warning(warning)
        from sweeper.record.store_check import store_problem
        from sweeper.record.tracking_uri import tracking_uri_problem

        ray_block = self._block("ray")
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
        mlflow_block = self._block("mlflow")
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
        if problems:
            raise SweeperConfigError(problems)
        assert space is not None and composer is not None
        return space, composer, settings, ray_block, mlflow_block

    def _params(self) -> dict[str, Any]:
        """``hydra.sweeper.params`` as the command line leaves it.

        Hydra merges ``hydra.sweeper.params={...}`` into the YAML's mapping, so ``{}`` would change nothing:
        here the last such override replaces the YAML's entries instead (``{}`` or ``null`` clears them), as
        the docs say, and ``hydra.sweeper.params.KEY=...`` given after it adds to it.
        """
        assert self.config is not None
        from hydra.core.override_parser.overrides_parser import OverridesParser

        kept: set[str] | None = None  # None: no override of the whole mapping
        texts = OmegaConf.to_container(self.config.hydra.overrides.hydra, resolve=False)  # as typed: ${...} kept
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
        return self.params if kept is None else {k: v for k, v in self.params.items() if k in kept}

    def _composer(self, space: SearchSpace) -> TrialComposer:
        """Compose the config of the space's centre point, as every trial will, before Ray starts.

        Also decides whether trials may take the fast composition path (see sweeper.run.compose).
        """
        assert self.hydra_context is not None and self.config is not None
        composer = TrialComposer(self.hydra_context, self.config, space.fixed_overrides)
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
        problems = _output_dir_problems(trial_cfg)
        env = trial_cfg.get(ENV_KEY)
        if isinstance(env, DictConfig):
            problems += env_problems(OmegaConf.to_container(env, resolve=True), space)  # type: ignore[arg-type]
        if problems:
            raise SweeperConfigError(problems)
        return composer

    def _block(self, name: str) -> dict[str, Any]:
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

        assert self.config is not None
        default = OmegaConf.structured(RayConf if name == "ray" else MLflowConf)
        given = self.config.get(name)
        merged = OmegaConf.merge(default, given) if given is not None else default
        root = copy.copy(self.config)  # the app's config with the merged block in place, for interpolations
        with open_dict(root):
            root[name] = merged
        if not HydraConfig.initialized():
            HydraConfig.instance().set_config(self.config)
        try:
            block: dict[str, Any] = OmegaConf.to_container(root[name], resolve=True)  # type: ignore[assignment]
        except OmegaConfBaseException as exc:
            key = str(getattr(exc, "full_key", None) or name)
            raise SweeperConfigError(
                f"{key} cannot be resolved: {str(exc).splitlines()[0]}. Give it a plain value (e.g. "
                f"{key}=...) or an interpolation that resolves in the app's config.") from None
        if name == "mlflow" and block.get("experiment_name") in (None, ""):
            block["experiment_name"] = str(self.config.hydra.job.name)
        return block

    # ---------------------------------------------------------------- MLflow parent run
    def _open_records(self, manifest: SweepManifest | None, mlflow_cfg: dict[str, Any], ray_cfg: dict[str, Any],
                      space: SearchSpace, settings: PolicySettings, sweep_dir: Path,
                      arguments: list[str]) -> tuple[Any, str]:
        """The MLflow tracker and the sweep's run: a resumed sweep's (``manifest``), reopened, or a new one
        in the resolved ``mlflow`` block's experiment."""
        from sweeper.record.tracking import MLflowTracker

        if manifest is not None:
            tracker = MLflowTracker(manifest.tracking_uri, manifest.experiment_name)
            parent_run_id = manifest.parent_run_id
            tracker.reopen(parent_run_id)
            log.info("Resuming the sweep of %s (MLflow run %s)", sweep_dir, parent_run_id)
        else:
            tracker = MLflowTracker(str(mlflow_cfg["tracking_uri"]), str(mlflow_cfg["experiment_name"]))
            parent_run_id = self._start_parent_run(tracker, ray_cfg, space, settings, sweep_dir, arguments)
        # Its link now, not only at the end: the run shows the trials and the live maps as they come.
        log.info("MLflow: experiment %r at %s, sweep run %s (in the MLflow UI: %s)", tracker.experiment_name,
                 tracker.tracking_uri, parent_run_id, tracker.run_url(parent_run_id))
        return tracker, parent_run_id

    def _start_parent_run(self, tracker: Any, ray_cfg: dict[str, Any], space: SearchSpace, settings: PolicySettings,
                          sweep_dir: Path, arguments: list[str]) -> str:
        # Credentials in the config or on the command line never reach the records: the
        # tracker redacts every param and tag; the command line is redacted argument by
        # argument (exact where free text must guess), the config as a tree.
        from sweeper.record.redaction import redact_overrides, redact_tree, redact_yaml_config

        assert self.config is not None
        run_id: str = tracker.start_run(
            f"{self.config.hydra.job.name}-{time.strftime('%Y%m%d-%H%M%S')}",
            params={
                **{k: v for k, v in asdict(settings).items()},
                "metric": self.metric,
                "max_failure_rate": self.max_failure_rate,
                **{f"space.{k}": v for k, v in space.describe().items()},
                "fixed_overrides": " ".join(redact_overrides(space.fixed_overrides)),
            },
            tags={
                "role": "sweep",
                "strategy": settings.strategy,
                "sweep_dir": str(sweep_dir),
                "command": " ".join([Path(sys.argv[0]).name, *redact_overrides(sys.argv[1:])]),
                "overrides": " ".join(redact_overrides(arguments)),
                **{f"driver.{k}": v for k, v in capture_conditions(self._code_dir()).items()},
                **{f"driver.{k}": v for k, v in code_conditions(self.task_function, self.hydra_context).items()},
            },
        )
        storage, name = tune_location(ray_cfg, sweep_dir, run_id)
        tracker.log(run_id, tags={"tune_experiment": tune_experiment_path(storage, name)})
        tracker.log_text(run_id, redact_yaml_config(self.config), "multirun.yaml")
        tracker.log_text(run_id, json.dumps(redact_tree(space.to_dict()), indent=2), "search_space.json")
        return run_id

    def _code_dir(self) -> str | None:
        try:
            source = inspect.getsourcefile(self.task_function)  # type: ignore[arg-type]
        except TypeError:
            return None
        return str(Path(source).parent) if source else None

    # ---------------------------------------------------------------- Ray Tune
    def _run_tune(self, space: SearchSpace, composer: TrialComposer, settings: PolicySettings,
                  ray_cfg: dict[str, Any], opening: Future[tuple[Any, str]], sweep_dir: Path,
                  manifest: SweepManifest | None = None, writer_start: WriterStart | None = None) -> tuple[Any, Any]:
        for key, value in _TUNE_ENV.items():
            os.environ.setdefault(key, value)
        import ray

        from sweeper.run.trial import TrialContext
        from sweeper.run.tune_run import TuneJob, run_on_head, run_tune

        client = is_client_address(ray_cfg.get("address"))
        started_ray, env = start_ray(ray_cfg, self._code_dir(), client)
        try:
            tracker, parent_run_id = opening.result()
            ctx = TrialContext(
                hydra_context=self.hydra_context,  # type: ignore[arg-type]
                composer=composer,
                task_function=task_ref(self.task_function, env.get("working_dir")),  # type: ignore[arg-type]
                singleton_state=Singleton.get_state(),
                space=space,
                metric=self.metric,
                metric_bounds=settings.bounds,
                code_dir=self._code_dir(),
                shipped_code=shipped_code(env.get("working_dir"), self._code_dir()),
                launch_dir=os.getcwd(),
            )
            ledger = None
            if manifest is not None:
                fs = storage_filesystem(manifest.tune_path)[0]
                ledger = reconcile(tracker, parent_run_id, lambda folder: newest_checkpoint(fs, [folder]) is not None)
                tune_storage, tune_name = str(Path(manifest.tune_path).parent), Path(manifest.tune_path).name
                ctx.replayed = {i: ledger.result_of(i, self.metric) for i in ledger.records(space, self.metric)}
                log.info("MLflow holds %d ended trials (not run again); %d trials in flight continue from their "
                         "checkpoints; %d runs left RUNNING were closed as KILLED and their trials run again",
                         len(ledger.ended), len(ledger.in_flight), len(ledger.killed))
            else:
                tune_storage, tune_name = tune_location(ray_cfg, sweep_dir, parent_run_id)
                tune_path = tune_experiment_path(tune_storage, tune_name)
                SweepManifest(parent_run_id, tracker.tracking_uri, tracker.experiment_name, tune_path,
                              space.to_dict(), settings.strategy, settings.seed, settings.num_trials,
                              current_command(), os.getcwd()).save(sweep_dir)
            job = TuneJob(space, settings, self.metric, ray_cfg, tracker, parent_run_id, ctx, tune_storage, tune_name,
                          ledger, str(sweep_dir / SPOOL_FILE), checkpoints=self.checkpoints, live_maps=self.live_maps,
                          writer_start=writer_start)
            recorder, searcher = run_on_head(job) if client else run_tune(job)
            (sweep_dir / SEARCHER_STATE_FILE).write_text(json.dumps(searcher.get_state()), encoding="utf-8")
            return recorder, searcher
        finally:
            if started_ray:
                ray.shutdown()

    def _resumed_sweep(self, sweep_dir: Path, space: SearchSpace, settings: PolicySettings) -> SweepManifest:
        """The manifest of the sweep in ``sweep_dir``, if this command may continue it."""
        manifest = SweepManifest.load(sweep_dir)
        problems = manifest.problems(space, settings.strategy, settings.seed, settings.num_trials)
        if problems:
            raise SweeperConfigError([f"cannot resume the sweep in {sweep_dir}: {p}" for p in problems])
        return manifest

    # ---------------------------------------------------------------- results
    def _stopped(self, tracker: Any, parent_run_id: str, recorder: Any, sweep_dir: Path,
                 settings: PolicySettings) -> None:
        """Record a sweep stopped by SIGTERM or Ctrl-C (sweeper.run.preemption); exit with the status saying which."""
        kind = str(recorder.stopped_by)  # PREEMPTED | INTERRUPTED
        word = kind.lower()
        outcome = SweepOutcome([recorder.records[i] for i in sorted(recorder.records)], self.metric, settings.mode)
        writer = DurableWriter(tracker, sweep_dir / SPOOL_FILE)
        what = f"closing the {word} sweep's run"
        writer.log(what, parent_run_id, metrics={"num_finished": len(outcome.finished),
                                                 "num_failed": len(outcome.failed)},
                   tags={"status": kind, f"{word}_trials": ",".join(map(str, recorder.suspended)),
                         f"{word}_at": time.strftime("%Y-%m-%d %H:%M:%S")})
        writer.finish(what, parent_run_id, "KILLED")
        writer.close()
        gap = records_gap(recorder.lost_writes + writer.failures, writer.waiting(), sweep_dir)
        if gap:
            log.error("The %s", gap)
        in_flight = ", ".join(f"#{i}" for i in recorder.suspended) or "none"
        if kind == PREEMPTED_STATUS:
            log.warning("Preempted: %d trial(s) were in flight (%s) and continue from their checkpoints, and %d "
                        "ended trials are kept, when the sweep resumes: sweeper resume %s", len(recorder.suspended),
                        in_flight, len(outcome.records), sweep_dir)
            raise SystemExit(PREEMPTED_EXIT_STATUS)
        log.info("The trials in flight (%s) were closed KILLED in MLflow; `sweeper resume` continues them from their "
                 "checkpoints, or runs them again, and keeps the %d that ended.", in_flight, len(outcome.records))
        log.warning("Interrupted after %d of %d trials; continue with: sweeper resume %s", len(outcome.records),
                    settings.num_trials, sweep_dir)
        raise SystemExit(INTERRUPTED_EXIT_STATUS)

    def _note_tags(self, outcome: SweepOutcome, settings: PolicySettings) -> dict[str, Any]:
        """The best trial as tags, and the run's MLflow description (sweeper.record.note) resting on them."""
        best = outcome.best
        best_params = dict(best.params) if best else None
        note = render_note(
            command=" ".join([Path(sys.argv[0]).name, *redact_overrides(sys.argv[1:])]), metric=self.metric,
            mode=settings.mode, outputs={}, artifact_uri=None,
            best={"index": best.index, "params": best_params, "value": best.value} if best else None,
            counts={"num_trials": len(outcome.records), "num_finished": len(outcome.finished),
                    "num_failed": len(outcome.failed)})
        return {"best_trial": best.index if best else None,
                "best_params": json.dumps(best_params, default=str) if best else None, NOTE_TAG: note}

    @staticmethod
    def _interrupted_at_once(sweep_dir: Path) -> None:
        """A second Ctrl-C (or one before Tune ran): say so in one line and exit as Ctrl-C does."""
        from sweeper.run.resume import MANIFEST_FILE

        if (sweep_dir / MANIFEST_FILE).is_file():
            log.warning("Interrupted at once (a second Ctrl-C); the trials in flight stay RUNNING in MLflow until "
                        "the sweep resumes; continue with: sweeper resume %s", sweep_dir)
        else:
            log.warning("Interrupted before the first trial started; nothing to resume")
        raise SystemExit(INTERRUPTED_EXIT_STATUS) from None

    def _finish(self, tracker: Any, parent_run_id: str, recorder: Any, searcher: Any, sweep_dir: Path,
                settings: PolicySettings) -> None:
        outcome = SweepOutcome([recorder.records[i] for i in sorted(recorder.records)], self.metric, settings.mode)
        best = outcome.best
        extra: dict[str, Any] = {}
        if settings.stop_on_bayes_factor is not None:
            extra["interaction_tests"] = [asdict(c) for c in searcher.policy.bayes_factors]
        results = outcome.results(mlflow={"tracking_uri": tracker.tracking_uri, "experiment": tracker.experiment_name,
                                          "parent_run_id": parent_run_id}, **extra)
        text = redact_text(OmegaConf.to_yaml(OmegaConf.create(results)))  # the tracking URI may hold a password
        (sweep_dir / RESULTS_FILE).write_text(text, encoding="utf-8")
        too_many = searcher.policy.failure_budget_exceeded
        stop = searcher.policy.stopped_on_bayes_factor
        # The sweep's last writes go the way the trials' went: retried, spooled while MLflow is away.
        writer = DurableWriter(tracker, sweep_dir / SPOOL_FILE)
        writer.log_text("logging the results", parent_run_id, text, RESULTS_FILE)
        writer.log_text("logging trials.csv", parent_run_id, outcome.trials_csv(), "trials.csv")
        if stop is not None:
            writer.log("logging the early stop", parent_run_id, tags={
                "stopped_on_bayes_factor": f"log10 K = {stop.log10_K:.3f} after {stop.n} trials: {stop.verdict}"})
        lost = recorder.lost_writes
        prospective = sweep_prospective_check(searcher.policy.suggestions, searcher.policy.results,
                                              single_fit=settings.bounds is None)
        writer.log("closing the sweep's run", parent_run_id, metrics={
            f"best_{self.metric}": best.value if best else math.nan,
            "num_trials": len(outcome.records), "num_finished": len(outcome.finished),
            "num_failed": len(outcome.failed), **(prospective.metrics("") if prospective else {}),
        }, tags={"status": "FAILED" if too_many else "FINISHED", "mlflow_write_failures": len(lost),
                 **self._note_tags(outcome, settings)})
        writer.finish("closing the sweep's run", parent_run_id, "FAILED" if too_many else "FINISHED")
        writer.close()
        # "Finished" only when the records say so too: every write landed, none waits in the spool.
        gap = records_gap(lost + writer.failures, writer.waiting(), sweep_dir)

        if best is not None:
            log.info("Best: trial #%d %s  %s=%.6g", best.index, format_params(best.params), self.metric, best.value)
        if prospective is not None:
            log.info("The searcher's predictions, made before the trials ran: %s (%s)", prospective.numbers(),
                     prospective.verdict())
        if stop is not None:
            log.info("Stopped early on a conclusive Bayes factor: log10 K = %.3f after %d trials (%s; "
                     "hydra.sweeper.stop_on_bayes_factor=%g)", stop.log10_K, stop.n, stop.verdict,
                     settings.stop_on_bayes_factor)
        log.info("%s %d trials (%d failed). Results: %s", "Finished" if gap is None else "Ran", len(outcome.records),
                 len(outcome.failed), sweep_dir / RESULTS_FILE)
        log.info("%s", tracker.browse_text(parent_run_id))
        if outcome.finished:
            log.info("%s", next_commands(tracker.experiment_name, parent_run_id, tracker.tracking_uri))
        also = f"\nAlso, the {gap}" if gap else ""
        if too_many and searcher.policy.stop_reason:
            raise TrialFailuresExceeded(
                f"the sweep stopped after {len(outcome.records)} trials: {searcher.policy.stop_reason}\n"
                f"Failures:\n{outcome.failure_lines()}{also}")
        if too_many:
            raise TrialFailuresExceeded(
                f"{len(outcome.failed)} of {len(outcome.records)} trials failed, more than "
                f"hydra.sweeper.max_failure_rate={self.max_failure_rate} of num_trials={settings.num_trials} allows; "
                f"the sweep stopped early. Failures:\n{outcome.failure_lines()}\n"
                f"Each failed run's traceback is in MLflow (artifact traceback.txt).{also}"
            )
        if gap:
            raise RecordsIncomplete(f"the sweep ran its {len(outcome.records)} trials, but {gap}")


def next_commands(experiment: str, run_id: str, tracking_uri: str) -> str:
    """What the sweep prints last: the commands that analyse it, with this sweep's experiment, run and store."""
    where = (f" --experiment {shlex.quote(experiment)} --run {run_id} "
             f"--tracking-uri {shlex.quote(redact_text(tracking_uri))}")
    return ("Next:\n"
            f"  sweeper report{where}\n"
            f"  sweeper multiverse{where}")


def fixed_values_text(space: SearchSpace) -> str:
    """The start line's tail naming the values every trial shares (the overrides that sweep nothing)."""
    return f"; fixed: {' '.join(redact_overrides(space.fixed_overrides))}" if space.fixed_overrides else ""


def _output_dir_problems(trial_cfg: DictConfig) -> list[str]:
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
                text = OmegaConf.to_container(cfg.hydra.sweep, resolve=False)[key.rsplit(".", 1)[1]]  # type: ignore
                problems.append(f"{key}={text!r} cannot be resolved for a trial: {str(exc).splitlines()[0]}. "
                                f"Give it a value that resolves, e.g. {key}={example}.")
    finally:
        hydra_config.cfg = saved
    return problems


def tune_location(ray_cfg: dict[str, Any], sweep_dir: Path, parent_run_id: str) -> tuple[str | None, str]:
    """Ray Tune's storage path and experiment name for a new sweep (None: Tune's default storage)."""
    storage = storage_path(ray_cfg, sweep_dir, client=is_client_address(ray_cfg.get("address")))
    # One Tune experiment per sweep, also when several sweeps share a storage_path.
    return storage, "tune" if storage == str(sweep_dir) else f"{sweep_dir.name}-{parent_run_id[:8]}"
