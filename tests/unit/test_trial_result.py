"""A trial's result crosses Ray Tune as a dict with the keys Tune and the records have always seen."""

from __future__ import annotations

import dataclasses
import math

from sweeper.run import trial_result
from sweeper.run.trial_result import TrialResult


def test_every_field_but_the_metric_has_its_key_and_round_trips() -> None:
    names = {f.name for f in dataclasses.fields(TrialResult)} - {"metric", "value"}
    assert set(trial_result._KEYS) == names
    full = TrialResult(**{f.name: f"{f.name}!" for f in dataclasses.fields(TrialResult)})
    assert TrialResult.from_dict(full.to_dict(), "metric!") == full


def test_a_finished_trials_dict_holds_the_metric_under_its_name_and_only_the_fields_given() -> None:
    result = TrialResult("score", 0.5, status="FINISHED", metrics={"score": 0.5}, config={}, duration_s=1.0)
    assert result.to_dict() == {"score": 0.5, "sweeper_status": "FINISHED", "sweeper_metrics": {"score": 0.5},
                                "sweeper_config": {}, "sweeper_duration_s": 1.0}


def test_a_per_step_result_has_no_status_and_a_partial_dict_reads_as_absent_fields() -> None:
    step = TrialResult(step=3, step_metrics={"loss": 0.1})
    assert step.to_dict() == {"sweeper_step": 3, "sweeper_step_metrics": {"loss": 0.1}}
    read = TrialResult.from_dict({"score": math.inf, "sweeper_status": "FAILED"}, "score")
    assert (read.value, read.status, read.error, read.metrics) == (math.inf, "FAILED", None, None)
    assert TrialResult.from_dict({}).status is None
