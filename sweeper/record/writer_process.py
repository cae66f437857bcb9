"""The sweep's MLflow writer in a process of its own.

Python runs one thread at a time per process. In the driver, Tune's event loop (which
hands each result to the searcher and starts the next trial) and an MLflow writer thread
(SQLAlchemy's work for each trial) would take turns on that one lock, so every trial would
wait for the previous trials' records (NOTE: docs/decisions/0023-writer-process.md).
:class:`WriterProcess` runs the same :class:`~sweeper.record.spool.DurableWriter` (retries,
spool, order, local handles) in a child process (:mod:`sweeper.helper_process`) and forwards
each write to it through a queue, so the driver only pickles it.

The child is forked before the driver runs any thread where it can be (:class:`WriterStart`:
the sweep's driver does it first thing, with MLflow imported and no connection open, so the
child starts with MLflow at no cost), and spawned otherwise.

The handles of runs are made here, so the driver can name a run in later writes at once;
the MLflow ids behind them, the failed writes and the number of spooled writes come back
when the writer closes. A driver that dies (SIGKILL) takes no more records with it than a
writer thread in the driver would: the child sends what reached it, then ends when it sees
its parent gone.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweeper.helper_process import FORK, SPAWN, fork_helper, orphaned, start_helper
from sweeper.record.spool import DurableWriter, _jsonable, new_handle

if TYPE_CHECKING:
    from sweeper.record.tracker_protocol import Tracker

log = logging.getLogger(__name__)

#: How often the child checks that the driver is alive while no write comes.
_PARENT_CHECK_S = 1.0


@dataclass
class WriterStart:
    """A writer process started before the sweep's MLflow records are open; :class:`WriterProcess` adopts it.

    Attributes:
        process: the child, waiting for the tracker to write through.
        spool_path: where its writes wait while the tracking server is away (None: no spool).
        writes: the queue of writes to the child.
        outcome: the queue of what the child reports when it closes.
        adopted: a :class:`WriterProcess` writes through it (else :meth:`discard` ends it).
    """

    process: Any
    spool_path: Path | None
    writes: Any
    outcome: Any
    adopted: bool = False

    @classmethod
    def fork(cls, spool_path: Path | None, tracking_uri: str) -> WriterStart | None:
        """Fork the writer now, MLflow and the code of the store at ``tracking_uri`` imported first
        (None: this process runs threads already).

        Call it before any thread starts and before any MLflow store or connection is opened,
        which the child would share.
        """
        from sweeper.record.tracking import import_store  # MLflow, imported once for both processes

        import_store(tracking_uri)

        if FORK is None:
            return None
        for stream in (sys.stdout, sys.stderr):  # what they hold would be written again by the child
            stream.flush()
        return cls._started(spool_path, FORK, fork_helper)

    @classmethod
    def spawn(cls, spool_path: Path | None) -> WriterStart:
        """Spawn the writer (it imports MLflow itself)."""
        started = cls._started(spool_path, SPAWN, start_helper)
        assert started is not None
        return started

    @classmethod
    def _started(cls, spool_path: Path | None, context: Any, start: Any) -> WriterStart | None:
        """The child started by ``start`` (:func:`fork_helper` or :func:`start_helper`), with ``context``'s queues."""
        writes, outcome = context.Queue(), context.Queue()
        process = start(_serve, (str(spool_path) if spool_path else None, writes, outcome, os.getpid()),
                        "mlflow-writer")
        return None if process is None else cls(process, spool_path, writes, outcome)

    def discard(self) -> None:
        """End the child if no :class:`WriterProcess` adopted it (e.g. Ray failed to start)."""
        if not self.adopted:
            self.adopted = True
            self.writes.put(None)
            self.process.join(timeout=10)


class WriterProcess:
    """:class:`~sweeper.record.spool.DurableWriter`'s interface, the writing done in a child process.

    Args:
        tracker: the driver's ``MLflowTracker`` (its URI and experiment are reopened in the child).
        spool_path: where writes wait while the tracking server is away (None: no spool).
        started: the child, forked early (:meth:`WriterStart.fork`, with this ``spool_path``);
            None: spawn it now.
    """

    def __init__(self, tracker: Tracker, spool_path: Path | None, started: WriterStart | None = None) -> None:
        self.tracker = tracker
        self.spool_path = spool_path
        self.failures: list[str] = []
        self._ids: dict[str, str] = {}
        self._spooled = 0
        assert started is None or started.spool_path == spool_path, (started.spool_path, spool_path)
        if started is None or started.adopted:
            started = WriterStart.spawn(spool_path)
        started.adopted = True
        self._writes: Any = started.writes
        self._outcome: Any = started.outcome
        self._process = started.process
        self._writes.put((tracker.tracking_uri, tracker.experiment_name, tracker.experiment_id))

    # ---------------------------------------------------------------- the writes
    def start_run(self, what: str, run_name: str, *, parent_run_id: str | None = None,
                  params: Mapping[str, Any] | None = None, tags: Mapping[str, Any] | None = None) -> str:
        handle = new_handle()
        self._send("start_run", what, run_name, parent_run_id=parent_run_id, params=_jsonable(params),
                   tags=_jsonable(tags), handle=handle)
        return handle

    def log(self, what: str, run: str, *, params: Mapping[str, Any] | None = None,
            metrics: Mapping[str, Any] | None = None, tags: Mapping[str, Any] | None = None, step: int = 0) -> None:
        self._send("log", what, run, params=_jsonable(params), metrics=_jsonable(metrics), tags=_jsonable(tags),
                   step=step)

    def log_text(self, what: str, run: str, text: str, artifact_file: str) -> None:
        self._send("log_text", what, run, text, artifact_file)

    def log_bytes(self, what: str, run: str, data: bytes, artifact_file: str) -> None:
        self._send("log_bytes", what, run, data, artifact_file)

    def finish(self, what: str, run: str, status: str) -> None:
        self._send("finish", what, run, status)

    def reopen(self, what: str, run: str) -> None:
        self._send("reopen", what, run)

    def run_id(self, run: str | None) -> str | None:
        """The MLflow id behind a handle, once the writer has closed (a real id is returned as it is)."""
        if run is None or not run.startswith("local-"):
            return run
        return self._ids.get(run)

    @property
    def spooled(self) -> int:
        """Writes left in the spool file, as of the writer's close."""
        return self._spooled

    def close(self) -> None:
        """Let the child send what is queued (and offer the spool as long as one write's retries wait), then
        collect."""
        self._writes.put(None)
        # The child's close waits out retries (1 + 2 + 4 + 8 s by default) and the drain, after the queue.
        while True:
            try:
                self._ids, self.failures, self._spooled = self._outcome.get(timeout=1.0)
                break
            except queue.Empty:
                if not self._process.is_alive():
                    self.failures.append(f"the MLflow writer process ended (exit code {self._process.exitcode}) "
                                         f"before it closed: the writes it had not sent are lost")
                    break
        self._process.join(timeout=30)

    def _send(self, kind: str, *args: Any, **kwargs: Any) -> None:
        if not self._process.is_alive() and self._process.exitcode is not None:
            raise RuntimeError(f"the MLflow writer process ended (exit code {self._process.exitcode}); "
                               f"its error is above. The sweep's records after this point are lost.")
        self._writes.put((kind, args, kwargs))


def _serve(spool_path: str | None, writes: Any, outcome: Any, parent_pid: int) -> None:
    """The child: wait for the tracker's URI and experiment (the first item), then apply each write
    through a DurableWriter until told to close or the driver is gone."""
    # Ctrl-C and SIGTERM reach the whole process group: the driver decides, and closes us; if
    # it dies instead, we notice below and send what reached us first.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("[%(asctime)s][HYDRA] %(message)s"))
    ours = logging.getLogger("sweeper")
    ours.handlers[:] = [handler]
    ours.setLevel(logging.INFO)
    ours.propagate = False  # forked: the driver's handlers (Hydra's console and log file) are here too
    writer: DurableWriter | None = None
    while True:
        try:
            item = writes.get(timeout=_PARENT_CHECK_S)
        except queue.Empty:
            if orphaned(parent_pid):  # the driver died: what reached us is written, then we end
                if writer is not None:
                    log.warning("the sweep's driver ended without closing its MLflow writer")
                break
            continue
        if writer is None:
            if item is None:  # discarded before any write
                return
            from sweeper.record.tracking import MLflowTracker

            writer = DurableWriter(MLflowTracker(*item), Path(spool_path) if spool_path else None)
            continue
        if item is None:
            break
        kind, args, kwargs = item
        getattr(writer, kind)(*args, **kwargs)
    if writer is None:
        return
    writer.close()
    outcome.put((writer.handles(), list(writer.failures), writer.spooled))
