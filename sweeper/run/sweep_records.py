"""The sweep's MLflow run: opened (a new sweep's) or reopened (a resumed sweep's) while Ray starts.

A new sweep's run holds the settings as params, where the sweep came from as tags (the command line,
the driver's conditions and code), its composed config (``multirun.yaml``) and its search space
(``search_space.json``). Credentials in the config or on the command line never reach the records:
the tracker redacts every param and tag; the command line is redacted argument by argument (exact
where free text must guess), the config as a tree.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

from sweeper.record.conditions import capture_conditions
from sweeper.record.tracker_protocol import Tracker
from sweeper.run.cluster import tune_experiment_path, tune_location
from sweeper.run.code_identity import code_conditions
from sweeper.run.resume import SweepManifest
from sweeper.run.run_settings import RunSettings
from sweeper.search.settings import PolicySettings
from sweeper.search.space import SearchSpace

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SweepOrigin:
    """Where the sweep came from, as its run records it: Hydra's config and context, the task, the overrides."""

    config: DictConfig
    hydra_context: HydraContext
    task_function: TaskFunction
    code_dir: str | None
    arguments: list[str]
    rerun_of: str | None = None  # the run id of the sweep this one re-runs (hydra.sweeper.rerun_of)


def open_records(manifest: SweepManifest | None, mlflow_cfg: dict[str, Any], ray_cfg: dict[str, Any],
                 space: SearchSpace, settings: PolicySettings, run: RunSettings, sweep_dir: Path,
                 origin: SweepOrigin) -> tuple[Tracker, str]:
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
        parent_run_id = start_parent_run(tracker, ray_cfg, space, settings, run, sweep_dir, origin)
    # Its link now, not only at the end: the run shows the trials and the live maps as they come.
    log.info("MLflow: experiment %r at %s, sweep run %s (in the MLflow UI: %s)", tracker.experiment_name,
             tracker.tracking_uri, parent_run_id, tracker.run_url(parent_run_id))
    return tracker, parent_run_id


def sweep_params(settings: PolicySettings, run: RunSettings, space: SearchSpace) -> dict[str, Any]:
    """The sweep run's params: the search's settings (the run's time limit among them, before the metric's
    bounds), the metric and failure rate, the space, and the overrides every trial shares."""
    from sweeper.record.redaction import redact_overrides

    search = asdict(settings)
    bounds = search.pop("metric_bounds")
    return {
        **search,
        "trial_timeout_s": run.trial_timeout_s,
        "metric_bounds": bounds,
        "metric": run.metric,
        "max_failure_rate": run.max_failure_rate,
        **{f"space.{k}": v for k, v in space.describe().items()},
        **({"configurations": len(space.configurations)} if space.joint else {}),
        "fixed_overrides": " ".join(redact_overrides(space.fixed_overrides)),
    }


def start_parent_run(tracker: Tracker, ray_cfg: dict[str, Any], space: SearchSpace, settings: PolicySettings,
                     run: RunSettings, sweep_dir: Path, origin: SweepOrigin) -> str:
    """Start a new sweep's run with its settings, origin, config and space; return its id."""
    from sweeper.record.redaction import redact_overrides, redact_tree, redact_yaml_config

    run_id = tracker.start_run(
        f"{origin.config.hydra.job.name}-{time.strftime('%Y%m%d-%H%M%S')}",
        params=sweep_params(settings, run, space),
        tags={
            "role": "sweep",
            "strategy": settings.strategy,
            "sweep_dir": str(sweep_dir),
            "command": " ".join([Path(sys.argv[0]).name, *redact_overrides(sys.argv[1:])]),
            "overrides": " ".join(redact_overrides(origin.arguments)),
            **{f"driver.{k}": v for k, v in capture_conditions(origin.code_dir).items()},
            **{f"driver.{k}": v for k, v in code_conditions(origin.task_function, origin.hydra_context).items()},
            **({"rerun_of": origin.rerun_of} if origin.rerun_of else {}),
        },
    )
    if origin.rerun_of:
        link_rerun(tracker, origin.rerun_of, run_id)
    storage, name = tune_location(ray_cfg, sweep_dir, run_id)
    tracker.log(run_id, tags={"tune_experiment": tune_experiment_path(storage, name)})
    tracker.log_text(run_id, redact_yaml_config(origin.config), "multirun.yaml")
    tracker.log_text(run_id, json.dumps(redact_tree(space.to_dict()), indent=2), "search_space.json")
    return run_id


def link_rerun(tracker: Tracker, first_run_id: str, run_id: str) -> None:
    """Tag the sweep ``first_run_id`` re-runs with ``sweeper.rerun_by``: the ids of its reruns, comma-separated,
    this one added. A failure is logged, not raised: the rerun's own tag ``sweeper.rerun_of`` holds the link too."""
    from sweeper.record.tracking import TAG_PREFIX, get_run

    key = "rerun_by"
    try:
        earlier = get_run(tracker.tracking_uri, first_run_id).data.tags.get(f"{TAG_PREFIX}{key}", "")
        ids = [i for i in earlier.split(",") if i and i != run_id]
        tracker.log(first_run_id, tags={key: ",".join([*ids, run_id])})
    except Exception as exc:  # noqa: BLE001 - the link back is a convenience; the rerun's own tag holds it
        log.warning("could not tag sweep run %s with %s%s=%s: %s", first_run_id, TAG_PREFIX, key, run_id, exc)
