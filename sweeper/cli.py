"""The ``sweeper`` command: look at sweeps recorded in MLflow.

    sweeper trials --experiment svm-breast-cancer            # the latest sweep's trials
    sweeper trials --experiment svm-breast-cancer --run ID   # a given sweep (parent run id)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

DEFAULT_TRACKING_URI = "sqlite:///mlruns.db"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sweeper", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command")
    trials = sub.add_parser("trials", help="list the trials of a sweep recorded in MLflow")
    trials.add_argument("--experiment", required=True, help="MLflow experiment name (mlflow.experiment_name)")
    trials.add_argument("--tracking-uri", default=DEFAULT_TRACKING_URI, help=f"default: {DEFAULT_TRACKING_URI}")
    trials.add_argument("--run", default=None, help="the sweep's parent run id (default: the latest sweep)")
    args = parser.parse_args(argv)
    if args.version:
        from sweeper import __version__

        print(__version__)
        return 0
    if args.command == "trials":
        return _trials(args.experiment, args.tracking_uri, args.run)
    parser.print_help()
    return 2


def _trials(experiment: str, tracking_uri: str, run_id: str | None) -> int:
    from sweeper.tracking import MLflowTracker, absolute_tracking_uri

    uri = absolute_tracking_uri(tracking_uri)
    from mlflow.tracking import MlflowClient

    exp = MlflowClient(uri).get_experiment_by_name(experiment)
    if exp is None:
        print(f"sweeper: no experiment {experiment!r} at {uri}. Check --experiment and --tracking-uri.",
              file=sys.stderr)
        return 1
    tracker = MLflowTracker(uri, experiment)
    if run_id is None:
        sweeps = tracker.client.search_runs([exp.experiment_id], "tags.`sweeper.role` = 'sweep'",
                                            order_by=["attributes.start_time DESC"], max_results=1)
        if not sweeps:
            print(f"sweeper: experiment {experiment!r} holds no sweep.", file=sys.stderr)
            return 1
        run_id = sweeps[0].info.run_id
    rows = sorted(tracker.child_runs(run_id), key=lambda r: int(r.data.tags.get("sweeper.trial_index", -1)))
    sweep_params = tracker.client.get_run(run_id).data.params
    metric = sweep_params.get("metric", "")
    dims = sorted(k[len("space."):] for k in sweep_params if k.startswith("space."))
    print(f"sweep {run_id} ({len(rows)} trials) in {experiment!r} at {uri}")
    for r in rows:
        print(_row(r, metric, dims))
    return 0


def _row(run: Any, metric: str, dims: list[str]) -> str:
    tags, params, metrics = run.data.tags, run.data.params, run.data.metrics
    value = metrics.get(metric)
    shown = f"{metric}={value:.6g}" if value is not None else tags.get("sweeper.error", run.info.status)
    return (f"#{tags.get('sweeper.trial_index', '?'):>4} {tags.get('sweeper.phase', '?'):<6} "
            f"{run.info.status:<9} {' '.join(f'{k}={params.get(k)}' for k in dims)}  {shown}")


if __name__ == "__main__":
    raise SystemExit(main())
