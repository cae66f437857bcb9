"""The Sweeper class Hydra discovers; the work happens in :mod:`sweeper.run.hydra_sweeper`."""

from __future__ import annotations

import sys
from typing import Any

from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


class MultiverseSweeper(Sweeper):
    """Hydra sweeper running Sobol -> GP-IVR trials on Ray and recording them in MLflow.

    Hydra instantiates it from ``hydra.sweeper`` (``MultiverseSweeperConf``, which holds every setting's default
    and meaning) with each setting by name, and it hands them to :class:`~sweeper.run.hydra_sweeper.SweeperImpl`,
    whose constructor names each.
    """

    def __init__(self, **settings: Any) -> None:
        # Imported here, not at module level: Hydra imports this module on every start. SweeperImpl takes each
        # setting by name (a missing one is a TypeError naming it).
        from sweeper.run.hydra_sweeper import SweeperImpl

        self._impl = SweeperImpl(**settings)

    def setup(
        self,
        *,
        hydra_context: HydraContext,
        task_function: TaskFunction,
        config: DictConfig,
    ) -> None:
        self._impl.setup(hydra_context=hydra_context, task_function=task_function, config=config)

    def sweep(self, arguments: list[str]) -> None:
        from sweeper.errors import (
            RECORDS_INCOMPLETE_EXIT_STATUS,
            RecordsIncomplete,
            SweeperConfigError,
            TrialFailuresExceeded,
        )

        try:
            return self._impl.sweep(arguments)
        except SweeperConfigError as exc:  # the message is the whole story: no traceback
            sys.stderr.write(f"Error: {exc}\n")
            raise SystemExit(2) from None
        except TrialFailuresExceeded as exc:
            sys.stderr.write(f"Error: {exc}\n")
            raise SystemExit(1) from None
        except RecordsIncomplete as exc:
            sys.stderr.write(f"Error: {exc}\n")
            raise SystemExit(RECORDS_INCOMPLETE_EXIT_STATUS) from None
