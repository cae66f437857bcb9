"""Ray Tune adaptor: :class:`MultiverseSearch` translates between Tune and the policy."""

from __future__ import annotations

import json
import logging
import math
import socket
from collections.abc import Mapping
from dataclasses import asdict, fields
from typing import Any

from ray.tune.search import Searcher

from sweeper.run.outcome import error_key, index_list
from sweeper.run.trial_info import TrialInfo
from sweeper.run.trial_result import TrialResult
from sweeper.search.grammar import parse_specs
from sweeper.search.policy import MultiversePolicy, Suggestion
from sweeper.search.settings import TRIAL_KEY, PolicySettings
from sweeper.search.space import SearchSpace

__all__ = ["TRIAL_KEY", "IdenticalFailures", "MultiverseSearch", "TrialInfo"]

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
            Hydra override grammar string (``"tag(log, interval(1e-4, 1e-1))"``); None builds an
            empty searcher that :meth:`restore` fills (Ray's ``Searcher.restore`` pattern).
        metric: the result key to model; trials whose value is missing, NaN or inf count
            as failed.
        mode: ``max`` or ``min``.
        **settings: the fields of :class:`~sweeper.search.settings.PolicySettings` (strategy,
            num_trials, n_initial, batch_size, seed, deterministic, ...).
    """

    _metric: str | None  # Searcher's, set by its constructor
    _mode: str | None

    def __init__(
        self,
        space: SearchSpace | Mapping[str, Any] | None = None,
        metric: str | None = None,
        mode: str | None = None,
        **settings: Any,
    ) -> None:
        mode = mode if mode is not None else settings.get("mode")  # the Hydra sweeper passes it with the settings
        super().__init__(metric=metric, mode=mode)
        if mode is not None:
            settings["mode"] = mode
        # No space: Ray's pattern of an empty searcher that restore(path) fills (space and settings are saved).
        policy = None if space is None else MultiversePolicy(
            space if isinstance(space, SearchSpace) else parse_specs(space), PolicySettings(**settings))
        self.policy: MultiversePolicy = policy  # type: ignore[assignment]  # None until restore() fills it
        self._index_of: dict[str, int] = {}
        self._metric_suspect: str | None = None  # why the metric may never come: see _check_metric_returned
        self._identical = IdenticalFailures(PolicySettings(**settings).stop_on_identical_failures)
        self._bug_suspect: str | None = None  # why the task may be broken: see _check_identical_failures
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
        if self.policy is None:
            raise RuntimeError("MultiverseSearch was built without a search space: pass one, e.g. "
                               "MultiverseSearch({'x': 'interval(0, 1)'}, metric=..., mode=...), or restore(path) "
                               "a saved searcher first")
        if not self._metric or not self._mode:  # as Ray's own searchers: suggesting blind would fail every trial
            raise RuntimeError(f"MultiverseSearch has no metric or mode (metric={self._metric!r}, mode="
                               f"{self._mode!r}): pass metric= and mode= to it or to tune.TuneConfig")
        if trial_id in self._index_of:  # Tune asks again for a trial it restarts
            return self.trial_config(self.policy.suggestions[self._index_of[trial_id]])
        if self._metric_suspect is not None:
            return None  # no new trial until the ones in flight tell whether the metric ever comes
        if self._bug_suspect is not None:
            return None  # no new trial until the ones in flight tell whether any trial can succeed
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
        trial = None if error or result is None else TrialResult.from_dict(result, self._metric)
        self.policy.tell(index, _as_float(None if trial is None else trial.value))
        self._check_metric_returned(index, trial)
        self._check_identical_failures(index, trial)

    def _check_metric_returned(self, index: int, result: TrialResult | None) -> None:
        """Fail fast on a metric the task never returns (a misnamed ``hydra.sweeper.metric``).

        When a trial returns other keys but not the metric and no trial so far has returned
        it, no new trial starts until the trials in flight end: if one of them returns the
        metric, the sweep goes on (the task omits it only sometimes: an ordinary failed
        trial); if none does, the sweep stops, instead of running every trial into its
        failure budget. Which way it goes depends on the points, not on which trial ends first.
        """
        succeeded = any(math.isfinite(v) for v in self.policy.results.values())
        returned = None if result is None else result.returned  # set by the trial when the metric was missing
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

    def _check_identical_failures(self, index: int, result: TrialResult | None) -> None:
        """Fail fast on a bug in the task: the first trials to end all raised the same exception.

        A misspelt config key fails every trial alike; without this, the sweep would run trials
        until ``max_failure_rate`` stops it. Once the first ``stop_on_identical_failures`` trials
        to end (:class:`IdenticalFailures`) all failed so, no new trial starts; the trials in
        flight finish, and if one of them succeeds the sweep goes on (the error belongs to a region
        of the space); if none does, the sweep stops. Checked after :meth:`_check_metric_returned`,
        whose more specific reason wins when both apply.
        """
        if self._identical.add(index, result) and self.policy.stop_reason is None:
            self._bug_suspect = self._identical.reason()
        if self._bug_suspect is None:
            return
        if any(math.isfinite(v) for v in self.policy.results.values()):
            log.info("a trial succeeded after all: the sweep goes on")
            self._bug_suspect = None
        elif not self.policy.pending:
            if self.policy.stop_reason is None:
                log.error("Stopping the sweep: %s\n  The error: %s", self._bug_suspect, self._identical.error)
                self.policy.stop(self._bug_suspect)
            self._bug_suspect = None

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
        saved = _search_state(state["policy"])
        if self.policy is None:  # built empty: the saved state brings the space and settings
            self.policy = MultiversePolicy(SearchSpace.from_dict(saved["space"]), PolicySettings(**saved["settings"]))
            self._identical = IdenticalFailures(self.policy.settings.stop_on_identical_failures)
        self.policy.load_state_dict(saved)
        self._index_of = dict(state["index_of"])
        self._metric, self._mode = state["metric"], state["mode"]

    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "w", encoding="utf-8") as f:
            json.dump(self.get_state(), f)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, encoding="utf-8") as f:
            self.set_state(json.load(f))


class IdenticalFailures:
    """Whether the first ``limit`` trials to end all raised the same exception: a bug in the task.

    "The same" is the same exception type (``module.QualName``) and message, memory addresses
    masked (:func:`~sweeper.run.outcome.error_key`), numbers not: a message quoting the trial's
    own values differs from point to point. Only exceptions count (the trial's ``sweeper_exception``
    result key): an unusable return value (NaN, out of the metric's bounds, a missing metric),
    a timeout or a dead worker depends on the point, the time limit or the machine, ends the
    run of identical failures like a success does, and is left to ``max_failure_rate`` (a missing
    metric to :meth:`MultiverseSearch._check_metric_returned`). The decision rests on the first
    trials to *end*, whatever their indices; when every trial fails alike, as a bug makes them,
    it does not depend on which ends first.

    Args:
        limit: how many (None or 0: never).
    """

    def __init__(self, limit: int | None) -> None:
        self.limit = limit or 0
        self.indices: list[int] = []  # the first trials to end, while they all failed alike
        self.deciding = self.limit > 0
        self._signature: tuple[str, str] | None = None
        self.error = ""  # the shared error, as the first of them reported it
        self._where = ""  # where the first of them left its traceback

    def add(self, index: int, result: TrialResult | None) -> bool:
        """Count a trial that ended; True once, when the ``limit``-th identical failure arrives."""
        if not self.deciding:
            return False
        signature = _failure_signature(result)
        if signature is None or (self.indices and signature != self._signature):
            self.deciding = False  # a success, another kind of failure, or another error: not one bug
            return False
        assert result is not None
        if not self.indices:
            self._signature, self.error, self._where = signature, str(result.error), _where_logged(index, result)
        self.indices.append(index)
        if len(self.indices) < self.limit:
            return False
        self.deciding = False
        return True

    def reason(self) -> str:
        """Why the sweep stops, where the first trial to fail left its traceback, and what to do."""
        return (f"the first {len(self.indices)} trials to end ({index_list(sorted(self.indices))}) all raised the "
                f"same exception, and none succeeded: a bug in the task, not a region of the search space, so no "
                f"further trial starts. {self._where} Fix the task and run the sweep again "
                f"(hydra.sweeper.stop_on_identical_failures=null runs every trial whatever fails).")


def _failure_signature(result: TrialResult | None) -> tuple[str, str] | None:
    """(exception type, message) of a trial that failed by an exception; None for any other end."""
    if result is None or result.status != "FAILED" or not result.exception or not result.error:
        return None
    return str(result.exception), error_key(result.error)


def _where_logged(index: int, result: TrialResult) -> str:
    """Where trial ``index``'s traceback is: its Hydra job's log file, else its MLflow run's artifact."""
    host = (result.conditions or {}).get("host")
    on = f" on host {host}" if host and host != socket.gethostname() else ""
    artifact = f"the MLflow artifact traceback.txt of trial #{index}'s run"
    if result.job_log:
        return f"Trial #{index}'s log, with the traceback: {result.job_log}{on} (also {artifact})."
    if result.job_dir:
        return f"Trial #{index}'s output folder: {result.job_dir}{on}; its traceback is {artifact}."
    return f"Trial #{index}'s traceback is {artifact}."


def _search_state(saved: dict[str, Any]) -> dict[str, Any]:
    """A saved policy state with only the settings :class:`PolicySettings` has: a state saved with
    ``trial_timeout_s`` among them (a setting of the run, sweeper.run.run_settings) loads without it."""
    known = {f.name for f in fields(PolicySettings)}
    settings = saved.get("settings") or {}
    if set(settings) <= known:
        return saved
    return {**saved, "settings": {k: v for k, v in settings.items() if k in known}}


def _as_float(value: Any) -> float | None:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None
