"""The sweeps the documents show, run as written (issues 16, 17).

README.md's "A sweep in ten lines" and docs/writing-a-sweep.md's "A task and its config": the
task, its YAML and the commands are read from the documents themselves, so an example that
stops working fails here. The docs' task has a training loop of ``...``: it is filled with a
few lines of arithmetic (the only change to a task), and the sweeps are made small by changing
the numbers of trials the commands and YAML give (16, 32, 64) to 6.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.documented import block_commands, documented, run_documented
from tests.integration.conftest import ONE_AT_A_TIME, SHARED_RAY

pytestmark = pytest.mark.integration

LOOP_BODY = "        loss, acc, train_acc = 1.0 / (1 + epoch), 1.0 - cfg.lr / (1 + cfg.depth), 1.0\n"
SMALL = "hydra.sweeper.n_initial=3 hydra.sweeper.batch_size=3"


def section(document: str, heading: str) -> str:
    """The text of ``document`` from ``heading`` to the next heading of the same level (or the end)."""
    text = (REPO / document).read_text(encoding="utf-8")
    start = text.index(f"\n{heading}\n") + 1
    end = text.find("\n## ", start + len(heading))
    return text[start:end if end >= 0 else None]


def fenced(section: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", section, re.S)


def test_the_readmes_ten_line_sweep_runs_as_written(tmp_path: Path) -> None:
    shown = section("README.md", "## A sweep in ten lines")
    (task,), (shell,) = fenced(shown, "python"), fenced(shown, "bash")
    assert task.startswith("# experiments/quadratic.py")
    (tmp_path / "experiments").mkdir()
    (tmp_path / "experiments" / "quadratic.py").write_text(task)
    (command,) = [c.text for c in block_commands(shell)]
    assert command == documented("python experiments/quadratic.py --multirun hydra/sweeper=multiverse "
                                 "'+x=interval(-2, 2)' '+y=interval(-2, 2)' hydra.sweeper.num_trials=16")
    proc = run_documented(f"{command.replace('num_trials=16', 'num_trials=6')} {SMALL}", tmp_path, timeout=300)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{command}\n{output[-4000:]}"
    assert "Finished 6 trials (0 failed)" in output, output[-4000:]

    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlruns.db'}")
    experiment = client.get_experiment_by_name("quadratic")  # the app's name, as the README says
    assert experiment is not None
    trials = [r for r in client.search_runs([experiment.experiment_id]) if "mlflow.parentRunId" in r.data.tags]
    assert len(trials) == 6 and all("objective" in r.data.metrics for r in trials)
    assert all(-2 <= float(r.data.params[k]) <= 2 for r in trials for k in ("x", "y"))


def test_the_docs_task_and_commands_run_as_written(tmp_path: Path) -> None:
    shown = section("docs/writing-a-sweep.md", "## A task and its config")
    task, yaml_text, shell = (fenced(shown, language)[0] for language in ("python", "yaml", "bash"))
    assert task.startswith("# experiments/my_task.py") and yaml_text.startswith("# conf/my_task.yaml")
    assert task.count("        ...\n") == 1, "the page's loop body changed: update LOOP_BODY"
    (tmp_path / "experiments").mkdir()
    (tmp_path / "conf").mkdir()
    (tmp_path / "experiments" / "my_task.py").write_text(task.replace("        ...\n", LOOP_BODY))
    (tmp_path / "conf" / "my_task.yaml").write_text(yaml_text.replace("num_trials: 32", "num_trials: 6"))
    # `sweeper_defaults` (the ray: and mlflow: blocks) comes with the installed plugin: nothing else is copied.
    runs = [c.text for c in block_commands(shell)]
    assert runs == [documented("python experiments/my_task.py --multirun hydra/sweeper=multiverse"),
                    documented("python experiments/my_task.py --multirun hydra/sweeper=multiverse "
                               "'lr=tag(log, interval(1e-5, 1e-1))' epochs=20 hydra.sweeper.num_trials=64")]
    # On the session's shared Ray head (the README's sweep above shows a first sweep's own local Ray), one trial
    # at a time: the task returns at once, and one Ray worker starts instead of two.
    ray, ray_env = SHARED_RAY.join()
    for i, command in enumerate(runs):
        small = command.replace("num_trials=64", "num_trials=6")
        proc = run_documented(f"{small} {SMALL} hydra.sweep.dir=multirun-{i} {' '.join(ray)} {ONE_AT_A_TIME}",
                              tmp_path, env=ray_env, timeout=300)
        output = proc.stdout + proc.stderr
        assert proc.returncode == 0, f"{command}\n{output[-4000:]}"
        assert "Finished 6 trials (0 failed)" in output, output[-4000:]
        if i == 1:  # the command line's lr replaced the YAML's (one log line says so), epochs=20 reached the task
            assert "hydra.sweeper.params.lr='tag(log, interval(1e-4, 1))' is replaced by the command line's" in output
            assert "epochs: 20" in (tmp_path / "multirun-1" / "0" / ".hydra" / "config.yaml").read_text()

    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlruns.db'}")
    experiment = client.get_experiment_by_name("my-task")
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id], order_by=["attributes.start_time ASC"])
    sweeps = [r.info.run_id for r in runs if r.data.tags.get("sweeper.role") == "sweep"]
    assert len(sweeps) == 2
    for sweep, (low, high) in zip(sweeps, [(1e-4, 1.0), (1e-5, 1e-1)], strict=True):
        trials = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == sweep]
        assert len(trials) == 6 and all("val_acc" in r.data.metrics for r in trials)
        assert all(low <= float(r.data.params["lr"]) <= high for r in trials), [r.data.params["lr"] for r in trials]

    # The report and multiverse commands of docs/reports.md on this sweep, as written (the first sweep's run id
    # filled in); the report without the GP surrogate's expected-max curve (an ivr sweep gets one by default),
    # which this test does not read.
    report = documented('sweeper report --experiment my-task --tracking-uri sqlite:///mlruns.db --run <parent run id> '
                        '--metric val_acc --group-by optimizer --filter "train_acc >= 0.99" --out report-my-task')
    proc = run_documented(f'{report.replace("<parent run id>", sweeps[0])} --surrogate never', tmp_path, timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    text = (tmp_path / "report-my-task" / "report.md").read_text()
    assert "optimizer=sgd" in text and "6 trials" in text, text[:3000]
    multiverse = documented('sweeper multiverse --experiment my-task --filter "train_acc >= 0.99" --kernel rbf-ard '
                            '--others marginal')
    proc = run_documented(multiverse, tmp_path, timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    # The latest sweep's maps, filtered: keyed by its run, the kernel and the filter's hash (issue 35).
    maps = list(tmp_path.glob(f"multiverse-my-task-{sweeps[1][:8]}-rbf-ard-*/map_*.csv"))
    assert maps, sorted(p.name for p in tmp_path.iterdir())
