"""The conditions of measurement every trial shares, recorded once on the sweep's run.

Each trial's worker reads some 35 conditions (:mod:`sweeper.record.conditions`); on one machine
nearly all are the same for every trial. As tags on every trial they fill the MLflow runs
table's column picker with per-trial copies of one environment. Instead:

- the first trial that closes with conditions fixes the **shared set**: its conditions, less the
  ones that are per trial by nature (:data:`PER_TRIAL_KEYS`) and those a tag would not hold as
  they are (:func:`storable`). The sweep's run gets them as one tag, ``sweeper.shared_conditions``
  (JSON, one column in the picker), and as the artifact ``trial_conditions.json``;
- each trial is tagged with only the conditions outside the shared set, and
  ``sweeper.shared_conditions`` saying that the rest are on the sweep's run; its
  ``conditions.json`` artifact keeps all of them;
- a shared condition that a later trial records differently (or not at all) leaves the shared
  set at once: every trial that relied on it gets its value as a tag of its own, then the sweep's
  run is rewritten without it and names it in ``sweeper.varied_conditions``. So the sweep's run
  never claims for a condition a value that some trial did not have.

Readers put the shared set back into each trial that points to it (:func:`merged_tags`): the
trial table of :mod:`sweeper.analysis.runs` is the one the trials' own tags gave before. A
resumed sweep takes over the shared set on its run (:meth:`SharedConditions.load`), never a new one.
NOTE: docs/decisions/0035-shared-trial-conditions.md
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from sweeper.record.mlflow_keys import clean_key
from sweeper.record.redaction import redact_mapping

log = logging.getLogger(__name__)

#: The tag key, without the tracker's ``sweeper.`` prefix: on the sweep's run the shared set as
#: JSON; on a trial, :data:`POINTER` (the trial's other conditions are that set).
SHARED_TAG = "shared_conditions"
#: On the sweep's run: the conditions that left the shared set because trials differed in them.
VARIED_TAG = "varied_conditions"
#: The value of :data:`SHARED_TAG` on a trial.
POINTER = "the rest are on the sweep's run, tag sweeper.shared_conditions"
#: The sweep run's artifact holding the shared set, the varied conditions and the trial that fixed the set.
ARTIFACT = "trial_conditions.json"
#: Conditions that name the trial's own process: never shared (two workers, two values).
PER_TRIAL_KEYS = frozenset({"pid"})
#: The longest value shared; a longer one stays on its trial, where the tracker shortens it as before.
MAX_VALUE_CHARS = 1000
#: The most characters of the JSON tag (MLflow keeps 8000 per tag value).
MAX_SHARED_CHARS = 7000
_PREFIX = "sweeper."
_TAG = _PREFIX + SHARED_TAG


def storable(key: str, value: Any) -> bool:
    """Whether a condition's tag would hold ``value`` as it is: text, short, unchanged by redaction."""
    return isinstance(value, str) and len(value) <= MAX_VALUE_CHARS and redact_mapping({key: value})[key] == value


def encode(shared: Mapping[str, str]) -> str | None:
    """The JSON of the shared set; None when the tracker's redaction of the tag would change it."""
    text = json.dumps(dict(shared), sort_keys=True)
    return text if redact_mapping({SHARED_TAG: text})[SHARED_TAG] == text else None


def shared_from_tags(parent_tags: Mapping[str, Any]) -> dict[str, str] | None:
    """The shared set recorded on a sweep's run (its tags as MLflow holds them); None when it has none.

    A value that does not read as JSON (a write cut short) gives an empty set, with a warning: the
    trials that point to it then lack those conditions, as they would had the write been lost.
    """
    text = parent_tags.get(_TAG)
    if text is None:
        return None
    try:
        shared = json.loads(text)
    except ValueError:
        shared = None
    if not isinstance(shared, dict):
        log.warning("the sweep's run holds an unreadable tag %s; its trials are read without the conditions "
                    "they share (each trial's conditions.json artifact holds all of its own)", _TAG)
        return {}
    return {str(k): str(v) for k, v in shared.items()}


def merged_tags(trial_tags: Mapping[str, Any], shared: Mapping[str, str] | None) -> dict[str, Any]:
    """A trial's tags with the shared conditions put back, as the trial would have recorded them itself.

    Only a trial that points to the shared set (tag ``sweeper.shared_conditions``) gets them, and
    never over a value of its own; the pointer itself is left out. Other trials' tags (those of a
    store written before the shared set existed, or of a trial that closed without conditions)
    come back as they are.
    """
    if _TAG not in trial_tags:
        return dict(trial_tags)
    tags = {k: v for k, v in trial_tags.items() if k != _TAG}
    for key, value in (shared or {}).items():
        tags.setdefault(_PREFIX + key, value)
    return tags


class SharedConditions:
    """The recorder's side: decides which conditions a closing trial records itself, and keeps the
    sweep's run's shared set true. Writes go through the recorder's writer, in its order."""

    def __init__(self) -> None:
        self.shared: dict[str, str] | None = None  # None: not fixed yet
        self.varied: list[str] = []
        self.relying: list[str] = []  # the runs (handles or ids) that point to the shared set
        self._others: list[dict[str, Any]] = []  # conditions of a resumed sweep's trials that recorded all their own

    def load(self, tracker: Any, parent_run_id: str) -> None:
        """Take over a resumed sweep's shared set and the trials that point to it, from MLflow."""
        from sweeper.record.tracking import get_run

        parent = get_run(tracker.tracking_uri, parent_run_id)
        self.adopt(parent.data.tags, ((r.info.run_id, r.data.tags) for r in tracker.child_runs(parent_run_id)))

    def adopt(self, parent_tags: Mapping[str, Any], children: Iterable[tuple[str, Mapping[str, Any]]]) -> None:
        """Take over the shared set on the sweep's run (``parent_tags``) and its trials' pointers.

        A sweep started before its run held a shared set has trials that recorded every condition
        themselves: when this process fixes the set, a condition in which one of them differs is
        left out of it (``sweeper.host`` tells such a trial from one that closed without conditions).
        """
        self.shared = shared_from_tags(parent_tags)
        self.varied = [k for k in str(parent_tags.get(_PREFIX + VARIED_TAG, "")).split(", ") if k]
        for run_id, tags in children:
            if _TAG in tags:
                self.relying.append(run_id)
            elif self.shared is None and f"{_PREFIX}host" in tags:
                self._others.append({k[len(_PREFIX):]: v for k, v in tags.items() if k.startswith(_PREFIX)})

    def trial_tags(self, writer: Any, parent_run_id: str, run: str, index: int,
                   conditions: Mapping[str, Any]) -> dict[str, Any]:
        """The condition tags of a closing trial (``sweeper.`` added by the tracker): those outside the
        shared set, and the pointer to it.

        Queues first what the sweep's run needs: the shared set, fixed by this trial if it is the
        first, or rewritten without the conditions this trial differs in, after they are written on
        every trial that relied on them.
        """
        own = {clean_key(k): v for k, v in conditions.items()}
        if not own:
            return {}
        if self.shared is None:
            self._fix(writer, parent_run_id, index, own)
        assert self.shared is not None
        differing = sorted(k for k, v in self.shared.items() if own.get(k) != v)
        if differing:
            self._vary(writer, parent_run_id, differing, f"trial #{index}")
        tags = {k: v for k, v in own.items() if k not in self.shared}
        if self.shared:
            tags[SHARED_TAG] = POINTER
            self.relying.append(run)
        return tags

    def _fix(self, writer: Any, parent_run_id: str, index: int, own: Mapping[str, Any]) -> None:
        """Fix the shared set from the first trial's conditions (what fits one tag) and record it."""
        candidates = {k: v for k, v in own.items() if k not in PER_TRIAL_KEYS and storable(k, v)}
        differing = {k for k, v in candidates.items() for other in self._others if other.get(k) != v}
        self._others.clear()
        shared: dict[str, str] = {}
        size = 2
        for key, value in sorted(candidates.items(), key=lambda kv: (len(kv[0]) + len(kv[1]), kv[0])):
            entry = len(json.dumps({key: value}))
            if key not in differing and size + entry <= MAX_SHARED_CHARS:
                shared[key] = value
                size += entry
        self.shared = shared if encode(shared) is not None else {}
        self.varied = sorted(set(self.varied) | differing)
        self._publish(writer, parent_run_id, f"recording the conditions trials share (from trial #{index})")

    def _vary(self, writer: Any, parent_run_id: str, keys: list[str], because: str) -> None:
        """Take ``keys`` out of the shared set: onto every trial that relied on them, then off the sweep's run."""
        assert self.shared is not None
        values = {k: self.shared.pop(k) for k in keys}
        if encode(self.shared) is None:  # the smaller set would not pass the tracker's redaction as it is
            values.update(self.shared)  # so every trial gets all of it back: nothing is shared from here on
            self.shared.clear()
        what = f"recording on each trial the conditions {', '.join(keys)} ({because} differs in them)"
        for run in self.relying:
            writer.log(what, run, tags=values)
        self.varied = sorted(set(self.varied) | set(keys))
        self._publish(writer, parent_run_id, what)

    def _publish(self, writer: Any, parent_run_id: str, what: str) -> None:
        """Write the shared set and the varied conditions on the sweep's run, as tags and as the artifact."""
        assert self.shared is not None
        writer.log(what, parent_run_id, tags={SHARED_TAG: encode(self.shared),
                                              VARIED_TAG: ", ".join(self.varied) or None})
        record = {"shared": self.shared, "varied": self.varied}
        writer.log_text(what, parent_run_id, json.dumps(record, indent=1, sort_keys=True), ARTIFACT)
