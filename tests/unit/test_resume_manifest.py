"""What a resumed sweep may change: where it runs, not what its trials compute."""

from __future__ import annotations


def test_a_resume_may_move_the_sweep_but_not_change_what_its_trials_compute() -> None:
    """``sweeper resume DIR ray.address=...`` moves a sweep to another cluster (docs/clusters.md); a changed fixed
    override of the task's config would mix two conditions in one sweep, and is refused, named."""
    from sweeper.run.resume import SweepManifest
    from sweeper.search.grammar import parse_search_space

    started = parse_search_space({}, ["x=interval(0,1)", "ray.address=10.0.0.1:6379", "sleep_s=3"])
    manifest = SweepManifest("run", "sqlite:///m.db", "e", "/tune", started.to_dict(), "ivr", 0, 8, [], "/")
    moved = parse_search_space({}, ["x=interval(0,1)", "ray.address=null", "ray.num_cpus=2", "sleep_s=3",
                                    "mlflow.tracking_uri=sqlite:///other.db"])
    assert manifest.problems(moved, "ivr", 0, 8) == []
    changed = parse_search_space({}, ["x=interval(0,1)", "sleep_s=4"])
    problems = manifest.problems(changed, "ivr", 0, 8)
    assert problems[0] == ("the fixed overrides changed from ['sleep_s=3'] to ['sleep_s=4']: every trial of a sweep "
                           "runs with the same (ray.* and mlflow.* may change: where the sweep runs, not what it "
                           "measures)")
    assert "search space changed" not in " ".join(problems)
