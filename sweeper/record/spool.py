"""MLflow writes that survive a tracking-server outage: retried, then spooled to disk, then sent.

The sweep's records go through one :class:`DurableWriter` thread, in order (for the trials,
in a process of its own: :mod:`sweeper.record.writer_process`). A write that
fails because the server cannot be reached is retried with backoff (1, 2, 4, 8 s, or the
waits in ``SWEEPER_MLFLOW_RETRY_DELAYS_S``: :func:`retry_delays`); if the server is still
away, that write and every later one go to a spool file in the sweep dir
(JSON lines, one write each, texts and figures inline), and the writer tries to send the
spool every few seconds. When the server returns, the spool is sent in order and the
writer carries on as before. If the sweep ends first, the spool stays on disk: ``sweeper
sync <sweep dir>`` sends it later.

A run created while the server is away has no MLflow id yet; writes name it by a local
handle (``local-<hex>``) until it exists. The spool keeps the handles it resolved, so a
``sweeper sync`` in another process sends the writes of those runs to the right place.

A write refused for any other reason (a bad request, not an outage) is reported and
dropped, never retried forever: it could never succeed and would hold every later write.

A run's creation waits up to :data:`HOLD_START_S` for the run's first log and goes in with
it: the run is created with both writes' tags, and its params ride with the metrics. A
short trial's record then takes three store transactions instead of four; the final record
is the same (NOTE: docs/decisions/0024-run-created-with-first-log.md). A longer trial's run
appears RUNNING after that wait.
"""

from __future__ import annotations

import base64
import json
import logging
import math
import os
import queue
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sweeper.record.tracker_protocol import Tracker

log = logging.getLogger(__name__)

SPOOL_FILE = "mlflow_spool.jsonl"
#: Seconds between the attempts of a write the store did not answer; after the last, the write is spooled.
RETRY_DELAYS_S = (1.0, 2.0, 4.0, 8.0)
#: The environment variable that sets other waits: seconds separated by commas, e.g. ``1,2,4,8,16,32``.
RETRY_DELAYS_ENV = "SWEEPER_MLFLOW_RETRY_DELAYS_S"
DRAIN_EVERY_S = 5.0
#: The tag (``sweeper.writer_handle``) naming the handle a run was created under, so a retried creation finds it.
HANDLE_TAG = "writer_handle"
#: How long a run's creation waits for the run's first log, to be written with it.
HOLD_START_S = 0.5
#: Tags a run may be created with at once (MLflow's batch limit); above it, no coalescing.
_MAX_CREATE_TAGS = 100
_OUTAGE_SIGNS = ("Max retries exceeded", "Connection refused", "ConnectionError", "Connection aborted",
                 "RemoteDisconnected", "Read timed out", "timed out", "Name or service not known",
                 "Temporary failure in name resolution", "status code 502", "status code 503", "status code 504",
                 "database is locked", "server closed the connection", "could not connect to server",
                 # a SQLite store's conditions a user can clear: sent later by `sweeper sync`, never dropped
                 "disk I/O error", "unable to open database file", "database or disk is full",
                 "attempt to write a readonly database")


def retry_delays() -> tuple[float, ...]:
    """The waits between attempts of one write: :data:`RETRY_DELAYS_ENV`'s if set, else :data:`RETRY_DELAYS_S`.

    An environment variable, not a Hydra setting, so that every process that writes a sweep's
    records waits alike: its driver, its writer process, a resumed sweep, and through Ray Client
    the writer on the head (``sweeper.run.cluster.FORWARDED_ENV``). ``sweeper sync`` keeps its own
    short waits (:func:`sync`).

    Raises:
        ValueError: the variable holds anything but seconds >= 0 separated by commas.
    """
    text = os.environ.get(RETRY_DELAYS_ENV, "").strip()
    if not text:
        return RETRY_DELAYS_S
    try:
        delays = tuple(float(part) for part in text.split(","))
    except ValueError:
        delays = ()
    if not delays or not all(math.isfinite(d) and d >= 0 for d in delays):
        raise ValueError(f"{RETRY_DELAYS_ENV}={text!r} is invalid: it is the seconds to wait between the attempts "
                         f"of an MLflow write, each >= 0, separated by commas. Try {RETRY_DELAYS_ENV}=1,2,4,8.")
    return delays


def is_outage(exc: BaseException) -> bool:
    """Whether a failed write failed because the store could not be reached or written for now
    (worth retrying, then spooling): a server away, or a SQLite file locked, full or unwritable."""
    text = f"{type(exc).__name__}: {exc}"
    return any(sign in text for sign in _OUTAGE_SIGNS)


class DurableWriter:
    """Runs a sweep's MLflow writes in one thread, in order, retrying and spooling through outages.

    Args:
        tracker: the writer of the records (:class:`~sweeper.record.tracking.MLflowTracker`).
        spool_path: where writes wait while the store is unreachable (None: no spool; an
            unreachable store then loses the writes, each reported in :attr:`failures`).
        retry_delays_s: waits between attempts of one write before it is spooled (None:
            :func:`retry_delays`).
        drain_every_s: how often a non-empty spool is offered to the store again.
    """

    def __init__(self, tracker: Tracker, spool_path: Path | None, *, retry_delays_s: tuple[float, ...] | None = None,
                 drain_every_s: float = DRAIN_EVERY_S) -> None:
        self.tracker = tracker
        self.spool_path = spool_path
        self.retry_delays_s = retry_delays() if retry_delays_s is None else tuple(retry_delays_s)
        self.drain_every_s = drain_every_s
        self.failures: list[str] = []  # writes dropped, each with what it was about
        self._ids: dict[str, str] = {}  # local handle -> MLflow run id
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._spooled = self._load_spool()  # writes waiting in the spool, in order
        self._last_drain = 0.0
        self._thread = threading.Thread(target=self._run, name="mlflow-writer", daemon=True)
        self._thread.start()

    # ---------------------------------------------------------------- the writes
    def start_run(self, what: str, run_name: str, *, parent_run_id: str | None = None,
                  params: Mapping[str, Any] | None = None, tags: Mapping[str, Any] | None = None,
                  handle: str | None = None) -> str:
        """Queue the creation of a run; return its handle (use it for this run's later writes).

        ``handle``: the one to use, made by :func:`new_handle` (by a writer in another process).
        """
        handle = handle or new_handle()
        self._put("start_run", what, handle, run_name=run_name, parent_run_id=parent_run_id,
                  params=_jsonable(params), tags=_jsonable(tags))
        return handle

    def log(self, what: str, run: str, *, params: Mapping[str, Any] | None = None,
            metrics: Mapping[str, Any] | None = None, tags: Mapping[str, Any] | None = None, step: int = 0) -> None:
        self._put("log", what, run, params=_jsonable(params), metrics=_jsonable(metrics), tags=_jsonable(tags),
                  step=step)

    def log_text(self, what: str, run: str, text: str, artifact_file: str) -> None:
        self._put("log_text", what, run, text=text, artifact_file=artifact_file)

    def log_bytes(self, what: str, run: str, data: bytes, artifact_file: str) -> None:
        """Queue a binary artifact (a figure); in the spool it waits base64-encoded."""
        self._put("log_bytes", what, run, data=base64.b64encode(data).decode("ascii"), artifact_file=artifact_file)

    def finish(self, what: str, run: str, status: str) -> None:
        self._put("finish", what, run, status=status)

    def reopen(self, what: str, run: str) -> None:
        """Mark an ended (or orphaned) run RUNNING again: its trial continues from a checkpoint."""
        self._put("reopen", what, run)

    def run_id(self, run: str | None) -> str | None:
        """The MLflow id behind a handle (a real id is returned as it is; None while not created)."""
        if run is None or not run.startswith("local-"):
            return run
        return self._ids.get(run)

    def handles(self) -> dict[str, str]:
        """Every local handle resolved so far -> its MLflow run id."""
        return dict(self._ids)

    @property
    def spooled(self) -> int:
        """Writes waiting in the spool file for the store to come back."""
        return len(self._spooled)

    def waiting(self) -> list[str]:
        """What each write waiting in the spool is about, in order (``"closing the run of trial #3"``)."""
        return [op["what"] for op in self._spooled]

    def close(self, drain_timeout_s: float | None = None) -> None:
        """Send what is queued, give the spool up to ``drain_timeout_s`` to go out (None: as long as one
        write's retries wait, 15 s by default), stop the thread."""
        self._queue.put(None)
        self._thread.join()
        deadline = time.monotonic() + (sum(self.retry_delays_s) if drain_timeout_s is None else drain_timeout_s)
        while self._spooled and not self._drain() and time.monotonic() < deadline:  # one try at least
            time.sleep(min(self.drain_every_s, max(0.0, deadline - time.monotonic())))
        if self._spooled:
            log.warning("%d MLflow write(s) could not reach %s and wait in %s: send them with `sweeper sync %s` "
                        "once the tracking server is back", len(self._spooled), self.tracker.tracking_uri,
                        self.spool_path, self.spool_path.parent if self.spool_path else "")

    # ---------------------------------------------------------------- internals
    def _put(self, kind: str, what: str, run: str | None, **payload: Any) -> None:
        self._queue.put({"op": kind, "what": what, "run": run, **payload})

    def _run(self) -> None:
        held: dict[str, tuple[float, dict[str, Any]]] = {}  # handle -> (deadline, its start_run), oldest first
        while True:
            try:
                op = self._queue.get(timeout=self._wait(held))
            except queue.Empty:
                self._release(held, due_only=True)
                if self._spooled and self._drain_due():
                    self._drain()
                continue
            try:
                if op is None:
                    self._release(held)
                    return
                self._release(held, due_only=True)
                # A held creation goes first: before its child's, or before its own run's next write.
                for handle in (op.get("parent_run_id"), op["run"] if op["op"] != "start_run" else None):
                    creation = held.pop(handle)[1] if handle in held else None
                    if creation is not None and handle == op["run"] and op["op"] == "log":
                        creation, op = _coalesced(creation, op)
                    if creation is not None:
                        self._write(creation)
                if op["op"] == "start_run" and not self._spooled:
                    held[op["run"]] = (time.monotonic() + HOLD_START_S, op)
                    continue
                self._write(op)
            finally:
                self._queue.task_done()

    def _wait(self, held: Mapping[str, tuple[float, Any]]) -> float | None:
        """How long the queue may stay quiet: until the first held creation is due, or the next drain."""
        if held:
            return max(0.0, min(deadline for deadline, _ in held.values()) - time.monotonic())
        return self.drain_every_s if self._spooled else None

    def _release(self, held: dict[str, tuple[float, dict[str, Any]]], due_only: bool = False) -> None:
        """Write the held creations (only those whose wait is over, with ``due_only``), oldest first."""
        now = time.monotonic()
        for handle in [h for h, (deadline, _) in held.items() if not due_only or deadline <= now]:
            self._write(held.pop(handle)[1])

    def _write(self, op: dict[str, Any]) -> None:
        if self._spooled and not (self._drain_due() and self._drain()):
            self._spool(op)  # keep the order: nothing overtakes a spooled write
            return
        self._send_with_retries(op)

    def _send_with_retries(self, op: dict[str, Any]) -> None:
        for delay in (*self.retry_delays_s, None):
            try:
                self._apply(op)
                return
            except Exception as exc:  # noqa: BLE001 - classified below; never fatal to the sweep
                if not is_outage(exc):
                    self._drop(op, exc)
                    return
                op["tried"] = True  # it may have landed before the connection broke (see _apply)
                if delay is None or self.spool_path is None:
                    if self.spool_path is None:
                        self._drop(op, exc)
                    else:
                        log.warning("MLflow at %s is unreachable (%s); spooling writes to %s until it is back",
                                    self.tracker.tracking_uri, exc, self.spool_path)
                        self._spool(op)
                    return
                time.sleep(delay)

    def _apply(self, op: dict[str, Any]) -> None:
        kind, run = op["op"], op["run"]
        if kind == "start_run":
            # A creation tried before may have reached the store with its answer lost in the
            # outage: the run tagged with this handle is that run, not one to create twice.
            existing = self.tracker.run_tagged(HANDLE_TAG, run) if op.get("tried") else None
            if existing is not None:
                self._ids[run] = existing
                self.tracker.log(existing, params=op["params"])
                return
            parent = self.run_id(op["parent_run_id"]) if op["parent_run_id"] else None
            self._ids[run] = self.tracker.start_run(op["run_name"], parent_run_id=parent, params=op["params"],
                                                    tags={**(op["tags"] or {}), HANDLE_TAG: run})
            return
        run_id = self.run_id(run)
        if run_id is None:
            raise LookupError(f"the run {run} was never created: its creation was dropped")
        if kind == "log":
            self.tracker.log(run_id, params=op["params"], metrics=op["metrics"], tags=op["tags"], step=op["step"])
        elif kind == "log_text":
            self.tracker.log_text(run_id, op["text"], op["artifact_file"])
        elif kind == "log_bytes":
            self.tracker.log_bytes(run_id, base64.b64decode(op["data"]), op["artifact_file"])
        elif kind == "finish":
            self.tracker.finish(run_id, op["status"])
        elif kind == "reopen":
            self.tracker.reopen(run_id)
        else:
            raise ValueError(f"unknown write {kind!r}")

    def _drop(self, op: dict[str, Any], exc: BaseException) -> None:
        self.failures.append(f"{op['what']}: {type(exc).__name__}: {exc}")
        log.error("MLflow write failed while %s: %s", op["what"], exc)

    def _spool(self, op: dict[str, Any]) -> None:
        self._spooled.append(op)
        self._save_spool()

    def _drain_due(self) -> bool:
        """Whether the store may be tried again (at most every ``drain_every_s`` during an outage)."""
        return time.monotonic() - self._last_drain >= self.drain_every_s

    def _drain(self) -> bool:
        """Send spooled writes in order; True once the spool is empty."""
        self._last_drain = time.monotonic()
        while self._spooled:
            op = self._spooled[0]
            try:
                self._apply(op)
            except Exception as exc:  # noqa: BLE001 - an outage of any kind keeps the spool; anything else is dropped
                if is_outage(exc):
                    self._save_spool()
                    return False
                self._drop(op, exc)
            self._spooled.pop(0)
        self._save_spool()
        log.info("MLflow at %s is back: the spooled writes were sent", self.tracker.tracking_uri)
        return True

    def _save_spool(self) -> None:
        if self.spool_path is None:
            return
        if not self._spooled:
            self.spool_path.unlink(missing_ok=True)
            return
        header = {"tracking_uri": self.tracker.tracking_uri, "experiment": self.tracker.experiment_name,
                  "run_ids": self._ids}
        tmp = self.spool_path.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(json.dumps(header) + "\n")
            for op in self._spooled:
                f.write(json.dumps(op) + "\n")
        os.replace(tmp, self.spool_path)  # a crash mid-write leaves the previous spool whole

    def _load_spool(self) -> list[dict[str, Any]]:
        if self.spool_path is None or not self.spool_path.is_file():
            return []
        header, ops = read_spool(self.spool_path)
        self._ids.update(header.get("run_ids", {}))
        return ops


def _coalesced(start: dict[str, Any], first_log: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A run's creation and its first log, rewritten so the creation carries both writes' tags and
    the log both writes' params: the same record in one store transaction fewer.

    Left as they are where that could change the record: a param in both (MLflow refuses a
    param logged twice with different values, and would now refuse the metrics with it), or
    more tags than one call may carry.
    """
    start_params, log_params = start["params"] or {}, first_log["params"] or {}
    tags = {**(start["tags"] or {}), **(first_log["tags"] or {})}
    if set(start_params) & set(log_params) or len(tags) > _MAX_CREATE_TAGS:
        return start, first_log
    return ({**start, "params": None, "tags": tags},
            {**first_log, "params": {**start_params, **log_params} or None, "tags": None})


def new_handle() -> str:
    """A local handle for a run not created yet (``local-<hex>``)."""
    return f"local-{uuid.uuid4().hex}"


def read_spool(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header (tracking URI, experiment, resolved handles) and the writes of a spool file."""
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not lines:
        return {}, []
    return lines[0], lines[1:]


def sync(sweep_dir: Path, tracker_factory: Callable[[str, str], Tracker]) -> tuple[int, list[str]]:
    """Send a sweep's spooled writes (``sweeper sync``); return how many are left and what failed.

    Args:
        sweep_dir: the sweep's directory, holding ``mlflow_spool.jsonl``.
        tracker_factory: called with (tracking_uri, experiment) from the spool's header.
    """
    path = sweep_dir / SPOOL_FILE
    if not path.is_file():
        return 0, []
    header, _ = read_spool(path)
    writer = DurableWriter(tracker_factory(header["tracking_uri"], header["experiment"]), path,
                           retry_delays_s=(1.0,), drain_every_s=1.0)
    writer.close(drain_timeout_s=5.0)
    return writer.spooled, writer.failures


def _jsonable(values: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A mapping whose values survive JSON: numbers and strings as they are, anything else as text."""
    if values is None:
        return None
    return {str(k): v if isinstance(v, (int, float, str, bool)) or v is None else str(v) for k, v in values.items()}
