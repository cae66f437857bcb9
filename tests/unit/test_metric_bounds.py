"""Declared metric bounds through the search and the report: validation, failed trials, predictions inside.

``hydra.sweeper.metric_bounds`` reaches the policy as ``PolicySettings.metric_bounds``, the
trial as ``TrialContext.metric_bounds`` and the analysis as ``SweepRecords.bounds`` (the
parent run's param). The math of the warp is tested in test_warping.py / test_bounded.py.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from sweeper.report import build_report
from sweeper.report.build_report import ReportError
from sweeper.run.trial import TrialError, metrics_from_return
from sweeper.search.grammar import parse_specs
from sweeper.search.policy import MultiversePolicy
from sweeper.search.settings import PolicySettings
from sweeper.search.warping import MetricBounds
from tests.unit.test_report_math import records_of

pytestmark = pytest.mark.usefixtures("one_blas_thread")

SPACE = parse_specs({"x": "interval(0, 1)", "y": "interval(0, 1)"})
FAST = dict(n_candidates=256, n_integration=128, gp_restarts=2)


def accuracy(x: float, y: float) -> float:
    """A bounded map with a plateau and a cliff: 0.62 (the majority class) below a diagonal, ~0.96 above."""
    return 0.62 + 0.34 / (1.0 + math.exp(-25.0 * (x + y - 0.9)))


@pytest.mark.parametrize(("bounds", "problem"), [
    ([1, 0], "needs low < high"),
    ([0.5, 0.5], "needs low < high"),
    (["low", 1], "two numbers or null"),
    ([0, 1, 2], "must be a list [low, high]"),
    ("[0, 1]", "must be a list [low, high]"),
])
def test_malformed_bounds_are_refused_naming_key_value_and_fix(bounds, problem: str) -> None:
    problems = PolicySettings(metric_bounds=bounds).problems(SPACE, prefix="hydra.sweeper.")
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"hydra.sweeper.metric_bounds={bounds!r} is invalid") and problem in problems[0]
    assert "Try hydra.sweeper.metric_bounds=[0,1]" in problems[0]
    assert not PolicySettings(metric_bounds=[0, None]).problems(SPACE)  # one open side is fine


def test_a_bounded_search_predicts_inside_the_bounds_and_fails_values_outside() -> None:
    policy = MultiversePolicy(SPACE, PolicySettings(num_trials=16, n_initial=8, batch_size=4, seed=0,
                                                    deterministic=True, metric_bounds=[0, 1], **FAST))
    outside = None
    while (s := policy.ask()) is not None:
        value = accuracy(s.params["x"], s.params["y"])
        if s.index == 2:  # a task bug: a value the metric cannot take
            outside, value = s.index, 1.5
        policy.tell(s.index, value)
    assert math.isnan(policy.results[outside])  # failed, never clipped to 1 and fitted
    gp_phase = [s for s in policy.suggestions if s.phase == "ivr"]
    assert len(gp_phase) == 8 and all(0.0 < s.predicted_mean < 1.0 for s in gp_phase)
    assert policy.state_dict()["settings"]["metric_bounds"] == [0, 1]


def run_policy(**settings) -> MultiversePolicy:
    policy = MultiversePolicy(SPACE, PolicySettings(num_trials=14, n_initial=8, batch_size=3, seed=1, **FAST,
                                                    **settings))
    while (s := policy.ask()) is not None:
        policy.tell(s.index, accuracy(s.params["x"], s.params["y"]))
    return policy


def test_ivr_chooses_the_raw_fits_points_and_tags_them_with_the_bounded_fit() -> None:
    # Points chosen on the warped fit drew a worse map (bench/README.md §3): the bounds change the tags only.
    plain, bounded = (run_policy(deterministic=True, metric_bounds=b) for b in (None, [0, 1]))
    assert [s.x for s in bounded.suggestions] == [s.x for s in plain.suggestions]
    tags = [(s.predicted_mean, b.predicted_mean) for s, b in zip(plain.suggestions, bounded.suggestions, strict=True)
            if s.phase == "ivr"]
    assert len(tags) == 6 and all(0.0 < b < 1.0 for _, b in tags) and any(p != b for p, b in tags)
    # Outside deterministic mode both fits warm-start the next: the warp's shapes travel with the bounded one.
    state = json.loads(json.dumps(run_policy(metric_bounds=[0, 1]).state_dict()))
    assert "warp" not in state["warm_start"] and {"a", "b"} <= set(state["warm_start_bounded"]["warp"])


def test_a_trial_returning_a_value_outside_the_bounds_is_an_error_naming_both() -> None:
    bounds = MetricBounds(0.0, 1.0)
    assert metrics_from_return({"acc": 1.0, "loss": 7.0}, "acc", bounds) == {"acc": 1.0, "loss": 7.0}
    with pytest.raises(TrialError) as err:
        metrics_from_return({"acc": 1.02}, "acc", bounds)
    message = str(err.value)
    assert "acc=1.02 is outside metric_bounds=[0, 1] (above 1)" in message and "not clipped" in message
    assert "hydra.sweeper.metric_bounds=[0, 1]" in message
    with pytest.raises(TrialError, match=r"loss=-0.5 is outside metric_bounds=\[0, null\] \(below 0\)"):
        metrics_from_return(-0.5, "loss", MetricBounds(0.0, None))


def test_the_report_reads_the_sweeps_bounds_and_keeps_its_curve_inside(tmp_path: Path) -> None:
    records = records_of("sobol")
    values = records.finished()["metric.acc"].to_numpy()
    low, high = float(values.min()) - 0.01, float(values.max()) + 0.01
    records.settings["metric_bounds"] = f"[{low!r}, {high!r}]"  # as MLflow records the param
    assert records.bounds == MetricBounds(low, high)
    report = build_report(records, out_dir=tmp_path / "a", n_samples=40, n_point_sets=4)
    curve = report.surrogate.curve
    assert report.surrogate.bounds == MetricBounds(low, high)
    assert low <= curve.low.min() and curve.high.max() <= high
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["metric_bounds"] == [low, high] and summary["surrogate"]["loo"]["n"] == len(values)
    assert "warp" in summary["surrogate"]["hyperparameters"]
    assert ("The GP behind this curve" in report.markdown.read_text()
            and "leave-one-out (" in report.markdown.read_text())
    # --bounds overrides the sweep's; bounds the values break are refused before anything is written.
    with pytest.raises(ReportError, match=r"kept trial\(s\) have acc outside the bounds \[0, 0.2\]"):
        build_report(records, out_dir=tmp_path / "b", bounds=MetricBounds(0.0, 0.2))
    assert not (tmp_path / "b").exists()
    plain = build_report(records, out_dir=tmp_path / "c", n_samples=40, n_point_sets=4, bounds=None)
    assert plain.surrogate.bounds is None and "warp" not in plain.surrogate.hyperparameters
    # Another metric than the sweep's does not inherit its bounds.
    other = build_report(records, metric="train_acc", out_dir=tmp_path / "d", n_samples=40, n_point_sets=4)
    assert other.surrogate.bounds is None


def test_recorded_bounds_read_back_in_every_form_mlflow_stores() -> None:
    assert MetricBounds.from_text("[0, 1]") == MetricBounds(0.0, 1.0)
    assert MetricBounds.from_text("[0.0, None]") == MetricBounds(0.0, None)
    assert MetricBounds.from_text("['0', 'null']") == MetricBounds(0.0, None)
    assert MetricBounds.from_text(None) is None and MetricBounds.from_text("None") is None
    with pytest.raises(ValueError):
        MetricBounds.from_text("0, 1")
    assert np.isclose(MetricBounds.parse([-1, 1]).clip([-2, 0.5, 3]), [-1, 0.5, 1]).all()
