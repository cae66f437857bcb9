"""Finished sweeps written straight to a real MLflow store, as the sweeper records them, without running one.

:func:`record_sweep` writes a sweep's parent run (tagged a sweep, as sweeper/run/sweep_records.py does) and
one trial run per score through :class:`sweeper.record.tracking.MLflowTracker`, so the analysis commands and
their Python API read real records whose numbers the test chose.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

#: The search space of a sweep over one param ``x``, as the ``space.*`` params record it.
ONE_PARAM = {"x": "interval(0, 1)"}


def record_sweep(uri: str, experiment: str, scores: Sequence[float], *, xs: Sequence[float] | None = None,
                 points: Sequence[Mapping[str, float]] | None = None, space: Mapping[str, str] = ONE_PARAM,
                 strategy: str = "random", metric: str = "acc", mode: str = "max", bounds: str = "None",
                 failed: int = 0, extra: dict[str, float] | None = None) -> str:
    """A finished sweep's parent run and its trial runs; returns the parent run's id.

    Args:
        uri: The tracking URI (a SQLite store).
        experiment: The experiment the sweep is recorded in.
        scores: The finished trials' values of ``metric``, one trial each.
        xs: Each finished trial's ``x`` (default 0.5), for a sweep over :data:`ONE_PARAM`.
        points: Each finished trial's params by name (instead of ``xs``), for a sweep over ``space``.
        space: Each dim's spec in Hydra's sweep grammar, by name.
        strategy, metric, mode, bounds: The sweep's settings, as its parent run's params record them.
        failed: Trials that failed after the finished ones (at the centre of the space, with an error).
        extra: Other metrics every finished trial reports.
    """
    from sweeper.record.tracking import MLflowTracker

    tracker = MLflowTracker(uri, experiment)
    if points is None:
        points = [{"x": x} for x in (xs if xs is not None else [0.5] * len(scores))]
    params = {"strategy": strategy, "mode": mode, "metric": metric, "num_trials": len(scores) + failed, "seed": 0,
              **{f"space.{name}": spec for name, spec in space.items()}, "metric_bounds": bounds}
    parent = tracker.start_run(f"{experiment}-sweep", params=params, tags={"role": "sweep", "strategy": strategy})
    for i, (point, y) in enumerate(zip(points, scores, strict=True)):
        run = tracker.start_run(f"trial-{i}", parent_run_id=parent, tags={"trial_index": i, "phase": strategy})
        tracker.log(run, params=dict(point), metrics={metric: y, **(extra or {}), "sweeper.duration_s": 2.0})
        tracker.finish(run)
    for i in range(failed):
        run = tracker.start_run(f"trial-{len(scores) + i}", parent_run_id=parent,
                                tags={"trial_index": len(scores) + i, "error": "ValueError: diverged"})
        tracker.log(run, params=dict.fromkeys(space, 0.5))
        tracker.finish(run, "FAILED")
    tracker.finish(parent)
    return parent
