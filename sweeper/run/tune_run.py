"""One sweep's Ray Tune run: searcher, trial recorder and Tuner, wherever the Tune driver runs.

Usually that is this process. Through Ray Client (``ray.address=ray://host:10001``) Tune
would run its loop on the head node with copies of the callbacks, so the trial recorder
and the searcher that the sweep reads afterwards would not be the ones that saw the
trials; there :func:`run_on_head` runs the whole of :func:`run_tune` as one task on the
head node and brings back the recorder (its records) and the searcher (its state). The
MLflow writes then come from the head node, which must reach the tracking server.
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweeper.record.tracker_protocol import Tracker
from sweeper.run.cluster import tune_experiment_path
from sweeper.run.resume import Ledger
from sweeper.run.run_settings import RunSettings
from sweeper.run.trial import TrialContext
from sweeper.run.tune_checkpoints import CheckpointSettings
from sweeper.search.settings import PolicySettings
from sweeper.search.space import SearchSpace

if TYPE_CHECKING:
    from sweeper.record.writer_process import WriterStart
    from sweeper.run.live_map_painter import LiveMaps
    from sweeper.run.recorder import TrialRecorder
    from sweeper.run.searcher import MultiverseSearch

log = logging.getLogger(__name__)


@dataclass
class TuneJob:
    """Everything a sweep's Tune run needs; picklable, so it can run on the head node."""

    space: SearchSpace
    settings: PolicySettings
    #: The run's settings: the metric, the trials' time limit, the live maps (sweeper.run.live_map_painter).
    run: RunSettings
    ray_cfg: dict[str, Any]
    tracker: Tracker
    parent_run_id: str
    ctx: TrialContext
    storage_path: str | None  # None: Tune's default (~/ray_results of the node running Tune)
    name: str
    ledger: Ledger | None = None  # a resumed sweep's trials in MLflow: restore Tune's experiment
    spool_path: str | None = None  # where MLflow writes wait while the tracking server is away
    #: MLflow writes from a child process (sweeper.record.writer_process), off the GIL of Tune's loop;
    #: False: a thread (inside a Ray task on the head node, which should not spawn processes).
    writer_process: bool = True
    checkpoints: CheckpointSettings = field(default_factory=CheckpointSettings)
    #: The writer process, forked before the driver started threads (None: spawned here).
    writer_start: WriterStart | None = None

    @property
    def metric(self) -> str:
        """The modelled metric's name."""
        return self.run.metric


def run_tune(job: TuneJob) -> tuple[TrialRecorder, MultiverseSearch]:
    """Run the sweep's trials; return the trial recorder and the searcher."""
    from ray import tune

    from sweeper.record.writer_process import WriterProcess
    from sweeper.run.checkpoint_callback import CheckpointKeeper
    from sweeper.run.fault_guard import FaultGuard, tolerate_oom_kills
    from sweeper.run.preemption import Interruption, Preemption
    from sweeper.run.recorder import TrialRecorder
    from sweeper.run.searcher import MultiverseSearch
    from sweeper.run.stops import INTERRUPTED_STATUS, PREEMPTED_STATUS
    from sweeper.run.trial import make_trainable

    settings = job.settings
    searcher = MultiverseSearch(job.space, metric=job.metric, **asdict(settings))
    spool = Path(job.spool_path) if job.spool_path else None
    writer = WriterProcess(job.tracker, spool, job.writer_start) if job.writer_process else None
    in_flight = job.ledger.in_flight if job.ledger is not None else {}
    keeper = CheckpointKeeper(job.checkpoints.keep_finished_checkpoints,
                              {i: run.trial_dir for i, run in in_flight.items()})
    recorder = TrialRecorder(job.tracker, job.parent_run_id, job.metric, settings.num_trials, settings.strategy,
                             spool, writer, keeper)
    recorder.adopt_in_flight(in_flight)
    preemption = Preemption(job.checkpoints.preempt_grace_s, searcher)
    interruption = Interruption(searcher)
    searcher.policy.on_bayes_factor = recorder.log_bayes_factor
    live = _live_maps(job, recorder.writer)
    if live is not None:
        searcher.policy.on_gp_fit = live.submit
    resources = job.ray_cfg["resources_per_trial"]
    bundle = {"CPU": float(resources["cpu"]), "GPU": float(resources["gpu"]), **(resources.get("custom") or {})}
    bundle = {k: float(v) for k, v in bundle.items() if v}
    # Trial-level faults (sweeper.run.faults): the time limit in the worker and, as its backstop, in
    # the driver; a worker killed by Ray's memory monitor fails its trial, not the sweep.
    ctx = replace(job.ctx, trial_timeout_s=job.run.trial_timeout_s)
    tolerate_oom_kills()
    trainable = tune.with_resources(make_trainable(ctx), tune.PlacementGroupFactory([bundle]))
    # No Tune logger callbacks: MLflow is the record, and Tune's per-trial JSON log would duplicate it
    # unredacted (NOTE: docs/decisions/0032-no-tune-result-logs.md).
    # The keeper first: the recorder reads which checkpoint a starting trial continues from.
    callbacks = [keeper, recorder, FaultGuard(job.metric, job.run.trial_timeout_s), preemption]
    _quiet_tune_logs()
    try:
        if job.ledger is not None:
            tuner = _restored_tuner(job, trainable, searcher, recorder, callbacks)
        else:
            tuner = _new_tuner(job, trainable, searcher, callbacks, bundle)
        with preemption.catching(), interruption.catching():
            tuner.fit()
        if preemption.requested:
            recorder.suspend_in_flight(PREEMPTED_STATUS, "the sweep was preempted (SIGTERM); its trial continues "
                                                         "from its checkpoint when the sweep resumes")
        elif interruption.requested:
            recorder.suspend_in_flight(INTERRUPTED_STATUS, "the sweep was interrupted (Ctrl-C); its trial continues "
                                                           "from its checkpoint, or runs again, when the sweep resumes")
    finally:
        if live is not None:  # its last maps go to the writer before the writer closes
            searcher.policy.on_gp_fit = None
            live.close()
        recorder.close()  # every queued MLflow write lands (or waits in the spool) before the summary
    return recorder, searcher


def _live_maps(job: TuneJob, writer: Any) -> LiveMaps | None:
    """The live maps of a GP sweep (None: turned off, or a strategy without a GP)."""
    from sweeper.run.live_map_painter import LiveMaps
    from sweeper.search.settings import GP_STRATEGIES

    s = job.settings
    if not job.run.live_maps or s.strategy not in GP_STRATEGIES or s.num_trials <= s.n_initial:
        return None
    last_batch = 1 + (s.num_trials - s.n_initial - 1) // s.batch_size
    try:
        return LiveMaps(writer, job.parent_run_id, job.space, job.metric, digits=max(3, len(str(last_batch))),
                        in_process=job.writer_process)
    except Exception as exc:  # noqa: BLE001 - a live map is never worth a sweep
        log.warning("live maps: the painter could not start (%s); the sweep goes on without them", exc)
        return None


class _TuneNoise(logging.Filter):
    """Drops Tune's lines that would mislead here.

    - that trials have no result logs: at the end of ``fit`` Tune's result grid reads every
      trial's ``result.json`` or ``progress.csv``, one warning per trial, and the sweep writes
      none on purpose (MLflow is the record);
    - its answers to a stop signal (Ctrl-C or the SIGUSR1 of a preemption): a ``Tuner.restore``
      hint and a list of trials that "did not complete"; the sweep says what happened and
      that ``sweeper resume`` continues it (sweeper.run.preemption).
    """

    PREFIXES = ("Failed to fetch metrics for", "Stop signal received", "Experiment has been interrupted",
                "Trials did not complete")

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(self.PREFIXES)


def _quiet_tune_logs() -> None:
    for name in ("ray.tune.analysis.experiment_analysis", "ray.tune.tune"):
        tune_log = logging.getLogger(name)
        if not any(isinstance(f, _TuneNoise) for f in tune_log.filters):
            tune_log.addFilter(_TuneNoise())


def _new_tuner(job: TuneJob, trainable: Any, searcher: Any, callbacks: list[Any], bundle: dict[str, float]) -> Any:
    import ray
    from ray import tune

    settings = job.settings
    return tune.Tuner(
        trainable,
        tune_config=tune.TuneConfig(
            search_alg=searcher,
            num_samples=settings.num_trials,
            max_concurrent_trials=job.ray_cfg.get("max_concurrent_trials") or fitting_trials(ray, bundle),
            reuse_actors=bool(job.ray_cfg.get("reuse_actors", True)),
            trial_dirname_creator=_trial_dirname,
        ),
        run_config=tune.RunConfig(
            name=job.name,
            storage_path=job.storage_path,
            callbacks=callbacks,
            verbose=0,
            log_to_file=False,
            failure_config=tune.FailureConfig(max_failures=int(job.ray_cfg.get("max_failures", 0))),
            checkpoint_config=tune.CheckpointConfig(num_to_keep=job.checkpoints.keep_checkpoints),
        ),
    )


def _restored_tuner(job: TuneJob, trainable: Any, searcher: Any, recorder: Any, callbacks: list[Any]) -> Any:
    """Ray Tune's experiment of a resumed sweep, continued with this process's searcher and recorder.

    ``Tuner.restore`` brings back the trials (finished ones are not run again, those in flight
    run again) and, from Tune's last checkpoint, the searcher's state. Tune would also unpickle
    the callbacks and searcher of the first run; the live ones are put in their place so that
    MLflow writes happen here and the searcher replays what MLflow says was suggested after
    that checkpoint.

    What it patches: the private ``_run_config.callbacks`` and ``_tune_config.search_alg`` of the
    restored ``Tuner._local_tuner``. Why no public API suffices: ``Tuner.restore`` takes a new
    trainable and ``param_space`` but neither callbacks nor a search algorithm. How breakage shows:
    tests/integration/test_resume.py, tests/integration/test_interrupts.py and the resume steps of
    tests/integration/test_checkpoints.py.
    """
    from ray import tune

    from sweeper.search.policy import Suggestion

    ledger = job.ledger
    assert ledger is not None
    searcher.policy.replay(
        Suggestion(i, tuple(how["x"]), job.space.from_unit([how["x"]])[0], how["phase"], how["batch"],
                   how.get("acquisition"), how.get("predicted_mean"), how.get("predicted_sd"),
                   how.get("predicted_from"), how.get("predicted_quantiles"))
        for i, how in sorted(ledger.suggested.items()))
    recorder.adopt(ledger.records(job.space, job.metric))
    path = tune_experiment_path(job.storage_path, job.name)
    tuner = tune.Tuner.restore(path, trainable, resume_unfinished=True, resume_errored=False)
    internal = tuner._local_tuner  # noqa: SLF001 - restore takes no callbacks nor searcher; test_resume.py
    internal._run_config.callbacks = callbacks  # noqa: SLF001 - restore takes no callbacks; test_resume.py
    internal._tune_config.search_alg = searcher  # noqa: SLF001 - restore takes no searcher; test_resume.py
    return tuner


def run_on_head(job: TuneJob) -> tuple[TrialRecorder, MultiverseSearch]:
    """:func:`run_tune` as a task on the head node of the cluster this Ray Client is connected to."""
    import ray

    remote = ray.remote(num_cpus=0, resources={"node:__internal_head__": 0.001}, max_retries=0)(_run_tune_logged)
    return ray.get(remote.remote(job))


def _run_tune_logged(job: TuneJob) -> tuple[TrialRecorder, MultiverseSearch]:
    # The sweep's console lines, as Hydra prints them; they reach the client through log_to_driver.
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("[%(asctime)s][HYDRA] %(message)s"))
    ours = logging.getLogger("sweeper")
    ours.handlers[:] = [handler]
    ours.setLevel(logging.INFO)
    ours.propagate = False
    return run_tune(replace(job, writer_process=False))


def fitting_trials(ray: Any, bundle: dict[str, float]) -> int:
    """How many trials of ``bundle`` the cluster holds at once (at least 1)."""
    available = ray.cluster_resources()
    fits = [math.floor(available.get(k, 0) / v + 1e-9) for k, v in bundle.items() if v > 0]
    return max(1, min(fits)) if fits else 1


def _trial_dirname(trial: Any) -> str:
    from sweeper.search.settings import TRIAL_KEY

    return f"trial_{int(trial.config[TRIAL_KEY]['index']):04d}_{trial.trial_id}"
