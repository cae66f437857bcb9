"""What the sweep's layers call on its MLflow writer, as a type that imports no MLflow.

:class:`~sweeper.record.tracking.MLflowTracker` satisfies it. The run layer and the durable
writers annotate with :class:`Tracker` (under ``TYPE_CHECKING`` or not: importing this
module costs nothing), so a test can pass any object with these members.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol


class Tracker(Protocol):
    """The writes and reads of one sweep's records in an MLflow experiment.

    Attributes:
        tracking_uri: The store's URI (a relative SQLite path made absolute).
        experiment_name: The experiment holding the sweep.
        experiment_id: Its MLflow id.
    """

    tracking_uri: str
    experiment_name: str
    experiment_id: str

    def start_run(self, run_name: str, *, parent_run_id: str | None = None, params: Mapping[str, Any] | None = None,
                  tags: Mapping[str, Any] | None = None) -> str:
        """Create a RUNNING run (nested under ``parent_run_id`` if given) and return its id."""
        ...

    def log(self, run_id: str, *, params: Mapping[str, Any] | None = None, metrics: Mapping[str, Any] | None = None,
            tags: Mapping[str, Any] | None = None, step: int = 0) -> None:
        """Log params, numeric metrics and tags (prefixed ``sweeper.``)."""
        ...

    def log_text(self, run_id: str, text: str, artifact_file: str) -> None:
        """Log a text artifact, redacted on the way."""
        ...

    def log_bytes(self, run_id: str, data: bytes, artifact_file: str) -> None:
        """Log ``data`` as the artifact ``artifact_file`` of a run."""
        ...

    def finish(self, run_id: str, status: str = "FINISHED") -> None:
        """End a run: FINISHED, FAILED or KILLED."""
        ...

    def reopen(self, run_id: str) -> None:
        """Mark a run RUNNING again."""
        ...

    def run_tagged(self, key: str, value: str) -> str | None:
        """The id of the experiment's run whose tag ``sweeper.<key>`` is ``value``, or None."""
        ...

    def child_runs(self, parent_run_id: str) -> list[Any]:
        """Every trial run of a sweep (MLflow ``Run`` objects)."""
        ...

    def run_url(self, run_id: str) -> str:
        """A run's page in the MLflow UI."""
        ...

    def browse_text(self, run_id: str) -> str:
        """What to run and open to see the sweep's run and its trials."""
        ...
