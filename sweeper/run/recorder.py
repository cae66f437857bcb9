"""Tune callback in the driver: every trial into MLflow, one console line per finished trial.

Runs in the driver process only, so MLflow needs to be reachable from the driver and
nowhere else. A trial's child run is created when it starts (RUNNING), per-step metrics
stream in while it runs, and it is closed FINISHED or FAILED with everything the worker
reported: metrics, the composed config, the conditions of measurement of the worker, the
error and its traceback.

A trial that restarts from a checkpoint (its worker died and Tune retried it, or a resumed
sweep continues it) continues its run: one run per training history. Its per-step metrics go
on where they were; a step the restarted attempt redoes (saved after its checkpoint, before
the fault) is not recorded a second time, per metric. The run counts its restarts
(``sweeper.resumes``) and says from which step each continued (``sweeper.resumed_from_steps``).
A trial that restarts without a checkpoint starts a new run, as its training starts anew.
"""

from __future__ import annotations

import json
import logging
import math
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ray.tune import Callback

from sweeper.record.conditions import measurement_record
from sweeper.record.redaction import redact_tree
from sweeper.record.shared_conditions import SharedConditions
from sweeper.record.spool import DurableWriter
from sweeper.run.outcome import TrialRecord, format_params
from sweeper.run.searcher import TRIAL_KEY
from sweeper.run.trial_result import STATUS_KEY, TrialResult
from sweeper.search.suggestion import quantiles_tag

if TYPE_CHECKING:
    from ray.tune.experiment import Trial

    from sweeper.record.tracker_protocol import Tracker
    from sweeper.run.checkpoint_callback import CheckpointKeeper
    from sweeper.run.resume import InFlight
    from sweeper.search.suggestion import BayesFactorCheck

log = logging.getLogger(__name__)



class TrialRecorder(Callback):
    """Records each trial of one sweep as a nested MLflow run and logs its outcome.

    Args:
        tracker: the MLflow writer.
        parent_run_id: the sweep's parent run.
        metric: the modelled metric's name (for the console line).
        num_trials: the planned number of trials (for the console line).
        strategy: recorded on each trial.
        spool_path: where writes wait while the tracking server is away.
        writer: the writer to use, e.g. a :class:`~sweeper.record.writer_process.WriterProcess`.
        keeper: says which checkpoint a (re)starting trial continues from (None: no checkpoints).
    """

    def __init__(self, tracker: Tracker, parent_run_id: str, metric: str, num_trials: int,
                 strategy: str, spool_path: Path | None = None, writer: Any = None,
                 keeper: CheckpointKeeper | None = None) -> None:
        self.tracker = tracker
        self.parent_run_id = parent_run_id
        self.metric = metric
        self.num_trials = num_trials
        self.strategy = strategy
        self.records: dict[int, TrialRecord] = {}
        self._packages_logged: set[str] = set()
        self._shared = SharedConditions()  # the conditions every trial shares, recorded once on the sweep's run
        self.keeper = keeper
        self._steps: dict[int, dict[str, tuple[int, float]]] = {}  # index -> metric -> last (step, value) recorded
        self._floors: dict[int, dict[str, int]] = {}  # index -> metric -> last step recorded before its restart
        self._resumed: dict[int, list[int]] = {}  # index -> the checkpoint steps it continued from
        self._continuable: dict[int, str] = {}  # index -> its run, open for a restart from a checkpoint
        self._by_trial: dict[str, TrialRecord] = {}
        self._adopted: dict[int, TrialRecord] = {}  # index -> a trial that ended before a resume
        self._started = time.monotonic()  # for the progress line's elapsed time and estimate
        self._ended_here = 0  # trials that ended in this process (not replayed): the pace of the estimate
        #: The trials in flight when the sweep was preempted or interrupted (None: it was not), and which of
        #: the two (PREEMPTED or INTERRUPTED): see sweeper.run.preemption.
        self.suspended: list[int] | None = None
        self.stopped_by: str | None = None
        #: A DurableWriter (a thread of this process) unless given one (sweeper.record.writer_process).
        self.writer: Any = writer if writer is not None else DurableWriter(tracker, spool_path)

    def __getstate__(self) -> dict[str, Any]:
        # Tune pickles its callbacks into the experiment state, and a sweep through Ray Client
        # brings the recorder back from the head node: a thread does not pickle, what it
        # failed to write does.
        return {**self.__dict__, "writer": None, "_lost_writes": self.lost_writes,
                "_spooled_writes": self.spooled_writes}

    @property
    def lost_writes(self) -> list[str]:
        """The MLflow writes that failed, each with what it was about."""
        if self.writer is not None:
            return list(self.writer.failures)
        return list(self.__dict__.get("_lost_writes", []))

    @property
    def spooled_writes(self) -> int:
        """MLflow writes left in the spool file because the tracking server was unreachable."""
        if self.writer is not None:
            return self.writer.spooled
        return int(self.__dict__.get("_spooled_writes", 0))

    def close(self) -> None:
        """Send (or spool) every queued write; give each record its MLflow run id."""
        assert self.writer is not None
        self.writer.close()
        for record in self.records.values():
            record.run_id = self.writer.run_id(record.run_id)

    def log_bayes_factor(self, check: BayesFactorCheck) -> None:
        """Log an interaction test of ``stop_on_bayes_factor`` on the sweep's run, step = the batch."""
        assert self.writer is not None
        self.writer.log(f"interaction test before batch {check.batch}", self.parent_run_id,
                        metrics={"interaction_log10_K": check.log10_K, "interaction_n": check.n}, step=check.batch)

    # ---------------------------------------------------------------- Tune events
    def on_trial_start(self, iteration: int, trials: list[Trial], trial: Trial, **info: Any) -> None:
        meta = trial.config[TRIAL_KEY]
        params = {k: v for k, v in trial.config.items() if k != TRIAL_KEY}
        index = int(meta["index"])
        if index in self._adopted:  # ended before a resume: its run exists, the trial is not run again
            self._by_trial[trial.trial_id] = self._adopted[index]
            return
        record = TrialRecord(index, meta["phase"], int(meta["batch"]), params)
        self._by_trial[trial.trial_id] = record
        restored = self.keeper.restored_from(trial) if self.keeper is not None else None
        run_id = self._continuable.pop(index, None)
        assert self.writer is not None
        if run_id is not None and restored is not None:
            record.run_id = run_id
            self.writer.reopen(f"reopening the run of trial #{index}", run_id)
            self._resume_tags(trial, record, restored.step)
            return
        if run_id is not None:  # its checkpoints are gone: the training starts anew, in a run of its own
            what = f"closing the earlier run of trial #{index}"
            self.writer.log(what, run_id, tags={"status": "KILLED", "error": "its trial restarted from the beginning: "
                                                                             "no checkpoint was left to continue from"})
            self.writer.finish(what, run_id, "KILLED")
            self._forget(index)
        tags = {
            "trial_index": index,
            "phase": meta["phase"],
            "batch": meta["batch"],
            "strategy": self.strategy,
            "acquisition": meta.get("acquisition"),
            "predicted_mean": meta.get("predicted_mean"),
            "predicted_sd": meta.get("predicted_sd"),
            "predicted_from": meta.get("predicted_from"),
            "predicted_quantiles": None if meta.get("predicted_quantiles") is None
            else quantiles_tag(meta["predicted_quantiles"]),
            "tune_trial_id": trial.trial_id,
            "unit_point": json.dumps([float(v) for v in meta.get("x", ())]),
            "trial_dir": trial.storage.trial_fs_path,
            "status": "RUNNING",
        }
        record.run_id = self.writer.start_run(f"creating the run of trial #{index}", f"trial-{index:04d}",
                                              parent_run_id=self.parent_run_id, params=params, tags=tags)
        if restored is not None:  # a checkpoint of an attempt whose run never reached MLflow
            self._resume_tags(trial, record, restored.step)

    def _resume_tags(self, trial: Trial, record: TrialRecord, step: int) -> None:
        """Say on the trial's run that it continues from the checkpoint of ``step``; hold back redone steps."""
        index = record.index
        self._floors[index] = {k: step for k, (step, _) in self._steps.get(index, {}).items()}
        history = self._resumed.setdefault(index, [])
        history.append(step)
        assert self.writer is not None and record.run_id is not None
        self.writer.log(f"marking trial #{index} resumed", record.run_id, tags={
            "status": "RUNNING", "tune_trial_id": trial.trial_id, "trial_dir": trial.storage.trial_fs_path,
            "resumes": len(history), "resumed_from_step": step, "resumed_from_steps": ",".join(map(str, history))})
        log.info("trial #%d continues from its checkpoint of step %d (restart %d), in its MLflow run",
                 index, step, len(history))

    def _forget(self, index: int) -> None:
        for known in (self._steps, self._floors, self._resumed):
            known.pop(index, None)

    def on_trial_result(self, iteration: int, trials: list[Trial], trial: Trial, result: dict[str, Any],
                        **info: Any) -> None:
        record = self._by_trial.get(trial.trial_id)
        if record is None or record.index in self._adopted:
            return
        assert self.writer is not None and record.run_id is not None
        reported = TrialResult.from_dict(result)
        if reported.step is not None:
            step, floor = int(reported.step), self._floors.get(record.index, {})
            metrics = {k: v for k, v in (reported.step_metrics or {}).items() if step > floor.get(k, -1)}
            last = self._steps.setdefault(record.index, {})
            last.update({k: (step, v) for k, v in metrics.items() if step >= last.get(k, (step, v))[0]})
            if metrics:  # else every metric of this step was recorded before the restart
                self.writer.log(f"logging step {step} of trial #{record.index}", record.run_id, metrics=metrics,
                                step=step)
        if reported.checkpoint_step is not None:
            self.writer.log(f"noting a checkpoint of trial #{record.index}", record.run_id,
                            tags={"checkpoint_step": int(reported.checkpoint_step)})

    def on_trial_complete(self, iteration: int, trials: list[Trial], trial: Trial, **info: Any) -> None:
        record = self._by_trial.pop(trial.trial_id, None)
        if record is None:
            return
        result = TrialResult.from_dict(trial.last_result or {}, self.metric)
        if result.replayed is not None:
            log.info("[%d/%d] #%d ended before the resume: %s (recorded in MLflow, not run again)",
                     len(self.records), self.num_trials, record.index, record.status)
            return
        self._close(record, result)

    def adopt(self, ended: dict[int, TrialRecord]) -> None:
        """Take over the trials a resumed sweep had ended: counted, never recorded twice; and the conditions
        its trials share, on its run (sweeper.record.shared_conditions), kept as they are."""
        self._adopted.update(ended)
        self.records.update(ended)
        self._shared.load(self.tracker, self.parent_run_id)

    def adopt_in_flight(self, in_flight: dict[int, InFlight]) -> None:
        """Take over the runs of a resumed sweep's trials that were in flight and left a checkpoint:
        each continues its run when its trial restarts from one."""
        for index, run in in_flight.items():
            self._continuable[index] = run.run_id
            self._steps[index] = dict(run.last_steps)
            self._resumed[index] = list(run.resumed_from)

    def suspend_in_flight(self, stopped_by: str, reason: str) -> None:
        """Close the runs of the trials in flight as KILLED, tagged ``stopped_by`` (PREEMPTED or
        INTERRUPTED): a resume continues them. Sets :attr:`suspended` and :attr:`stopped_by`."""
        suspended = []
        assert self.writer is not None
        for record in self._by_trial.values():
            if record.index in self._adopted or record.run_id is None:
                continue
            what = f"suspending trial #{record.index}"
            self.writer.log(what, record.run_id, tags={"status": stopped_by, "error": reason})
            self.writer.finish(what, record.run_id, "KILLED")
            suspended.append(record.index)
        self._by_trial.clear()
        self.suspended, self.stopped_by = sorted(suspended), stopped_by

    def on_trial_error(self, iteration: int, trials: list[Trial], trial: Trial, **info: Any) -> None:
        """Close the run with the trial's own last result if it sent one before its worker ended
        (a TIMEOUT: see sweeper.run.faults), else with Ray's reason, made readable."""
        from sweeper.run.fault_guard import trial_error_text
        from sweeper.run.faults import worker_error_message

        record = self._by_trial.pop(trial.trial_id, None)
        if record is not None:
            result = TrialResult.from_dict(trial.run_metadata.last_result or {}, self.metric)
            if result.status is None:
                text = trial_error_text(trial)
                result = TrialResult(status="FAILED", error=worker_error_message(text),
                                     traceback=text or _tune_error(trial))
            self._close(record, result)

    def on_trial_recover(self, iteration: int, trials: list[Trial], trial: Trial, **info: Any) -> None:
        """The worker failed and Tune retries: close this attempt's run; the retry gets a new one."""
        from sweeper.run.fault_guard import trial_error_text
        from sweeper.run.faults import worker_error_message

        record = self._by_trial.pop(trial.trial_id, None)
        if record is not None:
            error = worker_error_message(trial_error_text(trial))

            assert self.writer is not None and record.run_id is not None
            if self.keeper is not None and self.keeper.newest(trial) is not None:
                self._continuable[record.index] = record.run_id  # the retry continues this run
                self.writer.log(f"noting the restart of trial #{record.index}", record.run_id,
                                tags={"restart_error": error})
                log.warning("trial #%d failed in its worker and is retried from its checkpoint: %s", record.index,
                            error)
                return
            what = f"closing the failed attempt of trial #{record.index}"
            self.writer.log(what, record.run_id, tags={"status": "FAILED", "error": f"retried: {error}"})
            self.writer.finish(what, record.run_id, "FAILED")
            log.warning("trial #%d failed in its worker and is retried: %s", record.index, error)

    # ---------------------------------------------------------------- internals
    def _close(self, record: TrialRecord, result: TrialResult) -> None:
        record.status = "FAILED" if result.status is None else result.status
        record.metrics = dict(result.metrics or {})
        record.value = record.metrics.get(self.metric, math.nan)
        record.duration_s = float(math.nan if result.duration_s is None else result.duration_s)
        record.error = result.error
        if record.status == "FAILED" and record.error is None:
            record.error = f"the trial reported no {STATUS_KEY}; it did not run through the sweeper's trainable"
        config = result.config or {}
        conditions = result.conditions or {}
        config_params = {k: v for k, v in config.items() if k not in record.params}
        assert self.writer is not None and record.run_id is not None
        # Only what the trials do not all share; the sweep's run gets the rest first (same queue, in order).
        tags = self._shared.trial_tags(self.writer, self.parent_run_id, record.run_id, record.index, conditions)
        tags.update({"status": record.status, "duration_s": record.duration_s, "error": record.error})
        metrics = {**record.metrics, "sweeper.duration_s": record.duration_s}
        traceback_text = result.traceback
        last = self._steps.get(record.index, {})
        final_step = max((step for step, _ in last.values()), default=0)
        # The final values at the last step of the per-step history (not as a jump back to step 0), each
        # unless that step holds it already (a task returns its last epoch's numbers): no step twice.
        metrics = {k: v for k, v in metrics.items() if last.get(k) != (final_step, v)}
        self._forget(record.index)
        # Redacted as a tree: a credential-like config key's value never reaches conditions.json.
        measurement = redact_tree(measurement_record(self.metric, record.metrics, config, conditions))
        packages = result.packages
        new_packages = packages if packages and conditions.get("packages.sha256") not in self._packages_logged \
            else None
        if new_packages:
            self._packages_logged.add(conditions["packages.sha256"])

        what, run = f"closing the run of trial #{record.index}", record.run_id
        self.writer.log(what, run, params=config_params, metrics=metrics, tags=tags, step=final_step)
        self.writer.log_text(what, run, json.dumps(measurement, indent=1, default=str), "conditions.json")
        if traceback_text:
            self.writer.log_text(what, run, traceback_text, "traceback.txt")
        if new_packages:  # the pip freeze behind a packages.sha256, once per sweep on its run
            self.writer.log_text(what, self.parent_run_id, "\n".join(new_packages) + "\n",
                                 f"packages/{conditions['packages.sha256']}.txt")
        self.writer.finish(what, run, "FINISHED" if record.status == "FINISHED" else "FAILED")
        self.records[record.index] = record
        outcome = (f"{self.metric}={record.value:.6g}" if record.status == "FINISHED"
                   else f"{record.status}: {record.error}{_log_pointer(result)}")
        self._ended_here += 1
        log.info("[%d/%d%s] #%d %s batch %d  %s  %s  (%.2f s)", len(self.records), self.num_trials, self._pace(),
                 record.index, record.phase, record.batch, format_params(record.params), outcome,
                 record.duration_s)

    def _pace(self) -> str:
        """``, 1:05 elapsed, ~2:10 left`` for the progress line: the remaining trials at this sweep's pace so far."""
        elapsed = time.monotonic() - self._started
        left = max(self.num_trials - len(self.records), 0)
        estimate = f", ~{_clock(elapsed / self._ended_here * left)} left" if left and self._ended_here else ""
        return f", {_clock(elapsed)} elapsed{estimate}"


def _clock(seconds: float) -> str:
    """``h:mm:ss`` above an hour, ``m:ss`` below."""
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def _log_pointer(result: TrialResult) -> str:
    """`` (log: <the job's log file>)`` for a trial whose job wrote one, naming the node when not this one.

    The job's log holds what the job printed and, for a failed trial, its traceback
    (:mod:`sweeper.run.job_output`, ``sweeper.run.trial._job_files``): the place to look first.
    """
    path = result.job_log
    if not path:
        return ""
    host = (result.conditions or {}).get("host")
    return f" (log: {path}{f' on host {host}' if host and host != socket.gethostname() else ''})"


def _tune_error(trial: Trial) -> str:
    error = trial.get_error()
    return f"{type(error).__name__}: {error}" if error is not None else "the trial's worker failed"
