"""A job's logging built directly (sweeper.run.job_logging) leaves logging as Hydra's configure_log leaves it.

Each case configures a job's logging twice the way a worker does for two trials (the second through
the direct path), then Hydra's ``configure_log`` for the same second job, and compares what Python's
logging holds after each: the root logger's level and handlers (class, name, level, formatter, stream,
file, mode, encoding, delay, whether open), every logger's level and ``disabled``, the handlers by
name, the files created; and where records go.
"""

from __future__ import annotations

import gc
import logging
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hydra.core.utils import configure_log
from omegaconf import DictConfig, OmegaConf, read_write

from sweeper.run import job_logging
from sweeper.run.job_logging import configure_job_log

DEFAULT = {  # hydra/job_logging/default.yaml
    "version": 1,
    "formatters": {"simple": {"format": "[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "simple", "stream": "ext://sys.stdout"},
                 "file": {"class": "logging.FileHandler", "formatter": "simple",
                          "filename": "${hydra.runtime.output_dir}/${hydra.job.name}.log"}},
    "root": {"level": "INFO", "handlers": ["console", "file"]},
    "disable_existing_loggers": False,
}
VARIED = {  # every option the direct path takes
    "version": 1,
    "formatters": {"plain": {"format": "$levelname $message", "style": "$", "datefmt": "%H:%M", "validate": False},
                   "unused": {"format": "%(message)s"}},
    "handlers": {"err": {"class": "logging.StreamHandler", "formatter": "plain", "stream": "ext://sys.stderr",
                         "level": "WARNING"},
                 "b_file": {"class": "logging.FileHandler", "filename": "${hydra.runtime.output_dir}/b.log",
                            "mode": "w", "encoding": "utf-8", "delay": True, "errors": "strict", "level": 10},
                 "a_file": {"class": "logging.FileHandler", "formatter": "plain",
                            "filename": "${hydra.runtime.output_dir}/${hydra.job.name}_${hydra.job.num}.log"},
                 "default_stream": {"class": "logging.StreamHandler"}},
    "root": {"level": 15, "handlers": ["a_file", "err", "b_file"]},
    "disable_existing_loggers": True,
    "loggers": {},
    "filters": {},
    "incremental": False,
}


@pytest.fixture(autouse=True)
def _logging_restored() -> Iterator[None]:
    """Hydra's configure_log replaces the root logger's handlers (pytest's among them) and disables loggers."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    loggers = {name: (lg.level, lg.disabled) for name, lg in logging.root.manager.loggerDict.items()
               if isinstance(lg, logging.Logger)}
    yield
    for handler in root.handlers[:]:
        root.removeHandler(handler)
        handler.close()
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)
    for name, (lg_level, disabled) in loggers.items():
        logger = logging.getLogger(name)
        logger.setLevel(lg_level)
        logger.disabled = disabled


def _hydra_node(job_logging_conf: dict[str, Any], output_dir: Path, num: int) -> DictConfig:
    """``{"hydra": ...}`` with a job's output dir, name and number, read-only like a split job's hydra node."""
    cfg = OmegaConf.create({"hydra": {"runtime": {"output_dir": str(output_dir)}, "job": {"name": "app", "num": num},
                                      "job_logging": job_logging_conf}})
    OmegaConf.set_readonly(cfg, True)
    return cfg


def _next_job(cfg: DictConfig, output_dir: Path, num: int) -> None:
    """The next trial's values, written in place as TrialComposer.split does, after what a task may have done:
    a logger turned on or off, a handler added, the root's level changed."""
    module = logging.getLogger("some.module")
    module.disabled = not module.disabled
    logging.getLogger().addHandler(logging.StreamHandler(sys.stderr))
    logging.getLogger().setLevel(logging.CRITICAL)
    with read_write(cfg):
        cfg.hydra.runtime.output_dir, cfg.hydra.job.num = str(output_dir), num


def _handler(h: logging.Handler) -> dict[str, Any]:
    f = h.formatter
    out: dict[str, Any] = {"type": type(h), "name": h.name, "level": h.level, "filters": h.filters,
                           "formatter": f and (type(f), f._fmt, f.datefmt, type(f._style))}
    if isinstance(h, logging.FileHandler):
        out.update(file=h.baseFilename, mode=h.mode, encoding=h.encoding, delay=h.delay, errors=h.errors,
                   open=h.stream is not None)
    else:
        out.update(stream=getattr(h, "stream", None))
    return out


def _state() -> dict[str, Any]:
    gc.collect()  # a handler no logger holds lives on until then, in dictConfig's reference cycles
    root = logging.getLogger()
    return {"root": (root.level, root.filters, [_handler(h) for h in root.handlers]),
            "loggers": {name: (getattr(lg, "level", None), getattr(lg, "disabled", None), getattr(lg, "handlers", None))
                        for name, lg in sorted(logging.root.manager.loggerDict.items())},
            "named": sorted(logging._handlers)}  # type: ignore[attr-defined]  # what dictConfig fills


@pytest.mark.parametrize("verbose", [False, True, "some.module", ["a.b", "c"]])
@pytest.mark.parametrize("conf", [DEFAULT, VARIED], ids=["default", "varied"])
def test_the_second_job_s_logging_is_what_configure_log_gives(tmp_path: Path, conf: dict[str, Any], verbose: Any,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(job_logging, "_configured", set())  # as in a new worker process
    logging.getLogger("some.module")  # existing loggers: disabled or not, as by Hydra
    logging.getLogger("some.module.child").setLevel(logging.ERROR)
    first, second = tmp_path / "0", tmp_path / "1"
    first.mkdir(), second.mkdir()
    verbose = OmegaConf.create(verbose) if isinstance(verbose, list) else verbose
    cfg = _hydra_node(conf, first, 0)
    configure_job_log(cfg.hydra.job_logging, verbose)  # a process's first job: Hydra's configure_log
    before = [h for h in logging.getLogger().handlers if isinstance(h, logging.FileHandler)]
    _next_job(cfg, second, 1)
    assert job_logging._key(job_logging._resolved(cfg.hydra.job_logging), verbose) in job_logging._configured
    configure_job_log(cfg.hydra.job_logging, verbose)  # the direct path
    direct = _state()
    _records()
    direct_files = sorted(p.name for p in second.iterdir())
    assert all(h.stream is None for h in before)  # the first job's files are closed

    third = tmp_path / "hydra"
    third.mkdir()
    _next_job(cfg, third, 1)
    configure_log(cfg.hydra.job_logging, verbose)
    hydra = _state()
    _records()
    for state in (direct, hydra):  # the same but for the folder
        for h in state["root"][2]:
            if "file" in h:
                h["file"] = h["file"].replace(str(second), "DIR").replace(str(third), "DIR")
    assert direct == hydra
    assert direct_files == sorted(p.name for p in third.iterdir())
    for name in direct_files:
        assert _untimed((second / name).read_text()) == _untimed((third / name).read_text()), name
    assert "a record of job 1" in (second / ("app.log" if conf is DEFAULT else "app_1.log")).read_text()


def _records() -> None:
    logging.getLogger().warning("a record of job 1")
    logging.getLogger("some.module").warning("a module's record")  # unless disabled
    logging.getLogger("some.module").debug("a module's debug record")  # if verbose


def _untimed(text: str) -> str:
    return re.sub(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\]", "[TIME]", text)


def test_what_the_direct_path_does_not_know_takes_hydra_s_configure_log(tmp_path: Path) -> None:
    unknown = [
        {**DEFAULT, "loggers": {"x": {"level": "DEBUG"}}},
        {**DEFAULT, "filters": {"f": {"name": "x"}}},
        {**DEFAULT, "formatters": {"simple": {"()": "logging.Formatter", "fmt": "%(message)s"}}},
        {**DEFAULT, "formatters": {"simple": {"class": "logging.Formatter", "format": "%(message)s"}}},
        {**DEFAULT, "handlers": {**DEFAULT["handlers"], "console": {"class": "logging.handlers.WatchedFileHandler",
                                                                     "filename": str(tmp_path / "w.log")}}},
        {**DEFAULT, "handlers": {**DEFAULT["handlers"], "console": {**DEFAULT["handlers"]["console"],
                                                                     "stream": "ext://io.StringIO"}}},
        {**DEFAULT, "handlers": {**DEFAULT["handlers"], "file": {**DEFAULT["handlers"]["file"], "filters": ["f"]}}},
        {**DEFAULT, "handlers": {**DEFAULT["handlers"], "file": {**DEFAULT["handlers"]["file"],
                                                                  "encoding": "cfg://handlers.console.class"}}},
        {**DEFAULT, "root": None},
        {**DEFAULT, "root": {**DEFAULT["root"], "filters": []}},
        {**DEFAULT, "incremental": True},
        {**DEFAULT, "version": 2},
    ]
    for conf in unknown:
        resolved = job_logging._resolved(_hydra_node(conf, tmp_path, 0).hydra.job_logging)
        assert job_logging._key(resolved, False) is None, conf
    assert job_logging._key(job_logging._resolved(_hydra_node(DEFAULT, tmp_path, 0).hydra.job_logging), 3) is None


def test_a_changed_config_is_configured_by_hydra_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Equal but for the file names: the direct path; anything else different: Hydra's configure_log."""
    calls: list[Any] = []

    def counted(*args: Any) -> None:  # Hydra's own, counted
        calls.append(args[0].root.level)
        configure_log(*args)

    monkeypatch.setattr(job_logging, "_configured", set())
    monkeypatch.setattr(job_logging, "configure_log", counted)
    for i, level in enumerate(("INFO", "INFO", "DEBUG", "DEBUG", 20, "INFO")):
        (tmp_path / str(i)).mkdir()
        conf = {**DEFAULT, "root": {**DEFAULT["root"], "level": level}}
        configure_job_log(_hydra_node(conf, tmp_path / str(i), i).hydra.job_logging, False)
        assert logging.getLogger().level == logging.getLevelName(level) if isinstance(level, str) else level
        assert [h.baseFilename for h in logging.getLogger().handlers if isinstance(h, logging.FileHandler)] == [
            str(tmp_path / str(i) / "app.log")]
    assert calls == ["INFO", "DEBUG", 20]  # 20 is INFO, but written otherwise: not taken for the same config
    assert sys.stdout in [getattr(h, "stream", None) for h in logging.getLogger().handlers]


def test_a_config_that_is_not_read_only_is_resolved_each_time(tmp_path: Path) -> None:
    cfg = OmegaConf.create({"hydra": {"runtime": {"output_dir": str(tmp_path)}, "job": {"name": "app"},
                                      "job_logging": DEFAULT}})
    assert job_logging._resolved(cfg.hydra.job_logging)["handlers"]["file"]["filename"] == f"{tmp_path}/app.log"
    cfg.hydra.job.name = "other"
    assert job_logging._resolved(cfg.hydra.job_logging)["handlers"]["file"]["filename"] == f"{tmp_path}/other.log"
    assert job_logging._resolved(cfg.hydra.job_logging) == OmegaConf.to_container(cfg.hydra.job_logging, resolve=True)


def test_an_interpolation_to_a_node_resolves_as_to_container_resolves_it(tmp_path: Path) -> None:
    conf = {**DEFAULT, "formatters": "${hydra.formats}"}
    cfg = OmegaConf.create({"hydra": {"runtime": {"output_dir": str(tmp_path)}, "job": {"name": "app"},
                                      "formats": {"simple": {"format": "%(message)s"}}, "job_logging": conf,
                                      "nested": {"handlers": {"h": {"class": "logging.StreamHandler",
                                                                    "formatter": "${hydra.job.name}"}}}}})
    OmegaConf.set_readonly(cfg, True)
    for node in (cfg.hydra.job_logging, cfg.hydra.nested):
        assert job_logging._resolved(node) == OmegaConf.to_container(node, resolve=True)
    with read_write(cfg):
        cfg.hydra.nested.handlers.h.formatter = "${hydra.formats}"
    cfg2 = OmegaConf.create(OmegaConf.to_container(cfg))
    OmegaConf.set_readonly(cfg2, True)
    assert job_logging._resolved(cfg2.hydra.nested) == OmegaConf.to_container(cfg2.hydra.nested, resolve=True)
