"""The efficiency benchmark's second yardstick: each design scored by the map ``sweeper multiverse`` draws.

A run of the bench is scored from its saved points (nothing is chosen again) by the analysis's model,
fitted here independently of the bench code, against the ground truth of the demo's real map
(``bench/data/map_svm.npz``); the table counts trials to Sobol's n = 50 error under that model.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from bench import analysis_map, efficiency
from sweeper.search.hyperposterior import fit_posterior
from sweeper.search.warping import MetricBounds

pytestmark = pytest.mark.usefixtures("one_blas_thread")


def bench_args(*extra: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    efficiency.add_arguments(parser)
    return parser.parse_args(list(extra))


def test_saved_designs_are_scored_by_the_analysis_map_without_choosing_them_again(tmp_path, monkeypatch,
                                                                                  capsys) -> None:
    monkeypatch.setattr(efficiency, "RESULTS_DIR", tmp_path)
    checkpoint = tmp_path / "runs.json"
    common = ["--functions", "svm", "--strategies", "sobol", "--n", "15", "--seeds", "1",
              "--checkpoint", str(checkpoint), "--results-name", "tables"]
    efficiency.run(bench_args(*common, "--analysis-n", "10"))
    first = json.loads(checkpoint.read_text())["svm/sobol/0"]

    f, _ = efficiency.objective("svm")
    X_test, truth = efficiency.test_set("svm")
    X = np.asarray(first["X"])
    model = fit_posterior(X[:10], f(X[:10]), seed=0, bounds=MetricBounds.parse([0.0, 1.0]))
    expected = np.sqrt(np.mean((model.predict_mean(X_test) - truth) ** 2)) / np.std(truth)
    assert first[analysis_map.FIELD] == {"10": pytest.approx(expected, rel=1e-9)}
    # the bounded, warped mixture is not the yardstick's plain fit
    assert abs(first[analysis_map.FIELD]["10"] - first["shared_nrmse"]["15"]) > 1e-3

    capsys.readouterr()
    efficiency.run(bench_args(*common, "--analysis-n", "10", "15"))
    out = capsys.readouterr().out
    assert "0 runs to do" in out and "1 runs to score with the analysis's map" in out
    second = json.loads(checkpoint.read_text())["svm/sobol/0"]
    assert second["X"] == first["X"] and second["seconds"] == first["seconds"]  # the design was not run again
    assert second[analysis_map.FIELD]["10"] == first[analysis_map.FIELD]["10"]
    assert set(second[analysis_map.FIELD]) == {"10", "15"}

    efficiency.run(bench_args(*common, "--analysis-n", "10", "15"))
    assert "0 runs to score" in capsys.readouterr().out


def test_the_reach_table_counts_trials_to_sobols_n50_error_under_the_analysis_map() -> None:
    def run(strategy: str, seed: int, errors: dict[int, float]) -> dict[str, object]:
        return {"function": "svm", "strategy": strategy, "seed": seed, "n_max": 50,
                analysis_map.FIELD: {str(n): e for n, e in errors.items()}}

    rows = [run("sobol", 0, {35: 0.30, 50: 0.24}), run("sobol", 1, {35: 0.28, 50: 0.26}),
            run("ours", 0, {30: 0.30, 35: 0.26, 40: 0.24}), run("ours", 1, {30: 0.28, 35: 0.25, 40: 0.22})]
    table = analysis_map.reach_markdown(rows, ["svm", "branin"], ["ours", "sobol"])
    assert "| svm | ours | 0.25 | 0.255 | 40 | 2 |" in table  # mean 0.255 at 35 is above 0.25; 0.23 at 40
    assert "| svm | sobol | 0.25 | 0.29 | 36-50 | 2 |" in table  # only 35 and 50 scored: a range
    assert "branin" not in table
    early = [run("sobol", 0, {30: 0.3, 50: 0.2}), run("ours", 0, {30: 0.2, 35: 0.19})]
    assert "| svm | ours | 0.2 | 0.19 | ≤ 30 | 1 |" in analysis_map.reach_markdown(early, ["svm"], ["ours"])
    assert analysis_map.reach_markdown([r for r in rows if r["strategy"] == "ours"], ["svm"], ["ours"]) == ""


def test_a_run_that_cannot_be_scored_is_named_and_the_others_are_saved(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(efficiency, "BOUNDS", {"svm": [0.0, 0.5]})  # the demo's accuracies reach 0.96
    monkeypatch.setattr(efficiency, "RESULTS_DIR", tmp_path)
    f_svm, _ = efficiency.objective("svm")
    X = efficiency.initial_design(2, 0, 8)
    runs = {"svm/sobol/0": {"function": "svm", "strategy": "sobol", "seed": 0, "n_max": 8, "X": X.tolist()},
            "branin/sobol/0": {"function": "branin", "strategy": "sobol", "seed": 0, "n_max": 8, "X": X.tolist()}}
    saved = []
    with pytest.raises(SystemExit, match=r"1 of 2 runs could not be scored .*\n  svm/sobol/0: .*outside"):
        analysis_map.add_scores(runs, list(runs), [8], 1, saved.append, lambda: None)
    assert [r["function"] for r in saved] == ["branin"]
    assert "svm/sobol/0: not scored with the analysis's map" in capsys.readouterr().out
    assert analysis_map.FIELD not in runs["svm/sobol/0"] and "8" in runs["branin/sobol/0"][analysis_map.FIELD]
    assert f_svm(X).max() > 0.5  # so the svm run was refused for its scores, not for anything else


def test_a_score_past_its_declared_bound_is_refused(monkeypatch) -> None:
    f, _ = efficiency.objective("svm")
    X = efficiency.initial_design(2, 0, 10)
    top = float(f(X).max())
    monkeypatch.setattr(efficiency, "BOUNDS", {"svm": [0.0, top]})  # the best trial on the bound: scored
    assert np.isfinite(analysis_map.score_run({"function": "svm", "n_max": 10, "X": X.tolist()}, [10])["10"])
    monkeypatch.setattr(efficiency, "BOUNDS", {"svm": [0.0, top - 1e-12]})  # past it, by however little: refused
    with pytest.raises(ValueError, match="outside the warp's bounds"):
        analysis_map.score_run({"function": "svm", "n_max": 10, "X": X.tolist()}, [10])
