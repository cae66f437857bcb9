"""The trivial app with the sweeper's trial records replaced by timestamps: a diagnostic.

Not a mode of the sweeper (its records are the point of it): the overhead benchmark runs
this beside the real thing to say how much of a trial's orchestration cost is MLflow's
writes. The writer (``sweeper.record.spool.DurableWriter``, here as a thread of the driver rather
than the child process the sweeper uses, so that the patch below applies) still receives
every write, in order, from the same Tune callbacks; instead of sending it to MLflow it
notes when a trial's run would have been created and closed, into ``$BENCH_SPANS_OUT`` as JSON
``[[start, end], ...]`` (epoch seconds), the instants at which MLflow would have stamped
the run's start and end time.

    BENCH_SPANS_OUT=spans.json python bench/apps/trivial_no_records.py --multirun ...
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import sweeper.record.spool as spool
import sweeper.run.tune_run as tune_run

_SPANS: dict[str, list[float | None]] = {}


def _note_instead_of_writing(self: Any, op: dict[str, Any]) -> None:
    kind, run = op["op"], op["run"]
    if kind == "start_run":
        self._ids[run] = run.removeprefix("local-")
        if op.get("parent_run_id"):
            _SPANS[run] = [time.time(), None]
    elif kind == "finish" and run in _SPANS:
        _SPANS[run][1] = time.time()
        Path(os.environ["BENCH_SPANS_OUT"]).write_text(json.dumps(list(_SPANS.values())))


def _run_tune_with_the_writer_in_this_process(job: Any) -> Any:
    return _run_tune(replace(job, writer_process=False))


if __name__ == "__main__":
    spool.DurableWriter._apply = _note_instead_of_writing
    _run_tune = tune_run.run_tune
    tune_run.run_tune = _run_tune_with_the_writer_in_this_process
    sys.argv[0] = str(Path(__file__).with_name("trivial.py"))
    runpy.run_path(sys.argv[0], run_name="__main__")
