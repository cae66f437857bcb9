"""``sweeper rerun`` end to end, as docs/rerun.md shows it: the demo's SVM sweep (6 random trials here), its best
2 configurations re-run over 3 new data-split seeds through the real command line (a grid sweep of 2 x 3 trials,
linked both ways to the first), then ``sweeper report`` on the rerun: QRA per configuration and the ranking.

The report and the refusals go through the same command line (``sweeper.cli.main``) in this process: the rerun
itself cannot (it becomes the sweep's process), and a process of their own would only import the same modules again.

The refusals: no seed key in the SVM's config, --top above the finished configurations, an unknown --env key.
"""

from __future__ import annotations

import math
import shlex
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from sweeper.analysis.qra import qra_replicates
from sweeper.analysis.ranking import wilson_interval
from sweeper.cli import main
from sweeper.run.sweep_validation import rerun_problems
from tests.documented import documented, run_documented
from tests.integration.conftest import ONE_AT_A_TIME, SHARED_RAY, run_documented_sweep

pytestmark = pytest.mark.integration

EXPERIMENT = "svm-breast-cancer"


def sweeps(uri: str) -> dict[str, object]:
    """The experiment's sweep runs, by run id."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(EXPERIMENT)
    assert exp is not None
    return {r.info.run_id: r for r in client.search_runs([exp.experiment_id], "tags.`sweeper.role` = 'sweep'")}


def trials_of(uri: str, run_id: str) -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    runs = client.search_runs([client.get_run(run_id).info.experiment_id], f"tags.`mlflow.parentRunId` = '{run_id}'")
    return sorted(runs, key=lambda r: int(r.data.tags["sweeper.trial_index"]))


def refused(capsys: pytest.CaptureFixture[str], uri: str, first: str, *args: str) -> str:
    """Run ``sweeper rerun`` on the first sweep in this process; it must refuse (status 2) and start nothing."""
    status = main(["rerun", "--experiment", EXPERIMENT, "--tracking-uri", uri, "--run", first, *args])
    err = capsys.readouterr().err
    assert status == 2, err
    assert "Traceback" not in err
    return err


def test_the_best_configurations_run_again_over_new_seeds_and_the_report_ranks_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    sweep = run_documented_sweep(documented("python experiments/svm.py --multirun hydra/sweeper=multiverse"),
                                 tmp_path, "hydra.sweeper.strategy=random", "hydra.sweeper.num_trials=6", ONE_AT_A_TIME)
    assert sweep.proc.returncode == 0, sweep.output[-3000:]
    uri = sweep.tracking_uri
    (first,) = sweeps(uri)
    first_trials = trials_of(uri, first)
    assert len(first_trials) == 6

    err = refused(capsys, uri, first, "--top", "2", "--seeds", "3")
    assert "no seed key found" in err and "--seed-key data.split_seed" in err
    err = refused(capsys, uri, first, "--top", "7", "--seeds", "3", "--seed-key", "data.split_seed")
    assert "--top 7: the sweep has 6 configuration(s) with a finished trial" in err
    err = refused(capsys, uri, first, "--top", "2", "--seeds", "3", "--seed-key", "data.split_seed", "--env",
                  "env.threads=1,2")
    assert "--env env.threads: unknown key" in err
    assert len(sweeps(uri)) == 1
    # hydra.sweeper.rerun_of names a sweep's run of the sweep's store: a trial's run is refused, the sweep's taken.
    store = {"tracking_uri": uri}
    assert rerun_problems(first, store) == []
    (trial_problem,) = rerun_problems(first_trials[0].info.run_id, store)
    assert "holds a run that is not a sweep's (no tag sweeper.role=sweep)" in trial_problem

    _, ray_env = SHARED_RAY.join()
    rerun = documented("sweeper rerun --experiment svm-breast-cancer --top 3 --seeds 5 --seed-key data.split_seed")
    proc = run_documented(f"{rerun} --top 2 --seeds 3", tmp_path, env=ray_env, timeout=300)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    assert "Seed key: data.split_seed (given by --seed-key); seeds 1, 2, 3 (new: the sweep ran 0)" in output
    assert "6 trials as a grid sweep in" in output and "Finished 6 trials (0 failed)" in output

    # The rerun is a new sweep of the experiment, linked both ways to the first.
    runs = sweeps(uri)
    (second,) = set(runs) - {first}
    assert runs[second].data.tags["sweeper.rerun_of"] == first
    assert runs[first].data.tags["sweeper.rerun_by"] == second
    assert runs[second].data.params["strategy"] == "grid" and runs[second].data.params["configurations"] == "2"

    # Its trials: each of the first sweep's 2 best (C, gamma), exactly as the first ran them, once per new seed.
    best = sorted(first_trials, key=lambda r: (-r.data.metrics["test_acc"], int(r.data.tags["sweeper.trial_index"])))
    top = [(r.data.params["C"], r.data.params["gamma"]) for r in best[:2]]
    ran = [(r.data.params["C"], r.data.params["gamma"], r.data.params["data.split_seed"])
           for r in trials_of(uri, second)]
    assert Counter(ran) == Counter((c, g, s) for c, g in top for s in ("1", "2", "3"))

    # The report on it: QRA per configuration and the ranking, as computed from the trials MLflow holds.
    monkeypatch.chdir(tmp_path)  # where the documented command runs: the store is ./mlruns.db
    assert main(shlex.split(documented("sweeper report --experiment svm-breast-cancer"))[1:]) == 0, \
        capsys.readouterr().err[-3000:]
    out = tmp_path / f"report-{EXPERIMENT}-{second[:8]}"
    text = (out / "report.md").read_text()
    assert "## Ranking over replicates: does the best stay best?" in text
    assert f"re-running the best 2 of sweep `{first}`" in text
    ranking = pd.read_csv(out / "ranking.csv")
    assert ranking["number"].tolist() == [1, 2] and ranking["n"].tolist() == [3, 3]
    assert ranking["wins"].sum() == pytest.approx(3.0)  # every split seed has a best (a tie shared)
    by_config: dict[tuple[str, str], list[tuple[str, float]]] = {}
    for r in trials_of(uri, second):
        key = (r.data.params["C"], r.data.params["gamma"])
        by_config.setdefault(key, []).append((r.data.params["data.split_seed"], r.data.metrics["test_acc"]))
    for row, config in zip(ranking.itertuples(), top, strict=True):
        seeds, values = zip(*by_config[config], strict=True)
        assert row.mean == pytest.approx(sum(values) / 3, abs=1e-12)
        expected = qra_replicates(list(values), keys=list(seeds))
        assert (math.isnan(row.cv_star) and math.isnan(expected.cv_star)) or \
            row.cv_star == pytest.approx(expected.cv_star, rel=1e-9)
        assert (row.p_best_low, row.p_best_high) == pytest.approx(wilson_interval(row.wins, 3))
