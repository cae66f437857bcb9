"""``sweeper rerun``'s decisions and ``sweeper report``'s ranking of a rerun, on sweeps built from trial records.

- which configurations are the best (ties, failed trials, mode min, configurations run more than once), read back
  typed from the recorded params;
- which key is the seed (the sweep's seed dim, else env.seed, or --seed-key), and the refusals;
- the rerun's command from the first sweep's manifest;
- the ranking's numbers against their definitions: the Wilson interval against scipy's, Kendall's W against
  Friedman's statistic and the mean Spearman correlation, wins and mean ranks on a table counted by hand.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

from sweeper.analysis.qra import QRA, qra_replicates
from sweeper.analysis.ranking import kendall_w, rank_counts, ranks, wilson_interval
from sweeper.analysis.runs import RunRecord, SweepRecords, trials_frame
from sweeper.analysis.top_configurations import (
    RerunRefusal,
    choose_seed_key,
    configuration_dims,
    top_configurations,
    typed_value,
)
from sweeper.report.document import OutputDir, render_markdown
from sweeper.report.ranking import ranking_section, ranking_stability
from sweeper.run.rerun_command import rerun_command
from sweeper.run.resume import SweepManifest
from sweeper.search.configurations import with_configurations
from sweeper.search.grammar import parse_specs
from sweeper.search.space import ChoiceDim, SearchSpace


def sweep(trials: list[tuple[dict[str, Any], float | None]], space: SearchSpace, *, mode: str = "max",
          tags: dict[str, str] | None = None) -> SweepRecords:
    """A sweep's records: one run per (params, score) in order; a None score is a FAILED trial. Params are
    stored as MLflow stores them (``repr`` of a float, ``str`` of anything else)."""
    runs = []
    for i, (params, score) in enumerate(trials):
        text = {k: repr(v) if isinstance(v, float) else str(v) for k, v in params.items()}
        metrics = {} if score is None else {"score": score}
        runs.append(RunRecord(f"run{i}", "FAILED" if score is None else "FINISHED", 1000 + i, 2000 + i, text,
                              metrics, {"sweeper.trial_index": str(i)}))
    return SweepRecords("exp", "sqlite:///x.db", "first", {"metric": "score", "mode": mode}, space, "score", mode,
                        "random", trials_frame(runs), parent_tags=tags or {}, parent_status="FINISHED")


XY = parse_specs({"x": "interval(0, 1)", "kernel": "choice(rbf, linear)", "shrink": "choice(true, false)"})


def xy(x: float, kernel: str = "rbf", shrink: bool = True, **more: Any) -> dict[str, Any]:
    return {"x": x, "kernel": kernel, "shrink": shrink, "env.seed": 0, **more}


def test_the_best_configurations_with_a_tie_at_the_cut_and_failed_trials_said() -> None:
    records = sweep([(xy(0.5), 0.8), (xy(0.1), 0.9), (xy(0.7), None), (xy(0.3, "linear"), 0.8), (xy(0.2), 0.5)], XY)
    top = top_configurations(records, configuration_dims(records, choose_seed_key(records, None), []), 2)
    assert [(c.rank, c.values, c.score, c.first_trial) for c in top.chosen] == [
        (1, {"x": 0.1, "kernel": "rbf", "shrink": True}, 0.9, 1),
        (2, {"x": 0.5, "kernel": "rbf", "shrink": True}, 0.8, 0)]  # the tie goes to the trial run first
    assert top.candidates == 4
    assert "a tie at the cut: 2 configurations score 0.8; the 1 run first are taken. --top 3 takes them all." \
        in top.notes
    assert "1 failed trial(s) left out of the scores; 1 configuration(s) whose every trial failed are no candidates" \
        in top.notes
    assert type(top.chosen[0].values["shrink"]) is bool  # read back as the sweep gave it, not the text "True"


def test_mode_min_takes_the_lowest_and_refuses_more_than_the_finished_configurations() -> None:
    records = sweep([(xy(0.5), 3.0), (xy(0.1), 1.0), (xy(0.7), None), (xy(0.3), 2.0)], XY, mode="min")
    dims = configuration_dims(records, choose_seed_key(records, None), [])
    assert [c.score for c in top_configurations(records, dims, 3).chosen] == [1.0, 2.0, 3.0]
    with pytest.raises(RerunRefusal, match=r"--top 4: the sweep has 3 configuration\(s\) with a finished trial \(4 "
                                           r"trials, 1 failed, 3 finished with a finite score\). Give --top between "
                                           r"1 and 3"):
        top_configurations(records, dims, 4)


def test_a_configuration_run_over_several_seeds_is_scored_by_its_mean_and_fresh_seeds_follow_the_largest() -> None:
    space = parse_specs({"kernel": "choice(rbf, linear)", "seed": "range(0, 3)"})
    records = sweep([({"kernel": "rbf", "seed": s}, v) for s, v in zip(range(3), (0.9, 0.7, 0.8), strict=True)]
                    + [({"kernel": "linear", "seed": s}, v) for s, v in zip(range(3), (0.85, 0.84, 0.86),
                                                                            strict=True)], space)
    seed = choose_seed_key(records, None)
    assert (seed.key, seed.used, seed.fresh(3)) == ("seed", (0, 1, 2), [3, 4, 5])
    assert seed.reason == "the sweep's seed dim, seed=range(0, 3)"
    top = top_configurations(records, configuration_dims(records, seed, []), 2)
    assert [(c.values, c.n) for c in top.chosen] == [({"kernel": "linear"}, 3), ({"kernel": "rbf"}, 3)]
    assert top.chosen[0].score == pytest.approx(0.85) and top.chosen[1].score == pytest.approx(0.8)
    assert any("ran more than once: each is scored by the mean score" in n for n in top.notes)


def test_the_seed_key_is_the_seed_dim_else_env_seed_else_given_and_refused_when_none() -> None:
    with_env = sweep([(xy(0.5), 0.8)], XY)
    assert choose_seed_key(with_env, None).key == "env.seed"
    two = parse_specs({"data.split_seed": "range(0, 2)", "env.seed": "range(0, 2)", "x": "interval(0, 1)"})
    with pytest.raises(RerunRefusal, match=r"several seed dims \(data.split_seed, env.seed\): choose the one to vary "
                                           r"with --seed-key, e.g. --seed-key data.split_seed"):
        choose_seed_key(sweep([({"data.split_seed": 0, "env.seed": 0, "x": 0.5}, 0.8)], two), None)
    bare = sweep([({"x": 0.5, "kernel": "rbf", "shrink": True, "data.split_seed": 0}, 0.8)], XY)
    with pytest.raises(RerunRefusal, match=r"no seed key found: .* Its configs hold data.split_seed: e.g. "
                                           r"--seed-key data.split_seed\."):
        choose_seed_key(bare, None)
    assert choose_seed_key(bare, "data.split_seed").used == (0,)
    assert choose_seed_key(bare, "+trainer.seed").override_key == "+trainer.seed"
    with pytest.raises(RerunRefusal, match=r"--seed-key data.split_sed: the sweep's trials have no such key .* Did "
                                           r"you mean --seed-key data.split_seed\?"):
        choose_seed_key(bare, "data.split_sed")


def test_a_sweep_of_seeds_and_conditions_only_has_nothing_to_rank() -> None:
    space = parse_specs({"env.seed": "range(0, 2)", "env.threads": "choice(1, 2)"})
    records = sweep([({"env.seed": 0, "env.threads": 1}, 0.8)], space)
    with pytest.raises(RerunRefusal, match="it measured one configuration, so there is nothing to rank"):
        configuration_dims(records, choose_seed_key(records, None), [])


def test_recorded_params_are_read_back_as_the_dims_gave_them() -> None:
    dim = ChoiceDim("v", (None, True, 1, 1.5, "a b", [1, 2]))
    assert [typed_value(dim, text) for text in ("None", "True", 1, 1.5, "a b", "[1, 2]")] == list(dim.choices)
    assert typed_value(XY.dims[0], 0.30000000000000004) == 0.30000000000000004
    with pytest.raises(LookupError):
        typed_value(dim, "c")


def test_the_rerun_command_replaces_the_space_and_keeps_how_trials_run() -> None:
    first = SearchSpace((*parse_specs({"x": "interval(0, 1)", "+z": "choice(1, 2)", "w": "choice(a, b)"}).dims,),
                        ("y=0.5", "k=1", "env.seed=3"))
    command = ["python", "app.py", "--multirun", "hydra/sweeper=multiverse", "-cn", "other", "x=interval(0,1)", "y=0.5",
               "+z=choice(1,2)", "hydra.sweeper.params.w=choice(a,b)", "env.seed=3", "hydra.sweep.dir=/old",
               "hydra.sweeper.num_trials=9", "hydra.sweeper.metric=acc", "ray.address=auto"]
    manifest = SweepManifest("first", "sqlite:///m.db", "exp", "/old/tune", first.to_dict(), "ivr", 0, 9, command,
                             "/work")
    rerun = rerun_command(manifest, configurations=[{"x": 0.25, "+z": 2, "w": "a"}, {"x": 0.5, "+z": 1, "w": "b"}],
                          seed_key="env.seed", seeds=[4, 5], env=[("env.threads", "1,2")], sweep_dir=Path("/new"),
                          first_run_id="abc")
    assert rerun == [
        "python", "app.py", "--multirun", "hydra/sweeper=multiverse", "-cn", "other", "y=0.5",
        "hydra.sweeper.metric=acc", "ray.address=auto", "hydra.sweeper.params={}", "k=1",
        "hydra.sweeper.strategy=grid", "hydra.sweeper.num_trials=null", "hydra.sweeper.grid_repeats=1",
        "hydra.sweeper.stop_on_bayes_factor=null", "hydra.sweeper.configurations=[{x:0.25,+z:2,w:a},{x:0.5,+z:1,w:b}]",
        "env.seed=choice(4,5)", "env.threads=1,2", "hydra.sweep.dir=/new", "hydra.sweeper.rerun_of=abc"]


def test_rerun_of_is_a_run_id_and_a_store_that_is_not_there_holds_none_and_is_not_made(tmp_path: Path) -> None:
    from sweeper.run.sweep_validation import rerun_problems

    absent = {"tracking_uri": f"sqlite:///{tmp_path / 'none.db'}"}
    assert rerun_problems(None, absent) == []
    (bad,) = rerun_problems("not a run!", absent)
    assert bad.startswith("hydra.sweeper.rerun_of='not a run!' is invalid: the MLflow run id of a sweep")
    (missing,) = rerun_problems("abc123", absent)
    assert "holds no run of that id" in missing and "`sweeper trials --experiment NAME --tracking-uri" in missing
    assert not (tmp_path / "none.db").exists()


def test_the_wilson_interval_is_scipys() -> None:
    for k, n in [(0, 1), (0, 5), (3, 5), (5, 5), (7, 10), (13, 40), (1, 200)]:
        expected = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
        assert wilson_interval(k, n) == pytest.approx((expected.low, expected.high), abs=1e-12)
    assert wilson_interval(9, 12, 0.9) == pytest.approx(tuple(stats.binomtest(9, 12).proportion_ci(0.9, "wilson")))
    assert all(math.isnan(v) for v in wilson_interval(0, 0))


def test_kendalls_w_is_friedmans_statistic_over_m_n_minus_1_and_gives_the_mean_spearman_rho() -> None:
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(5, 7)) + np.arange(5)[:, None] * 0.7  # 5 configurations, 7 replicates
    r = ranks(scores, maximize=True)
    n, m = r.shape
    w = kendall_w(r)
    assert w == pytest.approx(stats.friedmanchisquare(*(-scores)).statistic / (m * (n - 1)), rel=1e-12)
    rho = np.mean([stats.spearmanr(r[:, a], r[:, b]).statistic for a, b in itertools.combinations(range(m), 2)])
    assert rho == pytest.approx((m * w - 1) / (m - 1), rel=1e-12)
    tied = np.round(scores, 0)  # ties: the tie-corrected W is still Friedman's (scipy corrects for ties too)
    assert kendall_w(ranks(tied, True)) == pytest.approx(
        stats.friedmanchisquare(*(-tied)).statistic / (m * (n - 1)), rel=1e-12)
    assert kendall_w(ranks(np.tile(np.arange(4.0)[:, None], (1, 3)), True)) == pytest.approx(1.0)
    assert kendall_w([[1, 3], [2, 2], [3, 1]]) == 0.0
    assert math.isnan(kendall_w([[1], [2]])) and math.isnan(kendall_w([[1.5, 1.5], [1.5, 1.5]]))


def test_wins_and_mean_ranks_over_the_complete_replicates_counted_by_hand() -> None:
    values = np.array([[0.9, 0.8, 0.7, 0.9, np.nan],
                       [0.8, 0.9, 0.7, 0.8, 0.99],
                       [0.1, 0.2, 0.7, 0.9, 0.5]])
    counts = rank_counts(values, maximize=True)
    assert counts.complete.tolist() == [True, True, True, True, False] and counts.m == 4
    # best: A; B; all three tie; A and C tie.
    np.testing.assert_allclose(counts.wins, [1 + 1 / 3 + 1 / 2, 1 + 1 / 3, 1 / 3 + 1 / 2])
    np.testing.assert_allclose(counts.mean_rank, [(1 + 2 + 2 + 1.5) / 4, (2 + 1 + 2 + 3) / 4, (3 + 3 + 2 + 1.5) / 4])
    assert counts.best_ties == 2
    minimize = rank_counts(-values, maximize=False)
    np.testing.assert_allclose(minimize.wins, counts.wins)


def rerun_records(values: dict[tuple[int, int], float | None]) -> SweepRecords:
    """A rerun: two configurations of (x, kernel) over env.seed 1..4, scores as given (None: failed)."""
    configs = [{"x": 0.1, "kernel": "rbf"}, {"x": 0.7, "kernel": "linear"}]
    space = with_configurations(parse_specs({"env.seed": "range(1, 5)"}), configs, strategy="grid")
    assert space is not None
    trials = [({**configs[c], "env.seed": s}, values[c, s]) for c, s in itertools.product(range(2), range(1, 5))]
    return sweep(trials, space, tags={"sweeper.rerun_of": "first"})


def test_the_report_ranks_the_configurations_of_a_rerun(tmp_path: Path) -> None:
    scores = {(0, 1): 0.9, (0, 2): 0.85, (0, 3): 0.7, (0, 4): 0.88,
              (1, 1): 0.8, (1, 2): 0.86, (1, 3): None, (1, 4): 0.88}
    records = rerun_records(scores)
    ranking = ranking_stability(records, records.finished(), "score", maximize=True)
    assert ranking is not None
    assert (ranking.replicate_dims, ranking.replicates, ranking.complete, ranking.best_ties) == (["env.seed"], 4, 3, 1)
    first, second = ranking.rows
    assert first.configuration == {"x": 0.1, "kernel": "rbf"} and (first.n, first.failed) == (4, 0)
    assert (second.n, second.failed) == (3, 1)
    assert (first.wins, second.wins) == (1.5, 1.5)  # seed 1: first; seed 2: second; seed 4: a tie; seed 3 left out
    assert first.p_best == 0.5 and first.p_best_ci == pytest.approx(wilson_interval(1.5, 3))
    assert (first.mean_rank, second.mean_rank) == (1.5, 1.5) and ranking.kendall_w == 0.0
    expected = qra_replicates([0.9, 0.85, 0.7, 0.88], keys=["1", "2", "3", "4"])
    assert isinstance(first.qra, QRA) and first.qra.cv_star == pytest.approx(expected.cv_star, rel=1e-12)
    out = OutputDir(tmp_path / "report")
    text = render_markdown(ranking_section(out, ranking, metric="score"))
    assert "re-running the best 2 of sweep `first`" in text and "1 of 4 replicates are left out" in text
    assert "| 1 | x=0.1, kernel=rbf | 4 | 0 | 0.8325 |" in text and "| 1.5 of 3 | 0.50 |" in text
    assert "Kendall's W = 0.000" in text


def test_a_sweep_without_configurations_has_no_ranking() -> None:
    assert ranking_stability(sweep([(xy(0.1), 0.8)], XY), sweep([(xy(0.1), 0.8)], XY).trials, "score", True) is None


def test_qra_groups_a_configuration_over_a_seed_key_that_is_not_env_or_seed() -> None:
    """A rerun whose seed key is ``data.split_seed``: each configuration is one object, its splits the replicates."""
    import pandas as pd

    from sweeper.report.groups import qra_groups

    rows = [{"index": i, "run_id": f"r{i}", "param.C": c, "param.data.split_seed": s,
             "metric.acc": 0.8 + 0.1 * (c == 10.0) + 0.01 * s}
            for i, (c, s) in enumerate((c, s) for c in (1.0, 10.0) for s in (1, 2, 3))]
    trials = pd.DataFrame(rows)
    assert qra_groups(trials, ["acc"]) == []  # without it, each split is another object of one trial
    groups = qra_groups(trials, ["acc"], replicates=["data.split_seed"])
    assert [(g.object, len(g.table)) for g in groups] == [({"C": 1.0}, 3), ({"C": 10.0}, 3)]
    assert all(g.conditions == ["param.data.split_seed"] for g in groups)
    qra = groups[1].results["acc"]
    assert qra.n == 3 and qra.mean == pytest.approx(0.92)
