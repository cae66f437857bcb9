"""``python -m bench calibration --points-from NAME``: an earlier run's trials analysed again, nothing swept."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest

import bench.calibration as calibration
import bench.report


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    calibration.add_arguments(parser)
    return parser.parse_args(list(argv))


@pytest.fixture
def results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(bench.report, "RESULTS_DIR", tmp_path)
    return tmp_path


def test_the_saved_trials_are_analysed_again_without_a_sweep(results: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.ml_maps import truth_at
    from sweeper.search.design import sobol_design

    X = sobol_design(10, 2, [0])
    trials = [{"x": x.tolist(), "y": float(y), "mean": None, "sd": None, "from": None, "quantiles": None}
              for x, y in zip(X, truth_at("wine", X), strict=True)]
    (results / "earlier.json").write_text(json.dumps({"rows": [{"map": "wine", "bounds": True, "seed": 0,
                                                                "trials": trials}]}))

    def no_sweep(*args: object, **kwargs: object) -> None:
        raise AssertionError("--points-from swept")

    monkeypatch.setattr(calibration, "sweep", no_sweep)
    calibration.run(_args("--smoke", "--points-from", "earlier", "--results-name", "again"))
    row = json.loads((results / "again.json").read_text())["rows"][0]
    assert row["trials"] == trials
    assert 0.0 < row["map_coverage"] <= 1.0 and np.isfinite(row["curve_max_error"])


def test_a_missing_run_or_a_policy_is_refused_before_any_analysis(results: Path) -> None:
    with pytest.raises(SystemExit, match="--points-from nope: no .*nope.json; run the bench with --results-name nope"):
        calibration.run(_args("--smoke", "--points-from", "nope"))
    (results / "earlier.json").write_text(json.dumps({"rows": []}))
    with pytest.raises(SystemExit, match="--policy with --points-from: nothing is swept"):
        calibration.run(_args("--smoke", "--points-from", "earlier", "--policy", "ivr_mixture=true"))
    with pytest.raises(SystemExit, match=r"--points-from earlier: no trials for \('wine', True, 0\)"):
        calibration.run(_args("--smoke", "--points-from", "earlier"))
