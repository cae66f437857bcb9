"""``log_metrics``: per-step metrics from inside a task, streamed live to the trial's MLflow run.

Tasks call it as often as they like (per epoch, per iteration); outside a sweep it does
nothing, so the same task runs standalone unchanged::

    from sweeper import log_metrics

    for epoch in range(epochs):
        ...
        log_metrics({"train_loss": loss, "test_acc": acc}, step=epoch)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

log = logging.getLogger(__name__)

Reporter = Callable[[dict[str, float], int], None]
_reporter: Reporter | None = None
_next_step = 0
_last_step: int | None = None  # the step of the running task's last log_metrics call


def log_metrics(metrics: Mapping[str, float], step: int | None = None) -> None:
    """Record metrics of the running trial at ``step`` (0, 1, 2, ... when omitted).

    Args:
        metrics: metric name -> number.
        step: the x-axis position (epoch, iteration); consecutive integers if None.
    """
    global _next_step, _last_step
    step = _next_step if step is None else int(step)
    _next_step = step + 1
    _last_step = step
    if _reporter is None:
        log.debug("log_metrics outside a sweep (step %d): %s", step, dict(metrics))
        return
    _reporter({k: float(v) for k, v in metrics.items()}, step)


@contextmanager
def reporting_to(reporter: Reporter) -> Iterator[None]:
    """Route :func:`log_metrics` calls to ``reporter`` while a trial runs."""
    global _reporter, _next_step, _last_step
    previous, _reporter, _next_step, _last_step = _reporter, reporter, 0, None
    try:
        yield
    finally:
        _reporter = previous


def last_step() -> int | None:
    """The step of the running task's last :func:`log_metrics` call (None: none yet)."""
    return _last_step
