"""The fast composition path gives exactly Hydra's config, and steps aside for config groups."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import HydraContext, RunMode
from omegaconf import DictConfig, OmegaConf, open_dict

from sweeper.run.compose import TrialComposer
from tests.integration.conftest import TOY_APP

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _hydra_config_restored() -> Iterator[None]:
    """These tests set Hydra's process-wide HydraConfig; the tests run after them in this pytest
    worker (unit tests too: make test runs both in one run) must not find a Hydra job in force."""
    instance = HydraConfig.instance()
    before = instance.cfg
    yield
    instance.cfg = before


@pytest.fixture()
def toy_context(tmp_path: Path) -> Iterator[tuple[HydraContext, DictConfig]]:
    from hydra._internal.callbacks import Callbacks

    with initialize_config_dir(config_dir=str(TOY_APP.parent / "conf"), version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        cfg = loader.load_configuration("toy", overrides=[f"hydra.sweep.dir={tmp_path}"], run_mode=RunMode.MULTIRUN)
        HydraConfig.instance().set_config(cfg)
        yield HydraContext(config_loader=loader, callbacks=Callbacks(cfg)), cfg


def tree(cfg: DictConfig) -> dict:
    t = OmegaConf.to_container(cfg, resolve=False)
    t["hydra"]["runtime"].pop("cwd")
    return t


@pytest.mark.parametrize("fixed", [[], ["model=large", "steps=2"]])
def test_fast_path_equals_hydra_for_value_dims(toy_context, fixed: list[str]) -> None:
    ctx, master = toy_context
    composer = TrialComposer(ctx, master, fixed)
    assert composer.verify(["x=0.5", "y=0.5"])
    for dims in (["x=0.1", "y=0.9"], ["x=0.75", "y=0.0"], ["x=1.0", "y=0.3333333333333333"]):
        fast, full = composer.compose(dims), composer.compose_full(dims)
        assert tree(fast) == tree(full)
        assert fast.x == float(dims[0].split("=")[1])
        assert list(fast.hydra.overrides.task) == [*fixed, *dims]
    if fixed:
        assert composer.compose(["x=0.1", "y=0.2"]).model.width == 64  # the group choice is kept


def test_config_group_dims_take_hydra_full_path(toy_context) -> None:
    ctx, master = toy_context
    composer = TrialComposer(ctx, master, [])
    assert not composer.verify(["model=large", "x=0.5"])
    cfg = composer.compose(["model=large", "x=0.5"])
    assert cfg.model.width == 64 and cfg.hydra.runtime.choices.model == "large"


def test_a_key_missing_from_the_config_raises(toy_context) -> None:
    ctx, master = toy_context
    with pytest.raises(Exception, match="typo"):
        TrialComposer(ctx, master, []).verify(["typo=1"])


def test_composer_pickles_without_its_cached_base(toy_context) -> None:
    import pickle

    ctx, master = toy_context
    composer = TrialComposer(ctx, master, [])
    composer.verify(["x=0.5", "y=0.5"])
    composer.compose(["x=0.2", "y=0.2"])
    assert composer._base is not None
    clone = pickle.loads(pickle.dumps(composer))
    assert clone.fast and clone._base is None
    assert tree(clone.compose(["x=0.2", "y=0.2"])) == tree(composer.compose(["x=0.2", "y=0.2"]))


# ---------------------------------------------------------------------- the split job (sweeper.run.job)
def _observing_task(seen: dict):
    """A task recording what it sees: its config, HydraConfig, cwd, an env_set variable; it logs a line."""
    import logging
    import os

    def task(cfg: DictConfig) -> float:
        logging.getLogger("observing_task").info("task of job %s, x=%s", HydraConfig.get().job.num, cfg.x)
        seen["cfg"] = OmegaConf.to_container(cfg, resolve=True)
        seen["hydra"] = OmegaConf.to_container(HydraConfig.get(), resolve=True)
        seen["cwd"] = os.getcwd()
        seen["env"] = os.environ.get("SPLIT_JOB_PROBE")
        seen["job_num"] = HydraConfig.get().job.num
        cfg.x = -1.0  # the task may change its own config: the next trial must not see it
        return float(cfg.y)

    return task


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((directory / ".hydra").iterdir())}


def _job_log(directory: Path) -> str:
    """The job's log file (hydra/job_logging's default: <output_dir>/<job name>.log), its times left out; removed."""
    import re

    (log,) = directory.glob("*.log")
    text = re.sub(r"^\[[0-9-]+ [0-9:,]+\]", "[TIME]", log.read_text(), flags=re.MULTILINE)
    log.unlink()
    return text


def _logging_now() -> list[tuple]:
    """The root logger's level and handlers, as Hydra's job logging leaves them."""
    import logging

    root = logging.getLogger()
    return [(root.level,)] + [(type(h), h.name, h.level, h.formatter._fmt if h.formatter else None,
                               getattr(h, "baseFilename", None), getattr(h, "stream", None) is not None)
                              for h in root.handlers]


@pytest.mark.parametrize("chdir", [False, True])
def test_split_job_gives_what_hydra_run_job_gives(tmp_path: Path, chdir: bool) -> None:
    """Files byte for byte, HydraConfig in the task, cwd, env_set, the JobReturn: as run_job."""
    import os

    from hydra._internal.callbacks import Callbacks
    from hydra.core.utils import run_job

    from sweeper.run.job import run_split_job, usable

    overrides = [f"hydra.sweep.dir={tmp_path}", f"hydra.job.chdir={chdir}", "+hydra.job.env_set.SPLIT_JOB_PROBE=on",
                 "hydra.sweep.subdir=${hydra.job.num}_${hydra.job.override_dirname}"]
    # A string YAML folds over lines, double-quoted (a tab), where libyaml and PyYAML break them differently: in the
    # task config and the overrides (kept text, and text written for each trial).
    note = "+note='" + "a long line of words:\tyes, " * 6 + "'"
    with initialize_config_dir(config_dir=str(TOY_APP.parent / "conf"), version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        master = loader.load_configuration("toy", overrides=overrides, run_mode=RunMode.MULTIRUN)
        HydraConfig.instance().set_config(master)
        ctx = HydraContext(config_loader=loader, callbacks=Callbacks(master))
        composer = TrialComposer(ctx, master, ["model=large", note])
        assert composer.verify(["x=0.5", "y=0.5"]) and composer.split_ok and usable(ctx)
        cwd = os.getcwd()
        trials = (["x=0.1", "y=0.9"], ["x=0.75", "y=0.25"], ["x=1e-05", "y=0.30000000000000004"])
        for index, dims in enumerate(trials, start=3):
            cfg = composer.compose(dims)
            with open_dict(cfg):
                cfg.hydra.job.id, cfg.hydra.job.num = f"{cfg.hydra.job.name}_{index}", index
            hydra_seen: dict = {}
            hydra_ret = run_job(task_function=_observing_task(hydra_seen), config=cfg, job_dir_key="hydra.sweep.dir",
                                job_subdir_key="hydra.sweep.subdir", hydra_context=ctx)
            job_dir = Path(hydra_ret.hydra_cfg.hydra.runtime.output_dir)
            hydra_files, hydra_log, hydra_logging = _files(job_dir), _job_log(job_dir), _logging_now()
            for p in (job_dir / ".hydra").iterdir():
                p.unlink()

            split_seen: dict = {}
            trial = composer.split(dims, index)
            output_dir = trial.output_dir
            split_ret = run_split_job(_observing_task(split_seen), trial)

            assert output_dir == str(job_dir) and job_dir.name.startswith(f"{index}_")
            assert _files(job_dir) == hydra_files  # config.yaml, hydra.yaml, overrides.yaml
            assert _logging_now() == hydra_logging  # index 4 on: sweeper.run.job_logging's direct path
            assert _job_log(job_dir) == hydra_log and f"task of job {index}, x=" in hydra_log
            hydra_seen["hydra"]["runtime"].pop("cwd"), split_seen["hydra"]["runtime"].pop("cwd")
            assert split_seen == hydra_seen
            assert split_seen["cfg"]["x"] == float(dims[0].split("=")[1]) and split_seen["env"] == "on"
            assert split_seen["cwd"] == (str(job_dir) if chdir else cwd) == os.path.realpath(split_seen["cwd"])
            assert os.getcwd() == cwd and "SPLIT_JOB_PROBE" not in os.environ
            assert split_ret.return_value == hydra_ret.return_value == float(dims[1].split("=")[1])
            assert split_ret.status == hydra_ret.status and split_ret.overrides == hydra_ret.overrides
            assert split_ret.working_dir == hydra_ret.working_dir
            assert OmegaConf.to_container(split_ret.cfg) == OmegaConf.to_container(hydra_ret.cfg)
            assert split_ret.task_name == hydra_ret.task_name


def test_split_steps_aside_for_swept_hydra_keys_and_task_interpolating_dirs(toy_context, tmp_path: Path) -> None:
    ctx, master = toy_context
    composer = TrialComposer(ctx, master, [])
    composer.verify(["x=0.5", "hydra.job.name=other"])
    assert not composer.split_ok
    composer = TrialComposer(ctx, master, ["hydra.sweep.subdir=${x}"])  # the job directory is named by a task key
    composer.verify(["x=0.5", "y=0.5"])
    assert not composer.split_ok  # trials take run_job's path, where the directory is the task's x
    assert OmegaConf.select(composer.compose(["x=0.25", "y=0.5"]), "hydra.sweep.subdir") == "0.25"


def test_a_failing_task_is_the_return_value_of_the_split_job(toy_context) -> None:
    from sweeper.run.job import run_split_job

    ctx, master = toy_context
    composer = TrialComposer(ctx, master, [])
    assert composer.verify(["x=0.5", "y=0.5"]) and composer.split_ok

    def boom(cfg: DictConfig) -> float:
        raise ValueError("task failed")

    ret = run_split_job(boom, composer.split(["x=0.5", "y=0.5"], 0))
    assert ret.status.name == "FAILED"
    with pytest.raises(ValueError, match="task failed"):  # JobReturn raises the task's exception, as with run_job
        ret.return_value  # noqa: B018 - reading it raises the task's exception
