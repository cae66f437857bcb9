"""``sweeper compare`` on sweeps written straight to a real MLflow SQLite store, whose true curves are known.

Two tasks of one param ``x`` drawn uniformly on [0, 1], scores as accuracies:

- ``svm-rbf``, a high ceiling with a narrow optimum: ``0.5 + 0.5 x^4`` (3 % of draws above 0.95);
- ``logreg``, a lower, broad plateau: ``0.5 + 0.4 x^(1/4)``, swept at random (``logreg-random``, 40 trials)
  and by a model-guided strategy (``logreg``, 16 trials, drawn at random but recorded as ``ivr``: its curve
  is the GP surrogate's).

The best of ``n`` uniform draws ``U_max ~ Beta(n, 1)`` gives the true expected max of ``n`` random trials
in closed form, ``E[U_max^a] = n / (n + a)``: ``0.5 + 0.5 n / (n + 4)`` and ``0.5 + 0.4 n / (n + 1/4)``,
which cross at ``n* = 14.75``: the plateau is ahead below, the narrow optimum above.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import numpy as np
import pytest

from sweeper.cli import main
from tests.documented import documented
from tests.integration.conftest import STORE_TEMPLATE
from tests.sweep_records import record_sweep

N = 40
CROSSING = 14.75  # (0.4 * 4 - 0.5 * 0.25) / (0.5 - 0.4)


def true_svm(n: np.ndarray) -> np.ndarray:
    return 0.5 + 0.5 * n / (n + 4.0)


def true_logreg(n: np.ndarray) -> np.ndarray:
    return 0.5 + 0.4 * n / (n + 0.25)


def svm_scores(x: np.ndarray) -> np.ndarray:
    return 0.5 + 0.5 * x**4


def logreg_scores(x: np.ndarray) -> np.ndarray:
    return 0.5 + 0.4 * x**0.25


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One store (a copy of the test process's migrated empty store): the two tasks' random sweeps, the plateau's
    model-guided sweep, and the degenerate sweeps."""
    root = tmp_path_factory.mktemp("compare")
    STORE_TEMPLATE.copy_to(root / "mlruns.db")
    uri = f"sqlite:///{root / 'mlruns.db'}"
    rng = np.random.default_rng(3)
    x_svm, x_logreg, x_ivr = rng.random(N), rng.random(N), rng.random(16)
    record_sweep(uri, "svm-rbf", svm_scores(x_svm).tolist(), xs=x_svm.tolist(), failed=1)
    record_sweep(uri, "logreg-random", logreg_scores(x_logreg).tolist(), xs=x_logreg.tolist())
    record_sweep(uri, "logreg", logreg_scores(x_ivr).tolist(), xs=x_ivr.tolist(), strategy="ivr")
    record_sweep(uri, "logreg-f1", [0.7, 0.8, 0.75], metric="f1", extra={"acc": 0.8})
    record_sweep(uri, "logreg-loss", [0.3, 0.2, 0.25], mode="min")
    record_sweep(uri, "logreg-bounded", [0.7, 0.8, 0.75], bounds="[0, 1]")
    record_sweep(uri, "one-trial", [0.7], failed=1)
    record_sweep(uri, "all-failed", [], failed=2)
    return root


def compare(store: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
            *args: str) -> tuple[int, str, str]:
    """``sweeper compare ARGS`` through the real command line, in the store's folder (its default store)."""
    monkeypatch.chdir(store)
    code = main(["compare", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_leader_at_each_budget_and_the_crossing_agree_with_the_true_curves(store: Path) -> None:
    from sweeper.analysis.expected_max import expected_max
    from sweeper.analysis.runs import load_sweep
    from sweeper.report.compare import compare_sweeps

    uri = f"sqlite:///{store / 'mlruns.db'}"
    svm, logreg = load_sweep("svm-rbf", uri), load_sweep("logreg-random", uri)
    assert int((svm.finished()["metric.acc"] > 0.9).sum()) >= 1  # the sample found the narrow optimum
    c = compare_sweeps([svm, logreg], labels=["svm-rbf", "logreg"])
    assert [k.kind for k in c.curves] == ["empirical", "empirical"] and c.n_common == N  # the failed trial is out
    n = np.array([s.n for s in c.standings])
    truth = {"svm-rbf": true_svm(n), "logreg": true_logreg(n)}
    gap = truth["svm-rbf"] - truth["logreg"]
    p_svm = np.array([s.p_best["svm-rbf"] for s in c.standings])
    clear = np.abs(gap) >= 0.04  # n <= 9 and n >= 28
    assert clear[:9].all() and clear[-12:].all()
    assert np.array_equal(p_svm[clear] > 0.5, gap[clear] > 0)  # the leader, where the truth's gap is clear
    assert all(s.leader == "logreg" and s.verdict == "ahead" for s in c.standings[:5])  # |gap| >= 0.1
    assert p_svm[-1] >= 0.8  # at n = 40 the narrow optimum is called (probably) ahead, as it truly is
    (change,) = c.changes
    assert (change.before, change.after) == ("logreg", "svm-rbf")
    assert change.low <= CROSSING <= change.high and change.low < change.n <= change.high
    for k in c.curves:  # the curve is the unbiased estimate, and (in this sample) its band holds the truth
        values = k.records.finished()["metric.acc"].to_numpy()
        assert np.allclose(k.mean, expected_max(values, without_replacement=True).mean[k.n - 1])
        assert np.all((k.low <= truth[k.label]) & (truth[k.label] <= k.high))


def test_the_probability_is_calibrated_in_direction_over_many_sweeps() -> None:
    """150 pairs of 100-trial random sweeps (numbers only): where the true gap is clear, the true leader gets most
    of the probability and a wrong call at P >= 0.95 never happens; at the crossing, calls are rare."""
    from sweeper.report.compare import rank
    from sweeper.report.compare_curves import empirical_curve

    n = np.array([1, 3, 15, 60, 100])
    p_svm = np.empty((150, n.size))
    for r in range(150):
        rng = np.random.default_rng([7, r])
        curves = [empirical_curve(label, None, f(rng.random(100)), n, maximize=True, bounds=None,
                                  durations=None, draws=400, seed=[r, i])
                  for i, (label, f) in enumerate((("svm-rbf", svm_scores), ("logreg", logreg_scores)))]
        p_svm[r] = [s.p_best["svm-rbf"] for s in rank(curves, True, 100)]
    svm_ahead = true_svm(n) > true_logreg(n)
    right = np.where(svm_ahead, p_svm, 1 - p_svm)
    clear = [0, 1, 3, 4]  # true gaps -0.22, -0.15, +0.07, +0.08
    assert np.all(right[:, clear].mean(axis=0) >= 0.9)
    assert np.all((right[:, clear] <= 0.05).mean(axis=0) == 0.0)
    assert (np.maximum(right[:, 2], 1 - right[:, 2]) >= 0.95).mean() <= 0.1  # n = 15: true gap 0.001


def test_a_loss_compares_as_its_negated_score() -> None:
    """mode min: the expected lowest loss, the same leaders, probabilities and order change as the score."""
    from sweeper.report.compare import order_changes, rank
    from sweeper.report.compare_curves import empirical_curve

    rng = np.random.default_rng(1)
    scores = {"svm-rbf": svm_scores(rng.random(100)), "logreg": logreg_scores(rng.random(100))}
    n = np.arange(1, 101)
    by_score, by_loss = (rank([empirical_curve(label, None, sign * v + shift, n, maximize=sign > 0,
                                               bounds=None, durations=None, seed=i)
                               for i, (label, v) in enumerate(scores.items())], sign > 0, 100)
                         for sign, shift in ((1.0, 0.0), (-1.0, 1.0)))
    assert [(s.leader, round(s.p, 12)) for s in by_score] == [(s.leader, round(s.p, 12)) for s in by_loss]
    assert order_changes(by_score) == order_changes(by_loss) and len(order_changes(by_loss)) == 1


def test_the_bootstrap_curves_are_eq_8_under_dirichlet_weights() -> None:
    """The carried powers and dropped terms give the direct sum of Dodge et al.'s eq. 8 under each draw's weights."""
    from sweeper.report.compare_curves import bootstrap_curves

    values = np.random.default_rng(0).normal(size=50)
    n = np.array([1, 2, 3, 10, 11, 50, 400])
    curves = bootstrap_curves(values, n, draws=20, seed=5)
    w = np.random.default_rng(5).standard_exponential((20, 50))  # the weights of the sorted values, in order
    cdf = np.cumsum(w, axis=1) / w.sum(axis=1, keepdims=True)  # (draws, N)
    below = np.hstack([np.zeros((20, 1)), cdf[:, :-1]])
    direct = np.stack([(cdf**m - below**m) @ np.sort(values) for m in n], axis=1)
    assert np.allclose(curves, direct, rtol=0, atol=1e-12)
    two_points = bootstrap_curves(np.array([0.0, 1.0]), np.array([1, 4]), draws=20000, seed=1)
    assert np.allclose(two_points.mean(axis=0), [1 / 2, 4 / 5], atol=0.01)  # E[1 - U^n] = n / (n + 1)


def test_the_documented_command_writes_the_folder_and_logs_a_run_that_links_both_sweeps(
        store: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from sweeper.analysis.runs import load_sweep
    from sweeper.record.tracking import read_client

    command = documented("sweeper compare --experiment svm-rbf --experiment logreg")
    code, out, err = compare(store, monkeypatch, capsys, *shlex.split(command)[2:])
    assert code == 0, out + err
    uri = f"sqlite:///{store / 'mlruns.db'}"
    svm, ivr = load_sweep("svm-rbf", uri), load_sweep("logreg", uri)
    folder = store / f"compare-{svm.parent_run_id[:8]}-{ivr.parent_run_id[:8]}"
    assert {p.name for p in folder.iterdir()} == {"compare.csv", "ahead.csv", "budget_to_reach.csv", "compare.png",
                                                 "summary.json", "compare.md", "compare.html"}
    rows = (folder / "compare.csv").read_text().splitlines()
    assert rows[0] == "sweep,n,mean,low,high" and len(rows) == 1 + N + 16
    summary = json.loads((folder / "summary.json").read_text())
    assert [s["curve"] for s in summary["sweeps"]] == ["empirical", "GP surrogate"]
    assert summary["segments"][0]["leader"] == "logreg" and summary["segments"][0]["verdict"] == "ahead"
    assert "logreg ahead" in out and "GP surrogate curve" in out and "compare.html" in out
    client = read_client(uri)
    (run,) = client.search_runs([client.get_experiment_by_name("svm-rbf").experiment_id],
                                "tags.`sweeper.role` = 'comparison'")
    tags = run.data.tags
    assert (tags["sweeper.compared.1"], tags["sweeper.compared.2"]) == (svm.parent_run_id, ivr.parent_run_id)
    note = tags["mlflow.note.content"]
    assert f"[`{svm.parent_run_id}`](http" in note and f"[`{ivr.parent_run_id}`](http" in note and command in note
    assert sorted(a.path for a in client.list_artifacts(run.info.run_id, "compare")) == sorted(
        f"compare/{p.name}" for p in folder.iterdir())
    for sweep in (svm, ivr):  # each sweep is tagged back with the comparison
        back = json.loads(client.get_run(sweep.parent_run_id).data.tags[f"sweeper.compared_in.{run.info.run_id}"])
        assert back["file"] == "compare/compare.html" and len(back["with"]) == 1
    (folder / "stale.csv").write_text("from an earlier comparison")
    code, out, err = compare(store, monkeypatch, capsys, *shlex.split(command)[2:], "--surrogate", "never")
    assert code == 0 and not (folder / "stale.csv").exists()  # the same question again: folder replaced, run reused
    assert len(client.search_runs([run.info.experiment_id], "tags.`sweeper.role` = 'comparison'")) == 1


@pytest.mark.parametrize(("args", "code", "message"), [
    (["--experiment", "logreg"], 2, "needs two or more sweeps; got 1"),
    (["--experiment", "logreg", "--experiment", "logreg"], 2, "--experiment logreg is given twice"),
    (["--experiment", "svm-rbf", "--experiment", "logreg-f1"], 2, "optimised different metrics"),
    (["--experiment", "svm-rbf", "--experiment", "logreg-loss"], 2, "in opposite directions"),
    (["--experiment", "svm-rbf", "--experiment", "logreg-bounded"], 2, "declared different bounds"),
    (["--experiment", "svm-rbf", "--experiment", "one-trial"], 1, "has 1 finished trial"),
    (["--experiment", "svm-rbf", "--experiment", "all-failed"], 1, "no trial of sweep"),
    (["--experiment", "svm-rbf", "--experiment", "nope"], 1, "no experiment 'nope'"),
    (["--experiment", "svm-rbf", "--run", "0123abcd"], 1, "--run 0123abcd: no such run"),
])
def test_a_comparison_that_cannot_be_made_says_why_and_how_to_fix_it(
        store: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], args: list[str],
        code: int, message: str) -> None:
    got, out, err = compare(store, monkeypatch, capsys, *args, "--no-log")
    assert got == code and message in err and "Traceback" not in err, err
    fixes = {"different metrics": "--metric acc", "opposite directions": "--mode max or --mode min",
             "different bounds": "--bounds 0 1", "all-failed": "ValueError: diverged"}
    assert all(fix in err for key, fix in fixes.items() if key in message or key in " ".join(args))


def test_the_fix_named_works_and_the_same_sweep_twice_or_a_constant_metric_is_said(
        store: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from sweeper.analysis.runs import load_sweep

    code, out, err = compare(store, monkeypatch, capsys, "--experiment", "svm-rbf", "--experiment", "logreg-f1",
                             "--metric", "acc", "--no-log", "--out", "by-acc")
    assert code == 0 and (store / "by-acc" / "compare.md").is_file(), err
    assert "logreg-f1's acc is 0.8 in all 3 finished trials" in err  # its acc is the same in every trial
    assert "**Caution: logreg-f1's acc is 0.8" in (store / "by-acc" / "compare.md").read_text()
    svm_run = load_sweep("svm-rbf", f"sqlite:///{store / 'mlruns.db'}").parent_run_id
    code, out, err = compare(store, monkeypatch, capsys, "--experiment", "svm-rbf", "--run", svm_run, "--no-log")
    assert code == 2 and f"sweep {svm_run} is named twice" in err
