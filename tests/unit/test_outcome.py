"""SweepOutcome: best trial by mode, failures, the written summaries."""

from __future__ import annotations

import csv
import io
import math

from sweeper.run.outcome import SweepOutcome, TrialRecord, format_params


def records() -> list[TrialRecord]:
    return [
        TrialRecord(0, "sobol", 0, {"C": 1.0, "kernel": "rbf"}, status="FINISHED", value=0.90, duration_s=0.1),
        TrialRecord(1, "sobol", 0, {"C": 10.0, "kernel": "rbf"}, status="FAILED", error="ValueError: boom"),
        TrialRecord(2, "ivr", 1, {"C": 0.123456, "kernel": "lin"}, status="FINISHED", value=0.95, duration_s=0.2),
        TrialRecord(3, "ivr", 1, {"C": 5.0, "kernel": "lin"}, status="FINISHED", value=0.80, duration_s=0.3),
    ]


def test_best_follows_the_mode() -> None:
    assert SweepOutcome(records(), "acc", "max").best.index == 2
    assert SweepOutcome(records(), "acc", "min").best.index == 3
    assert SweepOutcome(records()[1:2], "acc", "max").best is None


def test_results_count_and_name_failures() -> None:
    results = SweepOutcome(records(), "acc", "max").results(mlflow={"parent_run_id": "abc"})
    assert results["best_value"] == 0.95 and results["best_params"] == {"C": 0.123456, "kernel": "lin"}
    assert (results["num_trials"], results["num_finished"], results["num_failed"]) == (4, 3, 1)
    assert results["failures"] == {1: "ValueError: boom"}
    assert results["mlflow"] == {"parent_run_id": "abc"}


def test_trials_csv_has_one_row_per_trial() -> None:
    rows = list(csv.DictReader(io.StringIO(SweepOutcome(records(), "acc", "max").trials_csv())))
    assert [r["index"] for r in rows] == ["0", "1", "2", "3"]
    assert rows[1]["status"] == "FAILED" and rows[1]["error"] == "ValueError: boom"
    assert math.isnan(float(rows[1]["acc"])) and float(rows[2]["acc"]) == 0.95
    assert rows[2]["kernel"] == "lin"


def test_failure_lines_and_params_text() -> None:
    assert SweepOutcome(records(), "acc", "max").failure_lines() == "  #1 C=10 kernel=rbf: ValueError: boom"
    assert format_params({"C": 0.123456, "n": 3, "k": "rbf"}) == "C=0.1235 n=3 k=rbf"


TYPO = "ConfigAttributeError: Key 'lrr' is not in struct\n    full_key: lrr\n    object_type=dict"


def failed(index: int, error: str, status: str = "FAILED") -> TrialRecord:
    return TrialRecord(index, "random", 0, {"x": index / 10}, status=status, error=error)


def test_an_error_shared_by_trials_is_written_once_with_their_count_and_indices() -> None:
    """Groups in order of first appearance; a multi-line error keeps its other lines under its first."""
    records = [failed(0, TYPO), failed(1, "ValueError: x=0.1 is above 0"), failed(2, TYPO),
               TrialRecord(3, "random", 0, {"x": 0.3}, status="FINISHED", value=1.0), failed(4, TYPO),
               failed(5, "ValueError: x=0.5 is above 0")]
    assert SweepOutcome(records, "acc", "max").failure_lines().splitlines() == [
        "  3 × ConfigAttributeError: Key 'lrr' is not in struct (trials #0, #2, #4)",
        "    full_key: lrr",
        "    object_type=dict",
        "  #1 x=0.1: ValueError: x=0.1 is above 0",  # numbers differ: each trial its own line, with its point
        "  #5 x=0.5: ValueError: x=0.5 is above 0",
    ]


def test_many_trials_of_one_error_list_a_few_indices() -> None:
    lines = SweepOutcome([failed(i, "KeyError: 'lr'") for i in range(10)], "acc", "max").failure_lines()
    assert lines == "  10 × KeyError: 'lr' (trials #0, #1, #2, #3, #4, #5, #6, … #9)"


def test_errors_differing_only_in_memory_addresses_are_one_error() -> None:
    records = [failed(0, "TypeError: <Net object at 0x7f3a2c1b4d90> is not callable"),
               failed(1, "TypeError: <Net object at 0x7f99aa01cc10> is not callable"),
               failed(2, "trial exceeded its time limit", status="TIMEOUT")]
    assert SweepOutcome(records, "acc", "max").failure_lines().splitlines() == [
        "  2 × TypeError: <Net object at 0x7f3a2c1b4d90> is not callable (trials #0, #1)",
        "  #2 x=0.2: trial exceeded its time limit",
    ]



def test_a_sweep_whose_records_did_not_all_land_says_which_and_how_to_send_them() -> None:
    from sweeper.run.outcome import records_gap

    assert records_gap([], [], "/runs/s") is None  # every write landed: nothing to say
    waiting = ["creating the run of trial #3", "closing the run of trial #3", "closing the run of trial #12",
               "closing the sweep's run"]
    dropped = ["logging step 2 of trial #5: MlflowException: INVALID_PARAMETER_VALUE"]
    assert records_gap(dropped, waiting, "/runs/s") == (
        "the MLflow records of 3 trial(s) (#3, #5, #12) and the sweep's run are incomplete: 4 write(s) wait in "
        "/runs/s/mlflow_spool.jsonl: send them with `sweeper sync /runs/s` once the store takes writes again; "
        "1 write(s) were refused and are lost (every trial's result is in /runs/s/optimization_results.yaml and "
        "trials.csv):\n    logging step 2 of trial #5: MlflowException: INVALID_PARAMETER_VALUE")
    assert records_gap([], ["closing the run of trial #1"], "/d").startswith("the MLflow records of 1 trial(s) (#1) "
                                                                           "are incomplete: 1 write(s) wait")
