"""Live maps: after each GP batch, its map on the sweep's MLflow run, drawn off Tune's loop.

The searcher hands the fit each GP batch was planned with to :meth:`LiveMaps.submit`
(:attr:`~sweeper.search.policy.MultiversePolicy.on_gp_fit`), which only puts it on a queue:
``suggest()`` never waits for a drawing. A *painter* computes the map and draws it
(:mod:`sweeper.analysis.live_map`: the code of ``sweeper multiverse``; matplotlib's Agg, imported
there only) in a spawned process of its own, at a lower CPU priority, so it holds neither the
Python lock of Tune's loop nor a core the trials want. A thread of the driver, blocked on the
painter's results while it waits, hands each map to the sweep's MLflow writer:

* ``live/batch_003_mean.png`` and ``live/batch_003_sd.png`` on the sweep's run (names padded to
  the sweep's number of batches, so they sort by batch; ``_map.png`` over fewer than two
  continuous dims);
* metrics with ``step`` = the batch: the leave-one-out check of the fit (``live_loo_coverage95``,
  ``live_loo_rmse``, ``live_loo_coverage68``, ``live_loo_max_abs_residual``, ``live_loo_n``),
  whether the trials so far show an effect of any choice (``live_effect_p``,
  ``live_effect_log10_K``), ``live_trials`` (the trials the map rests on) and
  ``live_draw_cpu_s`` (the painter's CPU seconds for that map: what it cost).

Where Tune runs inside a Ray task on the head node (Ray Client), which should not spawn
processes, the painter is a thread. A failure while drawing never fails the sweep: the first is
a warning, later ones are logged at debug level, and the sweep goes on. At the sweep's end
:meth:`LiveMaps.close` gives the maps still being drawn up to :data:`CLOSE_TIMEOUT_S`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import signal
import threading
import time
from typing import TYPE_CHECKING, Any

from sweeper.helper_process import SPAWN, orphaned, start_helper

if TYPE_CHECKING:
    from sweeper.search.policy import BatchFit
    from sweeper.search.space import SearchSpace

log = logging.getLogger(__name__)

#: The artifact folder of the live maps on the sweep's run.
LIVE_FOLDER = "live"
#: How long the sweep's end waits for the maps still being drawn.
CLOSE_TIMEOUT_S = 60.0
#: Niceness the painter process adds to its own: drawing waits while trials want the cores.
PAINTER_NICENESS = 10
#: How often the painter checks that the driver is alive, and the forwarder that the painter is.
_CHECK_S = 1.0
#: What the forwarder gets from a painter that ended without its last word (None).
_ENDED = object()


class LiveMaps:
    """Draws each GP batch's map off Tune's loop and logs it on the sweep's run (see the module docstring).

    Args:
        writer: the sweep's MLflow writer (``log_bytes`` and ``log``).
        run_id: the sweep's parent run.
        space: the search space.
        metric: the modelled metric's name (for the figures).
        digits: the batch number's width in artifact names (enough for the sweep's last batch).
        in_process: draw in a spawned process (False: in a thread of this process).
    """

    def __init__(self, writer: Any, run_id: str, space: SearchSpace, metric: str, *, digits: int = 3,
                 in_process: bool = True) -> None:
        self.writer = writer
        self.run_id = run_id
        self.logged: list[int] = []  # the batches whose maps reached the writer
        self._submitted: list[int] = []
        self._warned = False
        self._stopped = False  # the painter or the writer is gone: nothing more is drawn
        args = (space, metric, digits)
        if in_process:
            self._jobs: Any = SPAWN.Queue()
            self._results: Any = SPAWN.Queue()
            self._painter: Any = start_helper(_paint, (*args, self._jobs, self._results, os.getpid()), "live-maps")
        else:
            self._jobs, self._results = queue.Queue(), queue.Queue()
            self._painter = threading.Thread(target=_paint, args=(*args, self._jobs, self._results, None),
                                             name="live-maps", daemon=True)
            self._painter.start()
        self._forwarder = threading.Thread(target=self._forward, name="live-maps-forward", daemon=True)
        self._forwarder.start()

    def submit(self, fitted: BatchFit) -> None:
        """Hand a batch's fit to the painter. Returns at once and never raises."""
        if self._stopped:
            return
        try:
            self._jobs.put(fitted)
            self._submitted.append(fitted.batch)
        except Exception as exc:  # noqa: BLE001 - a live map is never worth a sweep
            self._warn(f"the fit of batch {fitted.batch} could not be handed to the painter ({exc})")

    def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        """Let the painter finish the maps handed to it (up to ``timeout_s``), hand them to the writer, stop it."""
        with contextlib.suppress(Exception):  # the queue of a dead painter
            self._jobs.put(None)
        self._forwarder.join(timeout_s)
        missing = [b for b in self._submitted if b not in self.logged]
        if self._forwarder.is_alive():
            self._stopped = True
            log.warning("live maps: the map(s) of batch(es) %s were not drawn within %g s of the sweep's end and "
                        "are left out (`sweeper multiverse` draws the final map)",
                        ", ".join(map(str, missing)), timeout_s)
        if hasattr(self._painter, "kill"):
            self._painter.join(timeout=5.0)
            if self._painter.is_alive():  # it ignores SIGTERM, as a signal to the process group
                self._painter.kill()

    # ---------------------------------------------------------------- internals
    def _forward(self) -> None:
        """Hand each drawn map to the writer, in the order drawn, until the painter is done."""
        while not self._stopped:
            item = self._next_result()
            if item is None:
                return
            if item is _ENDED:
                code = getattr(self._painter, "exitcode", None)
                self._stopped = True
                self._warn("the painter ended unexpectedly" + (f" (exit code {code})" if code else "")
                           + ": no further live maps")
                return
            batch, outcome = item
            if isinstance(outcome, str):
                self._warn(f"drawing the map of batch {batch} failed: {outcome}")
                continue
            pngs, metrics = outcome
            what = f"logging the live map of batch {batch}"
            try:
                for name, data in pngs.items():
                    self.writer.log_bytes(what, self.run_id, data, f"{LIVE_FOLDER}/{name}")
                self.writer.log(what, self.run_id, metrics=metrics, step=batch)
            except Exception as exc:  # noqa: BLE001 - the writer is gone; the sweep reports that itself
                self._stopped = True
                self._warn(f"the map of batch {batch} could not be handed to the MLflow writer ({exc})")
                return
            self.logged.append(batch)

    def _next_result(self) -> Any:
        """The painter's next result, None once it is done, or ``_ENDED`` if it ended without saying so."""
        while True:
            try:
                return self._results.get(timeout=_CHECK_S)
            except queue.Empty:
                if self._painter.is_alive():
                    continue
            try:  # it has ended: what it sent before that may still be on its way
                return self._results.get(timeout=_CHECK_S)
            except queue.Empty:
                return _ENDED

    def _warn(self, problem: str) -> None:
        if self._warned:
            log.debug("live maps: %s", problem)
            return
        self._warned = True
        log.warning("live maps: %s. The sweep goes on (this warning is given once; hydra.sweeper.live_maps=false "
                    "turns live maps off)", problem)


def _paint(space: SearchSpace, metric: str, digits: int, jobs: Any, results: Any, parent_pid: int | None) -> None:
    """The painter: each fit from ``jobs`` to ``(batch, (pngs, metrics))`` or ``(batch, error)`` on ``results``.

    ``parent_pid``: the driver's, when this is a process of its own (it then lowers its
    priority, leaves Ctrl-C to the driver, and ends once the driver is gone); None in a thread.
    """
    limits: Any = contextlib.nullcontext()
    if parent_pid is not None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver decides, and closes us
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with contextlib.suppress(OSError):
            os.nice(PAINTER_NICENESS)
        from sweeper.blas import one_blas_thread

        # One BLAS thread for the GP's small factorisations beside busy trials (in a thread of the
        # driver the searcher sets its own limits: threadpoolctl's are process-wide).
        limits = one_blas_thread()
    try:  # imported while the sweep starts: the first map waits for none of it
        from sweeper.analysis.live_map import live_map, live_map_pngs, prepare_drawing

        prepare_drawing()
    except Exception as exc:  # noqa: BLE001 - e.g. no matplotlib: each map then says so
        failure: str | None = f"{type(exc).__name__}: {exc}"
    else:
        failure = None
    with limits:
        while True:
            try:
                fitted = jobs.get(timeout=_CHECK_S)
            except queue.Empty:
                if parent_pid is not None and orphaned(parent_pid):
                    return
                continue
            if fitted is None:
                break
            if failure is not None:
                results.put((fitted.batch, failure))
                continue
            started = time.thread_time()
            try:
                live = live_map(space, fitted)
                pngs = live_map_pngs(live, metric, digits=digits)
            except Exception as exc:  # noqa: BLE001 - reported to the driver, which warns once
                results.put((fitted.batch, f"{type(exc).__name__}: {exc}"))
                continue
            results.put((fitted.batch, (pngs, {**live.metrics(), "live_draw_cpu_s": time.thread_time() - started})))
    results.put(None)
