"""MLflow records of a sweep: the only module that imports mlflow.

One MLflow experiment per sweep name; one parent run per sweep; one nested child run per
trial, failed trials included. All writes go through :class:`MLflowTracker` in the driver
process, so only the driver needs to reach the tracking store (a SQLite file or a tracking
server), and a SQLite file never sees two writers.
"""

from __future__ import annotations

import logging
import math
import os
import posixpath
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mlflow.entities import Metric, Param, RunStatus, RunTag
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import ErrorCode
from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository
from mlflow.store.artifact.local_artifact_repo import LocalArtifactRepository
from mlflow.tracking import MlflowClient
from mlflow.tracking.fluent import get_active_model_id
from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID, MLFLOW_RUN_NAME
from mlflow.utils.time import get_current_time_millis
from mlflow.utils.uri import append_to_uri_path
from mlflow.utils.validation import _validate_batch_log_data, _validate_param_keys_unique, _validate_run_id

from sweeper.record.mlflow_keys import clean_key
from sweeper.record.note import NOTE_TAG, note_from_run, output_tag
from sweeper.record.redaction import redact_mapping, redact_text
from sweeper.record.sqlite_store import open_store
from sweeper.record.sqlite_writes import Batch, MlflowRules, RunRows
from sweeper.record.tracking_uri import absolute_tracking_uri, default_artifact_location, sqlite_path

log = logging.getLogger(__name__)

TAG_PREFIX = "sweeper."
MLFLOW_PREFIX = "mlflow."
_MAX_PARAM_LEN = 6000
_MAX_TAG_LEN = 8000
# MLflow accepts at most this many of each per log_batch call.
_MAX_PARAMS, _MAX_TAGS, _MAX_METRICS = 100, 100, 1000


#: MLflow's own HTTP retries (7, doubling: about 4 minutes per request) would hold a sweep for
#: minutes per write while a tracking server is away, and a sweep's start for as long when it
#: is down; sweeper.record.spool does the retrying, with backoff, and spools what cannot be sent.
MLFLOW_HTTP_ENV = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
                   "MLFLOW_HTTP_REQUEST_TIMEOUT": "20"}


def _text(value: Any, limit: int) -> str:
    s = value if isinstance(value, str) else repr(value) if isinstance(value, float) else str(value)
    return s if len(s) <= limit else s[: limit - 3] + "..."


def import_store(tracking_uri: str) -> None:
    """Import the code of the store at ``tracking_uri``, opening nothing: MLflow's SQLAlchemy store
    (with SQLAlchemy and alembic) for a database URI; nothing for a server.

    MLflow imports it when a client first touches the store. The sweep's driver calls this before it
    forks its writer process (:meth:`sweeper.record.writer_process.WriterStart.fork`), which then has it
    too: the import is paid once per sweep, not once in each process (NOTE: docs/decisions/0025-mlflow-import-costs.md).
    """
    scheme = tracking_uri.split(":", 1)[0].split("+", 1)[0]
    if scheme in ("sqlite", "postgresql", "mysql", "mssql"):
        import importlib

        import mlflow.store.tracking.sqlalchemy_store  # noqa: F401 - imported for its code, used by MLflow later

        importlib.import_module(f"sqlalchemy.dialects.{scheme}")


def read_client(tracking_uri: str) -> MlflowClient:
    """A client that reads the store at ``tracking_uri`` (relative SQLite made absolute), for the
    analysis and the command line, which import no mlflow themselves."""
    return MlflowClient(absolute_tracking_uri(tracking_uri))


def get_run(tracking_uri: str, run_id: str) -> Any:
    """The MLflow run ``run_id`` at ``tracking_uri``; LookupError naming both when there is none."""
    from mlflow.exceptions import MlflowException

    try:
        return read_client(tracking_uri).get_run(run_id)
    except MlflowException as exc:
        raise LookupError(f"no MLflow run {run_id} at {tracking_uri} ({exc})") from exc


def last_metric_steps(run: Any) -> dict[str, tuple[int, float]]:
    """Metric -> (step, value) of its latest value in a run read from MLflow (its history's last step)."""
    metrics = run.data._metric_objs  # noqa: SLF001 - RunData keeps the steps only there
    return {m.key: (int(m.step), float(m.value)) for m in metrics}


class MLflowTracker:
    """Writes one sweep's parent run and its trial runs.

    A local SQLite store's runs are written by :mod:`sweeper.record.sqlite_writes`, faster, the rows MLflow's
    client writes (NOTE: docs/decisions/0063-sqlite-fast-writes.md); else, and artifacts and reads, by MLflow's.

    Args:
        tracking_uri: any MLflow tracking URI; relative SQLite paths are made absolute.
        experiment_name: the experiment holding the sweep (created if absent).
        experiment_id: its id, when known (then nothing is looked up).
    """

    def __init__(self, tracking_uri: str, experiment_name: str, experiment_id: str | None = None) -> None:
        for key, value in MLFLOW_HTTP_ENV.items():
            os.environ.setdefault(key, value)
        self.tracking_uri = absolute_tracking_uri(tracking_uri)
        self.client = _client(self.tracking_uri)
        if experiment_id is None:  # else known: no request (a writer process opens the store again)
            exp = self.client.get_experiment_by_name(experiment_name)
            experiment_id = exp.experiment_id if exp else self.client.create_experiment(
                experiment_name, artifact_location=default_artifact_location(self.tracking_uri, experiment_name),
                tags=EXPERIMENT_TAGS,
            )
        self.experiment_id = experiment_id
        self.experiment_name = experiment_name
        self._artifact_uris: dict[str, str] = {}  # run id -> artifact URI, of the runs this tracker created
        self._rows = self._fast_rows()

    def _fast_rows(self) -> RunRows | None:
        """Fast writes to a SQLite file MLflow opened with its plain ``SqlAlchemyStore``; None for any
        other store (a server, PostgreSQL, a workspace-aware store, SQLite in memory or with options)."""
        path = sqlite_path(self.tracking_uri)
        if path is None or path == ":memory:" or "?" in path:
            return None
        from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore  # imported by MLflow for SQLite already

        plain = type(self.client._tracking_client.store) is SqlAlchemyStore  # noqa: SLF001 - the store MLflow chose
        return RunRows.open(path, MLFLOW_RULES) if plain else None

    # -------------------------------------------------------------- runs
    def start_run(
        self,
        run_name: str,
        *,
        parent_run_id: str | None = None,
        params: Mapping[str, Any] | None = None,
        tags: Mapping[str, Any] | None = None,
    ) -> str:
        """Create a RUNNING run (nested under ``parent_run_id`` if given) and return its id.

        The tags go in with the run (one call fewer per trial than a separate batch).
        """
        all_tags = {t.key: t.value for t in _tags(tags)}
        all_tags[MLFLOW_RUN_NAME] = run_name
        if parent_run_id:
            all_tags[MLFLOW_PARENT_RUN_ID] = parent_run_id
        if self._rows is not None:
            run_id, self._artifact_uris[run_id] = self._rows.create_run(self.experiment_id, run_name, all_tags,
                                                                        _batches(params, None, None, 0))
            return run_id
        run = self.client.create_run(self.experiment_id, run_name=run_name, tags=all_tags)
        self._artifact_uris[run.info.run_id] = run.info.artifact_uri
        self.log(run.info.run_id, params=params)
        return run.info.run_id

    def log(
        self,
        run_id: str,
        *,
        params: Mapping[str, Any] | None = None,
        metrics: Mapping[str, Any] | None = None,
        tags: Mapping[str, Any] | None = None,
        step: int = 0,
    ) -> None:
        """Log params, numeric metrics and tags (prefixed ``sweeper.``) in batches.

        Non-numeric and non-finite metric values are skipped for the metric table: MLflow
        stores NaN, but a NaN score is a failure and is recorded as such in the tags.
        Params and tags are redacted first (sweeper.record.redaction): a credential-like key's
        value becomes ``***``, and a URL's password or a ``key=secret`` inside any value too.
        """
        batches = _batches(params, metrics, tags, step)
        if self._rows is not None and get_active_model_id() is None:  # else MLflow also logs the model's metrics
            self._rows.log_batches(run_id, batches)
            return
        for batch in batches:
            self.client.log_batch(run_id, metrics=batch.metrics, params=batch.params, tags=batch.tags)

    def log_text(self, run_id: str, text: str, artifact_file: str) -> None:
        """Log a text artifact, redacted as free text (sweeper.record.redaction.redact_text) on the way.

        A backstop: configs are redacted as trees where they are produced (multirun.yaml,
        conditions.json); this catches URL passwords, ``key=secret`` and ``key: secret`` in
        anything else (an error's traceback, the results file's tracking URI).
        """
        self.log_bytes(run_id, redact_text(text).encode("utf-8"), artifact_file)

    def log_bytes(self, run_id: str, data: bytes, artifact_file: str) -> None:
        """Log ``data`` as the artifact ``artifact_file`` (e.g. ``live/batch_003_mean.png``) of a run.

        A local artifact store gets the file itself, replaced atomically, without the temporary
        folder MLflow's repository stages it in (NOTE: docs/decisions/0026-local-artifacts-direct.md);
        any other store (a tracking server's proxied artifacts, S3) gets it through MLflow's repository.
        """
        repository = get_artifact_repository(self._artifact_uri(run_id), tracking_uri=self.tracking_uri)
        if isinstance(repository, LocalArtifactRepository) and _inside(artifact_file):
            target = Path(repository.artifact_dir, artifact_file)
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
            partial.write_bytes(data)
            os.replace(partial, target)
            return
        directory, name = posixpath.split(artifact_file)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp, name)
            path.write_bytes(data)
            repository.log_artifact(str(path), directory or None)

    def clear_artifacts(self, run_id: str, artifact_dir: str) -> list[str]:
        """Delete the artifact folder ``artifact_dir`` of a run, before a report is logged into it again.

        MLflow's client cannot delete artifacts, but each store's artifact repository can, for
        most stores: a local folder (a SQLite store's ``mlruns/`` beside the database; deleted on
        disk), S3, GCS, Azure, HDFS, SFTP and a tracking server's proxied ``mlflow-artifacts``
        store (an HTTP DELETE, which ``mlflow server`` answers when it proxies artifacts, its
        default). Deleting, rather than logging into a fresh
        versioned folder, keeps one stable path per report, the one the sweep's note links to.

        Returns:
            The artifact paths that remain because the store refused to delete them (empty when
            the folder is gone): the caller logs its files anyway and says which old ones stayed.
        """
        repository = get_artifact_repository(self._artifact_uri(run_id), tracking_uri=self.tracking_uri)
        try:
            repository.delete_artifacts(artifact_dir)
            return []
        except Exception as exc:  # noqa: BLE001 - NotImplementedError, or the store's refusal, of any kind
            log.debug("cannot delete artifacts %s of run %s: %s", artifact_dir, run_id, exc)
        return self._artifact_files(repository, artifact_dir)

    @staticmethod
    def _artifact_files(repository: Any, artifact_dir: str) -> list[str]:
        """Every file under ``artifact_dir`` in an artifact repository, as artifact paths."""
        files: list[str] = []
        folders = [artifact_dir]
        while folders:
            for info in repository.list_artifacts(folders.pop()):
                (folders if info.is_dir else files).append(info.path)
        return sorted(files)

    def link_output(self, run_id: str, artifact_dir: str, main_file: str, local_dir: str | None) -> None:
        """Record an output logged to a sweep's run (a report, maps) and render the run's note again.

        The note (:data:`NOTE_TAG`, :mod:`sweeper.record.note`) then lists it with the outputs
        linked before, so the sweep's page in the MLflow UI leads to every result.
        """
        self.log(run_id, tags=output_tag(artifact_dir, main_file, local_dir))
        run = self.client.get_run(run_id)
        note = note_from_run(run.data.tags, run.data.params, run.data.metrics, run.info.artifact_uri)
        self.log(run_id, tags={NOTE_TAG: note})

    def _artifact_uri(self, run_id: str) -> str:
        """A run's artifact URI: known for the runs this tracker created, else looked up once."""
        uri = self._artifact_uris.get(run_id)
        if uri is None:
            uri = self._artifact_uris[run_id] = self.client.get_run(run_id).info.artifact_uri
        return uri

    def run_tagged(self, key: str, value: str) -> str | None:
        """The id of this experiment's run whose tag ``sweeper.<key>`` is ``value``, or None."""
        runs = self.client.search_runs([self.experiment_id], filter_string=f"tags.`sweeper.{key}` = '{value}'",
                                       max_results=1)
        return runs[0].info.run_id if runs else None

    def reopen(self, run_id: str) -> None:
        """Mark a run RUNNING again: a resumed sweep's, or a trial's that continues from a checkpoint."""
        if self._rows is not None:
            self._rows.update_run(run_id, "RUNNING")
        else:
            self.client.update_run(run_id, status="RUNNING")
        self.log(run_id, tags={"status": "RUNNING", "resumed_at": time.strftime("%Y-%m-%d %H:%M:%S")})

    def finish(self, run_id: str, status: str = "FINISHED") -> None:
        """End a run: FINISHED, FAILED or KILLED."""
        if self._rows is not None:  # MLflow's refusal of an unknown status first
            self._rows.update_run(run_id, RunStatus.to_string(RunStatus.from_string(status)), get_current_time_millis())
        else:
            self.client.set_terminated(run_id, status=status)

    # -------------------------------------------------------------- reading back
    def child_runs(self, parent_run_id: str) -> list[Any]:
        """Every trial run of a sweep, all pages."""
        runs: list[Any] = []
        token = None
        while True:
            page = self.client.search_runs(
                [self.experiment_id], filter_string=f"tags.{MLFLOW_PARENT_RUN_ID} = '{parent_run_id}'",
                max_results=1000, page_token=token,
            )
            runs.extend(page)
            token = page.token
            if not token:
                return runs

    def ui_command(self) -> str:
        """The shell command that browses these records."""
        return f"mlflow ui --backend-store-uri {self.tracking_uri}" if not self.tracking_uri.startswith(
            "http") else f"open {self.experiment_url()}"

    def experiment_url(self) -> str:
        """The experiment's runs table in the MLflow UI's "Model training" view.

        MLflow 3 opens an experiment in its GenAI view (traces, no runs) unless told
        otherwise: ``workflowType=machine_learning`` opens the runs table, where the sweep's
        run lists its trials. A tracking server's own address; for a local store, where
        ``mlflow ui`` serves by default (http://127.0.0.1:5000).
        """
        base = self.tracking_uri.rstrip("/") if self.tracking_uri.startswith("http") else LOCAL_UI
        return f"{base}/#/experiments/{self.experiment_id}/runs?workflowType=machine_learning"

    def run_url(self, run_id: str) -> str:
        """A run's page in the MLflow UI (see :meth:`experiment_url`)."""
        return self.experiment_url().replace("/runs?", f"/runs/{run_id}?")

    def browse_lines(self, run_id: str) -> list[str]:
        """What to run and open to see ``run_id`` (the sweep's run) and its trials."""
        lines = [] if self.tracking_uri.startswith("http") else [self.ui_command()]
        return [*lines, f"the sweep's trials: {self.experiment_url()}", f"the sweep's run:    {self.run_url(run_id)}"]

    def browse_text(self, run_id: str) -> str:
        """``Browse them:`` and :meth:`browse_lines`, indented: what the sweep and the commands print last."""
        return "Browse them:\n  " + "\n  ".join(self.browse_lines(run_id))


#: Where ``mlflow ui`` serves a local store by default.
LOCAL_UI = "http://127.0.0.1:5000"
#: Tags of an experiment the sweeper creates: MLflow 3's UI then shows it as model training, not GenAI.
EXPERIMENT_TAGS = {"mlflow.experimentKind": "custom_model_development"}

def _client(tracking_uri: str) -> MlflowClient:
    """An ``MlflowClient``; a SQLite file's opened by :func:`~sweeper.record.sqlite_store.open_store`
    (a new store's tables copied from a template, in turn with other trackers, in write-ahead-log mode)."""
    path = sqlite_path(tracking_uri)
    if path is None or path == ":memory:":
        return MlflowClient(tracking_uri)
    import alembic
    import mlflow
    import sqlalchemy

    return open_store(path, lambda: MlflowClient(tracking_uri), f"mlflow-{mlflow.__version__}-sqlalchemy-"
                      f"{sqlalchemy.__version__}-alembic-{alembic.__version__}",
                      lambda built: MlflowClient(f"sqlite:///{built}").search_experiments(max_results=1))


def _batches(params: Mapping[str, Any] | None, metrics: Mapping[str, Any] | None, tags: Mapping[str, Any] | None,
             step: int) -> list[Batch]:
    """What :meth:`MLflowTracker.log` writes, as MLflow takes it, in batches within MLflow's limits
    (none when there is nothing to write)."""
    now = get_current_time_millis()
    p = [Param(clean_key(k), _text(v, _MAX_PARAM_LEN)) for k, v in redact_mapping(params or {}).items()]
    t = _tags(tags)
    m = [Metric(clean_key(k), float(v), now, step) for k, v in (metrics or {}).items() if _is_number(v)]
    chunks = max(-(-len(p) // _MAX_PARAMS), -(-len(t) // _MAX_TAGS), -(-len(m) // _MAX_METRICS))
    return [Batch(params=p[i * _MAX_PARAMS: (i + 1) * _MAX_PARAMS], metrics=m[i * _MAX_METRICS: (i + 1) * _MAX_METRICS],
                  tags=t[i * _MAX_TAGS: (i + 1) * _MAX_TAGS]) for i in range(chunks)]


def _mlflow_checks(run_id: str, batch: Batch) -> Batch:
    """MLflow's checks of a ``log_batch`` (not its per-request limits: :func:`_batches` keeps them)."""
    _validate_run_id(run_id)
    metrics, params, tags = _validate_batch_log_data(batch.metrics, batch.params, batch.tags)
    _validate_param_keys_unique(params)
    return Batch(params=params, metrics=metrics, tags=tags)


def _mlflow_refusal(message: str, code: str) -> MlflowException:
    return MlflowException(message, error_code=ErrorCode.Value(code))


#: What MLflow decides about the fast writes: its checks, its exceptions, its runs' artifact URIs.
MLFLOW_RULES = MlflowRules(check=_mlflow_checks, refuse=_mlflow_refusal, join_uri=append_to_uri_path)


def _inside(artifact_file: str) -> bool:
    """Whether an artifact's relative path stays inside the run's artifact folder."""
    return not posixpath.isabs(artifact_file) and ".." not in artifact_file.split("/")


def _tags(tags: Mapping[str, Any] | None) -> list[RunTag]:
    """The sweeper's tags as MLflow takes them: redacted, prefixed ``sweeper.``, None left out.

    A key that starts with ``mlflow.`` is MLflow's own tag and keeps its name: e.g.
    :data:`NOTE_TAG`, the run's description in the MLflow UI.
    """
    return [RunTag(clean_key(k if k.startswith(MLFLOW_PREFIX) else TAG_PREFIX + k), _text(v, _MAX_TAG_LEN))
            for k, v in redact_mapping(tags or {}).items() if v is not None]


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
