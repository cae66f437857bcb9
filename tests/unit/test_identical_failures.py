"""A bug in the task stops the sweep early: the first trials to end all raised the same exception.

MultiverseSearch is driven directly, as Tune drives it (suggest, then on_trial_complete with the
result dict the trainable returned, or ``error=True`` for a dead worker), without Ray running.
"""

from __future__ import annotations

import itertools
import logging
import math
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf
from ray.tune.search import Searcher

from sweeper.run.faults import task_error_message
from sweeper.run.searcher import MultiverseSearch
from sweeper.run.trial import (
    CONDITIONS_KEY,
    ERROR_KEY,
    EXCEPTION_KEY,
    JOB_DIR_KEY,
    JOB_LOG_KEY,
    STATUS_KEY,
    TRACEBACK_KEY,
    _job_files,
)
from sweeper.search.settings import PolicySettings

SPACE = {"x": "interval(0, 1)", "y": "interval(0, 1)"}
LOG = "/sweeps/multirun/0/toy.log"


def raised(exc: BaseException, **extra: Any) -> dict[str, Any]:
    """The result a trial whose task raised ``exc`` returns (sweeper.run.trial.run_trial)."""
    return {"score": math.nan, STATUS_KEY: "FAILED", ERROR_KEY: task_error_message(exc),
            EXCEPTION_KEY: f"{type(exc).__module__}.{type(exc).__qualname__}", TRACEBACK_KEY: "Traceback ...",
            **extra}


def typo() -> dict[str, Any]:
    cfg = OmegaConf.create({"lr": 0.1})
    OmegaConf.set_struct(cfg, True)
    with pytest.raises(Exception) as info:
        cfg.lrr  # noqa: B018 - reading a misspelt key is what raises
    return raised(info.value, **{JOB_LOG_KEY: LOG, JOB_DIR_KEY: str(Path(LOG).parent)})


def search(**settings: Any) -> MultiverseSearch:
    return MultiverseSearch(SPACE, metric="score", mode="min", strategy="random", num_trials=16, **settings)


def test_identical_exceptions_stop_the_sweep_once_the_trials_in_flight_end() -> None:
    s = search()
    for trial in "ab":
        assert isinstance(s.suggest(trial), dict)
    s.on_trial_complete("a", typo())
    s.suggest("c")
    s.on_trial_complete("b", typo())
    s.suggest("d")
    s.on_trial_complete("c", typo())  # the third to end: no new trial, "d" still runs
    assert s.suggest("e") is None and s.policy.stop_reason is None
    s.on_trial_complete("d", typo())
    assert s.suggest("e") == Searcher.FINISHED
    assert s.policy.failure_budget_exceeded  # the sweep ends FAILED, with policy.stop_reason
    assert s.policy.stop_reason == (
        "the first 3 trials to end (#0, #1, #2) all raised the same exception, and none succeeded: a bug in the "
        "task, not a region of the search space, so no further trial starts. Trial #0's log, with the traceback: "
        f"{LOG} (also the MLflow artifact traceback.txt of trial #0's run). Fix the task and run the sweep again "
        "(hydra.sweeper.stop_on_identical_failures=null runs every trial whatever fails).")


@pytest.mark.parametrize("succeeds", [None, 0, 1, 2, 3])
def test_the_decision_does_not_depend_on_which_trial_ends_first(succeeds: int | None) -> None:
    """Four trials in flight, ending in every order: the sweep stops iff none of them succeeds."""
    for order in itertools.permutations(range(4)):
        s = search(stop_on_identical_failures=3)
        for i in range(4):
            s.suggest(str(i))
        for i in order:
            s.on_trial_complete(str(i), {"score": 1.0, STATUS_KEY: "FINISHED"} if i == succeeds else typo())
        assert (s.policy.stop_reason is not None) == (succeeds is None), order
        following = s.suggest("next")
        assert following == Searcher.FINISHED if succeeds is None else isinstance(following, dict), order


def _nan() -> dict[str, Any]:
    return {"score": math.nan, STATUS_KEY: "FAILED", ERROR_KEY: "the task returned score=nan (not finite)"}


def _timeout() -> dict[str, Any]:
    return {"score": math.nan, STATUS_KEY: "TIMEOUT", ERROR_KEY: "exceeded hydra.sweeper.trial_timeout_s=4 s"}


@pytest.mark.parametrize(("first", "error"), [
    pytest.param(lambda: {"score": 1.0, STATUS_KEY: "FINISHED"}, False, id="a success"),
    pytest.param(lambda: raised(ValueError("x=0.7 is above 0.5")), False, id="another message"),
    pytest.param(lambda: raised(KeyError("lrr")), False, id="another type"),
    pytest.param(_nan, False, id="a NaN metric"),
    pytest.param(_timeout, False, id="a timeout"),
    pytest.param(lambda: None, True, id="a dead worker"),
])
def test_a_different_first_end_rules_the_stop_out(first, error: bool) -> None:
    """Only the first trials to end decide; one that did not raise the same exception means no bug to stop on."""
    s = search()
    for i in range(6):
        s.suggest(str(i))
    s.on_trial_complete("0", first(), error=error)
    for i in range(1, 6):
        s.on_trial_complete(str(i), typo())
    assert s.policy.stop_reason is None and isinstance(s.suggest("next"), dict)


def test_identical_nans_are_not_a_bug_in_the_task() -> None:
    """A NaN depends on the point (a diverging learning rate): the failure budget decides, not this check."""
    s = search()
    for i in range(5):
        s.suggest(str(i))
        s.on_trial_complete(str(i), _nan())
    assert s.policy.stop_reason is None and isinstance(s.suggest("next"), dict)


def test_messages_differing_only_in_a_memory_address_are_the_same_error() -> None:
    s = search()
    for i, address in enumerate(["0x7f3a2c1b4d90", "0x7f99aa01cc10", "0x55d1e2f3a4b0"]):
        s.suggest(str(i))
        s.on_trial_complete(str(i), raised(TypeError(f"<Net object at {address}> is not callable")))
    assert s.policy.stop_reason is not None and "Trial #0's traceback is the MLflow artifact" in s.policy.stop_reason


@pytest.mark.parametrize("limit", [None, 0])
def test_the_stop_can_be_turned_off(limit: int | None) -> None:
    s = search(stop_on_identical_failures=limit)
    for i in range(6):
        s.suggest(str(i))
        s.on_trial_complete(str(i), typo())
    assert s.policy.stop_reason is None and isinstance(s.suggest("next"), dict)


def test_a_missing_metric_keeps_its_own_more_specific_reason() -> None:
    from sweeper.run.trial import RETURNED_KEY

    s = search(stop_on_identical_failures=1)
    s.suggest("a")
    s.on_trial_complete("a", {"score": math.nan, STATUS_KEY: "FAILED", RETURNED_KEY: ["acc"],
                              ERROR_KEY: "the task returned ['acc'] but not the metric 'score'"})
    assert "is not what the task returns" in s.policy.stop_reason


def test_the_first_failed_trials_folder_on_another_host_is_named_with_the_host() -> None:
    s = search(stop_on_identical_failures=1)
    s.suggest("a")
    s.on_trial_complete("a", raised(ImportError("No module named 'torchvison'"), **{
        JOB_DIR_KEY: "/scratch/multirun/0", CONDITIONS_KEY: {"host": "not-this-host.invalid"}}))
    assert ("Trial #0's output folder: /scratch/multirun/0 on host not-this-host.invalid; its traceback is the "
            "MLflow artifact traceback.txt of trial #0's run.") in s.policy.stop_reason


@pytest.mark.parametrize(("value", "valid"), [(3, True), (0, True), (None, True), (-1, False), (True, False),
                                              (2.5, False)])
def test_the_setting_is_a_count_or_null(value: Any, valid: bool) -> None:
    problems = PolicySettings(stop_on_identical_failures=value).problems(None, prefix="hydra.sweeper.")
    assert (problems == []) == valid
    if not valid:
        assert problems == [f"hydra.sweeper.stop_on_identical_failures={value!r} is invalid: a number of trials, an "
                            "integer >= 0 (0 or null: never stop on identical failures). Try "
                            "hydra.sweeper.stop_on_identical_failures=3."]


def test_a_failed_trials_traceback_goes_to_its_job_log(tmp_path: Path) -> None:
    """Hydra does not log the task's exception; the trial writes it to the job's log file, and only there."""

    class Job:  # the part of Hydra's JobReturn that _job_files reads
        hydra_cfg = OmegaConf.create({"hydra": {"runtime": {"output_dir": str(tmp_path / "0")}}})

    (tmp_path / "0").mkdir()
    root = logging.getLogger()
    inside, outside = logging.FileHandler(tmp_path / "0" / "toy.log"), logging.FileHandler(tmp_path / "other.log")
    root.addHandler(inside)
    root.addHandler(outside)
    try:
        files = _job_files(Job(), 0, raised(KeyError("lrr"), **{TRACEBACK_KEY: "Traceback (most recent call last):"}))
    finally:
        for handler in (inside, outside):
            root.removeHandler(handler)
            handler.close()
    assert files == {JOB_DIR_KEY: str(tmp_path / "0"), JOB_LOG_KEY: str(tmp_path / "0" / "toy.log")}
    expected = "trial #0 failed: KeyError: 'lrr'\nTraceback (most recent call last):\n"
    assert (tmp_path / "0" / "toy.log").read_text() == expected
    assert (tmp_path / "other.log").read_text() == ""
