"""Exceptions raised by the sweeper, each carrying a message a user can act on."""

from __future__ import annotations

from collections.abc import Sequence


class SweeperConfigError(ValueError):
    """A sweep's configuration is invalid; raised before Ray starts.

    Carries every problem found, so that one run reports all of them at once. Each
    problem names the dotted key as the user types it, the bad value, the rule and an
    override that fixes it.
    """

    def __init__(self, problems: str | Sequence[str]) -> None:
        self.problems: list[str] = [problems] if isinstance(problems, str) else list(problems)
        if len(self.problems) == 1:
            message = f"Invalid sweep configuration: {self.problems[0]}"
        else:
            lines = "\n".join(f"  - {p}" for p in self.problems)
            message = f"Invalid sweep configuration ({len(self.problems)} problems):\n{lines}"
        super().__init__(message)


class MissingDependencyError(ImportError):
    """An optional dependency is not installed; the message names the extra to install."""


class TrialFailuresExceeded(RuntimeError):
    """More trials failed than ``hydra.sweeper.max_failure_rate`` allows."""


class RecordsIncomplete(RuntimeError):
    """The sweep's trials ran, but some of their MLflow records are not in the store (spooled or refused).

    The message says how many writes and of which trials, and names ``sweeper sync``.
    """

#: Exit status of a sweep whose records are incomplete (``EX_IOERR``: an input/output error).
RECORDS_INCOMPLETE_EXIT_STATUS = 74
