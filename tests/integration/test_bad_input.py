"""Bad input never starts a sweep: each malformed config or request fails before any trial.

One table, each row a real command line: the toy app through Hydra's ``--multirun`` with the
multiverse sweeper (``run_cli``), or the ``sweeper`` command against an MLflow store holding
one (synthetic) sweep. Every row must exit non-zero with a message naming the key, the bad
value and the fix, and start nothing: no Ray (no ``Ray:`` line, no Tune folder), no trial
(no ``[1/`` line, no child run in the MLflow store).

A metric the task never returns cannot be known before a trial has run; that one fails
fast instead, after the trials in flight (one, with ``ray.max_concurrent_trials=1``).
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.conftest import TOY_APP, Sweep, run_cli

pytestmark = pytest.mark.integration

APP, CLI = "app", "cli"  # the toy app's Hydra command line / the sweeper command
#: A row that fails must fail at once: nothing in it waits on the network or on Ray.
MAX_SECONDS = 45


def case(name: str, *args: str, expect: tuple[str, ...], via: str = APP, env: dict[str, str] | None = None,
         marks: tuple = (), status: int | None = None) -> object:
    """A row: the arguments (and environment variables), the parts of the message that must appear
    (key=value, rule, fix) and, where given, the exit status."""
    return pytest.param(via, args, expect, env or {}, status, id=name, marks=marks)


CASES = [
    # ---------------------------------------------------------------- the search space
    case("bounds-reversed", "hydra.sweeper.params={x:'interval(1, 0)'}",
         expect=("hydra.sweeper.params.x='interval(1, 0)'", "lower bound 1.0 must be below upper bound 0.0",
                 "Use e.g. hydra.sweeper.params.x='interval(0, 1)'")),
    case("log-negative-bound", "+lr=tag(log, interval(-1, 1))",
         expect=("+lr='tag(log, interval(-1, 1))'", "a log-scaled dimension needs lower bound > 0, got -1.0",
                 "Use e.g. +lr='tag(log, interval(1e-05, 1))'")),
    case("log-int-zero-bound", "+n=tag(log, int(interval(0, 64)))",
         expect=("+n='tag(log, int(interval(0, 64)))'", "needs lower bound >= 1, got 0",
                 "Use e.g. +n='tag(log, int(interval(1, 64)))'")),
    case("empty-choice", "hydra.sweeper.params={x:'choice()'}",
         expect=("hydra.sweeper.params.x='choice()'", "a choice needs at least one value",
                 "Use e.g. hydra.sweeper.params.x='choice(a, b)'")),
    case("duplicate-choices", "+opt=choice(sgd, adam, sgd)",
         expect=("+opt='choice(sgd, adam, sgd)'", "choices must be distinct, got sgd more than once",
                 "Use e.g. +opt='choice(sgd, adam)'")),
    case("unknown-tag", "+lr=tag(lg, interval(1, 10))",
         expect=("+lr='tag(lg, interval(1, 10))'", "unknown tag 'lg'", "Use e.g. +lr='interval(1, 10)'")),
    case("range-step-zero", "+k=range(0, 5, 0)",
         expect=("+k='range(0, 5, 0)'", "a nonzero step, got step 0", "Use e.g. +k='range(0, 5)'")),
    case("range-empty", "+k=range(5, 0)",
         expect=("+k='range(5, 0)'", "the range is empty", "Use e.g. +k='range(0, 5)'")),
    case("log-range", "+k=tag(log, range(1, 10))",
         expect=("+k='tag(log, range(1, 10))'", "cannot be log-scaled",
                 "Use e.g. +k='tag(log, int(interval(1, 9)))'")),
    case("glob", "+m=glob(*)",
         expect=("+m='glob(*)'", "the sweeper cannot list", "Use e.g. +m='choice(a, b)'")),
    # A key of hydra.sweeper.params given on the command line is replaced (test_space.py); twice there, refused.
    case("key-twice-on-the-command-line", "x=interval(0, 0.5)", "x=0.2",
         expect=("'x=0.2': 'x' is given twice (also as 'x=interval(0, 0.5)')", "give each key once",
                 "Use e.g. 'x=0.2' alone")),
    case("swept-key-not-in-config", "typo=interval(0, 1)",
         expect=("typo=0.5", "Could not override 'typo'", "+typo=")),
    # ---------------------------------------------------------------- the sweeper's settings
    case("unresolvable-sweeper-setting", "mlflow.experiment_name=${oc.env:SWEEPER_TEST_NEVER_SET}",
         expect=("mlflow.experiment_name cannot be resolved", "SWEEPER_TEST_NEVER_SET",
                 "Give it a plain value (e.g. mlflow.experiment_name=...)")),
    case("unknown-strategy", "hydra.sweeper.strategy=bayes",
         expect=("hydra.sweeper.strategy='bayes'", "must be one of random, sobol, grid, ivr, ucb",
                 "Try hydra.sweeper.strategy=ivr")),
    # Issue 34: a Hydra user's habits. A misspelt setting, with + or without, names the closest one.
    case("unknown-setting-added", "+hydra.sweeper.num_trails=8", status=2,
         expect=("hydra.sweeper.num_trails=8 is not a setting of the multiverse sweeper",
                 "did you mean hydra.sweeper.num_trials? Try hydra.sweeper.num_trials=8.")),
    case("unknown-setting", "hydra.sweeper.num_trails=8", status=2,
         expect=("hydra.sweeper.num_trails=8 is not a setting of the multiverse sweeper",
                 "did you mean hydra.sweeper.num_trials? Try hydra.sweeper.num_trials=8.")),
    case("params-deleted", "~hydra.sweeper.params", status=2,
         expect=("~hydra.sweeper.params: the sweeper's settings cannot be deleted",
                 "clear the YAML's params with hydra.sweeper.params={}")),
    # {} and null clear the YAML's x and y: nothing is left to sweep (Hydra alone would merge {} into them).
    case("params-cleared", "hydra.sweeper.params={}", status=2,
         expect=("the search space has no dimension to search",)),
    case("params-null", "hydra.sweeper.params=null", status=2,
         expect=("the search space has no dimension to search",)),
    case("int-interval-non-integer-bound", "+n=int(interval(4.5, 64))", status=2,
         expect=("+n='int(interval(4.5, 64))'", "needs integer bounds (Hydra's int() would cut 4.5 to 4)",
                 "Use e.g. +n='int(interval(5, 64))'")),
    case("int-interval-without-an-integer", "+n=int(interval(4.5, 4.9))", status=2,
         expect=("+n='int(interval(4.5, 4.9))'", "no integer lies between them", "Use e.g. +n='int(interval(4, 5))'")),
    case("grid-num-trials-not-its-size", "hydra.sweeper.strategy=grid", "hydra.sweeper.num_trials=2",
         "hydra.sweeper.params={x:'choice(0.1, 0.9)',y:'choice(0.2, 0.8)'}", status=2,
         expect=("hydra.sweeper.num_trials=2 is invalid with strategy=grid",
                 "the grid has 4 points: set hydra.sweeper.num_trials=4, or leave it unset")),
    # Listed configurations (and a rerun's link) are checked with the rest: each problem once, in one message. The
    # store is not there (so no run is in it, and the check opens no MLflow: it creates nothing).
    case("configurations-and-rerun-of", "hydra.sweeper.configurations=[{x:0.1},{z:2}]",
         "hydra.sweeper.rerun_of=abc123", "mlflow.tracking_uri=sqlite:///absent.db", status=2,
         expect=("Invalid sweep configuration (4 problems)", "configuration 2 sets ['z'], configuration 1 sets ['x']",
                 "needs strategy=grid, not 'ivr'. Try hydra.sweeper.strategy=grid.",
                 "x is set by the configurations and also as 'x=interval(0, 1)'",
                 "hydra.sweeper.rerun_of=abc123: the store", "holds no run of that id")),
    case("unresolvable-sweep-subdir", "hydra.sweep.subdir=${nope}", status=2,
         expect=("hydra.sweep.subdir='${nope}' cannot be resolved for a trial", "Interpolation key 'nope' not found",
                 "e.g. hydra.sweep.subdir='${hydra.job.num}'")),
    case("problems-all-at-once", "+hydra.sweeper.num_trails=8", "hydra.sweeper.n_initial=100",
         "+n=int(interval(4.5, 64))", status=2,
         expect=("Invalid sweep configuration (3 problems)", "did you mean hydra.sweeper.num_trials?",
                 "hydra.sweeper.n_initial=100 is invalid", "Use e.g. +n='int(interval(5, 64))'")),
    case("n-initial-above-num-trials", "hydra.sweeper.n_initial=16",
         expect=("hydra.sweeper.n_initial=16", "cannot be longer than num_trials=8", "Try hydra.sweeper.n_initial=8")),
    case("batch-size-zero", "hydra.sweeper.batch_size=0",
         expect=("hydra.sweeper.batch_size=0", "a batch holds at least 1 point", "Try hydra.sweeper.batch_size=8")),
    case("num-trials-zero", "hydra.sweeper.num_trials=0",
         expect=("hydra.sweeper.num_trials=0", "at least 1 trial", "Try hydra.sweeper.num_trials=32")),
    case("num-trials-not-a-number", "hydra.sweeper.num_trials=many",
         expect=("hydra.sweeper.num_trials", "'many'", "could not be converted to Integer")),
    case("max-failure-rate-above-1", "hydra.sweeper.max_failure_rate=1.5",
         expect=("hydra.sweeper.max_failure_rate=1.5", "a fraction between 0 and 1",
                 "Try hydra.sweeper.max_failure_rate=0.5")),
    case("empty-metric-name", "hydra.sweeper.metric=",
         expect=("hydra.sweeper.metric=''", "name the key of the task's returned dict",
                 "Try hydra.sweeper.metric=objective")),
    case("mode-maximize", "hydra.sweeper.mode=maximize",
         expect=("hydra.sweeper.mode='maximize'", "must be max or min", "Try hydra.sweeper.mode=max")),
    case("unknown-kernel", "hydra.sweeper.kernel=linear",
         expect=("hydra.sweeper.kernel='linear'", "must be one of matern52-ard",
                 "Try hydra.sweeper.kernel=matern52-ard")),
    case("coregion-rank-zero", "hydra.sweeper.coregion_rank=0",
         expect=("hydra.sweeper.coregion_rank=0", "needs rank >= 1", "Try hydra.sweeper.coregion_rank=1")),
    case("bayes-factor-threshold-1", "hydra.sweeper.stop_on_bayes_factor=1",
         expect=("hydra.sweeper.stop_on_bayes_factor=1.0", "T must be > 1",
                 "Try hydra.sweeper.stop_on_bayes_factor=10")),
    case("bayes-factor-on-one-dim", "~hydra.sweeper.params.y", "hydra.sweeper.stop_on_bayes_factor=10",
         expect=("hydra.sweeper.stop_on_bayes_factor=10.0", "needs at least 2 dimensions",
                 "Try hydra.sweeper.stop_on_bayes_factor=null")),
    case("ucb-beta-negative", "hydra.sweeper.strategy=ucb", "hydra.sweeper.ucb_beta=-1",
         expect=("hydra.sweeper.ucb_beta=-1.0", "must be >= 0", "Try hydra.sweeper.ucb_beta=2.0")),
    case("n-candidates-zero", "hydra.sweeper.n_candidates=0",
         expect=("hydra.sweeper.n_candidates=0", "at least 1 candidate", "Try hydra.sweeper.n_candidates=2048")),
    case("metric-bounds-reversed", "hydra.sweeper.metric_bounds=[1,0]",
         expect=("hydra.sweeper.metric_bounds=[1, 0] is invalid", "needs low < high",
                 "Try hydra.sweeper.metric_bounds=[0,1]")),
    case("metric-bounds-not-numbers", "hydra.sweeper.metric_bounds=[low,1]",
         expect=("hydra.sweeper.metric_bounds=['low', 1] is invalid", "two numbers or null",
                 "Try hydra.sweeper.metric_bounds=[0,1]")),
    case("grid-over-intervals", "hydra.sweeper.strategy=grid",
         expect=("hydra.sweeper.strategy='grid' needs every dimension discrete", "x, y are float intervals",
                 "or use hydra.sweeper.strategy=sobol")),
    # ---------------------------------------------------------------- environment conditions
    case("env-threads-zero", "+env=default", "env.threads=0",
         expect=("env.threads=0", "must be an integer >= 1", "or null")),
    case("env-device-tpu", "+env=default", "env.device=tpu",
         expect=("env.device='tpu'", "must be one of", "auto, cpu, cuda")),
    case("env-swept-value-invalid", "+env=default", "env.threads=choice(1, 0)",
         expect=("env.threads=0", "must be an integer >= 1", "(swept by env.threads=choice(1, 0))")),
    # ---------------------------------------------------------------- Ray
    case("gpu-negative", "ray.resources_per_trial.gpu=-1",
         expect=("ray.resources_per_trial.gpu=-1.0", "a finite amount >= 0", "Try ray.resources_per_trial.gpu=0")),
    case("custom-resource-negative", "ray.resources_per_trial.custom={tpu: -2}",
         expect=("ray.resources_per_trial.custom.tpu=-2.0", "a finite amount >= 0",
                 "Try ray.resources_per_trial.custom.tpu=0")),
    case("reserves-nothing", "ray.resources_per_trial.cpu=0",
         expect=("ray.resources_per_trial reserves nothing (cpu=0, gpu=0)", "cannot place a trial",
                 "Try ray.resources_per_trial.cpu=1")),
    case("ray-address-malformed", "ray.address=http://head:6379",
         expect=("ray.address='http://head:6379' is not a Ray address", "HOST:6379 (the head's GCS port)",
                 "ray://HOST:10001 (Ray Client)")),
    case("ray-address-port-out-of-range", "ray.address=head:99999",
         expect=("ray.address='head:99999'", "port 99999 is not in 1-65535", "Try ray.address=HOST:6379")),
    case("ray-address-unreachable", "ray.address=127.0.0.1:1",
         expect=("ray.address='127.0.0.1:1' is unreachable", "nothing accepts connections at 127.0.0.1:1",
                 "try ray.address=null")),
    case("ray-client-address-unreachable", "ray.address=ray://127.0.0.1:1",
         expect=("ray.address='ray://127.0.0.1:1' is unreachable", "Ray Client", "try ray.address=null")),
    # ---------------------------------------------------------------- MLflow
    case("mlflow-retry-delays-env", env={"SWEEPER_MLFLOW_RETRY_DELAYS_S": "1,soon"},
         expect=("SWEEPER_MLFLOW_RETRY_DELAYS_S='1,soon' is invalid", "each >= 0, separated by commas",
                 "Try SWEEPER_MLFLOW_RETRY_DELAYS_S=1,2,4,8")),
    case("tracking-uri-ftp", "mlflow.tracking_uri=ftp://x",
         expect=("mlflow.tracking_uri='ftp://x' is invalid", "unknown scheme 'ftp'", "use sqlite:///mlruns.db")),
    case("tracking-uri-http-without-host", "mlflow.tracking_uri=http://",
         expect=("mlflow.tracking_uri='http://' is invalid", "needs a host", "e.g. http://127.0.0.1:5000")),
    case("tracking-uri-sqlite-missing-folder", "mlflow.tracking_uri=sqlite:////no/such/folder/mlruns.db",
         expect=("mlflow.tracking_uri='sqlite:////no/such/folder/mlruns.db' is invalid",
                 "the folder /no/such/folder does not exist", "create it")),
    # The store itself, checked before Ray starts (sweeper.record.store_check): even root cannot write in /proc.
    case("tracking-store-sqlite-unwritable-folder", "mlflow.tracking_uri=sqlite:////proc/mlruns.db",
         expect=("mlflow.tracking_uri='sqlite:////proc/mlruns.db': no file can be created in /proc",
                 "SQLite creates its journal beside the database", "choose a folder you can write")),
    case("tracking-store-postgresql-refused",
         "mlflow.tracking_uri=postgresql+psycopg://mlflow:hunter2@127.0.0.1:1/mlflow",
         expect=("mlflow.tracking_uri='postgresql+psycopg://mlflow:***@127.0.0.1:1/mlflow'",  # the password redacted
                 "nothing accepts connections at 127.0.0.1:1 (connection refused)", "Start the postgresql server")),
    # ---------------------------------------------------------------- the sweeper command
    case("report-invalid-filter", "report", "--filter", "score >> 0.5", via=CLI,
         expect=("invalid filter 'score >> 0.5'", '"<metric> <op> <number>"', 'e.g. "train_acc >= 0.99"')),
    case("multiverse-invalid-filter", "multiverse", "--filter", "score between 0 and 1", via=CLI,
         expect=("invalid filter 'score between 0 and 1'", '"<metric> <op> <number>"', 'e.g. "train_acc >= 0.99"')),
    case("report-filter-on-unknown-metric", "report", "--filter", "acc >= 0.5", via=CLI,
         expect=("filter 'acc >= 0.5'", "no trial has the metric 'acc'", "['loss', 'score', 'train_score']")),
    case("report-unknown-metric", "report", "--metric", "acc", via=CLI,
         expect=("no trial has the metric 'acc'", "['loss', 'score', 'train_score']", "Pass --metric with one")),
    case("multiverse-unknown-metric", "multiverse", "--metric", "acc", via=CLI,
         expect=("no trial has the metric 'acc'", "['loss', 'score', 'train_score']", "Pass --metric with one")),
    case("multiverse-unknown-kernel", "multiverse", "--kernel", "linear", via=CLI,
         expect=("argument --kernel", "invalid choice: 'linear'", "choose from 'matern52-ard'")),
    case("report-bounds-reversed", "report", "--bounds", "1", "0", via=CLI,
         expect=("--bounds 1 0", "needs low < high", "e.g. --bounds 0 1")),
    # The arguments are checked before the store is read: the bounds' message, not the experiment's.
    case("multiverse-bounds-not-numbers-before-the-store", "multiverse", "--experiment", "nope", "--bounds", "0", "one",
         via=CLI, expect=("--bounds 0 one", "Give LOW < HIGH", "e.g. --bounds 0 1")),
    case("multiverse-bounds-break-the-values", "multiverse", "--bounds", "0", "0.5", via=CLI,
         expect=("have score outside the bounds [0, 0.5]", "e.g. 0.", "pass --bounds that hold every value")),
    case("report-unknown-experiment", "report", "--experiment", "nope", via=CLI,
         expect=("no experiment 'nope'", "'synthetic']", "Check --experiment")),
    case("report-unknown-group-by", "report", "--group-by", "optimizer", via=CLI,
         expect=("--group-by 'optimizer'", "no trial has that param", "'x', 'y'")),
    case("resume-no-such-dir", "resume", "/no/such/dir", via=CLI,
         expect=("/no/such/dir is neither a sweep directory nor an MLflow run id", "give the sweep's directory",
                 "`sweeper trials --experiment NAME` lists sweeps")),
    case("resume-dir-without-sweep", "resume", "{tmp}", via=CLI,
         expect=("there is no sweep to resume in", "(no sweep.json)", "`sweeper trials --experiment NAME`")),
    case("report-malformed-tracking-uri", "report", "--tracking-uri", "ftp://x", via=CLI,
         expect=("--tracking-uri", "'ftp://x'", "sqlite:///")),
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """An MLflow store holding one finished 12-trial sweep of experiment ``synthetic`` (no Ray needed)."""
    from bench.sweep_report import write_synthetic_sweep

    db = tmp_path_factory.mktemp("store") / "mlruns.db"
    write_synthetic_sweep(f"sqlite:///{db}", "synthetic", 12, strategy="random", fail_rate=0.0, repeats=0)
    return f"sqlite:///{db}", db


def child_runs(db: Path) -> int:
    """Trial runs (nested under a sweep's run) in a SQLite MLflow store; 0 if there is none."""
    if not db.exists():
        return 0
    with contextlib.closing(sqlite3.connect(db)) as con:
        try:
            return con.execute("SELECT COUNT(*) FROM tags WHERE key = 'mlflow.parentRunId'").fetchone()[0]
        except sqlite3.OperationalError:  # the file exists but holds no MLflow tables
            return 0


def run_app(tmp_path: Path, args: tuple[str, ...]) -> Sweep:
    """``run_cli`` on the toy app; a row that sets its own tracking URI replaces run_cli's."""
    if not any(a.startswith("mlflow.tracking_uri=") for a in args):
        return run_cli(TOY_APP, tmp_path, *args, timeout=120)
    sweep_dir = tmp_path / "multirun"
    cmd = [sys.executable, str(TOY_APP), "--multirun", "hydra/sweeper=multiverse", f"hydra.sweep.dir={sweep_dir}",
           "ray.num_cpus=2", *args]
    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    proc = subprocess.run(cmd, cwd=tmp_path, env={**env, "PYTHONUNBUFFERED": "1"}, capture_output=True, text=True,
                          timeout=120)
    return Sweep(proc, sweep_dir, "")


def run_sweeper(tmp_path: Path, uri: str, args: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    """``sweeper <command> --experiment synthetic --tracking-uri URI --out DIR ...`` (resume takes a path only)."""
    args = tuple(a.format(tmp=tmp_path) for a in args)
    command, rest = args[0], list(args[1:])
    if command != "resume":
        defaults = {"--experiment": "synthetic", "--tracking-uri": uri, "--out": str(tmp_path / "out")}
        for option, value in defaults.items():
            if option not in rest:
                rest += [option, value]
    cmd = [sys.executable, "-m", "sweeper.cli", command, *rest]
    return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(("via", "args", "expect", "env", "status"), CASES)
def test_bad_input_fails_before_any_trial_and_says_what_to_fix(
    via: str, args: tuple[str, ...], expect: tuple[str, ...], env: dict[str, str], status: int | None,
    tmp_path: Path, store: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    uri, db = store
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    trials_before = child_runs(db)
    started = time.monotonic()
    if via == APP:
        sweep = run_app(tmp_path, args)
        returncode, output = sweep.proc.returncode, sweep.output
    else:
        proc = run_sweeper(tmp_path, uri, args)
        returncode, output = proc.returncode, proc.stdout + proc.stderr
    elapsed = time.monotonic() - started

    assert returncode != 0 if status is None else returncode == status, output
    for text in expect:
        assert text in output, f"{text!r} is not in the output:\n{output}"
    assert "Traceback" not in output, output  # a message, not a stack trace
    assert elapsed < MAX_SECONDS, f"took {elapsed:.0f} s"
    # Nothing started: no Ray, no Tune experiment, no trial line, no trial run in MLflow.
    assert "Ray:" not in output and "[1/" not in output, output
    assert not (tmp_path / "multirun" / "tune").exists()
    assert child_runs(tmp_path / "mlruns.db") == 0
    assert child_runs(db) == trials_before  # the sweeper command wrote no trial either
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("mode", ["null", "yaml"])
def test_a_tracking_server_that_does_not_answer_stops_the_sweep_in_a_line(mode: str, tmp_path: Path) -> None:
    """Nothing listens at the URI: exit 2 before Ray, one line naming the URI and the command that starts a server.

    With ``metric=loss`` and no mode (``null``), the sweep's one other line questions the direction
    (issue 31); the toy app's YAML sets ``mode: min``, and an explicit mode is never questioned.
    """
    args = ["mlflow.tracking_uri=http://127.0.0.1:1", "hydra.sweeper.metric=loss"]
    sweep = run_app(tmp_path, (*args, "hydra.sweeper.mode=null") if mode == "null" else tuple(args))
    lines = sweep.output.splitlines()
    error = ("Error: Invalid sweep configuration: mlflow.tracking_uri='http://127.0.0.1:1': no server answers there "
             "(connection refused). Start it (e.g. `mlflow server --backend-store-uri sqlite:///mlruns.db --host "
             "127.0.0.1 --port 1`), or record into a local file with "
             "mlflow.tracking_uri=sqlite:///mlruns.db.")
    warning = ("hydra.sweeper.metric='loss' reads like lower-is-better, but the sweep maximises it (hydra.sweeper.mode "
               "is not set): add hydra.sweeper.mode=min, or hydra.sweeper.mode=max to keep maximising "
               "and silence this.")
    assert sweep.proc.returncode == 2, sweep.output
    assert error in lines, sweep.output
    assert sum(line.endswith(warning) for line in lines) == (1 if mode == "null" else 0), sweep.output
    assert len(lines) == (2 if mode == "null" else 1), sweep.output  # nothing else: no traceback, no Ray
    assert not (tmp_path / "multirun" / "tune").exists() and not (tmp_path / "mlruns.db").exists()


@pytest.mark.parametrize("bounds", [None, "[null,null]"])
def test_an_accuracy_without_bounds_is_questioned_at_the_start(bounds: str | None, tmp_path: Path) -> None:
    """``metric=val_acc`` and no ``metric_bounds``: one line suggests bounds [0, 1] before anything runs (issue 32);
    ``[null,null]``, unbounded on purpose, silences it. The unreachable server ends the sweep after that line."""
    args = ("mlflow.tracking_uri=http://127.0.0.1:1", "hydra.sweeper.metric=val_acc",
            *(() if bounds is None else (f"hydra.sweeper.metric_bounds={bounds}",)))
    sweep = run_app(tmp_path, args)
    warning = ("hydra.sweeper.metric='val_acc' reads like a score in [0, 1], but no bounds are declared: the GP may "
               "map it outside [0, 1]. Add hydra.sweeper.metric_bounds=[0,1] (or "
               "hydra.sweeper.metric_bounds=[null,null] to model it unbounded and silence this).")
    lines = sweep.output.splitlines()
    assert sweep.proc.returncode == 2, sweep.output
    assert sum(line.endswith(warning) for line in lines) == (1 if bounds is None else 0), sweep.output
    assert len(lines) == (2 if bounds is None else 1), sweep.output  # the warning, the error; nothing else


def test_a_metric_the_task_never_returns_stops_the_sweep_after_the_first_trial(tmp_path: Path) -> None:
    """Not knowable before a trial runs: the sweep stops once the trials in flight all lack it.

    ``max_failure_rate=1.0`` would let every trial fail; the sweep stops anyway, since a
    metric no trial returns is a naming mistake, not a failing region of the space.
    """
    sweep = run_cli(TOY_APP, tmp_path, "hydra.sweeper.metric=acc", "ray.max_concurrent_trials=1",
                    "hydra.sweeper.max_failure_rate=1.0", timeout=300)
    out = sweep.output
    assert sweep.proc.returncode != 0, out
    assert ("hydra.sweeper.metric='acc' is not what the task returns: trial #0 returned ['score', 'x_seen'] and no "
            "trial returned 'acc', so no further trial starts. Try hydra.sweeper.metric=score.") in out
    # The progress line: trials ended, elapsed time and the estimate of what is left at this pace.
    assert re.search(r"\[1/8, \d+:\d\d elapsed, ~\d+:\d\d left\] #0 ", out) and "[2/8" not in out
    parent, children = sweep.runs("toy")
    assert parent.info.status == "FAILED"
    assert len(children) == 1 and children[0].info.status == "FAILED"
    assert "but not the metric 'acc'" in children[0].data.tags["sweeper.error"]


def _missing_metric_result(metric: str, returned: dict[str, float]) -> dict[str, object]:
    """A trial's result as the worker reports it when the task returned ``returned`` without ``metric``."""
    from sweeper.run.trial import ERROR_KEY, RETURNED_KEY, STATUS_KEY, MissingMetricError, metrics_from_return

    with pytest.raises(MissingMetricError) as info:  # what run_trial turns into the result below
        metrics_from_return(returned, metric)
    return {metric: float("nan"), STATUS_KEY: "FAILED", ERROR_KEY: str(info.value), RETURNED_KEY: info.value.returned}


def test_a_metric_missing_only_sometimes_does_not_stop_the_sweep() -> None:
    """The decision waits for the trials in flight, so it does not depend on which ends first."""
    from sweeper.run.searcher import MultiverseSearch

    space = {"x": "interval(0, 1)", "y": "interval(0, 1)"}
    search = MultiverseSearch(space, metric="score", mode="min", strategy="sobol", num_trials=6)
    search.suggest("a"), search.suggest("b")
    search.on_trial_complete("b", _missing_metric_result("score", {"x_seen": 0.7}))
    assert search.suggest("c") is None  # paused: "a" may still return the metric
    search.on_trial_complete("a", {"score": 1.5})
    assert search.policy.stop_reason is None
    assert isinstance(search.suggest("c"), dict)  # the sweep goes on; "b" is an ordinary failed trial

    never = MultiverseSearch(space, metric="acc", mode="min", strategy="sobol", num_trials=6)
    never.suggest("a"), never.suggest("b")
    never.on_trial_complete("a", _missing_metric_result("acc", {"score": 1.5, "x_seen": 0.4}))
    assert never.suggest("c") is None and never.policy.stop_reason is None  # "b" is still running
    never.on_trial_complete("b", _missing_metric_result("acc", {"score": 2.5, "x_seen": 0.7}))
    assert never.suggest("c") == "FINISHED" and never.policy.failure_budget_exceeded
    assert "trial #0 returned ['score', 'x_seen']" in never.policy.stop_reason
    assert never.policy.stop_reason.endswith("Try hydra.sweeper.metric=score.")
