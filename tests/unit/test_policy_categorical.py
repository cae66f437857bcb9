"""MultiversePolicy over categorical dimensions (coregionalized GP) and stop_on_bayes_factor."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from sweeper.errors import SweeperConfigError
from sweeper.search.grammar import parse_specs
from sweeper.search.policy import BayesFactorCheck, MultiversePolicy
from sweeper.search.settings import PolicySettings

FAST = dict(n_candidates=256, n_integration=256, gp_restarts=2)
MIXED = parse_specs({"model": "choice(a, b, c)", "x": "interval(0, 1)"})
OFFSET = {"a": 0.0, "b": 0.3, "c": 1.0}


def run(policy: MultiversePolicy, f) -> None:
    while (s := policy.ask()) is not None:
        policy.tell(s.index, f(s.params))


def mixed_f(p: dict) -> float:
    return math.sin(6 * p["x"]) + OFFSET[p["model"]]


@pytest.mark.parametrize("strategy", ["ivr", "ucb"])
def test_gp_phase_models_categorical_dims(strategy: str) -> None:
    # The balanced Sobol phase shows each model once; then the GP phase models all three.
    policy = MultiversePolicy(MIXED, PolicySettings(strategy=strategy, num_trials=15, n_initial=3,
                                                    batch_size=4, seed=3, **FAST))
    run(policy, mixed_f)
    assert sorted(s.params["model"] for s in policy.suggestions[:3]) == ["a", "b", "c"]
    gp_phase = [s for s in policy.suggestions if s.phase == strategy]
    assert len(gp_phase) == 12
    assert all(s.predicted_sd is not None for s in gp_phase)
    if strategy == "ivr":
        assert {s.params["model"] for s in gp_phase} == {"a", "b", "c"}
    else:  # UCB exploits: most of its points go to one model, the one that looks best
        models = [s.params["model"] for s in gp_phase]
        assert max(models.count(m) for m in "abc") > len(models) / 2


def test_ivr_spreads_over_categories_and_the_continuous_dim() -> None:
    policy = MultiversePolicy(MIXED, PolicySettings(strategy="ivr", num_trials=24, n_initial=6,
                                                    batch_size=6, seed=0, **FAST))
    run(policy, mixed_f)
    ivr = [s for s in policy.suggestions if s.phase == "ivr"]
    counts = {m: sum(s.params["model"] == m for s in ivr) for m in "abc"}
    assert min(counts.values()) >= 3, counts  # no category is starved
    for m in "abc":  # and within a category the points spread along x
        x = sorted(s.params["x"] for s in policy.suggestions if s.params["model"] == m)
        assert x[-1] - x[0] > 0.5, (m, x)


def test_categorical_only_space_runs_ivr() -> None:
    space = parse_specs({"model": "choice(a, b, c)", "data": "choice(u, v)"})
    policy = MultiversePolicy(space, PolicySettings(strategy="ivr", num_trials=12, n_initial=2,
                                                    batch_size=5, seed=1, **FAST))
    run(policy, lambda p: OFFSET[p["model"]] + (0.5 if p["data"] == "v" else 0.0))
    combos = {(s.params["model"], s.params["data"]) for s in policy.suggestions}
    assert len(combos) == 6  # every combination measured


def additive(p: dict) -> float:
    return math.sin(3 * p["x"]) + p["y"] ** 2


def interacting(p: dict) -> float:
    return math.sin(6 * p["x"] * p["y"])


SPACE_2D = parse_specs({"x": "interval(0, 1)", "y": "interval(0, 1)"})


@pytest.mark.parametrize(("f", "verdict", "sign"), [(additive, "no interaction", 1), (interacting, "interaction", -1)])
def test_stop_on_bayes_factor_ends_the_sweep_when_conclusive(f, verdict: str, sign: int) -> None:
    settings = PolicySettings(strategy="ivr", num_trials=64, n_initial=16, batch_size=8, seed=0,
                              deterministic=True, stop_on_bayes_factor=10.0, **FAST)
    policy = MultiversePolicy(SPACE_2D, settings)
    seen: list[BayesFactorCheck] = []
    policy.on_bayes_factor = seen.append
    run(policy, f)
    assert policy.is_finished and len(policy.suggestions) < 64
    stop = policy.stopped_on_bayes_factor
    assert stop is not None and stop.verdict == verdict and sign * stop.log10_K > 1
    assert seen == policy.bayes_factors and seen[-1] == stop
    # The test ran before each batch, on every result of the earlier batches.
    assert [c.batch for c in seen] == list(range(1, len(seen) + 1))
    assert [c.n for c in seen] == [16 + 8 * i for i in range(len(seen))]
    assert len(policy.suggestions) == stop.n


def test_the_in_sweep_interaction_test_fits_on_a_subset_as_the_search_does(monkeypatch: pytest.MonkeyPatch) -> None:
    import sweeper.search.policy

    real, calls = sweeper.search.policy.interaction_bayes_factor, []

    def recorded(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(sweeper.search.policy, "interaction_bayes_factor", recorded)
    settings = PolicySettings(strategy="ivr", num_trials=64, n_initial=16, batch_size=8, seed=0, deterministic=True,
                              stop_on_bayes_factor=10.0, gp_max_fit_points=20, gp_refine_max_points=None, **FAST)
    policy = MultiversePolicy(SPACE_2D, settings)
    run(policy, interacting)
    assert calls and all(c["max_fit_points"] == 20 and c["refine_max_points"] is None for c in calls)
    assert policy.stopped_on_bayes_factor is not None and policy.stopped_on_bayes_factor.verdict == "interaction"


def test_inconclusive_threshold_runs_to_the_end_and_state_keeps_the_checks() -> None:
    settings = PolicySettings(strategy="sobol", num_trials=24, batch_size=8, seed=0, stop_on_bayes_factor=1e300)
    policy = MultiversePolicy(SPACE_2D, settings)
    run(policy, additive)
    assert len(policy.suggestions) == 24 and policy.stopped_on_bayes_factor is None
    assert [c.batch for c in policy.bayes_factors] == [1, 2]
    assert all(c.verdict == "inconclusive" for c in policy.bayes_factors)
    state = json.loads(json.dumps(policy.state_dict()))
    again = MultiversePolicy(SPACE_2D, settings)
    again.load_state_dict(state)
    assert again.bayes_factors == policy.bayes_factors


def test_stop_on_bayes_factor_needs_two_dims() -> None:
    space = parse_specs({"x": "interval(0, 1)"})
    with pytest.raises(SweeperConfigError, match="stop_on_bayes_factor=10.0 needs at least 2 dimensions"):
        MultiversePolicy(space, PolicySettings(stop_on_bayes_factor=10.0))


def test_categorical_points_are_snapped_to_their_choice() -> None:
    policy = MultiversePolicy(MIXED, PolicySettings(strategy="ivr", num_trials=8, n_initial=3, batch_size=5,
                                                    seed=2, **FAST))
    run(policy, mixed_f)
    for s in policy.suggestions:
        k = "abc".index(s.params["model"])
        assert s.x[0] == pytest.approx((k + 0.5) / 3)
    assert np.isfinite([s.acquisition for s in policy.suggestions if s.phase == "ivr"]).all()


def test_deterministic_interaction_test_waits_for_every_earlier_result() -> None:
    settings = PolicySettings(strategy="ivr", num_trials=20, n_initial=12, batch_size=4, seed=0,
                              deterministic=True, stop_on_bayes_factor=10.0, **FAST)
    policy = MultiversePolicy(SPACE_2D, settings)
    first = [policy.ask() for _ in range(12)]
    for s in first[:-1]:
        policy.tell(s.index, interacting(s.params))
    assert policy.ask() is None and not policy.bayes_factors and not policy.is_finished  # #11 still runs
    policy.tell(first[-1].index, interacting(first[-1].params))
    policy.ask()
    assert [c.n for c in policy.bayes_factors] == [12]


def test_grid_is_the_full_factorial_in_a_seeded_order_then_replicated() -> None:
    space = parse_specs({"env.seed": "range(0, 4)", "env.threads": "choice(1, 2)",
                                    "env.deterministic": "choice(true, false)", "n": "int(interval(1, 3))"})
    policy = MultiversePolicy(space, PolicySettings(strategy="grid", num_trials=96, grid_repeats=2, seed=5))
    run(policy, lambda p: 0.0)
    combos = [tuple(s.params[k] for k in ("env.seed", "env.threads", "env.deterministic", "n"))
              for s in policy.suggestions]
    assert len(set(combos[:48])) == 48 and combos[48:] == combos[:48]  # every cell once, then again
    other = MultiversePolicy(space, PolicySettings(strategy="grid", num_trials=96, grid_repeats=2, seed=6))
    run(other, lambda p: 0.0)
    again = MultiversePolicy(space, PolicySettings(strategy="grid", num_trials=96, grid_repeats=2, seed=5))
    run(again, lambda p: 0.0)
    assert [s.params for s in again.suggestions] == [s.params for s in policy.suggestions]
    assert [s.params for s in other.suggestions] != [s.params for s in policy.suggestions]
    # Unlike Sobol's coupled cells, every seed meets both thread counts under both settings.
    assert {(c[0], c[1], c[2]) for c in combos[:48]} == {(s, t, d) for s in range(4) for t in (1, 2)
                                                         for d in (True, False)}


def test_grid_refuses_float_dims_and_huge_grids() -> None:
    with pytest.raises(SweeperConfigError, match=r"strategy='grid' needs every dimension discrete, but x is a float"):
        MultiversePolicy(parse_specs({"x": "interval(0, 1)", "k": "a,b"}), PolicySettings(strategy="grid"))
    big = parse_specs({"a": "int(interval(1, 2000))", "b": "int(interval(1, 2000))"})
    with pytest.raises(SweeperConfigError, match="would enumerate 4000000 combinations"):
        MultiversePolicy(big, PolicySettings(strategy="grid"))


def test_the_sobol_design_balances_category_combinations() -> None:
    space = parse_specs({"lr": "interval(0, 1)", "model": "choice(a, b)", "data": "choice(u, v)",
                                    "opt": "choice(sgd, adam)"})
    for seed in range(4):
        policy = MultiversePolicy(space, PolicySettings(strategy="sobol", num_trials=16, seed=seed))
        run(policy, lambda p: 0.0)
        cells = [(s.params["model"], s.params["data"], s.params["opt"]) for s in policy.suggestions]
        assert {cells.count(c) for c in set(cells)} == {2} and len(set(cells)) == 8
