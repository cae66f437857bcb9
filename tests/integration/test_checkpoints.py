"""Long trials survive (issue 18): a trial in flight continues from its last checkpoint on every restart path.

The faults are real: a trial's worker process SIGKILLed (Tune retries it, ``ray.max_failures=1``;
experiments/train.py, whose continued trial must end bit-identical to one never stopped),
SIGTERM to the driver (preemption) and ``sweeper resume``. The task of the SIGTERM test
(apps/epochs.py) logs each epoch it really executes, so it counts epochs executed per trial (at
most one is redone); each test reads back from MLflow that each trial has one run whose per-step
history has no step twice.
The sweep's whole process group SIGKILLed and ``sweeper resume`` run is the kill section of the
GPU check's dry run (``bench/checkpoint_gpu_check.py``, experiments/train.py), the last test here:
it had a sweep of apps/epochs.py of its own, which proved the same on a toy.
"""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient

from tests.integration.conftest import _kept_in, child_runs, record_faults, runs_by_index

pytestmark = [pytest.mark.integration, pytest.mark.slow]

EPOCHS_APP = Path(__file__).parent / "apps" / "epochs.py"
VENV_BIN = Path(sys.executable).parent
EPOCHS = 6


class Running:
    """A command-line sweep of apps/epochs.py in its own session, on a Ray it joins (the session's head), its
    executions log, its records."""

    def __init__(self, tmp_path: Path, *overrides: str) -> None:
        self.tmp_path, self.executions = tmp_path, tmp_path / "executions.log"
        self.sweep_dir, self.tracking_uri, kept, self.ray_env = _kept_in(tmp_path, False, False, overrides)
        self.log = tmp_path / "sweep.log"
        cmd = [sys.executable, str(EPOCHS_APP), "--multirun", "hydra/sweeper=multiverse", *kept,
               f"executions_log={self.executions}", f"epochs={EPOCHS}", *overrides]
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.ray_env}
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)

    def output(self) -> str:
        return self.log.read_text()

    def epochs_done(self) -> list[tuple[int, int, int]]:
        """(trial index, epoch, worker pid) of every epoch executed so far."""
        if not self.executions.is_file():
            return []
        lines = self.executions.read_text().splitlines()
        return [tuple(map(int, line.split())) for line in lines]  # type: ignore[misc]  # each line holds 3 ints

    def wait_until(self, ready: Callable[[], Any], what: str, timeout: float = 240) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = ready()
            if found:
                return found
            if self.proc.poll() is not None:
                raise AssertionError(f"the sweep ended before {what}:\n{self.output()[-4000:]}")
            time.sleep(0.2)
        os.killpg(self.proc.pid, signal.SIGKILL)
        raise AssertionError(f"never saw {what}:\n{self.output()[-4000:]}")

    def checkpointed(self, epochs: int) -> bool:
        """Whether every trial running has executed ``epochs`` epochs (and one has)."""
        done = collections.Counter(index for index, _epoch, _pid in self.epochs_done())
        return bool(done) and all(n >= epochs for n in done.values())


def resume(run: Running) -> subprocess.CompletedProcess[str]:
    """``sweeper resume`` of the sweep, on the Ray it ran on (the session's head: with its token)."""
    return subprocess.run([str(VENV_BIN / "sweeper"), "resume", str(run.sweep_dir)], cwd="/", capture_output=True,
                          text=True, timeout=400, env={**os.environ, **run.ray_env})


def check_records(run: Running, num_trials: int) -> dict[str, Any]:
    """Each trial: one FINISHED run, every step once; epochs executed; no checkpoint left on storage."""
    client = MlflowClient(run.tracking_uri)
    by_index = runs_by_index(child_runs(client, "epochs"))
    assert sorted(by_index) == list(range(num_trials)), run.output()[-3000:]
    duplicates = 0
    for index, runs in by_index.items():
        assert [r.info.status for r in runs] == ["FINISHED"], (index, [r.info.status for r in runs])
        for key in ("loss", "draw"):
            steps = [m.step for m in client.get_metric_history(runs[0].info.run_id, key)]
            duplicates += len(steps) - len(set(steps))
            assert sorted(set(steps)) == list(range(EPOCHS)), (index, key, steps)
    executed = collections.Counter(index for index, _, _ in run.epochs_done())
    assert set(executed) == set(range(num_trials))
    assert all(EPOCHS <= n <= EPOCHS + 1 for n in executed.values()), executed  # at most one epoch redone
    left = sorted(p.relative_to(run.sweep_dir) for p in run.sweep_dir.rglob("checkpoint_*"))
    assert not left, f"checkpoints of ended trials were not deleted: {left}"
    return {"trials_expected": num_trials, "trials_recorded": len(by_index), "duplicate_steps": duplicates,
            "epochs_per_trial": EPOCHS, "epochs_executed": dict(sorted(executed.items())),
            "epochs_redone": sum(executed.values()) - EPOCHS * num_trials, "by_index": by_index}


def test_sigterm_stops_the_sweep_at_the_next_checkpoints_and_resume_continues_it(tmp_path: Path) -> None:
    """Preemption: SIGTERM to the driver alone (as Slurm's --signal=B:TERM and sweep.sbatch send it), its
    trials on a Ray it joined (as sweep.sbatch's driver joins the job's Ray cluster): the session's head."""
    run = Running(tmp_path, "hydra.sweeper.num_trials=3", "ray.max_concurrent_trials=2",
                  "hydra.sweeper.preempt_grace_s=60")
    run.wait_until(lambda: run.checkpointed(2), "two epochs of each running trial")
    signalled = time.monotonic()
    os.kill(run.proc.pid, signal.SIGTERM)
    assert run.proc.wait(120) == 75, run.output()[-4000:]  # PREEMPTED_EXIT_STATUS: requeue and resume
    assert time.monotonic() - signalled < 30  # the next checkpoints come within an epoch, not at the grace's end
    output = run.output()
    assert "SIGTERM: no new trial starts; waiting up to 60 s" in output
    assert f"sweeper resume {run.sweep_dir}" in output

    client = MlflowClient(run.tracking_uri)
    before = {int(r.data.tags["sweeper.trial_index"]): r for r in child_runs(client, "epochs")}
    assert sorted(before) == [0, 1], before  # the third trial never started
    for r in before.values():
        assert (r.info.status, r.data.tags["sweeper.status"]) == ("KILLED", "PREEMPTED"), r.data.tags
    parent = client.get_run(before[0].data.tags["mlflow.parentRunId"])
    assert (parent.info.status, parent.data.tags["sweeper.status"]) == ("KILLED", "PREEMPTED")
    assert parent.data.tags["sweeper.preempted_trials"] == "0,1"
    executed_at_stop = len(run.epochs_done())

    resumed = resume(run)
    assert resumed.returncode == 0, (resumed.stdout + resumed.stderr)[-4000:]
    tally = check_records(run, 3)
    by_index = tally.pop("by_index")
    for index, r in before.items():
        (after,) = by_index[index]
        assert after.info.run_id == r.info.run_id and after.data.tags["sweeper.resumes"] == "1"
    assert "sweeper.resumes" not in by_index[2][0].data.tags
    parent = client.get_run(parent.info.run_id)
    assert (parent.info.status, parent.data.tags["sweeper.status"]) == ("FINISHED", "FINISHED")
    record_faults("SIGTERM preemption (exit 75), then sweeper resume: continued from the checkpoints",
                  faults_injected=1, epochs_before_stop=executed_at_stop, **tally)


TRAIN_APP = Path(__file__).parents[2] / "experiments" / "train.py"
#: Seconds-based metrics: they differ between any two runs.
TIMED = {"epoch_s", "duration_s", "sweeper.duration_s"}


def _workers_of(session: int) -> list[int]:
    """Pids of the Tune trial workers (``ray::ImplicitFunc``) in a process session."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and os.getsid(int(entry.name)) == session and (
                    entry / "cmdline").read_bytes().startswith(b"ray::ImplicitFunc"):
                pids.append(int(entry.name))
        except (OSError, ProcessLookupError):
            continue
    return pids


def _checkpoint_steps(sweep_dir: Path) -> dict[str, int]:
    """Trial folder -> the step of its newest complete checkpoint on storage."""
    import json

    steps: dict[str, int] = {}
    for meta in sweep_dir.glob("tune/trial_*/checkpoint_*/checkpoint.json"):
        try:
            steps[meta.parts[-3]] = max(steps.get(meta.parts[-3], -1), json.loads(meta.read_text())["step"])
        except (OSError, ValueError):
            continue
    return steps


def test_train_py_killed_and_retried_ends_bit_identical_to_an_uninterrupted_trial(tmp_path: Path) -> None:
    """env=reproducible on the CPU: two trials of one configuration (data.num_workers does not touch the
    in-memory digits), one worker SIGKILLed after a checkpoint, ``ray.max_failures=1``: the killed trial continues
    from its newest checkpoint in its own run, and both end with the same metrics, bit for bit."""
    sweep_dir, tracking_uri, kept, _ = _kept_in(tmp_path, True, False, ())
    cmd = [sys.executable, str(TRAIN_APP), "--multirun", *kept, "env=reproducible", "model=cnn", "epochs=8",
           "batch_size=16", "hydra.sweeper.strategy=grid", "hydra.sweeper.num_trials=2",
           "data.num_workers=choice(0,1)", "ray.max_failures=1"]
    log = tmp_path / "sweep.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
    deadline = time.monotonic() + 300
    while not (len(steps := _checkpoint_steps(sweep_dir)) == 2 and min(steps.values()) >= 1):
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-4000:]
        time.sleep(0.1)
    # The newest checkpoint only is kept per trial (a second while the newest is copied).
    folders = collections.Counter(p.parent.name for p in sweep_dir.glob("tune/trial_*/checkpoint_*"))
    assert folders and all(n <= 2 for n in folders.values()), folders
    workers = _workers_of(proc.pid)
    assert len(workers) == 2, workers
    os.kill(workers[0], signal.SIGKILL)
    assert proc.wait(300) == 0, log.read_text()[-4000:]

    client = MlflowClient(tracking_uri)
    runs = child_runs(client, "train")
    assert len(runs) == 2 and all(r.info.status == "FINISHED" for r in runs), [r.info.status for r in runs]
    resumed = [r for r in runs if r.data.tags.get("sweeper.resumes") == "1"]
    assert len(resumed) == 1, "the killed trial did not continue from its checkpoint"
    (killed,) = resumed
    # It continued from the newest checkpoint on storage at the kill, or a newer one: at most one epoch redone.
    assert int(killed.data.tags["sweeper.resumed_from_step"]) >= min(steps.values())
    assert killed.data.tags["sweeper.restart_error"].startswith("the trial's worker process died")
    index = killed.data.tags["sweeper.trial_index"]
    assert f"trial #{index} failed in its worker and is retried from its checkpoint" in log.read_text()
    left = sorted(p.relative_to(sweep_dir) for p in sweep_dir.rglob("checkpoint_*"))
    assert not left, f"checkpoints of ended trials were not deleted: {left}"

    def record(run: Any) -> tuple[dict[str, float], dict[str, list[tuple[int, float]]]]:
        final = {k: v for k, v in run.data.metrics.items() if k not in TIMED}
        history = {k: [(m.step, m.value) for m in sorted(client.get_metric_history(run.info.run_id, k),
                                                         key=lambda m: m.step)] for k in final}
        return final, history

    (final_a, history_a), (final_b, history_b) = record(runs[0]), record(runs[1])
    assert {"test_acc", "train_loss", "test_loss"} <= set(final_a)
    assert final_a == final_b  # bit-identical: == on the floats MLflow stored
    assert history_a == history_b
    assert [s for s, _ in history_a["train_loss"]] == list(range(8))  # each epoch's step once
    record_faults("worker SIGKILL mid-trial, ray.max_failures=1: continued from its checkpoint", faults_injected=1,
                  trials_expected=2, trials_recorded=len(runs),
                  duplicate_steps=sum(len(h) - len({s for s, _ in h}) for h in (*history_a.values(),
                                                                                  *history_b.values())))


def test_the_documented_run_without_the_sweeper_continues_after_ctrl_c(tmp_path: Path) -> None:
    """docs/reliability.md §7: the same command with the same hydra.run.dir continues an interrupted run."""
    import json

    from tests.conftest import REPO
    from tests.documented import documented, run_documented

    command = documented("python experiments/train.py model=cnn epochs=30 hydra.run.dir=outputs/cnn-digits").replace(
        "experiments/train.py", str(REPO / "experiments" / "train.py"))
    folder = tmp_path / "outputs" / "cnn-digits" / "checkpoints"
    # Ctrl-C's SIGINT as a terminal delivers it: a test run in the background by a non-interactive
    # shell (`make test &`) inherits SIGINT ignored, and so would the command.
    first = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=tmp_path, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True,
                             env={**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}"},
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    def saved_steps() -> list[int]:
        """The steps of the checkpoints saved so far. The run deletes older ones and writes new ones while this
        reads: a folder whose checkpoint.json is gone or not yet whole is skipped."""
        steps = []
        for meta in folder.glob("checkpoint_*/checkpoint.json"):
            with contextlib.suppress(OSError, ValueError):
                steps.append(int(json.loads(meta.read_text())["step"]))
        return steps

    deadline = time.monotonic() + 120
    while not any(step >= 1 for step in saved_steps()):
        assert first.poll() is None and time.monotonic() < deadline, first.stdout.read() if first.stdout else ""
        time.sleep(0.05)
    first.send_signal(signal.SIGINT)  # Ctrl-C
    out_first, _ = first.communicate(timeout=60)
    # 30 epochs of about 0.25 s: the interrupt lands seconds before the end (6 had ended first, once).
    assert first.returncode != 0 and "epoch 29:" not in out_first, out_first[-3000:]

    second = run_documented(command, tmp_path, timeout=300)
    out = second.stdout + second.stderr
    assert second.returncode == 0, out[-3000:]
    resumed = int(out.split("continuing after epoch ", 1)[1].split()[0])
    assert resumed >= 1 and f"epoch {resumed}:" not in out and "epoch 29:" in out, out[-3000:]


def test_the_gpu_checks_cpu_dry_run_kills_resumes_and_loses_at_most_one_epoch(tmp_path: Path) -> None:
    """bench/checkpoint_gpu_check.py's kill section without a GPU (docs/gpu.md): the script the device runs."""
    import json

    from tests.conftest import REPO
    from tests.documented import documented, run_documented

    command = documented("python bench/checkpoint_gpu_check.py --out dry.json --device cpu --quick --sections kill")
    proc = run_documented(f"{command.replace('bench/', str(REPO / 'bench') + '/')} --train-images 512", tmp_path,
                          timeout=400)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    kill = json.loads((tmp_path / "dry.json").read_text())["sections"]["kill"]
    assert kill["resume_returncode"] == 0 and "error" not in kill, kill
    assert sorted(kill["trials"]) == ["0", "1"]  # --quick: two trials
    # The sweep's whole process group was SIGKILLed mid-epoch, then `sweeper resume`: both trials in flight
    # continued their own runs from their checkpoints, every step recorded once, nothing left on storage.
    assert kill["resume_said"] == "2 trials in flight continue from their checkpoints", kill
    for trial in kill["trials"].values():
        assert trial["status"] == "FINISHED" and trial["same_run"] and trial["duplicate_steps"] == 0, trial
        assert trial["steps_complete"] and trial["resumed_from_step"] >= 1 and trial["epochs_lost"] <= 1, trial
    assert kill["epochs_lost_per_kill"]["max"] <= 1
    assert kill["checkpoints_left"] == [], "checkpoints of ended trials were not deleted"
    record_faults("driver SIGKILL mid-trial, then sweeper resume: trials in flight continue from their checkpoints",
                  faults_injected=1, trials_expected=2, trials_recorded=len(kill["trials"]),
                  duplicate_steps=sum(t["duplicate_steps"] for t in kill["trials"].values()),
                  epochs_redone=kill["epochs_lost_per_kill"]["sum"])
