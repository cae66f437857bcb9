"""MultiversePolicy: re-planning the rest of a batch as results arrive, warm-started refits, the prior."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable

import numpy as np
import pytest

import sweeper.search.gp_batch as gp_batch_module
from sweeper.errors import SweeperConfigError
from sweeper.search.gp_batch import WARM_RESTARTS
from sweeper.search.gp_fit import dimension_scaled_prior, fit_gp
from sweeper.search.grammar import parse_specs
from sweeper.search.policy import MultiversePolicy
from sweeper.search.settings import PolicySettings

SPACE_2D = parse_specs({"x": "interval(0, 1)", "y": "interval(0, 1)"})
FAST = dict(n_candidates=256, n_integration=128, gp_restarts=3)


def branin01(x: float, y: float) -> float:
    a, b = 15 * x - 5, 15 * y
    return ((b - 5.1 / (4 * math.pi**2) * a**2 + 5 / math.pi * a - 6) ** 2
            + 10 * (1 - 1 / (8 * math.pi)) * math.cos(a) + 10)


def value(s) -> float:
    return branin01(s.params["x"], s.params["y"])


def long_trials() -> Callable[[], float]:
    """A clock on which ten minutes pass between readings: trials far longer than a refit."""
    ticks = itertools.count(step=600.0)
    return lambda: float(next(ticks))


@pytest.fixture
def fits(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """Every fit_gp call of the policy: its n, restarts, warm start and prior."""
    calls: list[dict] = []

    def spy(X, y, **kwargs):
        calls.append({"n": len(y), "n_restarts": kwargs["n_restarts"], "init": kwargs.get("init"),
                      "prior": kwargs.get("lengthscale_prior")})
        return fit_gp(X, y, **kwargs)

    monkeypatch.setattr(gp_batch_module, "fit_gp", spy)
    return calls


def started(settings: PolicySettings) -> MultiversePolicy:
    """A policy whose Sobol phase has finished (results told)."""
    policy = MultiversePolicy(SPACE_2D, settings, clock=long_trials())
    for _ in range(settings.n_initial):
        s = policy.ask()
        policy.tell(s.index, value(s))
    return policy


def test_the_rest_of_a_batch_is_replanned_when_results_arrived(fits: list[dict]) -> None:
    settings = PolicySettings(num_trials=16, n_initial=6, batch_size=4, **FAST)
    policy = started(settings)
    first = policy.ask()  # plans the batch: a full fit on 6 results
    assert [c["n"] for c in fits] == [6] and fits[0]["init"] is None and fits[0]["n_restarts"] == 3
    planned = list(policy._batch_plan.plan)
    policy.tell(first.index, value(first))
    second = policy.ask()  # a result came in: refit (warm) and re-plan the 2 + 1 left
    assert [c["n"] for c in fits] == [6, 7]
    assert fits[1]["init"] is not None and fits[1]["n_restarts"] == WARM_RESTARTS
    assert second.batch == first.batch == 1 and second.phase == "ivr"
    assert second.x != planned[0].x  # a fresh plan (new hyperparameters, new candidates)
    assert len(policy._batch_plan.plan) == 2
    # No new result: the plan is handed out as it stands, no fit.
    third = policy.ask()
    assert len(fits) == 2 and third == policy.suggestions[-1]
    # A failure is no new information for the fit: no re-plan either.
    policy.tell(second.index, float("nan"))
    policy.ask()
    assert len(fits) == 2
    # The next batch starts warm too.
    for s in policy.suggestions:
        if s.index not in policy.results:
            policy.tell(s.index, value(s))
    nxt = policy.ask()
    assert nxt.batch == 2 and fits[-1]["init"] is not None and fits[-1]["n_restarts"] == WARM_RESTARTS


def test_trials_shorter_than_a_refit_keep_their_batch(fits: list[dict]) -> None:
    """Results every few milliseconds (a trivial task): re-planning would stall Tune's loop."""
    now = [0.0]
    settings = PolicySettings(num_trials=16, n_initial=6, batch_size=4, **FAST)
    policy = MultiversePolicy(SPACE_2D, settings, clock=lambda: now[0])
    for _ in range(settings.n_initial):
        s = policy.ask()
        policy.tell(s.index, value(s))
    first = policy.ask()
    planned = list(policy._batch_plan.plan)
    now[0] += 0.001  # the result is in a millisecond later: far less than the fit took
    policy.tell(first.index, value(first))
    assert policy.ask() == planned[0] and [c["n"] for c in fits] == [6]
    now[0] += 600  # ten minutes later, another result: now a refit is cheap next to the trials
    policy.tell(planned[0].index, value(planned[0]))
    policy.ask()
    assert [c["n"] for c in fits] == [6, 8]


def test_pending_points_are_conditioned_on_when_replanning() -> None:
    settings = PolicySettings(num_trials=24, n_initial=8, batch_size=8, **FAST)
    policy = started(settings)
    asked = [policy.ask() for _ in range(4)]
    policy.tell(asked[0].index, value(asked[0]))
    rest = [policy.ask() for _ in range(4)]  # re-planned, with 3 still pending
    X = np.array([s.x for s in policy.suggestions])
    assert len({tuple(x) for x in X}) == len(X)
    d = min(np.linalg.norm(np.array(a.x) - np.array(b.x)) for a in asked[1:] for b in rest)
    assert d > 0.02  # not stacked on the pending points


def test_deterministic_mode_never_replans_or_warm_starts(fits: list[dict]) -> None:
    settings = PolicySettings(num_trials=16, n_initial=4, batch_size=4, deterministic=True, **FAST)
    policy = MultiversePolicy(SPACE_2D, settings, clock=long_trials())
    while (s := policy.ask()) is not None:
        policy.tell(s.index, value(s))  # results arrive after every ask
    assert len(policy.suggestions) == 16
    assert [c["n"] for c in fits] == [4, 8, 12]  # one fit per batch
    assert all(c["init"] is None and c["n_restarts"] == 3 for c in fits)


def test_state_round_trip_with_a_replanned_batch_continues_identically() -> None:
    settings = PolicySettings(num_trials=20, n_initial=6, batch_size=6, seed=4, **FAST)
    original = started(settings)
    a = original.ask()
    original.tell(a.index, value(a))
    b = original.ask()  # re-planned
    c = original.ask()  # from the re-plan; b and c running
    state = json.loads(json.dumps(original.state_dict()))
    assert state["plan_ok"] == 7 and state["warm_start"] is not None
    restored = MultiversePolicy(SPACE_2D, settings, clock=long_trials())
    restored.load_state_dict(state)
    assert restored.pending == [b.index, c.index]
    for policy in (original, restored):
        policy.tell(b.index, value(b))
        policy.tell(c.index, value(c))
        while (s := policy.ask()) is not None:
            policy.tell(s.index, value(s))
    assert [s.x for s in original.suggestions] == [s.x for s in restored.suggestions]


def test_an_older_state_without_plan_fields_loads() -> None:
    settings = PolicySettings(num_trials=12, n_initial=6, batch_size=4, **FAST)
    policy = started(settings)
    policy.ask()
    state = policy.state_dict()
    del state["plan_ok"], state["warm_start"]
    restored = MultiversePolicy(SPACE_2D, settings, clock=long_trials())
    restored.load_state_dict(state)
    assert restored.ask().index == 7  # the saved plan, not re-planned (no result since)


def test_lengthscale_prior_setting_reaches_the_fit(fits: list[dict]) -> None:
    policy = started(PolicySettings(num_trials=10, n_initial=6, batch_size=4, gp_lengthscale_prior=True, **FAST))
    policy.ask()
    assert fits[0]["prior"] == dimension_scaled_prior(2)
    with pytest.raises(SweeperConfigError, match="gp_lengthscale_prior"):
        MultiversePolicy(SPACE_2D, PolicySettings(gp_lengthscale_prior="yes"))  # type: ignore[arg-type]  # on purpose


def test_local_search_adds_candidates_near_the_best(monkeypatch: pytest.MonkeyPatch) -> None:
    from sweeper.search.acquisition import integrated_variance_reduction
    from sweeper.search.local_search import local_ivr_candidates

    X = np.array([[0.1, 0.1], [0.9, 0.9], [0.5, 0.2]])
    gp = fit_gp(X, np.array([0.0, 1.0, 0.5]), seed=0, n_restarts=1)
    cand = np.random.default_rng(0).random((64, 2))
    mc = np.random.default_rng(1).random((128, 2))
    local = local_ivr_candidates(gp, X, cand, mc, np.random.default_rng(2), columns=np.array([0]))
    assert local.shape == (2 * 8 * 32, 2)
    assert np.all((local >= 0) & (local <= 1))
    assert set(np.round(local[:, 1], 12)) <= set(np.round(cand[:, 1], 12))  # column 1 not moved
    best = integrated_variance_reduction(gp, X, cand, mc).max()
    assert integrated_variance_reduction(gp, X, local, mc).max() >= best

    policy = started(PolicySettings(num_trials=10, n_initial=6, batch_size=4, ivr_local_search=True, **FAST))
    assert policy.ask().phase == "ivr"
    with pytest.raises(SweeperConfigError, match="ivr_local_search"):
        MultiversePolicy(SPACE_2D, PolicySettings(ivr_local_search=1))  # type: ignore[arg-type]  # on purpose


def test_ucb_keeps_its_batches_and_full_restarts(fits: list[dict]) -> None:
    settings = PolicySettings(strategy="ucb", num_trials=14, n_initial=6, batch_size=4, **FAST)
    policy = started(settings)
    while (s := policy.ask()) is not None:
        policy.tell(s.index, value(s))  # a result before every ask
    assert [c["n"] for c in fits] == [6, 10]  # one fit per batch, no re-plan
    assert all(c["init"] is None and c["n_restarts"] == 3 for c in fits)
