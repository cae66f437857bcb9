"""The run's settings (sweeper.run.run_settings) say what is wrong with each, as the search's settings do."""

from __future__ import annotations

import math
import re

import pytest

from sweeper.run.run_settings import RunSettings


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        (dict(trial_timeout_s=0.0), r"trial_timeout_s=0.0 is invalid: a trial's time limit is a positive number of "
                                    r"seconds \(null: no limit\)\. Try trial_timeout_s=3600"),
        (dict(trial_timeout_s=-5), r"trial_timeout_s=-5 is invalid"),
        (dict(trial_timeout_s=math.inf), r"trial_timeout_s=inf is invalid"),
    ],
)
def test_invalid_settings_are_reported(settings: dict, match: str) -> None:
    problems = RunSettings(**settings).problems(prefix="")
    assert len(problems) == 1 and re.search(match, problems[0])


def test_the_problems_come_in_the_order_asked_and_name_the_key_with_the_prefix() -> None:
    bad = RunSettings(metric=" ", max_failure_rate=1.5, trial_timeout_s=-1)
    assert [p.split("=")[0] for p in bad.problems()] == [
        "hydra.sweeper.max_failure_rate", "hydra.sweeper.trial_timeout_s", "hydra.sweeper.metric"]
    assert [p.split("=")[0] for p in bad.problems(keys=("metric",))] == ["hydra.sweeper.metric"]
    assert RunSettings().problems() == [] and RunSettings(trial_timeout_s=3600).problems() == []


def test_the_failure_budget_is_the_rate_clamped_to_a_fraction() -> None:
    assert RunSettings(max_failure_rate=0.5).max_failures(7) == 3
    assert RunSettings(max_failure_rate=1.5).max_failures(7) == 7
    assert RunSettings(max_failure_rate=-1.0).max_failures(7) == 0
