"""What a job says lands near the job, as under Hydra's basic launcher (issue 34, items 1 and 2).

One sweep of ``apps/talkative.py`` (logs at DEBUG and INFO through ``logging.getLogger(__name__)``,
prints to stdout and stderr, fails for x=2) with ``hydra.verbose=__main__``, both trials in one Ray
worker process (``ONE_AT_A_TIME``: the second trial reuses the first one's worker).
"""

from __future__ import annotations

import pytest

from tests.conftest import REPO
from tests.integration.conftest import ONE_AT_A_TIME, Sweep, run_cli

pytestmark = pytest.mark.integration

TALKATIVE_APP = REPO / "tests" / "integration" / "apps" / "talkative.py"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Sweep:
    done = run_cli(TALKATIVE_APP, tmp_path_factory.mktemp("talkative"), "hydra.verbose=__main__", ONE_AT_A_TIME)
    assert done.proc.returncode == 0, done.output
    return done


def _job_log(sweep: Sweep, job: int) -> str:
    return (sweep.sweep_dir / str(job) / "talkative.log").read_text()


def test_the_task_logs_as_main_and_hydra_verbose_main_shows_its_debug_lines(sweep: Sweep) -> None:
    for job, x in ((0, 0), (1, 2)):
        text = _job_log(sweep, job)
        assert f"[__main__][DEBUG] - debug line x={x}" in text, text  # module-level logger, turned on by verbose
        assert f"[__main__][INFO] - info line x={x}" in text, text  # getLogger(__name__) in the task
        assert "__sweeper_main__" not in text, text


def test_a_job_folder_holds_what_the_job_printed_and_a_failed_jobs_traceback(sweep: Sweep) -> None:
    ok, failed = _job_log(sweep, 0), _job_log(sweep, 1)
    assert "printed line x=0" in ok and "stderr line x=0" in ok, ok
    assert "x=2" not in ok, ok  # the worker's next trial writes to its own job's log only
    assert "Traceback" not in ok, ok
    assert ok.count("info line x=0") == 1, ok  # a console handler is not copied a second time
    assert "printed line x=2" in failed and "stderr line x=2" in failed, failed
    assert failed.index("printed line x=2") < failed.index("Traceback (most recent call last):"), failed
    assert 'raise ValueError(f"x={cfg.x} is above fail_above={cfg.fail_above}")' in failed, failed
    assert "ValueError: x=2 is above fail_above=1" in failed, failed
    # The console: the failure's one line, and where its log is.
    log = sweep.sweep_dir / "1" / "talkative.log"
    assert f"FAILED: ValueError: x=2 is above fail_above=1 (log: {log})" in sweep.output, sweep.output
