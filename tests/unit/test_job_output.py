"""A job's printed output copied to its log file, and the user's script logging as ``__main__`` (issue 34)."""

from __future__ import annotations

import io
import logging
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sweeper.run import job_output
from sweeper.run.job_output import JobOutput
from sweeper.run.task_ref import MAIN_ALIAS, _logging_as_main
from tests.conftest import REPO


@pytest.fixture
def configure_job_logging(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], Path]]:
    """Configures logging as Hydra's default job logging does for a job folder, without ``dictConfig`` (which
    would close this test process's handlers): a console handler on ``sys.stdout``, a file handler."""
    root = logging.getLogger()
    added: list[logging.Handler] = []
    formatter = logging.Formatter("[%(name)s][%(levelname)s] - %(message)s")
    monkeypatch.setattr(root, "level", logging.INFO)

    def configure(job: str) -> Path:
        folder = tmp_path / job
        folder.mkdir()
        monkeypatch.setattr(job_output, "_output_dir", lambda: str(folder))
        for handler in added:
            root.removeHandler(handler)
        handlers = [logging.StreamHandler(sys.stdout), logging.FileHandler(folder / "task.log")]  # ext://sys.stdout
        for handler in handlers:
            handler.setFormatter(formatter)
            root.addHandler(handler)
        added.extend(handlers)
        return folder / "task.log"

    yield configure
    for handler in added:
        root.removeHandler(handler)
        handler.close()


def test_printed_output_goes_to_the_job_log_in_order_and_to_the_streams_as_before(
        configure_job_logging: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch) -> None:
    stdout, stderr = io.StringIO(), io.StringIO()  # Ray's worker streams
    monkeypatch.setattr(sys, "stdout", stdout)
    monkeypatch.setattr(sys, "stderr", stderr)
    logs = []
    for job in ("0", "1"):  # one worker process running two trials
        with JobOutput() as output:
            assert sys.stdout is not stdout and sys.stderr is not stderr
            print(f"job {job}: composing")  # before the job's logging is configured: held, then written first
            logs.append(configure_job_logging(job))

            def task(job: str = job) -> None:
                print(f"job {job}: printed")
                logging.getLogger("task").info("job %s: logged", job)
                print(f"job {job}: to stderr", file=sys.stderr)

            output.task(task)()
            assert output.path == str(logs[-1])
        assert sys.stdout is stdout and sys.stderr is stderr  # the streams in force before are back
    first, second = (p.read_text() for p in logs)
    assert first.splitlines() == ["job 0: composing", "job 0: printed", "[task][INFO] - job 0: logged",
                                  "job 0: to stderr"], first
    assert "job 1" not in first and "job 1: printed" in second
    # The streams still get everything; the console handler's records reach the log once, from its file handler.
    assert stdout.getvalue().count("job 0: printed") == 1 and "[task][INFO] - job 0: logged" in stdout.getvalue()
    assert "job 1: to stderr" in stderr.getvalue()
    print("after the trials")
    logging.getLogger("task").info("logged after")  # the console handler writes to the stream, not a tee
    assert "after" not in second and "after the trials" in stdout.getvalue() and "logged after" in stdout.getvalue()


def test_the_scripts_logger_is_mains_while_imported_or_running_and_not_while_hydra_configures_logging() -> None:
    main_logger = logging.getLogger("__main__")
    with _logging_as_main(MAIN_ALIAS):
        assert logging.getLogger(MAIN_ALIAS) is main_logger
    assert MAIN_ALIAS not in logging.Logger.manager.loggerDict
    # A job_logging with disable_existing_loggers: true that names __main__ leaves it on, as under the basic
    # launcher (in a process of its own: dictConfig closes every handler of the process).
    script = """
import logging, logging.config
from sweeper.run.task_ref import MAIN_ALIAS, _logging_as_main
from tests.conftest import REPO
with _logging_as_main(MAIN_ALIAS):  # the script is imported: its module-level logger
    script_logger = logging.getLogger(MAIN_ALIAS)
logging.config.dictConfig({"version": 1, "disable_existing_loggers": True,  # Hydra configures the job's logging
                           "loggers": {"__main__": {"level": "DEBUG"}}})
with _logging_as_main(MAIN_ALIAS):  # the task runs
    assert logging.getLogger(MAIN_ALIAS) is script_logger is logging.getLogger("__main__")
assert not script_logger.disabled and script_logger.level == logging.DEBUG
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 0, done.stderr
