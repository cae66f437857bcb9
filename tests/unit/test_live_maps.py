"""The live maps' painter and forwarder (issue 19): nothing waits on a drawing, nothing fails the sweep.

A fake writer records what the forwarder hands it; the painter is a thread (the head node's
mode) except in the test of the default, a spawned process.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from typing import Any

import numpy as np
import pytest

from sweeper.run.live_map_painter import LiveMaps
from sweeper.search.gp_fit import fit_gp
from sweeper.search.grammar import parse_specs
from sweeper.search.policy import BatchFit
from tests.conftest import REPO

SPACE = parse_specs({"x": "interval(0, 1)", "y": "interval(0, 1)"})


class Writer:
    """What the MLflow writer was handed: ``(kind, artifact or step, payload)``, in order."""

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[str, Any, Any]] = []
        self.fail = fail

    def log_bytes(self, what: str, run: str, data: bytes, artifact_file: str) -> None:
        if self.fail:
            raise RuntimeError("the MLflow writer process ended (exit code -9)")
        self.calls.append(("bytes", artifact_file, data))

    def log(self, what: str, run: str, *, metrics: dict[str, float] | None = None, step: int = 0) -> None:
        self.calls.append(("log", step, metrics))


@pytest.fixture(scope="module")
def fitted() -> BatchFit:
    X = np.random.default_rng(0).random((10, 2))
    gp = fit_gp(X, np.sin(4 * X[:, 0]) + X[:, 1], seed=0, n_restarts=1)
    return BatchFit(1, gp, np.array([[0.9, 0.9]]))


def test_each_batch_lands_as_pngs_and_metrics_at_its_step(fitted: BatchFit) -> None:
    writer = Writer()
    live = LiveMaps(writer, "run", SPACE, "score", digits=4, in_process=False)
    started = time.perf_counter()
    live.submit(fitted)
    live.submit(BatchFit(2, fitted.gp, fitted.failed))
    assert time.perf_counter() - started < 0.05  # handed over, not drawn
    live.close()
    assert [(kind, where) for kind, where, _ in writer.calls] == [
        ("bytes", "live/batch_0001_mean.png"), ("bytes", "live/batch_0001_sd.png"), ("log", 1),
        ("bytes", "live/batch_0002_mean.png"), ("bytes", "live/batch_0002_sd.png"), ("log", 2)]
    metrics = writer.calls[2][2]
    assert metrics["live_trials"] == 10 and 0 <= metrics["live_loo_coverage95"] <= 1 and metrics["live_loo_rmse"] > 0
    assert metrics["live_draw_cpu_s"] > 0 and live.logged == [1, 2]
    assert all(data.startswith(b"\x89PNG") for kind, _, data in writer.calls if kind == "bytes")


def test_a_failed_drawing_warns_once_and_the_sweep_goes_on(fitted: BatchFit, caplog: pytest.LogCaptureFixture) -> None:
    writer = Writer()
    live = LiveMaps(writer, "run", SPACE, "score", in_process=False)
    broken = BatchFit(1, None, fitted.failed)  # type: ignore[arg-type]  # no model, so the drawing fails
    with caplog.at_level(logging.DEBUG, logger="sweeper.run.live_map_painter"):
        live.submit(broken)
        live.submit(BatchFit(2, broken.gp, broken.failed))
        live.submit(BatchFit(3, fitted.gp, fitted.failed))  # drawn as ever
        live.close()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "drawing the map of batch 1 failed: AttributeError" in warnings[0]
    assert "The sweep goes on" in warnings[0] and "hydra.sweeper.live_maps=false" in warnings[0]
    assert any("batch 2 failed" in r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG)
    assert live.logged == [3]


def test_a_writer_that_is_gone_stops_the_live_maps_without_an_error(fitted: BatchFit,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    live = LiveMaps(Writer(fail=True), "run", SPACE, "score", in_process=False)
    with caplog.at_level(logging.WARNING, logger="sweeper.run.live_map_painter"):
        live.submit(fitted)
        live.close()
        live.submit(fitted)  # after the writer failed: ignored
    assert live.logged == [] and "could not be handed to the MLflow writer" in caplog.text


#: The driver's side of the default mode, in a fresh interpreter: what it imports is what a sweep's driver does.
_DRIVER = """
import json, logging, os, signal, sys, time
import numpy as np
from sweeper.run.live_map_painter import LiveMaps
from sweeper.search.gp import GPFit
from sweeper.search.grammar import parse_specs
from sweeper.search.policy import BatchFit
from tests.conftest import REPO

warnings = []
logging.getLogger("sweeper").addHandler(type("H", (logging.Handler,), {"emit": lambda h, r: warnings.append(
    r.getMessage())})(logging.WARNING))
calls = []
writer = type("W", (), {"log_bytes": lambda w, what, run, data, name: calls.append(name),
                        "log": lambda w, what, run, metrics, step: calls.append(step)})()
X = np.random.default_rng(0).random((8, 2))
gp = GPFit.matern(np.array([0.3, 0.5]), 1.0, 1e-4, 0.0, 1.0, 0.0, X, np.sin(4 * X[:, 0]))
live = LiveMaps(writer, "run", parse_specs({"x": "interval(0, 1)", "y": "interval(0, 1)"}), "score")
started = time.perf_counter()
live.submit(BatchFit(1, gp, np.zeros((0, 2))))
submit_s = time.perf_counter() - started
deadline = time.monotonic() + 60
while not live.logged and time.monotonic() < deadline:
    time.sleep(0.05)
drawn_elsewhere = not {"matplotlib", "sweeper.analysis.live_map"} & set(sys.modules)
os.kill(live._painter.pid, signal.SIGKILL)
live._forwarder.join(10)
live.submit(BatchFit(2, gp, np.zeros((0, 2))))  # the painter is gone: ignored
live.close(timeout_s=5)
print(json.dumps({"calls": calls, "drawn_elsewhere": drawn_elsewhere, "submit_s": submit_s, "warnings": warnings}))
"""


def test_the_painter_process_draws_off_the_driver_and_its_death_is_a_warning() -> None:
    proc = subprocess.run([sys.executable, "-c", _DRIVER], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["calls"] == ["live/batch_001_mean.png", "live/batch_001_sd.png", 1]
    assert out["drawn_elsewhere"]  # the driver never imported matplotlib nor the drawing code
    assert out["submit_s"] < 0.05
    assert len(out["warnings"]) == 1 and "the painter ended unexpectedly (exit code -9)" in out["warnings"][0]
