"""Unit tests for the report's math (no MLflow, no Ray): surrogate curve, QRA groups, filters, pairing."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from sweeper.analysis import compare_conditions, expected_max, qra
from sweeper.analysis.runs import SweepRecords, trials_frame
from sweeper.report import FilterError, ReportError, build_report, parse_filter
from sweeper.report.groups import paired_conditions, qra_groups
from sweeper.report.sections import budget_grid
from sweeper.report.surrogate import SurrogateUnavailable, surrogate_curve, unit_points
from sweeper.search.design import random_design
from sweeper.search.policy import MultiversePolicy
from sweeper.search.settings import PolicySettings
from sweeper.search.space import SearchSpace
from sweeper.search.warping import MetricBounds

SPACE = SearchSpace.from_dict({"dims": [
    {"kind": "float", "name": "x", "low": 0.0, "high": 1.0},
    {"kind": "float", "name": "y", "low": 0.0, "high": 2.0},
]})


def smooth(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return 1 - (x - 0.3) ** 2 - (y / 2 - 0.6) ** 2 + 0.3 * np.sin(3 * x) * np.cos(y)


def random_sweep(n: int, seed: int, strategy: str = "random") -> tuple[np.ndarray, np.ndarray, list[dict]]:
    """A real ask/tell loop of MultiversePolicy, no Ray: unit points, scores, params."""
    policy = MultiversePolicy(SPACE, PolicySettings(strategy=strategy, num_trials=n, seed=seed, batch_size=8))
    points = []
    while (s := policy.ask()) is not None:
        value = float(smooth(np.array(s.params["x"]), np.array(s.params["y"])))
        policy.tell(s.index, value)
        points.append(s.params)
    X = SPACE.to_unit(points)
    return X, smooth(np.array([p["x"] for p in points]), np.array([p["y"] for p in points])), points


@pytest.fixture(scope="module")
def true_curve() -> np.ndarray:
    U = random_design(200_000, 2, seed=99)
    return smooth(U[:, 0], 2 * U[:, 1])


# ---------------------------------------------------------------- surrogate curve
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_empirical_curve_of_a_random_sweep_lies_in_the_surrogate_band(seed: int) -> None:
    """The brief's test. The band compared with an N-trial empirical curve must carry that curve's own
    sampling error: N points per posterior sample, a fresh set for each (see sweeper.report.surrogate)."""
    X, y, _ = random_sweep(40, seed)
    sur = surrogate_curve(X, y, n_points=40, n_samples=200, n_point_sets=200, seed=0).curve
    em = expected_max(y)
    inside = (em.mean >= sur.low) & (em.mean <= sur.high)
    assert inside.mean() >= 0.9, inside.mean()
    assert np.all(np.abs(sur.mean - em.mean) <= (sur.high - sur.low))  # and the two means agree everywhere


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_report_surrogate_band_covers_the_true_random_search_curve(seed: int, true_curve: np.ndarray) -> None:
    """With the report's settings (M = 1000 in 10 sets) the band holds the true curve of random search."""
    X, y, _ = random_sweep(40, seed)
    sur = surrogate_curve(X, y, n_samples=200, seed=0).curve
    truth = expected_max(true_curve, n_max=40).mean
    inside = (truth >= sur.low) & (truth <= sur.high)
    assert inside.mean() >= 0.9, inside.mean()


def test_surrogate_models_categorical_dims_by_coregionalization() -> None:
    mixed = SearchSpace.from_dict({"dims": [{"kind": "float", "name": "x", "low": 0, "high": 1},
                                            {"kind": "choice", "name": "model", "choices": ["a", "b"]}]})
    np.testing.assert_allclose(unit_points(mixed, [{"x": 0.5, "model": "b"}]), [[0.5, 0.75]])
    rng = np.random.default_rng(0)
    U = np.column_stack([rng.random(30), (rng.integers(0, 2, 30) + 0.5) / 2])
    y = np.sin(4 * U[:, 0]) + np.where(U[:, 1] > 0.5, 1.0, 0.0)  # model b scores 1 higher
    sur = surrogate_curve(U, y, n_points=200, n_samples=40, n_point_sets=4, seed=0, categories={1: 2}).curve
    assert np.all(np.diff(sur.mean) >= -1e-9) and np.all(sur.low <= sur.mean) and np.all(sur.mean <= sur.high)
    assert sur.mean[-1] > 1.5  # the best of many draws finds model b's peak (sin 4x + 1 reaches 2)


@pytest.mark.parametrize("bounds", [None, MetricBounds(0.0, 1.0)])
def test_surrogate_curve_reads_the_gp_only_at_legal_points(bounds: MetricBounds | None) -> None:
    """A metric defined only at integers (one value per seed-like s in 0..7, best 0.951, each result
    4 times bit-identically): between integers the GP knows nothing, and draws there lifted the
    curve to 0.9526. Snapped to legal s, every sample's values are its values at the 8 legal
    points, so the expected max of n draws from one sample is at most that sample's max over the
    legal points, and the curve's mean at every n is at most the model's E[max over legal points]
    (both Monte Carlo estimates: 4 standard errors between them)."""
    from sweeper.search.hyperposterior import fit_posterior

    space = SearchSpace.from_dict({"dims": [{"kind": "int", "name": "s", "low": 0, "high": 7}]})
    values = np.array([0.930, 0.951, 0.925, 0.940, 0.932, 0.945, 0.928, 0.936])
    s = np.repeat(np.arange(8), 4)
    X, y = space.to_unit([{"s": int(v)} for v in s]), values[s]
    n_samples = 40
    sur = surrogate_curve(X, y, n_points=200, n_samples=n_samples, n_point_sets=4, seed=0, bounds=bounds,
                          space=space).curve
    gp = fit_posterior(X, y, seed=0, bounds=bounds)  # the curve's own model: same trials, same seed
    best = gp.sample_posterior(space.to_unit([{"s": v} for v in range(8)]), 2000, [5]).max(axis=1)
    bound = best.mean() + 4 * best.std() * math.sqrt(1 / n_samples + 1 / best.size) + 1e-6
    assert np.all(sur.mean <= bound), (sur.mean.max(), bound)
    assert sur.mean[-1] > 0.95  # and 32 draws of 8 legal values do find the best one


def test_surrogate_needs_a_readable_space_and_enough_trials() -> None:
    with pytest.raises(SurrogateUnavailable, match="could not be read"):
        unit_points(None, [])
    with pytest.raises(SurrogateUnavailable, match="outside"):
        unit_points(SPACE, [{"x": 3.0, "y": 0.5}])
    with pytest.raises(SurrogateUnavailable, match="at least 4"):
        surrogate_curve(np.zeros((3, 2)), np.zeros(3))


# ---------------------------------------------------------------- QRA groups
def hand_made_trials() -> pd.DataFrame:
    """Two objects measured under several conditions, plus two one-off trials."""
    rows = [
        # object lr=0.1, depth=2 under seeds 0..2 on two hosts
        dict(index=0, lr=0.1, depth=2, seed=0, host="a", acc=0.80, loss=0.5),
        dict(index=1, lr=0.1, depth=2, seed=1, host="a", acc=0.82, loss=0.4),
        dict(index=2, lr=0.1, depth=2, seed=2, host="b", acc=0.81, loss=0.45),
        # object lr=0.2, depth=2 under env.threads 1, 2 (same seed)
        dict(index=3, lr=0.2, depth=2, seed=0, host="a", threads=1, acc=0.70, loss=0.6),
        dict(index=4, lr=0.2, depth=2, seed=0, host="a", threads=2, acc=0.71, loss=0.6),
        # singletons
        dict(index=5, lr=0.3, depth=2, seed=0, host="a", acc=0.6, loss=0.7),
        dict(index=6, lr=0.1, depth=3, seed=0, host="a", acc=0.6, loss=0.7),
    ]
    frame = pd.DataFrame({
        "index": [r["index"] for r in rows], "run_id": [f"r{r['index']}" for r in rows],
        "status": "FINISHED", "param.lr": [r["lr"] for r in rows], "param.depth": [r["depth"] for r in rows],
        "param.env.seed": [r["seed"] for r in rows],
        "param.env.threads": [r.get("threads", 1) for r in rows],
        "metric.acc": [r["acc"] for r in rows], "metric.loss": [r["loss"] for r in rows],
        "tag.host": [r["host"] for r in rows], "tag.seed": [str(r["seed"]) for r in rows],
        "tag.pid": [str(100 + r["index"]) for r in rows], "tag.pkg.numpy": "2.4.6",
        # per-trial bookkeeping the recorder and the MLflow writer add
        "tag.writer_handle": [f"h{r['index']}" for r in rows],
        "tag.unit_point": [f"[{r['index'] / 10}]" for r in rows],
    })
    return frame


def test_qra_groups_are_objects_measured_more_than_once() -> None:
    groups = qra_groups(hand_made_trials(), ["acc", "loss"])
    assert [g.table["index"].tolist() for g in groups] == [[0, 1, 2], [3, 4]]
    first, second = groups
    assert first.object == {"lr": 0.1, "depth": 2}
    # Only conditions that vary within the group; the seed tag repeats env.seed; the pid,
    # writer handle and unit point are bookkeeping.
    assert first.conditions == ["param.env.seed", "tag.host"]
    assert list(first.table.columns) == ["index", "run_id", "env.seed", "host", "acc", "loss"]
    assert first.table["host"].tolist() == ["a", "a", "b"]
    assert second.conditions == ["param.env.threads"]
    r = first.results["acc"]
    expected = qra([0.80, 0.82, 0.81])
    assert (r.n, r.mean, r.std, r.std_ci, r.cv_star) == (expected.n, expected.mean, expected.std, expected.std_ci,
                                                         expected.cv_star)


def test_qra_group_with_a_nonpositive_mean_says_why() -> None:
    trials = hand_made_trials()
    trials["metric.loss"] = -trials["metric.loss"]
    group = qra_groups(trials, ["loss"])[0]
    assert isinstance(group.results["loss"], str) and "scale_min" in group.results["loss"]


def test_no_group_when_every_object_differs() -> None:
    trials = hand_made_trials().iloc[[0, 3, 5, 6]]
    assert qra_groups(trials, ["acc"]) == []


def test_paired_conditions_match_scipy_through_compare_conditions() -> None:
    rng = np.random.default_rng(0)
    seeds = np.repeat(np.arange(6), 2)
    threads = np.tile([1, 2], 6)
    acc = 0.8 + 0.02 * rng.standard_normal(12)
    trials = pd.DataFrame({"index": np.arange(12), "run_id": [f"r{i}" for i in range(12)], "status": "FINISHED",
                           "param.lr": 0.1, "param.env.seed": seeds, "param.env.threads": threads,
                           "metric.acc": acc})
    comparisons, notes = paired_conditions(trials, "acc")
    assert notes == [] and len(comparisons) == 1
    p = comparisons[0]
    assert p.condition == "env.threads" and p.values == (1, 2)
    expected = compare_conditions(acc[threads == 1], acc[threads == 2], names=("env.threads=1", "env.threads=2"))
    assert p.comparison == expected
    # One seed only under threads=2: nothing to pair, and the note says what to do.
    comparisons, notes = paired_conditions(trials.iloc[[0, 1, 2, 4]], "acc")
    assert comparisons == [] and "only 1 pair" in notes[0]


# ---------------------------------------------------------------- filters
@pytest.mark.parametrize(("text", "metric", "op", "value"), [
    ("train_acc >= 0.99", "train_acc", ">=", 0.99),
    ("loss<0.5", "loss", "<", 0.5),
    ("  val.f1 != -1e-3 ", "val.f1", "!=", -1e-3),
    ("steps == 10", "steps", "==", 10.0),
    ("a/b > .5", "a/b", ">", 0.5),
    ("x <= +2", "x", "<=", 2.0),
])
def test_filter_parses(text: str, metric: str, op: str, value: float) -> None:
    rule = parse_filter(text)
    assert (rule.metric, rule.op, rule.value) == (metric, op, value)


@pytest.mark.parametrize("text", ["train_acc => 0.99", "train_acc >= high", "0.99 <= train_acc", "train_acc",
                                  "train_acc >= 0.99 and loss < 1", "", "train acc >= 0.9", "acc = 0.9"])
def test_malformed_filter_names_the_expression_and_the_form(text: str) -> None:
    with pytest.raises(FilterError) as err:
        parse_filter(text)
    message = str(err.value)
    assert f"invalid filter {text!r}" in message
    assert '"<metric> <op> <number>"' in message and ">=, >, <=, <, ==, !=" in message


def test_filter_keeps_trials_where_the_rule_holds() -> None:
    trials = pd.DataFrame({"metric.train_acc": [1.0, 0.98, np.nan, 0.99]})
    assert parse_filter("train_acc >= 0.99").keep(trials).tolist() == [True, False, False, True]
    with pytest.raises(FilterError, match=r"no trial has the metric 'acc'; the trials have \['train_acc'\]"):
        parse_filter("acc > 0").keep(trials)


def test_budget_grid() -> None:
    assert budget_grid(1) == [1]
    assert budget_grid(12) == [1, 2, 5, 10, 12]
    assert budget_grid(100) == [1, 2, 5, 10, 20, 50, 100]


# ---------------------------------------------------------------- the whole report, no MLflow
class FakeRun:
    """The parts of an MLflow Run that trials_frame reads."""

    def __init__(self, i: int, params: dict, metrics: dict, tags: dict, status: str = "FINISHED") -> None:
        self.info = type("Info", (), {"run_id": f"run{i}", "status": status, "start_time": 1_700_000_000_000 + i,
                                      "end_time": 1_700_000_001_000 + i})()
        self.data = type("Data", (), {"params": {k: repr(v) if isinstance(v, float) else str(v)
                                                 for k, v in params.items()},
                                      "metrics": metrics, "tags": tags})()


def records_of(strategy: str, n: int = 24) -> SweepRecords:
    _, y, points = random_sweep(n, 0, "random" if strategy == "random" else "sobol")
    runs = []
    for i, (p, v) in enumerate(zip(points, y, strict=True)):
        failed = i == 3
        runs.append(FakeRun(i, {**p, "epochs": 5}, {} if failed else {"acc": float(v), "train_acc": min(1.0, v + .3),
                                                                    "sweeper.duration_s": 1.0 + i % 3},
                            {"sweeper.trial_index": str(i), "sweeper.phase": strategy, "sweeper.batch": "0",
                             "sweeper.cpu.model": "Test CPU", "sweeper.pkg.numpy": "2.4.6",
                             **({"sweeper.error": "ValueError: boom"} if failed else {})},
                            "FAILED" if failed else "FINISHED"))
    settings = {"strategy": strategy, "metric": "acc", "mode": "max", "seed": "0", "num_trials": str(n),
                "space.x": "interval(0, 1)", "space.y": "interval(0, 2)"}
    return SweepRecords(experiment="unit", tracking_uri="sqlite:///none.db", parent_run_id="parent",
                        settings=settings, space=SPACE, metric="acc", mode="max", strategy=strategy,
                        trials=trials_frame(runs))


def test_report_of_a_sobol_sweep_is_honest_and_its_csv_equals_the_api(tmp_path: Path) -> None:
    records = records_of("sobol")
    report = build_report(records, out_dir=tmp_path, n_samples=50, n_point_sets=5)
    text = report.markdown.read_text()
    assert report.biased and "**Caution: the empirical expected-max estimator assumes i.i.d. random draws" in text
    assert "came from `sobol`" in text.split("## ")[0]  # at the top, before the first section
    assert report.surrogate is not None and (tmp_path / "surrogate_expected_max.png").exists()
    finished = records.finished()
    em = expected_max(finished["metric.acc"].to_numpy(), durations_s=finished["duration_s"].to_numpy())
    csv = pd.read_csv(tmp_path / "expected_max.csv")
    np.testing.assert_allclose(csv["mean"], em.mean, rtol=0, atol=1e-12)
    np.testing.assert_allclose(csv["std"], em.std, rtol=0, atol=1e-12)
    np.testing.assert_allclose(csv["budget_s"], em.budget_s, rtol=0, atol=1e-12)
    html = report.html.read_text()
    assert html.count("data:image/png;base64,") == len([f for f in report.files if f.suffix == ".png"])
    assert "](expected_max_trials.png)" in text
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["trials"] == {"planned": "24", "run": 24, "kept": 23, "failed": 1, "filtered": 0}
    assert "Hardware: GPU" in summary["not_recorded"]
    failures = pd.read_csv(tmp_path / "failures.csv")
    assert failures["index"].tolist() == [3] and failures["error"].tolist() == ["ValueError: boom"]


def test_report_of_a_random_sweep_has_no_caution_and_a_filter_marks_trials(tmp_path: Path) -> None:
    records = records_of("random")
    report = build_report(records, out_dir=tmp_path, trial_filter="train_acc >= 1")
    text = report.markdown.read_text()
    assert not report.biased and "Caution" not in text and report.surrogate is None
    trials = pd.read_csv(tmp_path / "trials.csv")
    kept = trials[trials["kept"]]
    assert (kept["metric.train_acc"] >= 1).all() and trials["filtered"].sum() == 23 - len(kept)
    assert "Filter `train_acc >= 1`" in text
    em = expected_max(kept["metric.acc"].to_numpy(), durations_s=kept["duration_s"].to_numpy())
    np.testing.assert_allclose(pd.read_csv(tmp_path / "expected_max.csv")["mean"], em.mean, atol=1e-12)


def test_report_errors_name_what_exists(tmp_path: Path) -> None:
    records = records_of("random", n=8)
    with pytest.raises(ReportError, match=r"no trial has the metric 'f1'; the trials have \['acc', 'train_acc'\]"):
        build_report(records, metric="f1", out_dir=tmp_path)
    with pytest.raises(ReportError, match=r"--group-by 'model'.*\['epochs', 'x', 'y'\]"):
        build_report(records, group_by="model", out_dir=tmp_path)
    with pytest.raises(FilterError, match="invalid filter"):
        build_report(records, trial_filter="acc >> 1", out_dir=tmp_path)


def test_trials_frame_parses_numbers_back() -> None:
    frame = records_of("random", n=6).trials
    assert frame["param.epochs"].dtype == np.int64 and frame["param.x"].dtype == np.float64
    assert frame.loc[3, "status"] == "FAILED" and math.isnan(frame.loc[3, "duration_s"])
    assert frame["index"].tolist() == list(range(6))
    assert "metric.sweeper.duration_s" not in frame and frame.loc[0, "duration_s"] == 1.0


def test_report_of_a_sweep_where_every_trial_failed(tmp_path: Path) -> None:
    runs = [FakeRun(i, {"x": 0.5, "y": 1.0}, {}, {"sweeper.trial_index": str(i), "sweeper.error": f"E{i}"},
                    "FAILED") for i in range(3)]
    records = SweepRecords(experiment="unit", tracking_uri="sqlite:///none.db", parent_run_id="parent",
                           settings={"strategy": "ivr", "metric": "acc", "mode": "max", "num_trials": "3"},
                           space=SPACE, metric="acc", mode="max", strategy="ivr", trials=trials_frame(runs))
    report = build_report(records, out_dir=tmp_path)
    text = report.markdown.read_text()
    assert "No finished trial counts." in text and "3 trial(s) failed" in text
    assert report.surrogate is None and "only 0 finished trial(s)" in report.surrogate_note
    assert pd.read_csv(tmp_path / "failures.csv")["error"].tolist() == ["E0", "E1", "E2"]


def test_recorded_text_maps_back_to_the_choice() -> None:
    from sweeper.report.trial_points import as_choice as _as_choice
    from sweeper.search.space import ChoiceDim

    flag = ChoiceDim("env.deterministic", (True, False))
    assert _as_choice(flag, "False") is False and _as_choice(flag, "True") is True
    threads = ChoiceDim("env.threads", (1, 2))
    assert _as_choice(threads, np.int64(2)) == 2 and type(_as_choice(threads, np.int64(2))) is int
    assert _as_choice(ChoiceDim("m", ("a", "b")), "b") == "b"


def test_report_of_an_interrupted_sweep_says_so_first_with_how_to_go_on(tmp_path: Path) -> None:
    """A sweep stopped by Ctrl-C (or preempted, or still running) holds fewer trials than it planned: its
    report says so before anything else, with the command that continues it; a sweep that ended says nothing."""
    import dataclasses

    records = records_of("random", n=8)
    assert records.unfinished is None and "Caution" not in build_report(records, out_dir=tmp_path / "a").markdown \
        .read_text()
    tags = {"sweeper.status": "INTERRUPTED", "sweeper.sweep_dir": "/runs/sweep"}
    stopped = dataclasses.replace(records, parent_tags=tags, parent_status="KILLED",
                                  settings={**records.settings, "num_trials": "32"})
    text = build_report(stopped, out_dir=tmp_path / "b").markdown.read_text()
    note = ("this sweep was interrupted (Ctrl-C) after 8 of 32 trials; continue it with: sweeper resume "
            "/runs/sweep")
    assert f"**Caution: {note}.**" in text.split("## ")[0]
    assert json.loads((tmp_path / "b" / "summary.json").read_text())["unfinished"] == note
    preempted = dataclasses.replace(stopped, parent_tags={**tags, "sweeper.status": "PREEMPTED"})
    assert preempted.unfinished.startswith("this sweep was preempted (SIGTERM) after 8 of 32 trials")
    running = dataclasses.replace(records, parent_status="RUNNING")
    assert running.unfinished == ("this sweep has not ended: 8 of 8 trials so far. It is still running, or its "
                                  "driver died; then continue it with: sweeper resume parent")


def test_an_unbounded_accuracy_whose_values_lie_in_0_1_gets_a_caution_suggesting_bounds(tmp_path: Path) -> None:
    """A score named like an accuracy, every finished value in [0, 1], analysed without bounds: the report says
    how to bound it, at the top and in summary.json; with bounds, or a value outside [0, 1], it says nothing."""
    import dataclasses

    records = records_of("random", n=8)
    assert json.loads((build_report(records, out_dir=tmp_path / "a").out_dir / "summary.json").read_text())[
        "bounds_hint"] is None  # smooth() reaches above 1: not a score in [0, 1]
    trials = records.trials.assign(**{"metric.acc": records.trials["metric.acc"].clip(0.0, 1.0)})
    in_unit = dataclasses.replace(records, trials=trials)
    text = build_report(in_unit, out_dir=tmp_path / "b").markdown.read_text()
    hint = json.loads((tmp_path / "b" / "summary.json").read_text())["bounds_hint"]
    assert "`--bounds 0 1`" in hint and "`hydra.sweeper.metric_bounds=[0,1]`" in hint
    assert f"**Caution: {hint}**" in text.split("## ")[0]
    bounded = build_report(in_unit, out_dir=tmp_path / "c", bounds=MetricBounds(0.0, 1.0))
    assert "metric_bounds=[0,1]" not in bounded.markdown.read_text()


def test_the_multiverse_of_a_constant_metric_says_so_and_estimates_nothing(tmp_path: Path) -> None:
    """A metric equal in every trial: no Bayes-factor verdict, no sensitivity indices, and the words first."""
    from sweeper.report.build_multiverse import build_multiverse

    records = records_of("random", n=12)
    frame = records.trials.copy()
    frame["metric.acc"] = 0.8666  # the failed trial #3 stays failed: only finished trials are modelled
    report = build_multiverse(dataclasses_replace(records, trials=frame), out_dir=tmp_path, resolution=5,
                              n_base=64, repeats=2)
    note = "the metric is constant over this sweep (value 0.8666 in all 11 trials)"
    assert report.summary["constant_metric"].startswith(note)
    text = (tmp_path / "multiverse.md").read_text()
    assert f"**Caution: {note}" in text.split("## ")[0] and "Not estimated: the metric is constant" in text
    assert report.summary["sensitivity"] == [] and not (tmp_path / "sensitivity.csv").exists()
    assert {t["verdict"] for t in report.summary["interaction"]["tests"]} == {"no evidence"}


def test_the_multiverse_of_seed_noise_says_no_effect_is_shown_before_its_indices(tmp_path: Path) -> None:
    """A metric that is 0.8 plus noise in every trial: the maps and indices are drawn, under a caution that says
    they are not findings, and the Bayes-factor table says first that no effect of any choice is shown."""
    from sweeper.report.build_multiverse import build_multiverse

    records = records_of("random", n=24)
    frame = records.trials.copy()
    frame["metric.acc"] = np.round(0.8 + np.random.default_rng(0).normal(0.0, 0.05, len(frame)), 4)
    report = build_multiverse(dataclasses_replace(records, trials=frame), out_dir=tmp_path, resolution=5,
                              n_base=64, repeats=2)
    effect = report.summary["effect"]
    assert effect["permutations"] == 19 and effect["p_value"] > 0.05 and effect["verdict"].startswith("not shown")
    text = (tmp_path / "multiverse.md").read_text()
    assert f"**Caution: {effect['caution']}.**" in text.split("## ")[0]
    assert "do not show that `acc` depends on any choice" in effect["caution"]
    interactions, sensitivity = text.split("## Interaction tests")[1].split("## Sensitivity")
    assert "Not findings: no effect of any choice is shown" in interactions
    assert "Not findings: no effect of any choice is shown" in sensitivity
    assert "the interaction verdicts and the Sobol indices describe what may be noise" in effect["caution"]
    assert f"| any effect (the GP against a constant) | {effect['log10_K']:.2f} | {effect['verdict']} |" in text
    assert len(report.summary["sensitivity"]) == 2  # still drawn and written, for who wants to look


def dataclasses_replace(records: SweepRecords, **changes: Any) -> SweepRecords:
    import dataclasses

    return dataclasses.replace(records, **changes)


# ---------------------------------------------------------------- advice that can be followed (issue 35, item 5)
def test_the_caution_names_the_phases_that_produced_the_trials(tmp_path: Path) -> None:
    records = records_of("sobol")
    records.trials.loc[records.trials["index"] >= 16, "phase"] = "ivr"  # 16 Sobol points, then GP-chosen ones
    records = replace(records, strategy="ivr")
    text = build_report(records, out_dir=tmp_path, surrogate=False).markdown.read_text().split("## ")[0]
    assert "came from `sobol` (15) and `ivr` (8)" in text  # the kept trials (#3 failed), by phase


def test_group_by_a_continuous_dim_is_refused_with_what_to_do_instead(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match=r"--group-by 'x': x is a continuous dim, so every trial has a value of "
                                          r"its own .* use `sweeper multiverse` to see how the metric depends on x"):
        build_report(records_of("sobol"), out_dir=tmp_path, group_by="x", surrogate=False)


def test_a_sweep_whose_trials_all_failed_says_so_and_why(tmp_path: Path) -> None:
    from sweeper.report.build_multiverse import build_multiverse

    records = records_of("sobol", n=6)
    trials = records.trials.assign(status="FAILED", error="ValueError: boom").drop(columns=["metric.acc"])
    with pytest.raises(ReportError, match=r"no trial of sweep parent finished \(6 trials, 6 failed; the most common "
                                          r"error \(6 of them\): ValueError: boom\)"):
        build_multiverse(replace(records, trials=trials), out_dir=tmp_path / "mv")
