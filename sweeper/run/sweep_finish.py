"""How a sweep ends: its results file, the last writes on its MLflow run, and what the console says.

A sweep that ran its trials writes ``optimization_results.yaml`` and closes its run FINISHED (FAILED when
too many trials failed); one stopped by SIGTERM or Ctrl-C closes its run KILLED and exits with the status
saying which (:mod:`sweeper.run.preemption`), to be continued by ``sweeper resume``.
"""

from __future__ import annotations

import json
import logging
import math
import shlex
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from omegaconf import OmegaConf

from sweeper.errors import RecordsIncomplete, TrialFailuresExceeded
from sweeper.record.note import NOTE_TAG, render_note
from sweeper.record.redaction import redact_overrides, redact_text
from sweeper.record.spool import SPOOL_FILE, DurableWriter
from sweeper.record.tracker_protocol import Tracker
from sweeper.run.outcome import SweepOutcome, format_params, records_gap
from sweeper.run.run_settings import RunSettings
from sweeper.run.stops import INTERRUPTED_EXIT_STATUS, PREEMPTED_EXIT_STATUS, PREEMPTED_STATUS
from sweeper.search.settings import PolicySettings

if TYPE_CHECKING:
    from sweeper.run.recorder import TrialRecorder
    from sweeper.run.searcher import MultiverseSearch
    from sweeper.search.loo import PredictiveCheck
    from sweeper.search.suggestion import BayesFactorCheck

log = logging.getLogger(__name__)

RESULTS_FILE = "optimization_results.yaml"


def _outcome(recorder: TrialRecorder, run: RunSettings, settings: PolicySettings) -> SweepOutcome:
    return SweepOutcome([recorder.records[i] for i in sorted(recorder.records)], run.metric, settings.mode)


def stopped(tracker: Tracker, parent_run_id: str, recorder: TrialRecorder, sweep_dir: Path,
            settings: PolicySettings, run: RunSettings) -> NoReturn:
    """Record a sweep stopped by SIGTERM or Ctrl-C (sweeper.run.preemption); exit with the status saying which."""
    assert recorder.suspended is not None
    kind = str(recorder.stopped_by)  # PREEMPTED | INTERRUPTED
    word = kind.lower()
    outcome = _outcome(recorder, run, settings)
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


def interrupted_at_once(sweep_dir: Path) -> NoReturn:
    """A second Ctrl-C (or one before Tune ran): say so in one line and exit as Ctrl-C does."""
    from sweeper.run.resume import MANIFEST_FILE

    if (sweep_dir / MANIFEST_FILE).is_file():
        log.warning("Interrupted at once (a second Ctrl-C); the trials in flight stay RUNNING in MLflow until "
                    "the sweep resumes; continue with: sweeper resume %s", sweep_dir)
    else:
        log.warning("Interrupted before the first trial started; nothing to resume")
    raise SystemExit(INTERRUPTED_EXIT_STATUS) from None


def finish(tracker: Tracker, parent_run_id: str, recorder: TrialRecorder, searcher: MultiverseSearch,
           sweep_dir: Path, settings: PolicySettings, run: RunSettings) -> None:
    """Write the results, close the sweep's run, say how it went; raise when too many trials failed or a
    record is missing."""
    outcome = _outcome(recorder, run, settings)
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
    # Imported here: its scipy.stats would cost every sweep's start a second, before Ray starts.
    from sweeper.search.calibration import sweep_prospective_check

    prospective = sweep_prospective_check(searcher.policy.suggestions, searcher.policy.results,
                                          single_fit=settings.bounds is None)
    best = outcome.best
    writer.log("closing the sweep's run", parent_run_id, metrics={
        f"best_{run.metric}": best.value if best else math.nan,
        "num_trials": len(outcome.records), "num_finished": len(outcome.finished),
        "num_failed": len(outcome.failed), **(prospective.metrics("") if prospective else {}),
    }, tags={"status": "FAILED" if too_many else "FINISHED", "mlflow_write_failures": len(lost),
             **note_tags(outcome, settings, run)})
    writer.finish("closing the sweep's run", parent_run_id, "FAILED" if too_many else "FINISHED")
    writer.close()
    # "Finished" only when the records say so too: every write landed, none waits in the spool.
    gap = records_gap(lost + writer.failures, writer.waiting(), sweep_dir)
    _say_how_it_went(outcome, prospective, stop, tracker, parent_run_id, sweep_dir, settings, run, gap)
    _raise_if_incomplete(outcome, searcher, settings, run, gap)


def _say_how_it_went(outcome: SweepOutcome, prospective: PredictiveCheck | None, stop: BayesFactorCheck | None,
                     tracker: Tracker, parent_run_id: str, sweep_dir: Path, settings: PolicySettings,
                     run: RunSettings, gap: str | None) -> None:
    """The console's last lines: the best trial, the predictions' check, an early stop, where the records are."""
    best = outcome.best
    if best is not None:
        log.info("Best: trial #%d %s  %s=%.6g", best.index, format_params(best.params), run.metric, best.value)
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


def _raise_if_incomplete(outcome: SweepOutcome, searcher: MultiverseSearch, settings: PolicySettings,
                         run: RunSettings, gap: str | None) -> None:
    """Raise when the sweep stopped on too many failures, or when a record did not land."""
    also = f"\nAlso, the {gap}" if gap else ""
    too_many = searcher.policy.failure_budget_exceeded
    if too_many and searcher.policy.stop_reason:
        raise TrialFailuresExceeded(
            f"the sweep stopped after {len(outcome.records)} trials: {searcher.policy.stop_reason}\n"
            f"Failures:\n{outcome.failure_lines()}{also}")
    if too_many:
        raise TrialFailuresExceeded(
            f"{len(outcome.failed)} of {len(outcome.records)} trials failed, more than "
            f"hydra.sweeper.max_failure_rate={run.max_failure_rate} of num_trials={settings.num_trials} allows; "
            f"the sweep stopped early. Failures:\n{outcome.failure_lines()}\n"
            f"Each failed run's traceback is in MLflow (artifact traceback.txt).{also}"
        )
    if gap:
        raise RecordsIncomplete(f"the sweep ran its {len(outcome.records)} trials, but {gap}")


def note_tags(outcome: SweepOutcome, settings: PolicySettings, run: RunSettings) -> dict[str, Any]:
    """The best trial as tags, and the run's MLflow description (sweeper.record.note) resting on them."""
    best = outcome.best
    best_params = dict(best.params) if best else None
    note = render_note(
        command=" ".join([Path(sys.argv[0]).name, *redact_overrides(sys.argv[1:])]), metric=run.metric,
        mode=settings.mode, outputs={}, artifact_uri=None,
        best={"index": best.index, "params": best_params, "value": best.value} if best else None,
        counts={"num_trials": len(outcome.records), "num_finished": len(outcome.finished),
                "num_failed": len(outcome.failed)})
    return {"best_trial": best.index if best else None,
            "best_params": json.dumps(best_params, default=str) if best else None, NOTE_TAG: note}


def next_commands(experiment: str, run_id: str, tracking_uri: str) -> str:
    """What the sweep prints last: the commands that analyse it, with this sweep's experiment, run and store."""
    where = (f" --experiment {shlex.quote(experiment)} --run {run_id} "
             f"--tracking-uri {shlex.quote(redact_text(tracking_uri))}")
    return ("Next:\n"
            f"  sweeper report{where}\n"
            f"  sweeper multiverse{where}")
