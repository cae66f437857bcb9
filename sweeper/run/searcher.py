"""Ray Tune adaptor: :class:`MultiverseSearch` translates between Tune and the policy."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from ray.tune.search import Searcher

from sweeper.run.trial_info import TrialInfo
from sweeper.search.grammar import parse_specs
from sweeper.search.policy import MultiversePolicy, Suggestion
from sweeper.search.settings import TRIAL_KEY, PolicySettings
from sweeper.search.space import SearchSpace

__all__ = ["TRIAL_KEY", "MultiverseSearch", "TrialInfo"]

log = logging.getLogger(__name__)


class MultiverseSearch(Searcher):
    """A Ray Tune searcher: Sobol design, then GP integrated variance reduction.

    Works in plain Ray Tune as well as behind ``hydra/sweeper=multiverse``. Each trial's
    config holds the point in original units under the dimension names, plus the key
    ``"sweeper_trial"`` with its index, phase, batch, acquisition value and the GP's
    prediction there (a trainable may ignore it).

    Example:
        .. code-block:: python

            from ray import tune
            from sweeper import MultiverseSearch

            def trainable(config):
                return {"score": -(config["x"] - 0.3) ** 2}

            search = MultiverseSearch(
                {"x": "interval(0, 1)", "lr": "tag(log, interval(1e-4, 1e-1))"},
                metric="score", mode="max", strategy="ivr", num_trials=24, n_initial=8,
            )
            tune.Tuner(trainable, tune_config=tune.TuneConfig(
                search_alg=search, num_samples=24)).fit()

    Args:
        space: a :class:`~sweeper.search.space.SearchSpace`, or a mapping of dimension name to a
            Hydra override grammar string (``"tag(log, interval(1e-4, 1e-1))"``).
        metric: the result key to model; trials whose value is missing, NaN or inf count
            as failed.
        mode: ``max`` or ``min``.
        **settings: the fields of :class:`~sweeper.search.settings.PolicySettings` (strategy,
            num_trials, n_initial, batch_size, seed, deterministic, ...).
    """

    def __init__(
        self,
        space: SearchSpace | Mapping[str, Any],
        metric: str | None = None,
        mode: str | None = None,
        **settings: Any,
    ) -> None:
        super().__init__(metric=metric, mode=mode)
        if not isinstance(space, SearchSpace):
            space = parse_specs(space)
        if mode is not None:
            settings["mode"] = mode
        self.policy = MultiversePolicy(space, PolicySettings(**settings))
        self._index_of: dict[str, int] = {}
        self._metric_suspect: str | None = None  # why the metric may never come: see _check_metric_returned
        self.held = False  # True: no new trial (the sweep is being preempted; see sweeper.run.preemption)

    def set_search_properties(self, metric: str | None, mode: str | None, config: dict, **spec: Any) -> bool:
        if config:
            return False  # the space comes from our own grammar, not Tune's param_space
        if metric and not self._metric:
            self._metric = metric
        if mode and not self._mode:
            self._mode = mode
            self.policy.settings = PolicySettings(**{**asdict(self.policy.settings), "mode": mode})
        return True

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        if trial_id in self._index_of:  # Tune asks again for a trial it restarts
            return self.trial_config(self.policy.suggestions[self._index_of[trial_id]])
        if self._metric_suspect is not None:
            return None  # no new trial until the ones in flight tell whether the metric ever comes
        if self.held:
            return None
        suggestion = self.policy.ask()
        if suggestion is None:
            return Searcher.FINISHED if self.policy.is_finished else None
        self._index_of[trial_id] = suggestion.index
        return self.trial_config(suggestion)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        index = self._index_of.get(trial_id)
        if index is None:
            return
        value = None if error or result is None else result.get(self._metric)
        self.policy.tell(index, _as_float(value))
        self._check_metric_returned(index, None if error else result)

    def _check_metric_returned(self, index: int, result: Mapping[str, Any] | None) -> None:
        """Fail fast on a metric the task never returns (a misnamed ``hydra.sweeper.metric``).

        When a trial returns other keys but not the metric and no trial so far has returned
        it, no new trial starts until the trials in flight end: if one of them returns the
        metric, the sweep goes on (the task omits it only sometimes: an ordinary failed
        trial); if none does, the sweep stops, instead of running every trial into its
        failure budget. Which way it goes depends on the points, not on which trial ends first.
        """
        from sweeper.run.trial import RETURNED_KEY

        succeeded = any(math.isfinite(v) for v in self.policy.results.values())
        returned = (result or {}).get(RETURNED_KEY)  # set by the trial when the metric was missing
        if self._metric_suspect is None and not succeeded and returned is not None and self.policy.stop_reason is None:
            fix = f" Try hydra.sweeper.metric={returned[0]}." if returned else ""
            self._metric_suspect = (
                f"hydra.sweeper.metric={self._metric!r} is not what the task returns: trial #{index} returned "
                f"{list(returned)} and no trial returned {self._metric!r}, so no further trial starts.{fix}")
        if self._metric_suspect is None:
            return
        if succeeded:
            log.info("a trial returned %r after all: the sweep goes on", self._metric)
            self._metric_suspect = None
        elif not self.policy.pending:
            log.error("Stopping the sweep: %s", self._metric_suspect)
            self.policy.stop(self._metric_suspect)
            self._metric_suspect = None

    def suggestion_for(self, trial_id: str) -> Suggestion | None:
        """The suggestion behind a Tune trial, or None for a trial this searcher did not make."""
        index = self._index_of.get(trial_id)
        return None if index is None else self.policy.suggestions[index]

    @staticmethod
    def trial_config(suggestion: Suggestion) -> dict[str, Any]:
        meta = {k: v for k, v in asdict(suggestion).items() if k != "params"}
        meta["x"] = list(suggestion.x)  # recorded on the trial's run: a resumed sweep replays it
        return {**suggestion.params, TRIAL_KEY: TrialInfo(meta)}

    def get_state(self) -> dict[str, Any]:
        return {"policy": self.policy.state_dict(), "index_of": dict(self._index_of),
                "metric": self._metric, "mode": self._mode}

    def set_state(self, state: dict[str, Any]) -> None:
        self.policy.load_state_dict(state["policy"])
        self._index_of = dict(state["index_of"])
        self._metric, self._mode = state["metric"], state["mode"]

    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "w", encoding="utf-8") as f:
            json.dump(self.get_state(), f)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, encoding="utf-8") as f:
            self.set_state(json.load(f))


def _as_float(value: Any) -> float | None:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None
