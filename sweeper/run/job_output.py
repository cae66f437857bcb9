"""What a trial's job prints, also written to the job's log file in its output folder.

Why: under Hydra's basic launcher a job's ``print()`` and warnings reach the terminal the user
watches, and its logging goes to ``<job folder>/<job name>.log``. In a Ray worker the terminal is
Ray's worker log file in Ray's session folder (forwarded to the sweep's console only with
``ray.log_to_driver=true``), so a job's folder held its log records and not what it printed, nor a
failed job's warnings. :class:`JobOutput` puts a tee in place of ``sys.stdout`` and ``sys.stderr`` for
the trial: every write still goes to the stream it replaced (Ray's own worker logging is unchanged)
and also to the job's log file, in the order written relative to the job's log records (both append
and flush at once). What is written before the job's logging is configured (while its config is
composed) is held and written first once the log file is known (:meth:`JobOutput.task`).

The job's log file is the file handler of Hydra's job logging (``hydra/job_logging``) inside the
job's output folder; a job logging to no file there gets no copy. Output of C code and child
processes (written to file descriptors 1 and 2, not ``sys.stdout``) is not copied.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable
from typing import IO, Any

_STREAMS = ("stdout", "stderr")


def job_log_handlers(output_dir: str) -> list[logging.FileHandler]:
    """The root logger's file handlers writing inside ``output_dir``: the job's log, per ``hydra/job_logging``."""
    inside = os.path.join(os.path.abspath(output_dir), "")
    return [h for h in logging.getLogger().handlers
            if isinstance(h, logging.FileHandler) and h.baseFilename.startswith(inside)]


def _output_dir() -> str | None:
    """The running job's output folder (``hydra.runtime.output_dir``); None outside a Hydra job."""
    from hydra.core.hydra_config import HydraConfig

    try:
        return str(HydraConfig.get().runtime.output_dir)
    except Exception:  # noqa: BLE001 - no Hydra job config: no job folder to write to
        return None


class _Tee:
    """A text stream that writes to ``original`` and to its :class:`JobOutput` while that is open."""

    def __init__(self, original: IO[str], output: JobOutput) -> None:
        self.original, self._output = original, output

    def write(self, text: str) -> int:
        written = self.original.write(text)
        self._output.copy(text)
        return written

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self.original.flush()

    def __getattr__(self, name: str) -> Any:  # encoding, fileno, isatty, buffer...: those of the stream replaced
        if name == "original":  # not set yet (a copy being made): no recursion
            raise AttributeError(name)
        return getattr(self.original, name)


class JobOutput:
    """While open, ``sys.stdout`` and ``sys.stderr`` are also copied to the job's log file (see the module doc).

    Use as a context manager around one trial; :meth:`task` wraps the task function so that the
    copy starts going to the job's log once Hydra has configured it. On exit the streams in force
    before are back, and a handler that captured a tee while it was in place (a console handler
    of ``hydra/job_logging`` configured with ``ext://sys.stdout``) writes to the stream again. A tee
    that someone still holds (a thread the task left running) passes writes on to its stream only.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: list[str] = []
        self._file: IO[str] | None = None
        self._open = False
        self._tees: dict[str, _Tee] = {}
        self.path: str | None = None  # the job's log file the output went to, once known

    def __enter__(self) -> JobOutput:
        for name in _STREAMS:
            original = getattr(sys, name)
            tee = _Tee(original.original if isinstance(original, _Tee) else original, self)
            self._tees[name] = tee
            setattr(sys, name, tee)
        self._open = True
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._open = False
            self._held.clear()
            if self._file is not None:
                self._file.close()
                self._file = None
        for name, tee in self._tees.items():
            if getattr(sys, name) is tee:
                setattr(sys, name, tee.original)
        self._unhook_handlers()

    def copy(self, text: str) -> None:
        """Write ``text`` to the job's log (held until it is known); nothing once closed."""
        if not text:
            return
        with self._lock:
            if not self._open:
                return
            if self._file is None:
                self._held.append(text)
                return
            self._file.write(text)
            self._file.flush()

    def task(self, function: Callable[..., Any]) -> Callable[..., Any]:
        """``function`` that, called by Hydra's job runner (its logging configured), first opens the job's log."""

        def with_output_in_job_log(*args: Any, **kwargs: Any) -> Any:
            self._start()
            return function(*args, **kwargs)

        return with_output_in_job_log

    def _start(self) -> None:
        """Send the copy to the job's log file, after what was held; console handlers write to the stream."""
        self._unhook_handlers()
        output_dir = _output_dir()
        handlers = job_log_handlers(output_dir) if output_dir else []
        with self._lock:
            if not self._open or self._file is not None or not handlers:
                return
            self.path = handlers[0].baseFilename
            # Its own append-mode handle: the handler flushes each record, so both land in the order written.
            encoding = handlers[0].encoding or "utf-8"
            self._file = open(self.path, "a", encoding=encoding)  # noqa: SIM115 - kept open, closed by close()
            self._file.write("".join(self._held))
            self._file.flush()
            self._held.clear()

    def _unhook_handlers(self) -> None:
        """Point stream handlers that hold one of this output's tees at the stream it wraps.

        A console handler writing through the tee would copy each log record to the job's log a
        second time (its file handler writes it already).
        """
        tees = set(map(id, self._tees.values()))
        loggers = [logging.getLogger(), *(v for v in logging.Logger.manager.loggerDict.values()
                                          if isinstance(v, logging.Logger))]
        for logger in loggers:
            for handler in logger.handlers:
                if isinstance(handler, logging.StreamHandler) and id(handler.stream) in tees:
                    handler.setStream(handler.stream.original)
