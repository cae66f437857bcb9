"""What a task may return, and how each unusable return is explained."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sweeper.run.trial import TrialError, metrics_from_return


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0.5, {"acc": 0.5}),
        (3, {"acc": 3.0}),
        (np.float32(0.25), {"acc": 0.25}),
        ({"acc": 0.9, "loss": np.float64(0.1), "note": "text", "flag": True}, {"acc": 0.9, "loss": 0.1}),
    ],
)
def test_numbers_and_dicts_become_metrics(value, expected) -> None:
    assert metrics_from_return(value, "acc") == pytest.approx(expected)


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ({"loss": 0.1},
         r"the task returned \['loss'\] but not the metric 'acc': return it, or set hydra.sweeper.metric"),
        ({"acc": "high"}, r"the task returned acc='high', which is not a number"),
        (None, r"the task returned NoneType None; return a number or a dict of numbers that includes 'acc'"),
        (True, r"the task returned bool True"),
        (math.nan, r"acc=nan \(not finite\)"),
        ({"acc": math.inf}, r"acc=inf \(not finite\)"),
    ],
)
def test_unusable_returns_explain_themselves(value, match: str) -> None:
    with pytest.raises(TrialError, match=match):
        metrics_from_return(value, "acc")


def test_trial_module_does_not_import_ray() -> None:
    import subprocess
    import sys

    code = "import sys, sweeper.run.trial; print('ray' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"
