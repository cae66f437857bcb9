"""Continue a sweep whose driver died: the manifest, the MLflow ledger, the compatibility check.

Three records survive a killed driver, and resuming reads all of them:

- ``sweep.json`` in the sweep dir (:class:`SweepManifest`), written before the first trial:
  the MLflow parent run, the tracking URI, where Ray Tune keeps its experiment state, the
  search space and strategy, and the command that started the sweep;
- Ray Tune's experiment state (restored with ``Tuner.restore``), with the searcher state it
  checkpointed;
- MLflow, the ledger of trials (:func:`reconcile`): a FINISHED or FAILED child run is a trial
  that ended, whatever Tune's last checkpoint says, and is never run again; a child run left
  RUNNING belonged to a trial in flight when the driver died (one closed KILLED and tagged
  PREEMPTED or INTERRUPTED, to a trial in flight when the sweep was preempted or stopped by
  Ctrl-C). If that trial left a
  complete checkpoint in its folder (tag ``sweeper.trial_dir``), it continues from it, in
  the same run; else its run is closed as KILLED and the trial runs once more.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sweeper.errors import SweeperConfigError
from sweeper.run.outcome import TrialRecord
from sweeper.search.space import SearchSpace
from sweeper.search.suggestion import quantiles_from_tag

MANIFEST_FILE = "sweep.json"
MANIFEST_VERSION = 1
#: Overrides the resume command sets itself (dropped from the recorded command).
_RESUME_KEYS = ("hydra.sweep.dir=", "hydra.sweeper.resume=")


@dataclass
class SweepManifest:
    """What a sweep needs to be continued, saved in its sweep dir as ``sweep.json``."""

    parent_run_id: str
    tracking_uri: str
    experiment_name: str
    tune_path: str  # the Ray Tune experiment folder (storage_path/name)
    space: dict[str, Any]
    strategy: str
    seed: int
    num_trials: int
    command: list[str]  # the interpreter and argv that started the sweep
    cwd: str
    version: int = MANIFEST_VERSION

    def save(self, sweep_dir: Path) -> None:
        (sweep_dir / MANIFEST_FILE).write_text(json.dumps(asdict(self), indent=1), encoding="utf-8")

    @classmethod
    def load(cls, sweep_dir: Path) -> SweepManifest:
        path = sweep_dir / MANIFEST_FILE
        if not path.is_file():
            raise SweeperConfigError(
                f"there is no sweep to resume in {sweep_dir} (no {MANIFEST_FILE}): give the sweep's directory "
                f"(its `sweep_dir` tag in MLflow) or its parent run id; `sweeper trials --experiment NAME` lists "
                f"the latest sweep of an experiment."
            )
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("version") != MANIFEST_VERSION:
            raise SweeperConfigError(f"{path} has version {data.get('version')!r}; this sweeper reads "
                                     f"version {MANIFEST_VERSION}")
        return cls(**data)

    def resume_command(self, sweep_dir: Path, overrides: list[str] | None = None) -> list[str]:
        """The original command, pointed at ``sweep_dir`` with ``hydra.sweeper.resume=true``.

        ``overrides`` (e.g. ``ray.address=`` of a new cluster) replace the original's of the same keys.
        """
        given = tuple(o.split("=", 1)[0] + "=" for o in overrides or [])
        kept = [a for a in self.command if not a.startswith(_RESUME_KEYS + given)]
        return [*kept, *(overrides or []), f"hydra.sweep.dir={sweep_dir}", "hydra.sweeper.resume=true"]

    def problems(self, space: SearchSpace, strategy: str, seed: int, num_trials: int) -> list[str]:
        """What differs between the saved sweep and the one asked to continue it."""
        found = []
        saved = SearchSpace.from_dict(self.space)
        if saved.dims != space.dims:
            found.append(f"the search space changed: the sweep searched {saved.describe()}, this command "
                         f"searches {space.describe()}")
        before, now = trial_conditions(saved.fixed_overrides), trial_conditions(space.fixed_overrides)
        if before != now:
            found.append(f"the fixed overrides changed from {before} to {now}: every trial of a sweep runs with "
                         f"the same (ray.* and mlflow.* may change: where the sweep runs, not what it measures)")
        for key, was, asked in (("strategy", self.strategy, strategy), ("seed", self.seed, seed),
                                ("num_trials", self.num_trials, num_trials)):
            if was != asked:
                found.append(f"hydra.sweeper.{key} changed from {was!r} to {asked!r}")
        if found:
            found.append("a sweep continues only with the settings it started with: drop the changed overrides, "
                         "or start a new sweep without hydra.sweeper.resume")
        return found


def trial_conditions(overrides: tuple[str, ...]) -> list[str]:
    """The fixed overrides that set what every trial computes: all but ``ray.*`` and ``mlflow.*``, which say
    where the sweep runs and records (a resumed sweep may move to another cluster: ``sweeper resume DIR
    ray.address=...``)."""
    return sorted(o for o in overrides if not o.lstrip("+~").startswith(("ray.", "mlflow.")))


def current_command() -> list[str]:
    """The interpreter and argv of this process, as recorded in the manifest."""
    return [sys.executable, *sys.argv]


@dataclass(frozen=True)
class InFlight:
    """A trial in flight when the sweep stopped, that left a checkpoint: its run continues."""

    run_id: str
    trial_dir: str  # the folder of its checkpoints on ray.storage_path (tag sweeper.trial_dir)
    last_steps: dict[str, tuple[int, float]]  # metric -> the last step its run recorded, and the value there
    resumed_from: list[int]  # the steps it continued from before (tag sweeper.resumed_from_steps)


@dataclass
class Ledger:
    """The trials MLflow holds for a sweep, read when it resumes.

    Attributes:
        ended: trial index -> its FINISHED or FAILED run (the latest one per index).
        suggested: trial index -> how it was suggested: ``x`` (the unit-cube point, tag
            ``sweeper.unit_point``), ``phase``, ``batch`` and the GP's values there.
        killed: run ids of orphaned RUNNING runs closed as KILLED.
        in_flight: trial index -> its run, for trials that continue from a checkpoint.
    """

    ended: dict[int, Any] = field(default_factory=dict)
    suggested: dict[int, dict[str, Any]] = field(default_factory=dict)
    killed: list[str] = field(default_factory=list)
    in_flight: dict[int, InFlight] = field(default_factory=dict)

    def result_of(self, index: int, metric: str) -> dict[str, Any]:
        """The metrics and status of an ended trial, as a trial reports them."""
        run = self.ended[index]
        metrics = {k: float(v) for k, v in run.data.metrics.items() if not k.startswith("sweeper.")}
        status = run.data.tags.get("sweeper.status", run.info.status)
        return {"status": status, "metrics": metrics, "value": metrics.get(metric, math.nan),
                "error": run.data.tags.get("sweeper.error"), "run_id": run.info.run_id,
                "duration_s": float(run.data.tags.get("sweeper.duration_s", "nan") or "nan")}


    def records(self, space: SearchSpace, metric: str) -> dict[int, TrialRecord]:
        """The ended trials as the sweep's records (params from the recorded unit-cube point)."""
        out = {}
        for index in self.ended:
            how = self.suggested.get(index)
            if how is None:  # no recorded point: nothing can tell a replay from a new trial
                continue
            r = self.result_of(index, metric)
            out[index] = TrialRecord(index, how["phase"], how["batch"], space.from_unit([how["x"]])[0],
                                     run_id=r["run_id"], status=r["status"], value=r["value"], metrics=r["metrics"],
                                     duration_s=r["duration_s"], error=r["error"])
        return out


def reconcile(tracker: Any, parent_run_id: str,
              has_checkpoint: Callable[[str], bool] | None = None) -> Ledger:
    """Read a sweep's child runs; close the orphans (left RUNNING by a dead driver) as KILLED.

    ``has_checkpoint(trial_dir)`` says whether a trial folder holds a complete checkpoint: an
    orphan (or a preempted trial's run) whose folder does is kept open for its trial to continue.
    """
    ledger = Ledger()
    for run in sorted(tracker.child_runs(parent_run_id), key=lambda r: r.info.start_time or 0):
        tags = run.data.tags
        if "sweeper.trial_index" not in tags:
            continue
        index = int(tags["sweeper.trial_index"])
        if "sweeper.unit_point" in tags:
            ledger.suggested[index] = {
                "x": tuple(json.loads(tags["sweeper.unit_point"])), "phase": tags.get("sweeper.phase", "?"),
                "batch": int(tags.get("sweeper.batch", 0)),
                **{k: _number(tags.get(f"sweeper.{k}")) for k in ("acquisition", "predicted_mean", "predicted_sd")},
                "predicted_from": _count(tags.get("sweeper.predicted_from")),
                "predicted_quantiles": quantiles_from_tag(tags.get("sweeper.predicted_quantiles")),
            }
        ended = tags.get("sweeper.status") in ("FINISHED", "FAILED", "TIMEOUT")
        stopped = run.info.status == "RUNNING" or tags.get("sweeper.status") in ("PREEMPTED", "INTERRUPTED")
        trial_dir = tags.get("sweeper.trial_dir")
        if run.info.status in ("FINISHED", "FAILED") and ended:
            ledger.ended[index] = run
        elif stopped and trial_dir and has_checkpoint is not None and has_checkpoint(trial_dir):
            from sweeper.record.tracking import last_metric_steps

            steps = {k: v for k, v in last_metric_steps(run).items() if not k.startswith("sweeper.")}
            history = tags.get("sweeper.resumed_from_steps", "")
            ledger.in_flight[index] = InFlight(run.info.run_id, trial_dir, steps,
                                               [int(s) for s in history.split(",") if s])
        elif run.info.status == "RUNNING":
            tracker.log(run.info.run_id, tags={
                "status": "KILLED", "error": "the sweep's driver died while this trial ran; the trial runs again "
                                             "when the sweep resumes"})
            tracker.finish(run.info.run_id, "KILLED")
            ledger.killed.append(run.info.run_id)
    return ledger


def _number(text: str | None) -> float | None:
    try:
        return None if text is None else float(text)
    except ValueError:
        return None


def _count(text: str | None) -> int | None:
    number = _number(text)
    return None if number is None or not number.is_integer() else int(number)


def find_sweep_dir(ref: str, tracking_uri: str) -> Path:
    """The sweep dir named by ``ref``: a directory holding ``sweep.json``, or an MLflow parent run id."""
    path = Path(ref).expanduser()
    if path.is_dir():
        return path.resolve()
    if "/" in ref or not ref.isalnum():
        raise SweeperConfigError(
            f"{ref} is neither a sweep directory nor an MLflow run id: give the sweep's directory (its "
            f"`sweep_dir` tag in MLflow) or its parent run id; `sweeper trials --experiment NAME` lists sweeps.")
    from sweeper.record.tracking import TAG_PREFIX, get_run

    try:
        run = get_run(tracking_uri, ref)
    except LookupError as exc:
        raise SweeperConfigError(f"{exc}: give the sweep's directory, or --tracking-uri where the sweep was "
                                 f"recorded") from exc
    sweep_dir = run.data.tags.get(f"{TAG_PREFIX}sweep_dir")
    if run.data.tags.get(f"{TAG_PREFIX}role") != "sweep" or not sweep_dir:
        raise SweeperConfigError(f"MLflow run {ref} is not a sweep's parent run (no {TAG_PREFIX}sweep_dir tag); "
                                 f"give the parent run id (tag {TAG_PREFIX}role=sweep)")
    return Path(sweep_dir)
