"""MultiverseSearch in plain Ray Tune (no Hydra), on a real local Ray."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from sweeper.run.searcher import TRIAL_KEY, MultiverseSearch

pytestmark = pytest.mark.integration

SPACE = {"x": "interval(0, 1)", "lr": "tag(log, interval(1e-4, 1e-1))"}
FAST = dict(n_candidates=512, n_integration=256, gp_restarts=2)


def objective(config: dict) -> dict:
    import math

    return {"score": -((config["x"] - 0.3) ** 2) - (math.log10(config["lr"]) + 2) ** 2}


def objective_reading_its_trial_info(config: dict) -> dict:
    """The trainable still reads the trial's metadata as a mapping."""
    return {**objective(config), "index_seen": config[TRIAL_KEY]["index"], "phase_seen": config[TRIAL_KEY]["phase"]}


def test_plain_tune_run_uses_the_searcher(ray_local, tmp_path: Path) -> None:
    from ray import tune

    search = MultiverseSearch(SPACE, metric="score", mode="max", strategy="ivr", num_trials=12, n_initial=4,
                              batch_size=4, **FAST)
    results = tune.Tuner(
        objective_reading_its_trial_info,
        # One worker for all trials: a new actor each (Tune's default here) starts one at a time behind a searcher
        # (TUNE_MAX_PENDING_TRIALS_PG=1), ~3 s per trial of this instant objective; 36 s -> 5 s in all.
        tune_config=tune.TuneConfig(search_alg=search, num_samples=12, reuse_actors=True),
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit()
    assert len(results) == 12 and not results.errors
    metas = sorted((r.config[TRIAL_KEY] for r in results), key=lambda m: m["index"])
    assert [m["index"] for m in metas] == list(range(12))
    assert [m["phase"] for m in metas] == ["sobol"] * 4 + ["ivr"] * 8
    assert len(search.policy.results) == 12
    X = np.array([s.x for s in search.policy.suggestions])
    assert min(np.linalg.norm(a - b) for a, b in itertools.combinations(X, 2)) > 1e-3
    for r in results:
        assert 1e-4 <= r.config["lr"] <= 1e-1
        meta = r.config[TRIAL_KEY]
        assert (r.metrics["index_seen"], r.metrics["phase_seen"]) == (meta["index"], meta["phase"])
        # Tune names the trial's folder after its config: the metadata shows as its index alone (issue 16).
        folder = Path(r.path).name
        assert f"sweeper_trial={meta['index']}" in folder and "predicted_mean" not in folder, folder


def test_save_restore_keeps_a_pending_trial(tmp_path: Path) -> None:
    """Ray Tune's SaveRestoreCheckpointTest, for our searcher (no cluster needed)."""
    search = MultiverseSearch(SPACE, metric="score", mode="max", num_trials=10, n_initial=3, batch_size=2, **FAST)
    configs = {f"t{i}": search.suggest(f"t{i}") for i in range(3)}
    for tid in ("t0", "t1"):
        search.on_trial_complete(tid, objective(configs[tid]))
    path = tmp_path / "searcher.json"
    search.save(str(path))

    restored = MultiverseSearch(SPACE, metric="score", mode="max", num_trials=10, n_initial=3, batch_size=2, **FAST)
    restored.restore(str(path))
    assert restored.policy.pending == [2]
    assert restored.suggestion_for("t2").index == 2
    for s in (search, restored):
        s.on_trial_complete("t2", objective(configs["t2"]))
    nxt = [s.suggest("t3") for s in (search, restored)]
    assert nxt[0] == nxt[1] and nxt[0][TRIAL_KEY]["phase"] == "ivr"
    # Tune asking again for a trial it restarts gets the same point, not a new one.
    assert restored.suggest("t3") == nxt[1]


def test_failed_and_errored_trials_count_as_failures() -> None:
    search = MultiverseSearch(SPACE, metric="score", mode="max", strategy="sobol", num_trials=4, max_failures=0)
    search.suggest("a")
    search.suggest("b")
    search.on_trial_complete("a", {"score": float("nan")})
    assert search.policy.n_failed == 1
    assert search.suggest("c") == "FINISHED"  # max_failures=0 exceeded
    search.on_trial_complete("b", None, error=True)
    assert search.policy.n_failed == 2


def test_the_searcher_follows_rays_searcher_contract(tmp_path: Path) -> None:
    """As Ray's own searchers: no suggestion without a metric and mode, and an empty searcher that restore fills."""
    blind = MultiverseSearch(SPACE, num_trials=4, n_initial=2)
    with pytest.raises(RuntimeError, match="no metric or mode"):
        blind.suggest("t0")
    assert blind.set_search_properties("score", "max", {})  # what tune.TuneConfig(metric=, mode=) does
    assert blind.suggest("t0") is not None
    search = MultiverseSearch(SPACE, metric="score", mode="max", num_trials=6, n_initial=3, **FAST)
    first = search.suggest("t0")
    search.on_trial_complete("t0", objective(first))
    path = tmp_path / "searcher.json"
    search.save(str(path))
    empty = MultiverseSearch()
    with pytest.raises(RuntimeError, match="without a search space"):
        empty.suggest("t1")
    empty.restore(str(path))
    assert empty.policy.space.dims == search.policy.space.dims and empty.policy.results == search.policy.results
    assert empty.suggest("t1") == search.suggest("t1")
